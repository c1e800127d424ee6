"""Output equivalence: does the speculative server answer what the baseline answers, at every load?

At temperature 0 a lossless speculative server returns the target model's own answer. Both compared runs send
the same prompts in the same order at every level, and each level restarts the order, so one prompt is
answered by both servers at several loads. Answers (``answers.jsonl``, identity in ``answer_digest``) are
paired by (level, prompt position); a failed request's answer is never compared, nor one whose request was
still in flight when its step's window closed (it ran partly under the next level's load, so a C=1 answer
would no longer be a lone request's). Per level:

* spec against baseline at that level: how many answers changed, and the first token where each pair differs
  (positions in token ids when both runs kept ids, else in characters of the text);
* the noise floor, with no extra run: each server at level C against its own answer to the same prompt at
  the lowest level (batch-shape arithmetic changes greedy answers under load even without speculation).

The verdict calls speculation lossy only when its changed share is significantly above the baseline's own: a
one-sided Fisher exact test of the two counts at the 5% level. Where the test could not have shown a changed share
within 10 points of the floor, it says there were not enough answers to tell, and the share the run could have
shown. A speculative server whose answers move across its own levels significantly more than the baseline's do
(the same test on the two noise floors) is a finding of its own, said in a second sentence.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specbench.analysis.records.steps import step_windows
from specbench.analysis.stats.proportion import fisher_greater, smallest_detectable
from specbench.contract.schema import RunData

#: The equivalence tests' level (one-sided), and how far above the noise floor a changed share may lie and still
#: go undetected before a non-significant result is "not enough answers to tell" rather than "within noise".
EQUIVALENCE_ALPHA = 0.05
MAX_UNDETECTED_EXCESS = 0.10

#: Histogram of first-difference positions: bins [0,1), [1,2), [2,4), [4,8), ... (powers of two).
MAX_BIN_EDGE = 1 << 20


@dataclass(frozen=True)
class Answer:
    """One answer's identity: its digest, and its token ids or text (to find where two answers part)."""

    digest: str
    ids: tuple[int, ...] | None
    text: str | None


@dataclass(frozen=True)
class Changes:
    """Answers compared pairwise, how many differ, and where each differing pair first differs."""

    compared: int
    changed: int
    positions: tuple[int, ...]  # first differing position of each changed pair, sorted

    @property
    def share(self) -> float | None:
        return self.changed / self.compared if self.compared else None

    @property
    def median_position(self) -> float | None:
        return float(statistics.median(self.positions)) if self.positions else None


@dataclass(frozen=True)
class LevelEquivalence:
    """One target concurrency: spec against baseline, and each server against itself at the lowest level."""

    target_c: int
    spec_vs_baseline: Changes
    baseline_noise: Changes | None  # None at the lowest level (it is the reference)
    spec_noise: Changes | None


@dataclass(frozen=True)
class ProbeEquivalence:
    """The probe's counts and verdict; ``kind`` as ``Equivalence.kind`` (lossless, within_noise, too_few,
    not_lossless)."""

    reference_c: int | None
    probe_c: int | None
    compared: int  # prompts answered in all three passes
    spec_changed: int  # speculation against the reference
    repeat_changed: int  # the baseline's repeat against the reference
    spec_only: int  # discordant: speculation changed it, the repeat did not
    repeat_only: int  # discordant: the repeat changed it, speculation did not
    p_value: float
    positions: tuple[int, ...]  # where each of speculation's changed answers first differs, sorted
    kind: str
    text: str


@dataclass(frozen=True)
class Equivalence:
    """The whole check; ``kind`` is lossless, within_noise, too_few (not enough answers to tell), not_lossless or
    not_checked."""

    kind: str
    text: str
    unit: str  # "token" or "character"
    lowest_c: int | None
    levels: tuple[LevelEquivalence, ...]
    total: Changes  # spec against baseline over all levels
    baseline_noise: Changes  # the baseline against itself over the levels above the lowest
    spec_noise: Changes
    probe: ProbeEquivalence | None = None  # the paired probe (``analysis.verdicts.equivalence_probe``), if run

    @property
    def checked(self) -> bool:
        return self.kind != "not_checked"


def run_answers(run: RunData) -> dict[int, dict[int, Answer]]:
    """target C -> prompt position -> answer, from the ok records that carry a digest (first turns only) and
    ended by their step's window end."""
    full = {a["request_id"]: a for a in run.answers}
    step_end = {w.index: w.t1 for w in step_windows(run)}
    out: dict[int, dict[int, Answer]] = {}
    for rec in run.records:
        digest, c = rec.get("answer_digest"), rec.get("target_c")
        if rec["status"] != "ok" or not isinstance(digest, str) or c is None or rec.get("turn", 1) != 1:
            continue
        step = rec.get("step")
        end = step_end.get(step) if step is not None else None
        if end is not None and rec["start_s"] + rec["e2e_s"] > end:
            continue
        line: Mapping[str, object] = full.get(rec["request_id"], {})
        ids, text = line.get("ids"), line.get("text")
        answer = Answer(digest, tuple(ids) if isinstance(ids, list) else None, text if isinstance(text, str) else None)
        out.setdefault(int(c), {}).setdefault(int(rec["prompt_seq"]), answer)
    return out


def first_difference(a: Answer, b: Answer) -> int | None:
    """Where two answers part (ids if both have them, else text); None when they are the same answer."""
    if a.digest == b.digest:
        return None
    x: Sequence[int] | str | None = a.ids if a.ids is not None and b.ids is not None else a.text
    y: Sequence[int] | str | None = b.ids if a.ids is not None and b.ids is not None else b.text
    if x is None or y is None:
        return 0
    for i, (u, v) in enumerate(zip(x, y, strict=False)):
        if u != v:
            return i
    return min(len(x), len(y))


def changes(mine: dict[int, Answer], theirs: dict[int, Answer]) -> Changes:
    """Pair two levels' answers by prompt position and count those that differ."""
    positions = [first_difference(mine[seq], theirs[seq]) for seq in sorted(mine.keys() & theirs.keys())]
    found = sorted(p for p in positions if p is not None)
    return Changes(len(positions), len(found), tuple(found))


def _sum(parts: Sequence[Changes]) -> Changes:
    return Changes(sum(p.compared for p in parts), sum(p.changed for p in parts),
                   tuple(sorted(x for p in parts for x in p.positions)))


def check_equivalence(base: RunData, spec: RunData) -> Equivalence:
    """The per-level figures and the verdict for a baseline run and a speculative run."""
    empty = Changes(0, 0, ())
    reason = _not_checked(base, spec)
    b_ans, s_ans = run_answers(base), run_answers(spec)
    if reason is None and not (b_ans and s_ans):
        reason = ("output equivalence not checked: the runs kept no answers (run at temperature 0 with "
                  "--check-output; specbench compare, sweep and demo do by default)")
    if reason is not None:
        return Equivalence("not_checked", reason, "token", None, (), empty, empty, empty)
    common = sorted(b_ans.keys() & s_ans.keys())
    lowest = common[0] if common else None
    levels = tuple(LevelEquivalence(
        c, changes(s_ans[c], b_ans[c]),
        changes(b_ans[c], b_ans[lowest]) if lowest is not None and c != lowest else None,
        changes(s_ans[c], s_ans[lowest]) if lowest is not None and c != lowest else None) for c in common)
    total = _sum([lv.spec_vs_baseline for lv in levels])
    b_noise = _sum([lv.baseline_noise for lv in levels if lv.baseline_noise is not None])
    s_noise = _sum([lv.spec_noise for lv in levels if lv.spec_noise is not None])
    ids = all(a.ids is not None for run in (b_ans, s_ans) for level in run.values() for a in level.values())
    kind, text = verdict(total, b_noise, common, s_noise)
    return Equivalence(kind, text, "token" if ids else "character", lowest, levels, total, b_noise, s_noise)


def _not_checked(base: RunData, spec: RunData) -> str | None:
    temps = [r.meta.settings.temperature if r.meta.settings else 0.0 for r in (base, spec)]
    if max(temps) > 0:
        return (f"output equivalence not checked: the runs sample at temperature {max(temps):g}, so answers "
                "differ from run to run by design; only greedy (temperature 0) answers must match")
    if any(r.get("target_rate") is not None for run in (base, spec) for r in run.records):
        return "output equivalence not checked: open-loop (rate) runs are not paired by level yet"
    return None


def verdict(total: Changes, noise: Changes, levels: Sequence[int], spec_noise: Changes | None = None
            ) -> tuple[str, str]:
    """The line: lossless, not lossless (spec's changed share significantly above the baseline's noise floor),
    not enough answers to tell, or within the noise floor; then, as a finding of its own, a speculative server
    whose answers vary across its own levels significantly more than the baseline's do."""
    kind, text = _spec_against_floor(total, noise, levels)
    if kind != "not_checked" and spec_noise is not None:
        text += _own_levels(spec_noise, noise)
    return kind, text


def _spec_against_floor(total: Changes, noise: Changes, levels: Sequence[int]) -> tuple[str, str]:
    where = f"C={levels[0]}..{levels[-1]}" if len(levels) > 1 else f"C={levels[0]}" if levels else "no level"
    floor = (f"the baseline itself changed {noise.changed} of {noise.compared} under load"
             if noise.compared else "no noise floor: one level only")
    if total.changed == 0:
        return "lossless", f"speculation changed 0 of {total.compared} answers at {where} ({floor})"
    share, floor_share = total.share or 0.0, noise.share or 0.0
    if not noise.compared:  # one level: nothing to tell noise by, and a greedy answer must not change at all
        return "not_lossless", (f"speculation changed {share:.0%} of answers ({total.changed} of {total.compared} "
                                f"at {where}) with {floor}: this server is not lossless")
    p = fisher_greater(total.changed, total.compared, noise.changed, noise.compared)
    if p < EQUIVALENCE_ALPHA:
        return "not_lossless", (f"speculation changed {share:.0%} of answers ({total.changed} of {total.compared} "
                                f"at {where}) against a {floor_share:.0%} noise floor ({floor}; one-sided Fisher "
                                f"exact test p = {p:.2g}): this server is not lossless")
    least = smallest_detectable(total.compared, noise.changed, noise.compared, EQUIVALENCE_ALPHA)
    shown = "no changed share" if least is None else f"only a changed share of {least / total.compared:.0%} or more"
    if least is None or least / total.compared - floor_share > MAX_UNDETECTED_EXCESS:
        return "too_few", (f"not enough answers to tell: speculation changed {total.changed} of {total.compared} "
                           f"answers ({share:.1%}) at {where} against the baseline's own {floor_share:.1%} "
                           f"({floor}), and with these counts {shown} would have shown (one-sided Fisher exact "
                           f"test, {EQUIVALENCE_ALPHA:.0%} level)")
    return "within_noise", (f"speculation changed {total.changed} of {total.compared} answers ({share:.1%}) at "
                            f"{where}, not significantly more than the baseline's own {floor_share:.1%} ({floor}; "
                            f"one-sided Fisher exact test p = {p:.2g}; {shown} would have shown): not told apart "
                            "from batch-shape noise")


def _own_levels(spec_noise: Changes, noise: Changes) -> str:
    """A second sentence where the speculative server's answers moved across its own levels significantly more
    than the baseline's did (each against its answer at the lowest level); empty otherwise."""
    if not (spec_noise.compared and noise.compared and spec_noise.changed):
        return ""
    p = fisher_greater(spec_noise.changed, spec_noise.compared, noise.changed, noise.compared)
    if p >= EQUIVALENCE_ALPHA:
        return ""
    return (f". Its own answers also change with load: {spec_noise.changed} of {spec_noise.compared} "
            f"({spec_noise.share or 0.0:.0%}) differ from its answer at the lowest level, against the baseline's "
            f"{noise.changed} of {noise.compared} ({noise.share or 0.0:.0%}; one-sided Fisher exact test p = {p:.2g})")


def histogram(positions: Sequence[int]) -> list[tuple[int, int, int]]:
    """(from, to, count) over bins [0,1), [1,2), [2,4), [4,8), ... up to the last position."""
    if not positions:
        return []
    edges = [0, 1]
    while edges[-1] <= max(positions) and edges[-1] < MAX_BIN_EDGE:
        edges.append(edges[-1] * 2)
    return [(lo, hi, sum(1 for p in positions if lo <= p < hi)) for lo, hi in itertools.pairwise(edges)]
