"""Energy per output token, spec against baseline, at one level: the ratio, its interval and one sentence.

The ratio is spec / baseline of each step's ``energy_per_token_j`` (``analysis.records.energy``): above 1,
speculation uses more energy per token. Its 95% interval comes from batches of one median request (as the
throughput's ``lifetime_batches``, at least five a side, each batch also at least two sampling intervals long so
that its energy is not mostly interpolation): each batch's energy (the GPUs' telemetry over its slice of the
window) and tokens, resampled as pairs (``analysis.stats.ratio_of_sums``). Where the windows do not hold
enough such batches the ratio has no interval, and ``note`` says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from specbench.analysis.records.energy import GpuSeries, batch_energies
from specbench.analysis.records.steprow import StepRow
from specbench.analysis.stats.bootstrap import MAX_BATCHES
from specbench.analysis.stats.ratio_of_sums import MIN_PAIRS, ratio_of_sums_interval
from specbench.analysis.table import fmt_interval
from specbench.contract.schema import RequestRecord
from specbench.contract.window import batch_throughputs

BOOTSTRAP_BATCHES = "bootstrap_batches"
SAMPLES_PER_BATCH = 2.0  # a batch lasts at least this many sampling intervals


@dataclass(frozen=True)
class EnergyLevel:
    """Energy per output token of both servers at one level; ratio = spec / baseline."""

    target_c: int
    spec_j_per_token: float | None
    baseline_j_per_token: float | None
    ratio: float | None
    ratio_low: float | None
    ratio_high: float | None
    interval_method: str | None  # bootstrap_batches, or None (no interval: ``note``)
    batches: int  # batches a side behind the interval (the fewer of the two)
    note: str | None = None  # why a figure or the interval is missing

    @property
    def sentence(self) -> str:
        """'C=30: speculation uses 1.40x the energy per token (95% CI 1.31-1.50x; 9.8 vs 7.0 J/token)'."""
        where = f"C={self.target_c}"
        if self.ratio is None:
            return f"{where}: energy per token not compared: {self.note or 'not measured'}"
        interval = (f"95% CI {fmt_interval(self.ratio_low, self.ratio_high)}" if self.ratio_low is not None
                    else f"no interval: {self.note or 'too few batches'}")
        return (f"{where}: speculation uses {self.ratio:.2f}x the energy per token ({interval}; "
                f"{self.spec_j_per_token:.3g} vs {self.baseline_j_per_token:.3g} J/token)")


def _sample_gap(series: Sequence[GpuSeries]) -> float:
    """The longest typical sampling interval among the GPUs (their ``max_gap_s`` is a multiple of it)."""
    gaps = [float(np.median(np.diff(s.times))) for s in series if len(s.times) >= 2]
    return max(gaps) if gaps else 0.0


def _batches(row: StepRow, records: Sequence[RequestRecord], series: Sequence[GpuSeries], n: int
             ) -> tuple[np.ndarray, np.ndarray] | None:
    t0, t1 = row.window_start_s, row.window_end_s
    if t0 is None or t1 is None:
        return None
    energy = batch_energies(series, t0, t1, n)
    if energy is None:
        return None
    tokens = batch_throughputs(records, t0, t1, n) * ((t1 - t0) / n)
    return energy, tokens


def batch_number(rows: Sequence[StepRow], series: Sequence[Sequence[GpuSeries]]) -> int:
    """Batches a side: each at least one median request and ``SAMPLES_PER_BATCH`` sampling intervals long."""
    counts = []
    for row, gpus in zip(rows, series, strict=True):
        if not row.window_s:
            return 0
        least = max(row.e2e_p50_s or 0.0, SAMPLES_PER_BATCH * _sample_gap(gpus))
        counts.append(MAX_BATCHES if least <= 0 else min(MAX_BATCHES, int(row.window_s // least)))
    return min(counts)


def energy_level(target_c: int, base: StepRow, spec: StepRow, base_records: Sequence[RequestRecord],
                 spec_records: Sequence[RequestRecord], base_gpus: Sequence[GpuSeries],
                 spec_gpus: Sequence[GpuSeries], rng: np.random.Generator, n_boot: int) -> EnergyLevel | None:
    """The level's energy comparison; None when neither run had GPU telemetry."""
    if not base_gpus and not spec_gpus:
        return None
    b, s = base.energy_per_token_j, spec.energy_per_token_j
    if b is None or s is None or b <= 0:
        missing = [f"{name}: {row.energy_note or ('no GPU telemetry' if not gpus else 'no tokens in the window')}"
                   for name, row, gpus, value in (("spec", spec, spec_gpus, s), ("baseline", base, base_gpus, b))
                   if value is None]
        return EnergyLevel(target_c, s, b, None, None, None, None, 0, "; ".join(missing) or "no energy")
    n = batch_number((base, spec), (base_gpus, spec_gpus))
    found = None
    if n >= MIN_PAIRS:
        pb = _batches(base, base_records, base_gpus, n)
        ps = _batches(spec, spec_records, spec_gpus, n)
        if pb is not None and ps is not None:
            found = ratio_of_sums_interval(pb[0], pb[1], ps[0], ps[1], rng=rng, n_boot=n_boot)
    note = None if found is not None else (
        f"the windows hold {n} batches of one median request and {SAMPLES_PER_BATCH:g} GPU samples, "
        f"{MIN_PAIRS} needed" if n < MIN_PAIRS else "a batch of a window was not measured")
    return EnergyLevel(target_c, s, b, s / b, found[0] if found else None, found[1] if found else None,
                       BOOTSTRAP_BATCHES if found else None, n if found else 0, note)


@dataclass(frozen=True)
class EnergyCrossing:
    """Speculation's energy per token goes from one side of the baseline's to the other between two levels.

    Both levels' 95% intervals exclude 1 (a level whose interval holds 1 decides nothing and is passed over), so
    the sides are each shown at that confidence; ``near_c`` is where log(ratio), linear in log(C) between the two
    levels, crosses 0: an estimate between measured levels, not a measurement."""

    below_c: int  # the last level on the first side
    above_c: int  # the first level on the other side
    below_ratio: float
    above_ratio: float
    near_c: float

    @property
    def sentence(self) -> str:
        """'speculation uses less energy per token up to C=5 (0.82x) and more from C=10 (1.21x); ...'."""
        first, then = ("less", "more") if self.below_ratio < 1 else ("more", "less")
        return (f"Energy crossover: speculation uses {first} energy per token up to C={self.below_c} "
                f"({self.below_ratio:.2f}x) and {then} from C={self.above_c} ({self.above_ratio:.2f}x); the ratio "
                f"crosses 1 near C={self.near_c:.3g} (interpolated)")


def _side_of_one(level: EnergyLevel) -> int:
    """-1: speculation uses less energy per token (interval below 1); 1: more (above 1); 0: undecided."""
    if level.ratio_low is None or level.ratio_high is None:
        return 0
    return -1 if level.ratio_high < 1 else 1 if level.ratio_low > 1 else 0


def energy_crossings(levels: Sequence[EnergyLevel]) -> list[EnergyCrossing]:
    """Each change of side between consecutive decided levels (by C); undecided levels between them are skipped."""
    decided = [lv for lv in sorted(levels, key=lambda lv: lv.target_c) if _side_of_one(lv) and lv.ratio]
    found = []
    for a, b in pairwise(decided):
        if _side_of_one(a) == _side_of_one(b):
            continue
        assert a.ratio is not None and b.ratio is not None  # decided levels have a ratio
        la, lb = np.log(a.ratio), np.log(b.ratio)
        ca, cb = np.log(a.target_c), np.log(b.target_c)
        near = float(np.exp(ca + (0 - la) * (cb - ca) / (lb - la)))
        found.append(EnergyCrossing(a.target_c, b.target_c, a.ratio, b.ratio, near))
    return found
