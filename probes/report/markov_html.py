"""The one-page report of an ICL-MC run, its argument in order: the phases the model passes through, the circuit
the probes find forming, what ablating its heads costs, and how close it comes to the hand-made construction
(Edelman et al.'s Proposition 2.1). One HTML file, every figure embedded
(:mod:`~induction_probes.probes.report.html`)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from induction_probes.circuits.defaults import PAGE_SEQS, PROBE_SEED
from induction_probes.circuits.runs.reader import run_task
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.probes.ablation.ablation_study import ablation_study
from induction_probes.probes.ablation.head_ablation import single_heads
from induction_probes.probes.comparison.trained_vs_prop21 import compare_with_prop21
from induction_probes.probes.report.ablation_views import ablation_text, plot_ablations
from induction_probes.probes.report.html import paragraph, section, write_page
from induction_probes.probes.report.markov_probe_views import plot_probes, probe_text, probe_trajectory, progress_text
from induction_probes.probes.report.markov_views import report_text
from induction_probes.probes.report.verify_views import comparison_text, figure_steps, plot_comparison
from induction_probes.probes.run_level.all_probes import probe_eval_set, probe_markov_run

if TYPE_CHECKING:
    from induction_probes.circuits.devices import Device
    from induction_probes.circuits.runs.reader import Run


def phases_section(run: Run, directory: Path) -> str:
    text, figures = report_text(run, directory)
    return section(
        "1. Phases: what the model predicts over training",
        "The distance from each strategy to the model at the last token, with the strategies' own losses. "
        "Edelman et al.'s models pass from the uniform strategy to the unigram one (a plateau), then to the "
        "bigram one; the phases below say which this run passes and when.",
        text,
        figures,
    )


def probes_section(run: Run, steps: list[int], probe_set, directory: Path, device: Device = None) -> str:
    results = list(probe_markov_run(run, probe_set, run.saved_steps(steps), device))
    progress = [r.progress for r in results if r.progress is not None]
    text = "\n\n".join(
        [probe_text(run, results[-1]), probe_trajectory(results)] + ([progress_text(run, progress)] if progress else [])
    )
    return section(
        "2. Probes: which circuit forms, and when",
        f"Attention scores and progress measures from the weights at {len(steps)} checkpoints, on "
        f"{PAGE_SEQS} fresh sequences (seed {PROBE_SEED}). Look for the order in which the pieces form: "
        "in markov-k3 layer 1 matches tokens on the plateau and layer 0's previous-token head forms only "
        "after the transition.",
        text,
        plot_probes(run, results, probe_set.inputs, directory),
    )


def ablation_section(run: Run, probe_set, directory: Path, device: Device = None) -> str:
    step = run.steps[-1]
    model = run.load(step=step, device=device)
    reference = probe_eval_set(run, PAGE_SEQS, PROBE_SEED + 1).inputs
    baseline, results = ablation_study(model, probe_set, single_heads(model), "zero", reference, PROBE_SEED)
    return section(
        "3. Ablations: does in-context learning need these heads?",
        "Zero-ablating each head of the final model; each bar is coloured by the strategy the ablated "
        "model is then closest to.",
        ablation_text(run, step, "zero", PAGE_SEQS, baseline, results),
        plot_ablations(run, step, baseline, results, probe_set, "zero", directory),
    )


def construction_section(run: Run, steps: list[int], probe_set, directory: Path) -> str:
    k, c = run_task(run, MarkovTask).k, 100.0
    results = {step: compare_with_prop21(run.load(step=step), probe_set.inputs, k, c) for step in steps}
    return section(
        "4. Against the construction: Edelman et al.'s Proposition 2.1",
        "The trained model's attention, positional profile, token matching and OV circuit against the "
        "hand-made two-layer circuit, over training and at the end.",
        comparison_text(run, results, k, c, PAGE_SEQS),
        plot_comparison(run, results, k, directory),
    )


def markov_report_html(run: Run, directory: Path, device: Device = None) -> Path:
    """``directory/RUN_report.html``: every section that applies to the run (the probes, ablations and
    comparison need a two-layer attention model on bigram chains); probes and ablations run on ``device``."""
    name = run.path.name
    with tempfile.TemporaryDirectory() as scratch:
        figures = Path(scratch)
        sections = [phases_section(run, figures)]
        if run.config.get("model_class") == "HookedTransformer":
            steps = figure_steps(run)
            probe_set = probe_eval_set(run, PAGE_SEQS, PROBE_SEED)
            sections += [
                probes_section(run, steps, probe_set, figures, device),
                ablation_section(run, probe_set, figures, device),
            ]
            if run_task(run, MarkovTask).n == 2:
                sections.append(construction_section(run, steps, probe_set, figures))
        else:
            model_class = run.config.get("model_class", "")
            sections.append(
                paragraph(f"{name} is a {model_class}: it has no attention patterns to probe, ablate or compare.")
            )
        return write_page(name, f"{name}: from phases to circuit", sections, Path(directory))
