"""What ``probe`` and ``ablate`` show for a Hugging Face language model (a model directory, a directory
of ``step_N/`` checkpoints, or a name in the local Hugging Face cache), callable from Python: each function takes
the model's source (:func:`~induction_probes.circuits.interop.model_sources.find_source`) and returns its text,
with one ``figure: PATH`` line per figure written into ``plot``, or with ``as_json`` a JSON-ready dict."""

from __future__ import annotations

import os
from pathlib import Path

from induction_probes.circuits.common.defaults import LM_PROBE_SEQS, PROBE_SEED
from induction_probes.circuits.common.names import head_label
from induction_probes.circuits.common.untrusted import read_text
from induction_probes.circuits.interop.language_models import load_bridge
from induction_probes.circuits.interop.model_sources import ModelSource, Series, as_source, require_model
from induction_probes.probes.ablation.head_ablation import check_heads, parse_head_list, single_heads
from induction_probes.probes.lm.ablation import ablate, check_mode
from induction_probes.probes.lm.attribution import Screen, ranked_heads, screen_heads
from induction_probes.probes.lm.measure import text_icl_score
from induction_probes.probes.lm.protocols import repeated_random_tokens
from induction_probes.probes.lm.roles import THRESHOLD, heads_text, interval_text
from induction_probes.probes.lm.series import probe, probe_series
from induction_probes.probes.report.tables import figure_lines, format_table

ABLATE_THRESHOLD = 0.5  # share of the induction gap an ablation must remove to be marked
TABLE_ROWS = 12  # heads listed in a table (all of them are in the JSON)
TEXT_BYTES = 1 << 24  # a --text file: 16 MiB, far more than the ICL score's windows need
PROTOCOL = "repeated random tokens [BOS] + F + R + R, |R| drawn per sequence, with controls [BOS] + F + R + R'"


def figures_module():
    """The language-model figures, imported only when a figure is asked for: matplotlib and seaborn are a second
    of every probe's start otherwise."""
    from induction_probes.probes.lm import plots  # matplotlib and seaborn: only once a figure is asked for

    return plots


def quiet_transformers() -> None:
    """The command's output is its table: no loading bar per checkpoint, no config warnings."""
    from transformers.utils import logging  # only to quiet a language model's loading

    logging.disable_progress_bar()
    logging.set_verbosity_error()


def boot(source: ModelSource | Series, step: int | None, device: str):
    """The checkpoint of ``source`` at ``step`` (default the last) and its bridge."""
    quiet_transformers()
    model = require_model(source, step)
    return model, load_bridge(model, device)


def title(source, model: ModelSource) -> str:
    """How a table names what it probed: the model, or the series and the step."""
    return f"series {source.name}, step {model.step}" if isinstance(source, Series) else f"model {model.describe()}"


def figure_stem(source, model: ModelSource) -> str:
    """A figure's file name starts with the model's (or series') folder or cache name, and its step."""
    name = Path(source.name if isinstance(source, Series) else model.location).name or "model"
    return name.replace("/", "_") + (f"_step{model.step}" if model.step is not None else "")


def header(source, model: ModelSource | None, protocol: dict) -> dict:
    """What every JSON answer about a language model starts with."""
    return {
        "model": model.describe() if model is not None else source.name,
        "steps": source.steps if isinstance(source, Series) else None,
        "protocol": PROTOCOL,
        **protocol,
        "intervals": "95 % over sequences: percentile bootstrap for attention scores and shares, Student t for "
        "losses and logits; ablation effects paired (ablated - clean on the same sequences)",
    }


def protocol_json(length, n_seqs: int, seed: int) -> dict:
    return {"length": list(length) if isinstance(length, tuple) else length, "batch": n_seqs, "seed": seed}


def estimate_cell(value: float, low: float | None, high: float | None) -> str:
    return f"{value:.2f}" if low is None or high is None or low != low else interval_text(value, low, high)


def loss_line(loss) -> str:
    parts = {name: loss.interval(name) for name in ("first_half", "repeated_half", "gap", "icl")}
    cell = {name: estimate_cell(e.value, e.low, e.high) for name, e in parts.items()}
    return (
        f"loss on R: first copy {cell['first_half']}, repeated copy {cell['repeated_half']}, gap {cell['gap']}; "
        f"ICL score {cell['icl']} (loss at token R[L/2] of the repeat minus its first occurrence)"
    )


# --- probe ----------------------------------------------------------------------------------------------


def probe_language_model(
    source: ModelSource | Series | str | os.PathLike,
    *,
    step: int | None = None,
    all_steps: bool = False,
    length: int | tuple[int, int] | None = None,
    n_seqs: int = LM_PROBE_SEQS,
    seed: int = PROBE_SEED,
    threshold: float = THRESHOLD,
    text: Path | None = None,
    device: str = "cpu",
    plot: Path | None = None,
    as_json: bool = False,
    progress: bool = True,
) -> str | dict:
    """The induction probes of one model (or of the series' checkpoint at ``step``), or of every checkpoint of a
    series with ``all_steps``: scores with their intervals, each head's role, the composition check, losses.
    ``progress``: bars on stderr where it is a terminal or a notebook's (:mod:`induction_probes.probes.lm.progress`)."""
    source = as_source(source)
    protocol = {"length": length, "batch": n_seqs, "seed": seed, "threshold": threshold}
    if all_steps:
        if not isinstance(source, Series):
            raise ValueError(f"{source.location} is one model, not a checkpoint series: --all-steps does not apply")
        if step is not None:
            raise ValueError("give --step or --all-steps, not both")
        quiet_transformers()
        results = list(probe_series(source, device, progress, **protocol))
        return series_view(source, results, protocol_json(length, n_seqs, seed), threshold, plot, as_json)
    model, bridge = boot(source, step, device)
    result = probe(bridge, model.step, **protocol, progress=progress)
    text_icl = read_text_icl(bridge, text) if text else None
    figures = []
    if plot:
        stem = figure_stem(source, model)
        figures = [
            figures_module().plot_lm_scores(result.scores, f"{stem}: head scores", plot / f"{stem}_head_scores.png")
        ]
    if as_json:
        extra = {"text_icl": text_icl.to_json()} if text_icl else {}
        body = {"threshold": threshold, **result.to_json(), **extra, "figures": [str(f) for f in figures]}
        return header(source, model, protocol_json(length, n_seqs, seed)) | body
    lines = [probe_text(title(source, model), bridge, result, n_seqs, seed)]
    if text_icl:
        t = text_icl
        lines.append(
            f"text ICL score {estimate_cell(t.icl_score, t.low, t.high)}: loss at token {t.late} ({t.late_loss:.4f}) "
            f"minus token {t.early} ({t.early_loss:.4f}), {t.windows} window(s) of {text}"
        )
    return "\n".join(lines + figure_lines(figures))


def read_text_icl(bridge, file: Path):
    try:
        text = read_text(file, TEXT_BYTES)
    except UnicodeDecodeError:
        raise ValueError(f"{file} is not UTF-8 text") from None
    return text_icl_score(bridge, text)


def head_rows(result) -> list[list]:
    scores = result.scores
    ranked = scores.ranked("content")
    shown = {(layer, head) for layer, head, _ in ranked[:TABLE_ROWS]} | set(result.induction_heads)
    roles = {(r.layer, r.head): r for r in result.roles}
    rows = []
    for layer, head, _ in ranked:
        if (layer, head) not in shown:
            continue
        role = roles[(layer, head)]
        rows.append(
            [
                head_label(layer, head) + (" *" if "induction" in role.labels else ""),
                role.text,
                interval_text(*scores.content.at(layer, head)),
                interval_text(*scores.induction.at(layer, head)),
                interval_text(*scores.control.at(layer, head)),
                f"{interval_text(*scores.positional_share.at(layer, head))} at {role.offset}",
                interval_text(*scores.previous_token.at(layer, head)),
                interval_text(*scores.copying.at(layer, head)),
            ]
        )
    return rows


def probe_text(name: str, bridge, result, n_seqs: int, seed: int) -> str:
    low, high = result.repeated.length_range
    n_heads = bridge.cfg.n_layers * bridge.cfg.n_heads
    headers = [
        "head",
        "role",
        "content-based",
        "on R + R",
        "control",
        "positional",
        "previous-token",
        "copying (logit)",
    ]
    rows = head_rows(result)
    lines = [
        f"{name}: {bridge.cfg.n_layers} layers x {bridge.cfg.n_heads} head(s)",
        f"{n_seqs} sequences of repeated random tokens, |R| drawn from {low} to {high} per sequence, each with a "
        f"control whose second R is fresh tokens (seed {seed}); [low, high]: 95 % intervals over sequences",
        format_table(headers, rows),
        f"({len(rows)} of {n_heads} heads, by content-based score = on R + R minus control; positional: the "
        "control's attention at the distance back it favours; * marks induction heads; --json has every head)",
        f"induction heads (content-based score >= {result.threshold}, interval above 0): "
        f"{heads_text(result.induction_heads)}",
        f"previous-token heads (>= {result.threshold}): {heads_text(result.previous_token_heads)}",
    ]
    positional = [r for r in result.roles if any(name.startswith("positional") for name in r.labels)]
    for role in positional[:TABLE_ROWS]:
        for label, reason in zip(role.labels, role.reasons):
            if label.startswith("positional"):
                lines.append(f"{role.name}: {label}: {reason}")
    for c in result.compositions:
        verdict = "depends on" if c.depends else "does not depend on"
        lines.append(
            f"K-composition: {head_label(*c.reader)} {verdict} {head_label(*c.writer)}: its induction score falls by "
            f"{interval_text(*c.drop)} with {head_label(*c.writer)} zero-ablated ({c.clean:.2f} -> {c.ablated:.2f})"
        )
    lines.append(loss_line(result.loss))
    return "\n".join(lines)


def series_view(source: Series, results: list, protocol: dict, threshold: float, plot, as_json: bool):
    """The per-step table (and JSON, and figure) of a checkpoint series."""
    figures = []
    if plot:
        name = Path(source.name).name or "series"
        figures = [figures_module().plot_lm_series(results, source.name, plot / f"{name}_induction_steps.png")]
    if as_json:
        body = {"threshold": threshold, "checkpoints": [r.to_json() for r in results]}
        return header(source, None, protocol) | body | {"figures": [str(f) for f in figures]}
    rows = []
    for r in results:
        prev, ind = r.best("previous_token"), r.best("content")
        rows.append(
            [
                r.step,
                head_label(prev[0], prev[1]),
                interval_text(*r.scores.previous_token.at(prev[0], prev[1])),
                head_label(ind[0], ind[1]),
                interval_text(*r.scores.content.at(ind[0], ind[1])),
                heads_text(r.induction_heads),
                r.loss.first_half,
                r.loss.repeated_half,
                r.loss.icl_score,
            ]
        )
    headers = [
        "step",
        "prev-token head",
        "score",
        "top content head",
        "content-based",
        "induction heads",
        "loss first copy",
        "loss repeat",
        "ICL score",
    ]
    low, high = results[0].repeated.length_range
    heading = (
        f"{source.name}: {len(results)} checkpoints, {protocol['batch']} sequences of repeated random tokens "
        f"(|R| from {low} to {high}, seed {protocol['seed']}); [low, high]: 95 % intervals over sequences"
    )
    return "\n".join([heading, format_table(headers, rows)] + figure_lines(figures))


# --- ablate ---------------------------------------------------------------------------------------------


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
) -> str | dict:
    """Each head alone (or the ``heads`` together) ablated on repeated random tokens, ranked by the rise of the
    repeated copy's loss (paired, with its interval); marked where the rise is at least ``threshold`` of the
    clean model's gap; ``heads`` as the command line writes them ("L1H0,1.1") are checked before any boot.
    ``progress``: a bar on stderr naming the heads being ablated, where stderr is a terminal or a notebook's.
    ``screen`` N: attribution patching ranks every head first (:mod:`~induction_probes.probes.lm.attribution`),
    and only its top N are ablated exactly."""
    check_mode(mode)
    heads = parse_head_list(heads) if isinstance(heads, str) else heads
    if screen is not None and heads is not None:
        raise ValueError("the screen ranks every head: give --screen or --heads, not both")
    source = as_source(source)
    model, bridge = boot(source, step, device)
    head_sets = single_heads(bridge) if heads is None else [heads]
    for head_set in head_sets:
        check_heads(head_set, bridge.cfg.n_layers, lambda layer: bridge.cfg.n_heads)
    tokens = repeated_random_tokens(bridge, length, n_seqs, seed)
    reference = repeated_random_tokens(bridge, tokens.length_range, n_seqs, seed + 1)  # other sequences, same shape
    if screen is None:
        (baseline, results), found = ablate(bridge, tokens, head_sets, mode, reference, seed, progress), None
    else:
        baseline, found = screen_heads(bridge, tokens, screen, mode, reference, seed, progress)
        results = found.checked
    results = sorted(results, key=lambda r: -r.loss_increase)
    marked = [r.heads for r in results if baseline.gap > 0 and r.gap_removed >= threshold]
    figures = []
    if plot:
        name = figure_stem(source, model)
        title_text = f"{name}: {mode} ablation"
        figures = [
            figures_module().plot_lm_ablation(
                baseline, results[:TABLE_ROWS], title_text, plot / f"{name}_ablation_{mode}.png"
            )
        ]
    if as_json:
        body = {
            "mode": mode,
            "threshold": threshold,
            "baseline": baseline.to_json(),
            "ablations": [r.to_json() for r in results],
            "marked": [heads_text(h) for h in marked],
        } | ({"screen": screen_json(found)} if found else {})
        return (
            header(source, model, protocol_json(length, n_seqs, seed)) | body | {"figures": [str(f) for f in figures]}
        )
    lines = ablation_lines(title(source, model), tokens, mode, n_seqs, seed, threshold, baseline, results, marked)
    return "\n".join(lines + (screen_lines(found) if found else []) + figure_lines(figures))


def screen_json(found: Screen) -> dict:
    estimates = found.estimates
    return {
        "method": "attribution patching: (z' - z) . dL/dz per head, one forward and one backward pass",
        "estimates": [{"head": head_label(l, h)} | estimates.to_json(l, h) for l, h, _ in ranked_heads(estimates)],
        "checked": [heads_text(r.heads) for r in found.checked],
        "rank_correlation": found.agreement,
    }


def screen_lines(found: Screen) -> list[str]:
    """What the screen estimated for the heads it checked, and how well it ranked them."""
    n_heads = found.estimates.value.numel()
    estimated = ", ".join(
        f"{heads_text(r.heads)} {interval_text(*found.estimates.at(*r.heads[0]))}" for r in found.checked
    )
    agreement = "" if found.agreement is None else f"; rank correlation with the exact rises {found.agreement:.2f}"
    return [
        f"screen: attribution patching estimated all {n_heads} heads' rises in one forward and one backward pass; "
        f"the {len(found.checked)} it ranks highest were ablated exactly (the table){agreement}",
        f"estimated rise: {estimated}",
    ]


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
                percent_cell(share) if baseline.gap > 0 else "-",
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
