"""What ``ablate`` shows for a Hugging Face language model (a model directory, a directory of ``step_N/``
checkpoints, or a name in the local Hugging Face cache), callable from Python: its text, with one ``figure: PATH``
line per figure written into ``plot``, or with ``as_json`` a JSON-ready dict. The parts it shares with ``probe``'s
view (booting, titles, the loss line) are :mod:`.lm_views`'s."""

from __future__ import annotations

import os
from pathlib import Path

from induction_probes.circuits.defaults import LM_PROBE_SEQS, PROBE_SEED
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.model_sources import ModelSource, Series, as_source
from induction_probes.circuits.names import head_label
from induction_probes.probes.ablation.head_ablation import check_heads, check_mode, parse_head_list, single_heads
from induction_probes.probes.lm.ablate_heads import ablate
from induction_probes.probes.lm.ablate_series import ablate_series
from induction_probes.probes.lm.attribution import Screen, ranked_heads, screen_heads
from induction_probes.probes.lm.measure import HeadEstimate
from induction_probes.probes.lm.protocols import repeated_random_tokens
from induction_probes.probes.lm.roles import heads_text, interval_text
from induction_probes.probes.report.lm_ablation_series import series_ablation_view
from induction_probes.probes.report.lm_views import (
    TABLE_ROWS,
    all_steps_of,
    boot,
    estimate_cell,
    figure_stem,
    figures_module,
    header,
    loss_line,
    protocol_json,
    title,
)
from induction_probes.probes.report.tables import figure_lines, format_table

ABLATE_THRESHOLD = 0.5  # share of the induction gap an ablation must remove to be marked
SCREEN_METHOD = (
    "AtP* (Kramar et al. 2024): attribution patching, (z' - z) . dL/dz with attention patterns held, plus the QK "
    "fix, each later layer's patterns recomputed exactly from the head's output change, plus GradDrop, the "
    "estimate retaken with each layer's gradient dropped; heads are ranked by size, the larger of |estimate| and "
    "GradDrop's score"
)
SCREEN_CAVEAT = (
    "first-order outside queries and keys, so it guards against saturated attention (a previous-token head read "
    "through an induction head's keys) and, by GradDrop, against paths that cancel to first order, not against a "
    "saturated loss; the exact ablations are the answer"
)


def ablate_language_model(
    source: ModelSource | Series | str | os.PathLike,
    *,
    step: int | None = None,
    heads: list[tuple[int, int]] | str | None = None,
    mode: str = "zero",
    length: int | tuple[int, int] | None = None,
    n_seqs: int = LM_PROBE_SEQS,
    seed: int = PROBE_SEED,
    threshold: float = ABLATE_THRESHOLD,
    device: str = "cpu",
    plot: Path | None = None,
    as_json: bool = False,
    progress: bool = True,
    screen: int | None = None,
    out: str | os.PathLike | None = None,
    threads: int | None = None,
    all_steps: bool = False,
    backend: str = "local",
    address: str | None = None,
) -> str | dict:
    """Each head alone (or the ``heads`` together) ablated on repeated random tokens, ranked by the rise of the
    repeated copy's loss (paired, with its interval); marked where the rise is at least ``threshold`` of the
    clean model's gap; ``heads`` as the command line writes them ("L1H0,1.1") are checked before any boot.
    ``progress``: a bar on stderr naming the heads being ablated, where stderr is a terminal or a notebook's.
    ``screen`` N: attribution patching ranks every head first (:mod:`~induction_probes.probes.lm.attribution`),
    and only its top N are ablated exactly. ``out``: a journal of each head set's result as soon as it is final
    (:mod:`~induction_probes.probes.lm.ablation_journal`), from which the same call resumes. ``threads``: torch
    threads (default: the policy of :mod:`~induction_probes.circuits.threads`). ``all_steps``: every head at every
    checkpoint of a series (``out`` then a folder of journals; ``backend="ray"``: one Ray task per checkpoint, at
    ``address`` or on a local instance): :mod:`.lm_ablation_series`."""
    check_mode(mode)
    heads = parse_head_list(heads) if isinstance(heads, str) else heads
    if screen is not None and heads is not None:
        raise BadInput("the screen ranks every head: give --screen or --heads, not both")
    source, protocol = as_source(source), {"length": length, "n_seqs": n_seqs, "seed": seed}
    if all_steps:
        where = {"journal": out, "device": device, "progress": progress, "backend": backend, "address": address}
        series = checked_series(source, step, heads, screen)
        result = ablate_series(series, mode, **protocol, threads=threads, **where)
        return series_ablation_view(series, result, protocol, threshold, plot, as_json)
    if backend != "local" or address is not None:
        raise BadInput("--backend and --address spread the checkpoints of --all-steps: give it too")
    model, bridge = boot(source, step, device)
    head_sets = single_heads(bridge) if heads is None else [heads]
    for head_set in head_sets:
        check_heads(head_set, bridge.cfg.n_layers, lambda layer: bridge.cfg.n_heads)
    tokens = repeated_random_tokens(bridge, length, n_seqs, seed)
    reference = repeated_random_tokens(bridge, tokens.length_range, n_seqs, seed + 1)  # other sequences, same shape
    run = {"seed": seed, "progress": progress, "journal": out, "threads": threads}
    baseline, results, found = ablations(bridge, tokens, head_sets, mode, reference, screen, run)
    marked = [r.heads for r in results if baseline.has_gap and r.gap_removed >= threshold]
    figures = ablation_figures(figure_stem(source, model), mode, baseline, results, plot)
    if as_json:
        body = {"mode": mode, "threshold": threshold, "baseline": baseline.to_json()}
        body |= {"ablations": [r.to_json() for r in results], "marked": [heads_text(h) for h in marked]}
        body |= {"screen": screen_json(found)} if found else {}
        return header(source, model, protocol_json(**protocol)) | body | {"figures": [str(f) for f in figures]}
    lines = ablation_lines(title(source, model), tokens, mode, n_seqs, seed, threshold, baseline, results, marked)
    return "\n".join(lines + (screen_lines(found) if found else []) + figure_lines(figures))


def checked_series(source, step: int | None, heads, screen: int | None) -> Series:
    """``source`` as a series whose every head is ablated at every step: one clear line for what does not apply."""
    series = all_steps_of(source, step)
    if heads is not None or screen is not None:
        raise BadInput("--all-steps ablates every head alone at every checkpoint: --heads and --screen do not apply")
    return series


def ablation_figures(name: str, mode: str, baseline, results, plot: Path | None) -> list[Path]:
    """The ablation figure, written into ``plot`` (none without it)."""
    if not plot:
        return []
    title_text = f"{name}: {mode} ablation"
    path = plot / f"{name}_ablation_{mode}.png"
    return [figures_module().plot_lm_ablation(baseline, results[:TABLE_ROWS], title_text, path)]


def ablations(bridge, tokens, head_sets, mode, reference, screen: int | None, run: dict):
    """The clean loss, the ablations by their rise from the highest down, and the :class:`Screen` that chose them
    (None without ``screen``: every head set is ablated). ``run``: :func:`ablate`'s seed, progress, journal and
    threads."""
    if screen is None:
        (baseline, results), found = ablate(bridge, tokens, head_sets, mode, reference, **run), None
    else:
        baseline, found = screen_heads(bridge, tokens, screen, mode, reference, **run)
        results = found.checked
    return baseline, sorted(results, key=lambda r: -r.loss_increase), found


def screen_json(found: Screen) -> dict:
    estimates = found.estimates
    return {
        "method": SCREEN_METHOD,
        "caveat": SCREEN_CAVEAT,
        "estimates": [
            {"head": head_label(l, h)} | estimates.rise.to_json(l, h) | {"size": estimates.size.to_json(l, h)}
            for l, h, _ in ranked_heads(estimates.rise)
        ],
        "checked": [heads_text(r.heads) for r in found.checked],
        "rank_correlation": found.agreement,
        "rank_correlation_interval": found.agreement_interval,
    }


def screen_lines(found: Screen) -> list[str]:
    """What the screen estimated for the heads it checked, and how well it ranked them."""
    estimates = found.estimates
    n_heads = estimates.rise.value.numel()

    def estimated(score: HeadEstimate) -> str:
        return ", ".join(f"{heads_text(r.heads)} {interval_text(*score.at(*r.heads[0]))}" for r in found.checked)

    return [
        f"screen: AtP* (attribution patching with its QK fix and GradDrop, Kramar et al. 2024) estimated all "
        f"{n_heads} heads; the {len(found.checked)} of largest size (the larger of |estimated rise| and GradDrop's "
        "score) were ablated exactly (the table)",
        agreement_text(found),
        f"estimated rise: {estimated(estimates.rise)}",
        f"size: {estimated(estimates.size)}",
        f"caveat: {SCREEN_CAVEAT}",
    ]


def agreement_text(found: Screen) -> str:
    if found.agreement is None:
        return "rank correlation of sizes with the exact rises' sizes: not defined (under 3 heads, or a side all ties)"
    interval = found.agreement_interval
    none = " (no interval: under 10 heads checked, or a perfect order)"
    bounds = none if interval is None else f" [{interval[0]:.2f}, {interval[1]:.2f}] (95 %, Fisher z)"
    return f"rank correlation of sizes with the exact rises' sizes {found.agreement:.2f}{bounds}"


def ablation_lines(name, tokens, mode, n_seqs, seed, threshold, baseline, results, marked) -> list[str]:
    rows = [
        [
            "none",
            estimate_cell(*interval_parts(baseline.interval("repeated_half"))),
            "",
            "",
            f"{baseline.icl_score:.2f}",
        ]
    ]
    for r in results[: max(TABLE_ROWS, len(marked))]:
        share = r.share
        rows.append(
            [
                heads_text(r.heads) + (" *" if r.heads in marked else ""),
                estimate_cell(*interval_parts(r.loss.interval("repeated_half"))),
                estimate_cell(*interval_parts(r.increase)),
                percent_cell(share) if baseline.has_gap else "-",
                f"{r.loss.icl_score:.2f}",
            ]
        )
    low, high = tokens.length_range
    lines = [
        f"{name}: {mode} ablation on {n_seqs} sequences of repeated random tokens (|R| from {low} to {high}, "
        f"seed {seed}); [low, high]: 95 % intervals over sequences, effects paired with the clean model",
        loss_line(baseline).replace("loss on R", "clean model, loss on R"),
        format_table(["ablated heads", "loss repeat", "rise", "share of gap", "ICL score"], rows),
    ]
    if baseline.gap <= 0:
        lines.append("the clean model predicts the repeat no better than the first copy: no induction to remove")
    elif not baseline.has_gap:
        gap = baseline.interval("gap")
        bounds = "no interval (one sequence)" if gap.low is None else f"[{gap.low:.3g}, {gap.high:.3g}] includes 0"
        lines.append(f"the clean model's gap {gap.value:.3g} {bounds}: no share of it is given")
    else:
        names = ", ".join(heads_text(h) for h in marked) or "none"
        lines.append(f"* removes >= {100 * threshold:.0f}% of the gap: {names}")
    return lines


def percent_cell(estimate) -> str:
    if estimate.low is None:
        return f"{100 * estimate.value:.0f}%"
    return f"{100 * estimate.value:.0f}% [{100 * estimate.low:.0f}, {100 * estimate.high:.0f}]"


def interval_parts(estimate) -> tuple[float, float | None, float | None]:
    return estimate.value, estimate.low, estimate.high
