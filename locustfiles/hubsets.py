"""A standard prompt set read through the Hugging Face ``datasets`` library (the optional extra ``hf``).

``--prompts NAME=hf:SOURCE[#SPLIT]``: SOURCE is a dataset on the hub (``nvidia/SPEED-Bench``; from the local
cache when ``HF_HUB_OFFLINE=1``) or a local folder in the hub's layout (data files, and a README.md whose YAML
header lists the configurations). A ``speed-bench:...`` set asks for its configuration (``qualitative``,
``throughput_8k``, ...); SPLIT defaults to the only split, else ``test``. The rows go through the same reader as
the publisher's file, so a missing or wrong field is the same one line, naming the row.

Why the library and not our own reader: the hub's layout (configurations in a README header, sharded Parquet,
a local cache keyed by revision, authentication for gated sets such as SPEED-Bench) is the library's to keep
right; our readers stay the ones for the files the publishers distribute.

What the library downloads is sized by our own readers before the library decodes it (``contract.inputcaps``:
the same caps as the publishers' files; a Parquet bomb the library would decode whole, row group by row group, is
refused first), and the prepared split's rows and bytes are checked before they become Python rows. Without a
network the line comes at once (a 3 s probe of the hub), not after the library's retries, saying how to fetch
the set on a connected machine (``PREFETCH``) and read it here with ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from specbench.contract import inputcaps
from specbench.contract.inputcaps import check_gzip, check_parquet, check_plain_size, over_bytes, over_lines
from specbench.locustfiles.promptset import PromptError

HUB_PREFIX = "hf:"
EXTRA_HINT = "pip install 'locust-specbench[hf]'"
OFFLINE_ENV = "HF_HUB_OFFLINE"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")  # OWNER/NAME (or a canonical NAME)
PROBE_S = 3.0  # a hub that does not answer a TCP connect in 3 s is not there for a download either
#: The data files the library's packaged readers take and ours can size before it decodes them.
_SIZED = {".parquet": "parquet", ".gz": "gzip", ".jsonl": "plain", ".json": "plain", ".csv": "plain",
          ".tsv": "plain", ".txt": "plain"}


def parse_hub_source(text: str) -> tuple[str, str | None]:
    """``hf:SOURCE[#SPLIT]`` -> (SOURCE, SPLIT or None)."""
    source, _, split = text[len(HUB_PREFIX):].partition("#")
    return source.strip(), split.strip() or None


def prefetch_hint(source: str, config: str | None) -> str:
    """What to run on a machine with network so that this one reads the set offline."""
    name = f", {config!r}" if config else ""
    return (f"on a machine with network run: python -c \"import datasets; datasets.load_dataset({source!r}{name})\" "
            f"(after 'hf auth login' for a gated set), copy its cache (~/.cache/huggingface, or $HF_HOME) to this "
            f"machine and set {OFFLINE_ENV}=1; or give the set's file as NAME=PATH")


def _offline_set() -> bool:
    return os.environ.get(OFFLINE_ENV, "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def _unreachable() -> str | None:
    """Why the hub (``HF_ENDPOINT``) cannot be reached, from one TCP connect of at most ``PROBE_S``; None when
    it can."""
    endpoint = urlsplit(os.environ.get("HF_ENDPOINT", "").strip() or "https://huggingface.co")
    host = endpoint.hostname or "huggingface.co"
    try:
        port = endpoint.port or (80 if endpoint.scheme == "http" else 443)
        socket.create_connection((host, port), timeout=PROBE_S).close()
    except (OSError, ValueError) as e:
        return f"{host} cannot be reached: {getattr(e, 'strerror', None) or e or type(e).__name__}"
    return None


def _go_offline() -> None:
    """The library's offline mode: its cache only, no request and no retry (set before or after its import)."""
    os.environ[OFFLINE_ENV] = "1"
    for module in ("datasets.config", "huggingface_hub.constants"):
        if module in sys.modules:
            sys.modules[module].HF_HUB_OFFLINE = True  # type: ignore[attr-defined]


def hub_rows(source: str, config: str | None, split: str | None, display: str) -> list[tuple[str, dict[str, Any]]]:
    """The split's rows, each with where it stands (``display row N``)."""
    folder = Path(source).expanduser().is_dir()
    if not folder and not _HUB_ID.match(source):
        raise PromptError(f"{display}: no such folder, and not a dataset name on the hub (OWNER/NAME)")
    offline = None if folder else _offline_reason()
    try:
        import datasets
    except ImportError:
        raise PromptError(f"{display}: reading a set through Hugging Face needs the datasets library: "
                          f"{EXTRA_HINT} (or give the file as its publisher distributes it)") from None
    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    try:
        builder = datasets.load_dataset_builder(source, name=config)
        _check_data_files(datasets, builder, display)
        builder.download_and_prepare()
        found = builder.as_dataset()
    except PromptError:
        raise
    except Exception as e:  # the library's own errors (not found, offline, gated, no such configuration)
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        said = f"{type(e).__name__}: {first}"
        why = f"{offline}, and the local cache has no copy ({said[:120]}); {prefetch_hint(source, config)}" \
            if offline else f"the datasets library could not load it ({said})"
        raise PromptError(f"{display}: {why}") from None
    splits = list(found)
    chosen = split or (splits[0] if len(splits) == 1 else "test" if "test" in splits else None)
    if chosen not in splits:
        raise PromptError(f"{display}: no split {chosen or '(none given)'!r}; it has {', '.join(splits)}: "
                          f"add #SPLIT")
    return _rows(found[chosen], display)


def _offline_reason() -> str | None:
    """None with a network; else why not, the library put in its offline mode (the cache alone answers)."""
    if _offline_set():
        return f"{OFFLINE_ENV} is set"
    why = _unreachable()
    if why:
        _go_offline()
    return why


def _check_data_files(datasets: Any, builder: Any, display: str) -> None:
    """Each data file of the set, fetched where the library will look for it (a local folder's are read where
    they are), sized by our readers under the caps before the library decodes any: together at most
    ``MAX_INPUT_BYTES``. A set already prepared in the cache (offline) names no files; its rows are counted
    by ``_rows``."""
    files = builder.config.data_files or {}
    wanted = [str(f) for split in files.values() for f in split]
    if not wanted:
        return
    config = datasets.DownloadConfig(cache_dir=getattr(builder, "_cache_downloaded_dir", None), use_etag=False,
                                     token=getattr(builder, "token", None))
    local = datasets.DownloadManager(download_config=config).download(wanted)
    total = 0
    for remote, path in zip(wanted, local, strict=True):
        file = Path(path)
        shown = f"{display}: {Path(remote).name}"
        kind = _SIZED.get(file.suffix.lower()) or _SIZED.get(Path(remote).suffix.lower())
        if kind is None:
            raise PromptError(f"{shown}: the hf route reads Parquet, JSON Lines, JSON or CSV data files (plain or "
                              f".gz), which can be sized before they are decoded; give the set's file as NAME=PATH")
        total += check_parquet(file, shown, PromptError) if kind == "parquet" else \
            check_gzip(file, shown, PromptError) if kind == "gzip" else check_plain_size(file, shown, PromptError)
        if total > inputcaps.MAX_INPUT_BYTES:
            raise over_bytes(display, PromptError, " in its data files together")


def _rows(split: Any, display: str) -> list[tuple[str, dict[str, Any]]]:
    """The prepared split as rows, refused before any becomes a Python row when it holds more than the caps
    (its Arrow table is memory-mapped from the cache: counting it reads no value)."""
    if split.num_rows > inputcaps.MAX_INPUT_LINES:
        raise over_lines(display, PromptError, f"rows ({split.num_rows})")
    if split.data.nbytes > inputcaps.MAX_INPUT_BYTES:
        raise over_bytes(display, PromptError, f" in its prepared rows ({split.data.nbytes} bytes)")
    out: list[tuple[str, dict[str, Any]]] = []
    for batch in split.iter(batch_size=1024):
        columns = list(batch)
        for values in zip(*(batch[c] for c in columns), strict=True):
            out.append((f"{display} row {len(out) + 1}", dict(zip(columns, values, strict=True))))
    return out
