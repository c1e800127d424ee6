"""``serverinfo._from_llamacpp`` on the shapes llama.cpp builds give, without a server.

The real-server tests (test_suite_records.py) pin what build 0.3.36 says; these pin the rules for the other
shapes: older builds that copy a slot, ``speculative`` included, into ``/props``, and servers run with
``--no-slots``.
"""

from __future__ import annotations

from typing import Any

from specbench.locustfiles.serverinfo import _from_llamacpp

URL = "http://127.0.0.1:8080"


def props_0336(**params: Any) -> dict[str, Any]:
    """/props of build 0.3.36: speculative.types reads "none" even when the server drafts."""
    return {"default_generation_settings": {"params": {"temperature": 0.8, "speculative.types": "none", **params},
                                            "n_ctx": 2048},
            "total_slots": 2, "model_path": "/m/target.gguf", "build_info": "b0-unknown"}


def slot(i: int, speculative: bool, types: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"id": i, "n_ctx": 2048, "speculative": speculative, "is_processing": False}
    if types is not None:
        out.update(id_task=7, params={"speculative.types": types})
    return out


def test_slots_decide_and_props_none_is_ignored() -> None:
    base = _from_llamacpp(URL, props_0336(), "m", [slot(0, False), slot(1, False, "none")])
    assert base.kind == "llamacpp" and base.speculative is None and base.max_running_requests == 2
    assert base.model == "m" and base.version == "b0-unknown"
    fresh = _from_llamacpp(URL, props_0336(), None, [slot(0, True), slot(1, True)])
    assert fresh.speculative == {"algorithm": "draft", "source": "slots", "speculative_slots": 2}
    assert fresh.model == "/m/target.gguf"
    used = _from_llamacpp(URL, props_0336(), "m", [slot(0, True), slot(1, True, "none,draft-simple")])
    assert used.speculative == {"types": "none,draft-simple", "algorithm": "draft-simple", "source": "slots",
                                "speculative_slots": 2}


def test_older_builds_copy_the_slot_into_props() -> None:
    props = {"default_generation_settings": {"speculative": True, "params": {"speculative.n_max": 16,
                                                                             "speculative.n_min": 0}},
             "total_slots": 4}
    spec = _from_llamacpp(URL, props, "m", None).speculative
    assert spec == {"n_max": 16, "n_min": 0, "algorithm": "draft", "source": "props"}
    props["default_generation_settings"]["speculative"] = False  # n_max is there on every server: no signal
    assert _from_llamacpp(URL, props, "m", None).speculative is None


def test_without_slots_only_a_real_type_in_props_counts() -> None:
    assert _from_llamacpp(URL, props_0336(), "m", None).speculative is None  # --no-slots: "none" proves nothing
    spec = _from_llamacpp(URL, props_0336(**{"speculative.types": "ngram-simple"}), "m", None).speculative
    assert spec == {"types": "ngram-simple", "algorithm": "ngram-simple", "source": "props"}
    no_total = {"default_generation_settings": {"params": {}}}
    assert _from_llamacpp(URL, no_total, "m", [slot(0, False)] * 3).max_running_requests == 3
