"""The why line's queue sentence claims a cap only on evidence of one: running held below C while requests
waited, or a declared cap below C. Each case beside its near miss, which must stay silent."""

from __future__ import annotations

from dataclasses import replace

from steprows import clean_row

from specbench.analysis.verdicts.why import level_why


def test_a_queue_while_running_held_below_c_is_a_cap() -> None:
    spec = clean_row(60, server_queued=12.0, server_running=47.5, server_running_max=48.0)
    assert level_why(clean_row(60), spec, [spec]) == "spec queued 12 requests on average: capped at 48 running"


def test_running_that_reached_c_names_no_cap_whatever_the_queue_gauge_said() -> None:
    # The case that was reported: C=32 on a server whose cap is 256; running equalled C and the "queue" was the
    # instant between one request's end and the next's admission.
    spec = clean_row(32, server_queued=1.2, server_running=31.0, server_running_max=32.0)
    assert level_why(clean_row(32), spec, [spec], caps=(None, 256)) is None
    # One below C, with the same queue: requests did wait while the server ran fewer than C.
    held = replace(spec, server_running_max=31.0)
    assert level_why(clean_row(32), held, [held]) == "spec queued 1 request on average: capped at 31 running"


def test_a_declared_cap_below_c_speaks_without_a_running_gauge_and_at_c_stays_silent() -> None:
    spec = clean_row(64, server_queued=16.0, server_running=None, server_running_max=None)
    assert level_why(clean_row(64), spec, [spec], caps=(None, 48)) == (
        "spec queued 16 requests on average: capped at 48 running (max_running_requests)")
    assert level_why(clean_row(64), spec, [spec], caps=(None, 64)) is None
    assert level_why(clean_row(64), spec, [spec]) is None  # a queue with nothing to say why: no cause claimed


def test_a_queue_under_one_or_on_too_few_samples_or_matched_by_the_other_side_is_silent() -> None:
    spec = clean_row(60, server_queued=0.9, server_running_max=48.0)
    assert level_why(clean_row(60), spec, [spec]) is None
    sparse = clean_row(60, server_queued=12.0, server_running_max=48.0, server_samples=2)
    assert level_why(clean_row(60), sparse, [sparse]) is None
    spec = clean_row(60, server_queued=12.0, server_running_max=48.0)
    queued_too = clean_row(60, server_queued=6.0, server_running_max=48.0)  # half as many: the other side queued too
    assert level_why(queued_too, spec, [spec]) is None
    assert "spec queued 12" in (level_why(replace(queued_too, server_queued=5.9), spec, [spec]) or "")


def test_the_baseline_side_speaks_in_its_own_name_with_its_own_cap() -> None:
    base = clean_row(40, server_queued=8.0, server_running_max=32.0)
    assert level_why(base, clean_row(40), [clean_row(40)], caps=(32, None)) == (
        "baseline queued 8 requests on average: capped at 32 running (max_running_requests 32)")
