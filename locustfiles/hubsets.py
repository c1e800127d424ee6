"""A standard prompt set read through the Hugging Face ``datasets`` library (the optional extra ``hf``).

``--prompts NAME=hf:SOURCE[#SPLIT]``: SOURCE is a dataset on the hub (``nvidia/SPEED-Bench``; from the local
cache when ``HF_HUB_OFFLINE=1``) or a local folder in the hub's layout (data files, and a README.md whose YAML
header lists the configurations). A ``speed-bench:...`` set asks for its configuration (``qualitative``,
``throughput_8k``, ...); SPLIT defaults to the only split, else ``test``. The rows go through the same reader as
the publisher's file, so a missing or wrong field is the same one line, naming the row.

Why the library and not our own reader: the hub's layout (configurations in a README header, sharded Parquet,
a local cache keyed by revision, authentication for gated sets such as SPEED-Bench) is the library's to keep
right; our readers stay the ones for the files the publishers distribute.
"""

from __future__ import annotations

from typing import Any

from specbench.locustfiles.promptset import PromptError

HUB_PREFIX = "hf:"
EXTRA_HINT = "pip install 'locust-specbench[hf]'"


def parse_hub_source(text: str) -> tuple[str, str | None]:
    """``hf:SOURCE[#SPLIT]`` -> (SOURCE, SPLIT or None)."""
    source, _, split = text[len(HUB_PREFIX):].partition("#")
    return source.strip(), split.strip() or None


def hub_rows(source: str, config: str | None, split: str | None, display: str) -> list[tuple[str, dict[str, Any]]]:
    """The split's rows, each with where it stands (``display row N``)."""
    try:
        import datasets
    except ImportError:
        raise PromptError(f"{display}: reading a set through Hugging Face needs the datasets library: "
                          f"{EXTRA_HINT} (or give the file as its publisher distributes it)") from None
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    try:
        found = datasets.load_dataset(source, name=config)
    except Exception as e:  # the library's own errors (not found, offline, gated, no such configuration)
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise PromptError(f"{display}: the datasets library could not load it ({type(e).__name__}: {first})") from None
    splits = list(found)
    chosen = split or (splits[0] if len(splits) == 1 else "test" if "test" in splits else None)
    if chosen not in splits:
        raise PromptError(f"{display}: no split {chosen or '(none given)'!r}; it has {', '.join(splits)}: "
                          f"add #SPLIT")
    return [(f"{display} row {i}", dict(row)) for i, row in enumerate(found[chosen].to_list(), start=1)]
