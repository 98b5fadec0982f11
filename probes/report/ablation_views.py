"""What ablating heads costs, as text, JSON and figures: an ICL-MC model's KL to the truth, loss, ICL score and
closest strategy, or a Gaussian-task model's error, clean and with each set of heads ablated."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from induction_probes.probes.ablation.ablation_study import ablation_study, gaussian_ablation_study
from induction_probes.probes.figures.plots import figure_name, heads_label
from induction_probes.probes.figures.plots_circuit import plot_ablation_bars, plot_error_bars
from induction_probes.probes.intervals import paired_effect
from induction_probes.probes.report.tables import ablations_json, format_table, heads_name, provenance, with_figures
from induction_probes.probes.run_level.all_probes import probe_eval_set

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel
    from induction_probes.circuits.runs.reader import Run
    from induction_probes.probes.report.view_protocols import Output, ProbeSet, Shown


def ablate_markov(
    run: Run,
    model: HookedModel,
    head_sets: list[list[tuple[int, int]]],
    step: int,
    mode: str,
    probes: ProbeSet,
    output: Output,
) -> Shown:
    """KL to the truth, loss, ICL score and closest strategy of an ICL-MC model (the run's checkpoint at
    ``step``) with each head set ablated, on the fresh sequences of ``probes``, and each ablation's effect
    (ablated − clean, paired on those sequences) with its interval."""
    n_seqs, seed, plot = probes.n_seqs, probes.seed, output.plot
    eval_set = probe_eval_set(run, n_seqs, seed)
    reference = probe_eval_set(run, n_seqs, seed + 1).inputs  # other sequences
    baseline, results = ablation_study(model, eval_set, head_sets, mode, reference, seed)
    figures = plot_ablations(run, step, baseline, results, eval_set, mode, plot) if plot else []
    if output.as_json:
        base = {
            "last_token_kl": baseline.last_token_kl,
            "loss": baseline.loss,
            "icl_score": baseline.icl_score,
            "closest_strategy": baseline.closest_strategy,
            "intervals": {name: e.to_json() for name, e in baseline.intervals.items()},
        }
        header = provenance(run, [step], n_seqs, seed)
        ablations = [r.to_json() | {"effects": effects_json(r.behaviour, baseline)} for r in results]
        return header | {"mode": mode, "baseline": base, "ablations": ablations}
    return with_figures(ablation_text(run, step, mode, n_seqs, baseline, results), figures)


def effects_json(ablated, clean) -> dict:
    """Each behavioural measure's paired effect, ablated − clean, as {value, low, high}."""
    effects = {name: paired_effect(ablated, clean, name) for name in clean.intervals}
    return {name: {"value": e.value, "low": e.low, "high": e.high} for name, e in effects.items() if e is not None}


def ablation_text(run: Run, step: int, mode: str, n_seqs: int, baseline, results) -> str:
    kl = "last_token_kl.true"
    rows = [["none", interval_cell(baseline.intervals[kl]), "", f"{baseline.loss:.4f}", "", baseline.closest_strategy]]
    for r in results:
        b = r.behaviour
        kl_effect, loss_effect = (paired_effect(b, baseline, name) for name in (kl, "loss"))
        rows.append(
            [
                heads_name(r.heads),
                interval_cell(b.intervals[kl]),
                interval_cell(kl_effect, signed=True),
                f"{b.loss:.4f}",
                interval_cell(loss_effect, signed=True),
                b.closest_strategy,
            ]
        )
    title = (
        f"run {run.path.name}, step {step}: {mode} ablation on {n_seqs} sequences; [low, high]: 95 % intervals over "
        "them, effects paired (ablated - clean on the same sequences)"
    )
    headers = ["ablated heads", "KL(true||model)", "effect on KL", "loss", "effect on loss", "closest"]
    return "\n".join([title, format_table(headers, rows)])


def interval_cell(estimate, signed: bool = False) -> str:
    """``value [low, high]`` to 4 decimals (the value alone without an interval)."""
    sign = "+" if signed else ""
    if estimate.low is None:
        return f"{estimate.value:{sign}.4f}"
    return f"{estimate.value:{sign}.4f} [{estimate.low:{sign}.4f}, {estimate.high:{sign}.4f}]"


def plot_ablations(run: Run, step: int, baseline, results, eval_set, mode: str, directory: Path) -> list[Path]:
    name = run.path.name
    strategy_kl = {strategy: kl.mean().item() for strategy, kl in eval_set.strategy_kl().items()}
    title = f"{name}, step {step}: {mode} ablation of each head"
    path = directory / figure_name(name, "ablation", [step], mode)
    return [plot_ablation_bars(baseline, results, strategy_kl, title, path)]


def ablate_gaussian(
    run: Run,
    model: HookedModel,
    head_sets: list[list[tuple[int, int]]],
    step: int,
    mode: str,
    probes: ProbeSet,
    output: Output,
) -> Shown:
    """A Gaussian-task model's relative MSE at the last position, clean and with each head set ablated."""
    # gaussian_ablation_study loads the checkpoint on its own device
    n_seqs, seed, plot = probes.n_seqs, probes.seed, output.plot
    baseline, ablated = gaussian_ablation_study(run, head_sets, mode, step, n_seqs, seed, device=output.device)
    if output.as_json:
        rows = [(heads, {"relative_mse": value}) for heads, value in ablated]
        return ablations_json(run, step, mode, n_seqs, seed, {"relative_mse": baseline}, rows)
    rows = [["none", baseline]] + [[heads_name(heads), value] for heads, value in ablated]
    title = f"run {run.path.name}: {mode} ablation on {n_seqs} Gaussian sequences"
    figures = []
    if plot:
        path = plot / figure_name(run.path.name, "ablation", [step], mode)
        bars = [("none", baseline)] + [(heads_label(heads), value) for heads, value in ablated]
        figures = [plot_error_bars(bars, f"{run.path.name}, step {step}: {mode} ablation of each head", path)]
    return with_figures("\n".join([title, format_table(["ablated heads", "MSE / target variance"], rows)]), figures)
