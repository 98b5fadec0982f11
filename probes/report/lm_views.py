"""What ``probe`` shows for a Hugging Face language model (a model directory, a directory
of ``step_N/`` checkpoints, or a name in the local Hugging Face cache), callable from Python: each function takes
the model's source (:func:`~induction_probes.circuits.interop.model_sources.find_source`) and returns its text,
with one ``figure: PATH`` line per figure written into ``plot``, or with ``as_json`` a JSON-ready dict."""

from __future__ import annotations

import os
from pathlib import Path

from induction_probes.circuits.defaults import LM_PROBE_SEQS, PROBE_SEED
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.language_models import load_bridge
from induction_probes.circuits.interop.model_sources import ModelSource, Series, as_source, require_model
from induction_probes.circuits.names import head_label
from induction_probes.circuits.untrusted import read_text
from induction_probes.probes.lm.measure import text_icl_score
from induction_probes.probes.lm.ray_series import series_threads
from induction_probes.probes.lm.roles import THRESHOLD, heads_text, interval_text
from induction_probes.probes.lm.series import probe, probe_series
from induction_probes.probes.report.tables import figure_lines, format_table

TABLE_ROWS = 12  # heads listed in a table (all of them are in the JSON)
TEXT_BYTES = 1 << 24  # a --text file: 16 MiB, far more than the ICL score's windows need
PROTOCOL = "repeated random tokens [BOS] + F + R + R, |R| drawn per sequence, with controls [BOS] + F + R + R'"


def figures_module():
    """The language-model figures, imported only when a figure is asked for: matplotlib and seaborn are a second
    of every probe's start otherwise."""
    from induction_probes.probes.lm import series_plots  # matplotlib and seaborn: only once a figure is asked for

    return series_plots


def quiet_transformers() -> None:
    """The command's output is its table: no loading bar per checkpoint, no config warnings."""
    from transformers.utils import logging  # only to quiet a language model's loading

    logging.disable_progress_bar()
    logging.set_verbosity_error()


def all_steps_of(source: ModelSource | Series, step: int | None) -> Series:
    """``source`` as the series whose every checkpoint ``--all-steps`` reads: one line where it is one model, or
    where a ``step`` was given too."""
    if not isinstance(source, Series):
        raise BadInput(f"{source.location} is one model, not a checkpoint series: --all-steps does not apply")
    if step is not None:
        raise BadInput("give --step or --all-steps, not both")
    return source


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
    backend: str = "local",
    address: str | None = None,
    threads: int | None = None,
) -> str | dict:
    """The induction probes of one model (or of the series' checkpoint at ``step``), or of every checkpoint of a
    series with ``all_steps``, here or (``backend="ray"``) on Ray
    (:func:`~induction_probes.probes.lm.series.probe_series`): scores with their intervals, each head's role, the
    composition check, losses.
    ``progress``: bars on stderr where it is a terminal or a notebook's
    (:mod:`~induction_probes.probes.lm.progress_bars`).
    ``threads``: torch threads (default: the policy of :mod:`~induction_probes.circuits.threads`; a Ray task runs on
    one)."""
    source = as_source(source)
    protocol = {"length": length, "batch": n_seqs, "seed": seed, "threshold": threshold}
    if all_steps:
        if text is not None:
            raise BadInput("--text scores one model's text: give --step (or no --all-steps), not --all-steps")
        series, here = all_steps_of(source, step), series_threads(backend, threads, "probes")
        quiet_transformers()
        results = list(probe_series(series, device, progress, backend, address, **protocol, **here))
        return series_view(series, results, protocol_json(length, n_seqs, seed), threshold, plot, as_json)
    if backend != "local" or address is not None:
        raise BadInput("--backend and --address spread the checkpoints of --all-steps: give it too")
    model, bridge = boot(source, step, device)
    result = probe(bridge, model.step, **protocol, progress=progress, threads=threads)
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
        raise BadInput(f"{file} is not UTF-8 text") from None
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
