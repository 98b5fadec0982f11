"""``ablate RUN --all-steps`` for an ICL-MC run of ours: every head ablated alone at every checkpoint, on the same
fresh sequences, each effect on the next-token loss and on the last token's KL to the true chain paired with the
clean model on those sequences (Student-t interval over them). Since when the model depends on a head: the first
checkpoint from which the loss rise's interval stays above 0 at every later one. The tiny models ablate in a
fraction of a second per checkpoint, so no journal is kept (a language model's series keeps one:
:mod:`.lm_ablation_series`)."""

from __future__ import annotations

from pathlib import Path

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.names import head_label
from induction_probes.circuits.runs.reader import Run
from induction_probes.probes.ablation.ablation_study import ablation_study
from induction_probes.probes.ablation.head_ablation import check_mode, single_heads
from induction_probes.probes.figures.plots_atlas import step_head_heatmap
from induction_probes.probes.intervals import paired_effect
from induction_probes.probes.report.tables import format_table, provenance, with_figures
from induction_probes.probes.run_level.all_probes import probe_eval_set
from induction_probes.probes.tidy import crossing_step
from induction_probes.probes.views.movie_page import spread

EFFECTS = {"loss_increase": "loss", "kl_increase": "last_token_kl.true"}  # JSON name: the behaviour's measure
SHOWN_STEPS = 10  # checkpoints a text table lists (every one is in the JSON)


def ablate_run_series(run: Run, n_seqs: int, seed: int, mode: str, device=None) -> list[dict]:
    """One row per checkpoint and head: ``step``, ``heads`` and each effect of :data:`EFFECTS` with its
    interval."""
    check_mode(mode)
    if run.task.name != "markov":
        raise BadInput(
            f"ablate --all-steps reads ICL-MC runs and language-model series; {run.path.name} is a "
            f"{run.task.name} run: ablate one checkpoint at a time (--step)"
        )
    if len(run.steps) < 2:
        raise BadInput(f"run {run.path.name} has one checkpoint: ablate it without --all-steps")
    eval_set = probe_eval_set(run, n_seqs, seed)
    reference = probe_eval_set(run, n_seqs, seed + 1).inputs  # other sequences, for mean and resample
    rows = []
    for step in run.steps:
        model = run.load(step=step, device=device)
        baseline, results = ablation_study(model, eval_set, single_heads(model), mode, reference, seed)
        for result in results:
            effects = {name: paired_effect(result.behaviour, baseline, measure) for name, measure in EFFECTS.items()}
            rows.append(
                {"step": step, "heads": [head_label(*h) for h in result.heads]}
                | {name: e.to_json() if e is not None else None for name, e in effects.items()}
            )
    return rows


def depends_from(rows: list[dict]) -> dict[str, int | None]:
    """Each head's first checkpoint from which its loss rise's interval lies above 0 at every later one."""
    heads = list(dict.fromkeys(",".join(r["heads"]) for r in rows))
    found = {}
    for name in heads:
        mine = [r for r in rows if ",".join(r["heads"]) == name]
        above = [
            1.0 if (r["loss_increase"] or {}).get("low") is not None and r["loss_increase"]["low"] > 0 else 0.0
            for r in mine
        ]
        found[name] = crossing_step([r["step"] for r in mine], above, 1.0)
    return found


def run_series_view(
    run: Run, n_seqs: int, seed: int, mode: str, *, device=None, plot: Path | None = None, as_json: bool = False
) -> str | dict:
    """The text (or JSON) of :func:`ablate_run_series`, with a step × head heatmap of the loss rise in ``plot``."""
    rows = ablate_run_series(run, n_seqs, seed, mode, device)
    since = depends_from(rows)
    figures = [atlas(run, rows, mode, plot)] if plot else []
    if as_json:
        depends = [{"heads": name, "step": step} for name, step in since.items()]
        answer = provenance(run, run.steps, n_seqs, seed) | {"mode": mode, "rows": rows, "depends_from": depends}
        return answer | {"figures": [str(f) for f in figures]}
    steps = spread(run.steps, SHOWN_STEPS)
    cells = {(",".join(r["heads"]), r["step"]): r["loss_increase"] for r in rows}
    table = [[name, *(rise_cell(cells[name, step]) for step in steps)] for name in since]
    lines = [
        f"run {run.path.name}: {mode} ablation of each head at all {len(run.steps)} checkpoints, on {n_seqs} fresh "
        f"sequences (seed {seed}); rise of the next-token loss, paired with the clean model (95 % intervals in "
        "the JSON)",
        format_table(["heads", *(f"step {s}" for s in steps)], table),
        f"shown: {len(steps)} of the {len(run.steps)} checkpoints (every one, and the KL to the true chain, in "
        "the JSON)",
        "depends on the head (the rise's interval above 0 from then on): "
        + ", ".join(f"{name} {since_text(step)}" for name, step in since.items()),
    ]
    return with_figures("\n".join(lines), figures)


def since_text(step: int | None) -> str:
    return "not at the last checkpoint" if step is None else f"from step {step}"


def rise_cell(effect: dict | None) -> str:
    return "-" if effect is None else f"{effect['value']:+.3f}"


def atlas(run: Run, rows: list[dict], mode: str, plot: Path) -> Path:
    names = list(dict.fromkeys(",".join(r["heads"]) for r in rows))
    values = [[r["loss_increase"]["value"] for r in rows if ",".join(r["heads"]) == name] for name in names]
    title = f"{run.path.name}: {mode} ablation of each head over training"
    path = plot / f"{run.path.name}_ablation_{mode}_all_steps.png"
    return step_head_heatmap(values, names, run.steps, title, "rise of the next-token loss (nats)", path)
