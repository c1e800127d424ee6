"""The paired equivalence probe: enough answers, at low load, to catch a speculative server that changes few tokens.

Why: the per-level check (``analysis.verdicts.equivalence``) gets its noise floor from the ladder's leftovers (each
server against its own answer at the lowest level), a dozen or two answers in a budgeted run, too few to tell a
server that changes 0.5% of tokens (a sixth of its answers) from noise. The probe (``specbench.probe``) asks for
the answers it needs: the same N prompts, at temperature 0, to the baseline at a low level (the reference), to
the baseline again at the probe level (the repeat) and to each speculative server at the probe level. The
baseline's probe run (``RunDir.probe``) holds both of its levels, the lower one the reference; a speculative
server's holds its one level.

Each prompt is a pair of yes-or-no outcomes against the reference: did speculation change the answer, did the
baseline's repeat change it. Under the null hypothesis (speculation is the baseline's own arithmetic at that
load) the two are exchangeable, so of the discordant prompts (one changed, the other not) each way is a fair
coin: the test is the exact one-sided sign test on them (McNemar's exact test). Prompts both changed, or
neither, say nothing about the difference. A repeat at another level than the reference keeps the baseline's own
batch-shape noise in its floor: a batch-variant baseline repeated at the same batch would repeat its own changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from specbench.analysis.stats.proportion import sign_greater, smallest_sign_detectable
from specbench.analysis.verdicts.equivalence import Answer, Equivalence, ProbeEquivalence, first_difference
from specbench.contract.rundir import RunDir
from specbench.contract.runformat import RunFormatError
from specbench.contract.schema import RunData

#: The probe's test level (one-sided), and the most a changed share may lie above the repeat's and go undetected
#: before a non-significant result is "too few answers" rather than "within noise" (as the per-level check's).
PROBE_ALPHA = 0.05
PROBE_MAX_UNDETECTED_EXCESS = 0.10


@dataclass(frozen=True)
class ProbeAnswers:
    """One probe level: its concurrency and each prompt position's answer."""

    target_c: int
    answers: dict[int, Answer]


def probe_levels(run: RunData) -> dict[int, dict[int, Answer]]:
    """A probe run's answers by level and prompt position: ok first turns with a digest, warm-up included (the
    probe's load is the same from its first request to its last; each level restarts the prompt order)."""
    full = {a["request_id"]: a for a in run.answers}
    out: dict[int, dict[int, Answer]] = {}
    for rec in run.records:
        digest, c = rec.get("answer_digest"), rec.get("target_c")
        if rec["status"] != "ok" or not isinstance(digest, str) or c is None or rec.get("turn", 1) != 1:
            continue
        line: Mapping[str, object] = full.get(rec["request_id"], {})
        ids, text = line.get("ids"), line.get("text")
        out.setdefault(int(c), {}).setdefault(int(rec["prompt_seq"]), Answer(
            digest, tuple(ids) if isinstance(ids, list) else None, text if isinstance(text, str) else None))
    return out


def read_probe(run_dir: RunDir) -> dict[int, dict[int, Answer]] | None:
    """A probe run's answers by level; None where it was not run (or left nothing readable)."""
    if not run_dir.has_records():
        return None
    try:
        return probe_levels(run_dir.read())
    except (RunFormatError, OSError):
        return None


def probe_of(base: RunData, spec: RunData) -> ProbeEquivalence | None:
    """The probe of this pair of runs, from the probe runs inside their run directories: the baseline's lowest
    level is the reference, its level at the speculative server's probe level the repeat. None without one."""
    b, s = read_probe(RunDir(base.path).probe()), read_probe(RunDir(spec.path).probe())
    if not b or not s or len(b) < 2:
        return None
    ref_c, spec_c = min(b), min(s)
    if spec_c not in b or spec_c == ref_c:
        return None
    return judge_probe(ProbeAnswers(ref_c, b[ref_c]), ProbeAnswers(spec_c, b[spec_c]), ProbeAnswers(spec_c, s[spec_c]))


def judge_probe(ref: ProbeAnswers, rep: ProbeAnswers, spec: ProbeAnswers) -> ProbeEquivalence:
    """Pair the three passes by prompt position and test speculation's changes against the repeat's."""
    seqs = sorted(ref.answers.keys() & rep.answers.keys() & spec.answers.keys())
    s_diff = {q: first_difference(spec.answers[q], ref.answers[q]) for q in seqs}
    r_diff = {q: first_difference(rep.answers[q], ref.answers[q]) for q in seqs}
    spec_only = sum(1 for q in seqs if s_diff[q] is not None and r_diff[q] is None)
    repeat_only = sum(1 for q in seqs if s_diff[q] is None and r_diff[q] is not None)
    positions = tuple(sorted(p for p in s_diff.values() if p is not None))
    repeat_changed = sum(1 for p in r_diff.values() if p is not None)
    p = sign_greater(spec_only, repeat_only)
    counts = (len(seqs), len(positions), repeat_changed, spec_only, repeat_only)
    kind, text = probe_verdict(counts, p, ref.target_c, spec.target_c)
    return ProbeEquivalence(ref.target_c, spec.target_c, len(seqs), len(positions), repeat_changed, spec_only,
                            repeat_only, p, positions, kind, text)


def probe_verdict(counts: tuple[int, int, int, int, int], p: float, ref_c: int | None, probe_c: int | None
                  ) -> tuple[str, str]:
    """The probe's sentence: speculation's changed count at the probe level against the baseline's repeat."""
    n, changed, repeat_changed, spec_only, repeat_only = counts
    at = f"C={probe_c}" if probe_c is not None else "the probe level"
    head = (f"paired probe: speculation changed {changed} of {n} answers ({changed / n if n else 0.0:.0%}) at {at} "
            f"against the baseline's own at C={ref_c}, where the baseline repeated at {at} changed {repeat_changed}")
    if changed == 0:
        return "lossless", head
    test = (f"{spec_only} prompts changed by speculation alone, {repeat_only} by the repeat alone; one-sided exact "
            f"sign test on the discordant pairs p = {p:.2g}")
    if p < PROBE_ALPHA:
        return "not_lossless", f"{head} ({test}): this server is not lossless"
    least = smallest_sign_detectable(repeat_only, n - repeat_only, PROBE_ALPHA)
    floor = repeat_changed / n if n else 0.0
    if least is None or least / n - floor > PROBE_MAX_UNDETECTED_EXCESS:
        shown = "no count" if least is None else f"only {least} or more ({least / n:.0%})"
        return "too_few", (f"{head} ({test}): not enough answers to tell; {shown} changed by speculation alone "
                           "would have shown")
    return "within_noise", f"{head} ({test}): not told apart from the baseline's own noise"


def with_probe(eq: Equivalence, probe: ProbeEquivalence | None) -> Equivalence:
    """The per-level check with the probe added: the probe's sentence first (it has the power at low load), then
    the per-level one (load's own effects). Not lossless where either says so; otherwise the probe's kind."""
    if probe is None or not eq.checked:
        return eq
    kind = "not_lossless" if "not_lossless" in (eq.kind, probe.kind) else probe.kind
    return replace(eq, kind=kind, text=f"{probe.text}; under load, {eq.text}", probe=probe)
