"""Terminal text for ``summarize`` and ``compare``: aligned tables, the verdict and every warning.

Each whole text leaves through ``plain_lines`` (``contract.servertext``): a run's label, a category or a prompt id
woven into a sentence reaches the terminal and comparison.txt as visible escapes, never as a control sequence
(#70)."""

from __future__ import annotations

from collections.abc import Sequence

from specbench.analysis.records.checks import ValidityWarning
from specbench.analysis.records.metafacts import max_tokens_text
from specbench.analysis.records.server_side import NOT_REPORTED, unreported_figures
from specbench.analysis.records.summary import RunSummary
from specbench.analysis.reporting.category_report import category_verdict_text
from specbench.analysis.reporting.columns import (
    CATEGORY_COLUMNS,
    LEVEL_COLUMNS,
    REFINED_NOTE,
    SWITCH_COLUMNS,
    has_server_side,
    server_columns,
    slo_level_columns,
    step_columns,
)
from specbench.analysis.reporting.decompose_report import DECOMPOSITION_COLUMNS, DECOMPOSITION_NOTE
from specbench.analysis.reporting.energy_report import ENERGY_NOTE, energy_columns, energy_lines, energy_notes
from specbench.analysis.reporting.equivalence_report import equivalence_lines
from specbench.analysis.table import text_table
from specbench.analysis.verdicts.categories import ALL
from specbench.analysis.verdicts.compare import Comparison
from specbench.analysis.verdicts.decompose import Decomposition
from specbench.analysis.verdicts.saturation import Saturation
from specbench.contract.servertext import describe_speculative, markdown_text, plain, plain_lines

PERCENTILE_NOTE = ("tok/s 95% CI: bm = batch means, life = batches of one median request; latency percentiles "
                   "rest on 'pct reqs' complete requests, ~ marks fewer than 30 (indicative only)")


def unfinished_lines(c: Comparison) -> list[str]:
    """Levels whose ratio rests on no finished request on a side (#61): say what the figure counts, and that no
    per-request figure stands there (TTFT, per-request speed and latency are left out, not estimated)."""
    out = []
    for lv in c.levels:
        sides = [name for name, row in (("spec", lv.spec), ("baseline", lv.baseline))
                 if row.window_s and row.requests_ok == 0]
        if lv.ratio is None or not sides:
            continue
        where = " and ".join(sides)
        out.append(f"C={lv.target_c}: no request finished inside the window on {where}: the ratio {lv.ratio:.2f}x "
                   f"counts only the tokens that arrived in the windows; no per-request figure ({where}) there")
    return out


def _on_off(value: object) -> str:
    """A setting's truth as the header reads it (``on``/``off``), never Python's ``True``."""
    return "on" if value is True else "off" if value is False else str(value)


def _template_note(api: str | None, server: dict[str, object]) -> str:
    """A chat run's prompt tokens hold the chat template's: how many, as measured at its start."""
    tokens = server.get("chat_template_tokens")
    if api != "chat" or not isinstance(tokens, int) or isinstance(tokens, bool):
        return ""
    return f", chat template +{tokens} prompt tokens a request (measured)"


def describe_run(summary: RunSummary, *, markdown: bool = False) -> str:
    """One line naming the run, its server and the settings that make runs comparable. Every value read from
    the run's files (the server's names and settings among them) goes through ``contract.servertext``: plain
    text for the terminal, escaped Markdown for report.md."""
    shown = markdown_text if markdown else plain
    meta, server = summary.meta, summary.meta.server
    parts = [f"{shown(summary.name)}: {shown(summary.path, None)}"]
    if summary.has_meta:
        parts.append(f"server {shown(server.get('kind') or '?')} {shown(server.get('model') or '?')}, "
                     f"{shown(describe_speculative(server.get('speculative'), runtime=False), None)}, "
                     f"max_running_requests={shown(server.get('max_running_requests') or '?')}")
        prompts = meta.prompts
        settings = meta.settings
        max_tokens = max_tokens_text(settings, summary.requested_max_tokens)  # never one the records contradict
        parts.append(f"api {shown(meta.api or '?')}, max_tokens {max_tokens}, "
                     f"ignore_eos {_on_off(settings.ignore_eos) if settings else '?'}, "
                     f"prompts {shown(prompts.get('name') or '?')} ({shown(prompts.get('count') or '?')}, "
                     f"{shown(prompts.get('mode') or '?')})" + _template_note(meta.api, server))
    else:
        parts.append("no meta.json")
    return " | ".join(parts)


def render_warnings(warnings: Sequence[ValidityWarning]) -> str:
    if not warnings:
        return "Warnings: none"
    lines = [f"Warnings ({len(warnings)}):"]
    lines.extend(f"  [{w.code}] {plain(w.message, None)}" for w in warnings)
    return "\n".join(lines)


def render_summary_table(summary: RunSummary) -> str:
    """The seed-style per-step table of one run, then its warnings."""
    return plain_lines("\n".join([
        describe_run(summary),
        "",
        text_table(step_columns(summary), summary.rows) if summary.rows else "(no ladder steps in this run)",
        *server_section(summary),
        "",
        PERCENTILE_NOTE,
        *([ENERGY_NOTE, *energy_notes(summary.rows)] if energy_columns(summary.rows) else []),
        "",
        render_warnings(summary.warnings),
    ]))


SERVER_NOTE = ("means of the server's /metrics samples inside each window; server tok/s is its generation-token "
               "counter, client tok/s same span the client's tokens over the same seconds (between two samples no "
               "request finished close to: the span the token gap is judged on, '-' where there is none), not the "
               "whole window's tok/s; client CPU: the busiest load process, 100% = one core; "
               "send lag: from a user being ready to its request on the wire")


def server_section(summary: RunSummary) -> list[str]:
    """The server's side of each step, when the run sampled /metrics or measured its CPU."""
    if not has_server_side(summary.rows):
        return []
    table = text_table(server_columns(summary), summary.rows)
    return ["", f"Server side, {summary.name} ({SERVER_NOTE})", table, *unreported_note(summary)]


def unreported_note(summary: RunSummary) -> list[str]:
    """'Not reported by this server: ...' under a server-side table, or nothing when the server gives it all."""
    missing = unreported_figures(summary.server_samples, summary.meta.server, [r.accept_length for r in summary.rows])
    return [f"{NOT_REPORTED.capitalize()}: {', '.join(missing)}"] if missing else []


def why_lines(comparison: Comparison) -> list[str]:
    """'C=70: spec queued 22 requests on average: capped at 48 running' for each level with a reason."""
    return [f"C={lv.target_c}: {lv.why}" for lv in comparison.levels if lv.why]


def render_comparison(comparison: Comparison) -> str:
    """Per-level ratios, verdict, recommendation with its price, per-category spread and warnings."""
    c = comparison
    out = [
        f"Baseline  {describe_run(c.baseline)}",
        f"Spec      {describe_run(c.spec)}",
        "",
    ]
    if not c.open_loop:
        out += [
            "Per level: ratios are spec / baseline (>1x: spec higher); ratio 95% CI from batch means sized by the "
            "token rate's autocorrelation (bm), or by bootstrap over batches of one median request where the data "
            f"allow no shorter batch (life; seed {c.seed}, {c.n_boot} resamples)",
            text_table(LEVEL_COLUMNS, c.levels) if c.levels else "(no level measured in both runs)",
            *([REFINED_NOTE] if any(lv.refined for lv in c.levels) else []),
            "",
            *decomposition_section(c),
            *(["Why, per level (the servers' own figures and the decomposition):",
               *(f"  {line}" for line in why_lines(c)), ""] if why_lines(c) else []),
            *([*energy_lines(c), ""] if energy_lines(c) else []),
        ]
    out += [*slo_section(c), ""] if c.slo is not None else []
    out += [*equivalence_lines(c.equivalence), ""] if c.equivalence is not None else []
    out += [
        f"Verdict: {c.verdict.text}",
        *(f"Rests on: {line}" for line in unfinished_lines(c)),
        *(f"Crossover: {line}" for line in c.crossover_lines),
        f"Recommendation: {c.recommendation.text}",
        *saturation_lines(c.saturation),
        *([f"Skipped: {c.skipped}"] if c.skipped else []),
    ]
    if c.recommendation.levels:
        out += ["", text_table(SWITCH_COLUMNS, c.recommendation.levels)]
    out += [line for s in (c.baseline, c.spec) for line in server_section(s)]
    if not c.open_loop:  # open loop: levels are rates, compared under the SLO, not per category
        out += ["", *category_section(c)]
    out += ["", render_warnings(c.warnings)]
    return plain_lines("\n".join(out))


def saturation_lines(found: Sequence[Saturation]) -> list[str]:
    """'Saturation: baseline saturates near C=80 at 7,100 tok/s (server queue from C=100)' per server."""
    return [f"Saturation: {s.text}" for s in found]


def decompositions(comparison: Comparison) -> list[Decomposition]:
    """The levels' decompositions, lowest C first (levels without one are left out)."""
    return [lv.decomposition for lv in comparison.levels if lv.decomposition is not None]


def decomposition_section(comparison: Comparison) -> list[str]:
    """'Why the ratio moves': tokens per pass and pass cost per level, then a blank line; nothing without data."""
    found = decompositions(comparison)
    if not found:
        return []
    return [f"Why the ratio moves ({DECOMPOSITION_NOTE})", text_table(DECOMPOSITION_COLUMNS, found), ""]


def slo_heading(comparison: Comparison) -> str:
    slo = comparison.slo
    assert slo is not None
    return (f"Under the SLO ({slo.slo.text()}): attainment = share of requests sent in the window that met every "
            f"target; goodput counts only those (DistServe); capacity = highest {slo.unit.split()[-1]} "
            f"with attainment >= {slo.threshold:.0%} there and below")


def slo_section(comparison: Comparison) -> list[str]:
    """The SLO table and each server's capacity under the SLO."""
    slo = comparison.slo
    assert slo is not None
    return [
        slo_heading(comparison),
        text_table(slo_level_columns(slo.open_loop), slo.levels) if slo.levels else "(no level with SLO figures)",
        f"Capacity under the SLO: spec {slo.spec_capacity.text(slo.unit)}; baseline "
        f"{slo.baseline_capacity.text(slo.unit)}",
    ]


def category_section(comparison: Comparison) -> list[str]:
    """The per-category table at the lowest compared level, where a single prompt misleads most."""
    rows = comparison.categories.rows
    if not rows:
        return ["Per category: no level to compare"]
    level = min(r.target_c for r in rows)
    at_level = [r for r in rows if r.target_c == level]
    lines = [f"Per category at C={level} (speed-up = spec per-request tok/s / baseline per-request tok/s; "
             "best/worst prompt matched by prompt_id; every level in comparison.json)",
             text_table(CATEGORY_COLUMNS, at_level)]
    if not any(r.category != ALL for r in at_level):
        lines.append("(no categories)")
    lines.extend(f"Note: {t}" for t in comparison.categories.traps)
    verdict = category_verdict_text(comparison)
    if verdict:
        lines.extend(["", *verdict])
    return lines
