"""What the paper page reads from one shipped ICL-MC run: its metrics and phases, the strategies' losses on
its evaluation set, probes at a few checkpoints, and the figures of its phases and circuit, drawn with
the figure helpers of :mod:`induction_probes.probes.figures.plots` and
:mod:`induction_probes.probes.figures.plots_circuit`.
Everything is read or computed from the shipped checkpoints in seconds; nothing trains."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from induction_probes.circuits.defaults import PAGE_SEQS, PROBE_SEED
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.runs.reader import run_task
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.probes.attention.patterns import chance_scores, run_with_patterns
from induction_probes.probes.behaviour.icl_behaviour import (
    Phase,
    even_sequence,
    illustrative_steps,
    log_spread_steps,
    plateau_step,
    strategy_phases,
)
from induction_probes.probes.figures.plots import (
    figure_name,
    plot_distance_to_strategies,
    plot_loss_against_baselines,
    plot_scores_over_training,
    step_caption,
)
from induction_probes.probes.figures.plots_attention import plot_attention_lines
from induction_probes.probes.figures.plots_circuit import (
    plot_attention_heatmaps,
    plot_minimal_parameters,
    plot_positional_profiles,
)
from induction_probes.probes.figures.plots_progress import plot_progress_measures
from induction_probes.probes.paper.shipped_files import open_run
from induction_probes.probes.progress.progress_measures import progress_measures, threshold_crossings
from induction_probes.probes.run_level.all_probes import probe_eval_set, probe_markov_run

if TYPE_CHECKING:
    from jaxtyping import Int
    from torch import Tensor

    from induction_probes.circuits.runs.reader import Run
    from induction_probes.circuits.tasks.markov.strategies import MarkovEvalSet


@dataclass
class MarkovFacts:
    """One ICL-MC run as the page quotes it. ``baselines``: mean last-token KL(true ‖ strategy) on the run's
    evaluation set, ``baseline_sd`` its standard deviation over those sequences; ``probes`` by step, on the
    sequences of ``probe_set`` (the page's probe set, drawn once per run)."""

    name: str
    run: Run
    metrics: list[dict]
    phases: list[Phase]
    baselines: dict[str, float]
    baseline_sd: dict[str, float]
    n_eval: int
    # by step, the checkpoint's CheckpointProbes, or for the minimal model (no heads to probe) the checkpoint itself
    probes: dict[int, Any] = field(default_factory=dict)
    probe_set: MarkovEvalSet | None = None  # drawn by probe_and_draw
    shown: list[int] = field(default_factory=list)
    figures: dict[str, Path] = field(default_factory=dict)

    @property
    def probe_tokens(self) -> Int[Tensor, "batch pos"]:
        """The sequences of the page's probe set, once :func:`probe_and_draw` has drawn it."""
        if self.probe_set is None:
            raise BadInput(f"run {self.name} has no probe set yet: probe_and_draw draws it")
        return self.probe_set.inputs

    @property
    def final(self) -> dict:
        return self.metrics[-1]

    @property
    def transition(self) -> Phase | None:
        """The phase that starts with the last change of closest strategy (None without one)."""
        return self.phases[-1] if len(self.phases) > 1 else None

    def required_transition(self) -> Phase:
        """:attr:`transition`, for a figure drawn around it: refused where the run never changes strategy."""
        transition = self.transition
        if transition is None:
            raise BadInput(f"{self.name} stays closest to {self.phases[0].strategy} throughout: no transition to draw")
        return transition

    def entry(self, step: int) -> dict:
        return next(m for m in self.metrics if m["step"] == step)


def markov_facts(name: str, directory: Path, circuit_figures: bool = True) -> MarkovFacts:
    """The run's metrics, phases and strategy baselines, and its figures of the phases (written into
    ``directory``); with attention heads, the probes too, and (``circuit_figures``) the attention and score
    figures; for the minimal model, v and W."""
    run = open_run(name)
    metrics, recipe = run.metrics(), run.recipe
    eval_kl = run_task(run, MarkovTask).eval_set(recipe.eval_seqs, recipe.eval_seed).strategy_kl()
    facts = MarkovFacts(
        name,
        run,
        metrics,
        strategy_phases(metrics),
        {s: kl.mean().item() for s, kl in eval_kl.items()},
        {s: kl.std().item() for s, kl in eval_kl.items()},
        recipe.eval_seqs,
    )
    facts.shown = illustrative_steps(facts.phases, run.steps)
    facts.figures["strategies"] = plot_distance_to_strategies(
        metrics, list(facts.baselines), name, directory / f"{name}_strategies.png"
    )
    facts.figures["loss"] = plot_loss_against_baselines(metrics, facts.baselines, name, directory / f"{name}_loss.png")
    if run.config.get("model_class") == "HookedTransformer":
        probe_and_draw(facts, directory, circuit_figures)
    else:
        draw_minimal(facts, directory)
    return facts


def probe_steps(facts: MarkovFacts) -> list[int]:
    """Steps spread in log sequences seen, the illustrative ones, and the first checkpoint of the last phase."""
    saved = set(facts.run.steps)
    seen = {m["step"]: m["sequences_seen"] for m in facts.metrics if m["step"] in saved}
    steps = log_spread_steps(seen) | set(facts.shown)
    transition = facts.transition
    if transition is not None:
        steps.add(min(facts.run.steps, key=lambda step: abs(step - transition.first_step)))
    return sorted(steps)


def probe_and_draw(facts: MarkovFacts, directory: Path, figures: bool = True) -> None:
    """Probes at :func:`probe_steps`, and (``figures``) the attention and score figures."""
    run, name = facts.run, facts.name
    probe_set = facts.probe_set = probe_eval_set(run, PAGE_SEQS, PROBE_SEED)
    steps = probe_steps(facts)
    facts.probes = {r.step: r for r in probe_markov_run(run, probe_set, steps)}
    if not figures:
        return
    captions = {step: step_caption(facts.entry(step)) for step in facts.shown}
    example = even_sequence(probe_set.inputs)
    patterns = {step: run_with_patterns(run.load(step=step), example[None])[1] for step in facts.shown}
    facts.figures["attention"] = plot_attention_heatmaps(
        patterns, example, captions, name, directory / figure_name(name, "attention", facts.shown)
    )
    facts.figures["attention_lines"] = plot_attention_lines(
        patterns, example, captions, name, directory / figure_name(name, "attention-lines", facts.shown)
    )
    results = [facts.probes[step] for step in steps]
    facts.figures["scores"] = plot_scores_over_training(
        results,
        [facts.entry(s) for s in steps],
        chance_scores(probe_set.inputs[:100]),
        name,
        directory / figure_name(name, "scores", steps),
    )


def draw_minimal(facts: MarkovFacts, directory: Path) -> None:
    """The minimal model's v and W on the plateau, at the drop and at the end, as ``report`` draws them."""
    run = facts.run
    drop = min(run.steps, key=lambda step: abs(step - facts.phases[-1].first_step))
    facts.shown = sorted({plateau_step(facts.phases, run.steps), drop, run.steps[-1]})
    captions = {step: step_caption(facts.entry(step)) for step in facts.shown}
    models = {step: run.load(step=step) for step in facts.shown}
    facts.probes = models
    v_figure, w_figure = plot_minimal_parameters(models, captions, facts.name, directory, facts.name)
    facts.figures |= {"v": v_figure, "W": w_figure}


def around_transition(facts: MarkovFacts) -> list[int]:
    """The plateau's illustrative step, the probed step nearest the transition, and the last step: the three
    times of Edelman et al.'s positional-encoding panels."""
    first = facts.required_transition().first_step
    nearest = min(facts.probes, key=lambda step: abs(step - first))
    return [facts.shown[1], nearest, facts.shown[-1]]


def draw_positional(facts: MarkovFacts, directory: Path) -> Path:
    """Layer 0's positional profile at :func:`around_transition`'s steps."""
    steps = around_transition(facts)
    captions = {s: step_caption(facts.entry(s)) for s in steps}
    profiles = {s: facts.probes[s].positional_profile[0].numpy() for s in steps}
    path = directory / figure_name(facts.name, "positional", steps)
    return plot_positional_profiles(profiles, captions, facts.name, path)


def progress_over_training(facts: MarkovFacts, directory: Path) -> dict:
    """The progress measures of every checkpoint (weights only), their figure, and per measure the first
    step at which the best head is halfway from chance to Proposition 2.1 (None: never)."""
    run = facts.run
    progress = [progress_measures(run.load(step=step), step) for step in run.steps]
    by_step = {m["step"]: m for m in facts.metrics}
    rows = threshold_crossings(progress, run.model_config, {step: m["sequences_seen"] for step, m in by_step.items()})
    facts.figures["progress"] = plot_progress_measures(
        progress, [by_step[s] for s in run.steps], rows, facts.name, directory / f"{facts.name}_progress.png"
    )
    return rows
