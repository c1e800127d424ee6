"""SGLang's batch cap as the suite reads it: the cap in force, not the launch flag (issue #39).

``/server_info``'s top-level ``max_running_requests`` is the ``--max-running-requests`` flag: null when it was not
given, and the requested value when SGLang lowered the cap for memory. The cap in force is in
``internal_states[*].effective_max_running_requests_per_dp`` (one state per DP rank) and, in the newest releases,
in the gauge ``sglang:max_running_requests`` per DP rank. Each case runs an emulator vintage that answers so, and
the suite's identity must carry the emulator's real cap (the one its scheduler enforces).
"""

from __future__ import annotations

from pathlib import Path

import requests

from specbench.analysis.records.server_side import unreported_figures
from specbench.contract.server_metrics import parse_metrics
from specbench.locustfiles.serverinfo import identify


def _profile(tmp_path: Path, text: str) -> str:
    path = tmp_path / "profile.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_default_server_reports_its_cap_from_internal_states(emulator, tmp_path: Path) -> None:
    emu = emulator(_profile(tmp_path, "base: baseline\nmax_running_requests: 80\nmax_running_requests_flag: null\n"))
    info = requests.get(emu.url + "/server_info", timeout=10).json()
    assert info["max_running_requests"] is None
    assert [s["effective_max_running_requests_per_dp"] for s in info["internal_states"]] == [80]
    ident = identify(emu.url)
    assert ident.max_running_requests == 80  # was None: "not reported"
    assert "max_running (batch cap)" not in unreported_figures([], ident.to_json(), [])


def test_a_cap_lowered_for_memory_is_the_one_in_force_summed_over_dp_ranks(emulator, tmp_path: Path) -> None:
    emu = emulator(_profile(tmp_path, "base: eagle3\nvintage: sglang-0.5.23-tp2dp2\nmax_running_requests: 41\n"
                                      "max_running_requests_flag: 64\n"))
    info = requests.get(emu.url + "/server_info", timeout=10).json()
    assert info["max_running_requests"] == 64 and info["dp_size"] == 2
    assert [s["effective_max_running_requests_per_dp"] for s in info["internal_states"]] == [21, 20]
    assert identify(emu.url).max_running_requests == 41  # was 64, the requested value


def test_the_newest_per_rank_gauge_is_summed_across_ranks(emulator, tmp_path: Path) -> None:
    emu = emulator(_profile(tmp_path, "base: eagle3\nvintage: sglang-newest\nmax_running_requests: 30\n"
                                      "max_running_requests_flag: null\n"))
    text = requests.get(emu.url + "/metrics", timeout=10).text
    series = [line for line in text.splitlines() if line.startswith("sglang:max_running_requests{")]
    assert len(series) == 2 and all('cap_source="auto"' in line for line in series)
    assert parse_metrics(text, 0.0)["values"]["max_running"] == 30
    assert identify(emu.url).max_running_requests == 30  # was None


def test_a_flag_that_was_granted_reads_the_same_everywhere(emulator, tmp_path: Path) -> None:
    emu = emulator(_profile(tmp_path, "base: eagle3\nvintage: sglang-newest\nmax_running_requests: 48\n"))
    text = requests.get(emu.url + "/metrics", timeout=10).text
    assert 'cap_source="server_args"' in text
    assert requests.get(emu.url + "/server_info", timeout=10).json()["max_running_requests"] == 48
    assert identify(emu.url).max_running_requests == 48
