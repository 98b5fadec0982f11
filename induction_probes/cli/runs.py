"""``induction-probes info`` and ``report``: what a run is, and its phases over training."""

from __future__ import annotations

import argparse
from pathlib import Path

from induction_probes.cli import lm
from induction_probes.cli.common import path, add_device_option, add_output_options, add_run_argument, device_of, figure_lines, format_table, json_text, provenance, spread_steps


def register(commands) -> None:
    info = commands.add_parser("info", help="task, recipe, architecture, checkpoint steps and final metrics of a run")
    add_run_argument(info)
    info.add_argument("--step", type=int, help="checkpoint to load and verify (default: the last)")
    add_output_options(info, plot=False)
    info.set_defaults(handler=run_info)

    report = commands.add_parser("report", help="loss against the strategies over an ICL-MC run, phases, figures")
    add_run_argument(report)
    add_output_options(report)
    report.add_argument("--html", type=path, metavar="DIR",
                        help="write RUN_report.html into DIR: phases, probes, ablations and the construction on one "
                             "offline page (about half a minute)")
    add_device_option(report)
    report.set_defaults(handler=run_report)


def describe_model(model_class: str, model: dict) -> str:
    """The architecture in one line, from a run's resolved model config."""
    if model_class != "HookedTransformer":
        return f"{model_class}: " + ", ".join(f"{key}={value}" for key, value in model.items())
    heads = model.get("layer_heads") or [model["n_heads"]] * model["n_layers"]
    parts = [
        f"{model['n_layers']} layers", "heads " + ",".join(map(str, heads)), f"d_model {model['d_model']}",
        f"d_head {model['d_head']}", f"positional {model['positional']}", f"mask {model['mask']}",
        "pre-LN" if model["normalization"] == "LN" else "no LayerNorm",
        f"MLP {model['d_mlp']}" if model["d_mlp"] else "attention-only",
    ]
    return "HookedTransformer: " + ", ".join(str(part) for part in parts)


def info_text(run, step: int | None = None) -> str:
    """Task, recipe, architecture, checkpoint steps and final metrics of a run; loads the checkpoint at
    ``step`` (default the last), which verifies its sha256 and its shapes against the config."""
    model = run.load(step=step)
    n_params = sum(p.numel() for p in model.parameters())
    recipe = run.recipe
    settings = {key: value for key, value in recipe.to_json().items() if key != "name"}
    lines = [
        f"run {run.path}",
        f"task: {recipe.task.describe()}",
        f"recipe {recipe.name}: " + ", ".join(f"{key}={value}" for key, value in settings.items()),
        "model: " + describe_model(run.config["model_class"], run.config["model"]),
    ]
    steps = run.steps
    lines.append(f"checkpoints: {len(steps)} steps from {steps[0]} to {steps[-1]}" if steps else "checkpoints: none")
    lines.append(f"loaded step {run.entry(step)['step']}: {n_params} parameters, sha256 verified")
    metrics = run.metrics()
    if metrics:
        lines.append(final_metrics_text(metrics[-1]))
    return "\n".join(lines)


def final_metrics_text(last: dict) -> str:
    if "last_token_kl" in last:
        rows = [[name, value] for name, value in last["last_token_kl"].items()]
        head = f"final step {last['step']} ({last['sequences_seen']} sequences), train loss {last['train_loss']:.4g}"
        return head + "\n" + format_table(["last-token KL(x||model)", "value"], rows)
    if "relative_mse" in last:
        return f"final step {last['step']}: eval MSE {last['eval_loss']:.4g}, MSE / target variance {last['relative_mse']:.4g}"
    return f"final step {last['step']}: loss {last['loss']:.4g}"


def run_info(args: argparse.Namespace) -> str:
    from induction_probes.circuits.runs.reader import Run

    if (model := lm.language_model(args)) is not None:
        return lm.run_info(args, model)
    run = Run.open(args.run)
    text = info_text(run, args.step)
    if args.json:
        final = (run.metrics() or [None])[-1]
        return json_text({"path": str(run.path), "config": run.config, "steps": run.steps, "final": final})
    return text


def run_report(args: argparse.Namespace) -> str:
    """The main job: a run's loss against the strategies over training, its phases and figures; with
    --html, the whole argument (phases, probes, ablations, construction) on one page."""
    from induction_probes.circuits.runs.reader import Run

    run = Run.open(args.run)
    if run.task.name == "gaussian":
        return gaussian_report(run, args)
    if args.json:
        return json_text(report_json(run, args.plot))
    text, figures = report_text(run, args.plot)
    if args.html:
        from induction_probes.cli.report_html import write_html_report

        text += f"\nreport: {write_html_report(run, args.html, device_of(args))}"
    return "\n".join([text] + figure_lines(figures))


def gaussian_report(run, args: argparse.Namespace) -> str:
    """A Gaussian-task run over training: its error on its evaluation set (no strategy phases here; the
    probes are ``probe RUN --all-steps``)."""
    metrics, recipe = run.metrics(), run.recipe
    if args.html:
        raise ValueError(f"run {run.path.name} is a Gaussian-task run: the HTML report follows the ICL-MC argument")
    if args.json:
        return json_text(provenance(run, [m["step"] for m in metrics], recipe.eval_seqs, recipe.eval_seed) | {"metrics": metrics})
    figures = []
    if args.plot:
        from induction_probes.probes.figures.plots_circuit import plot_gaussian_training

        figures = [plot_gaussian_training(metrics, run.path.name, args.plot / f"{run.path.name}_error.png")]
    wanted = spread_steps([m["step"] for m in metrics])
    rows = [[m["step"], f"{m['sequences_seen'] / 1000:.1f}", m["train_loss"], m["eval_loss"], m["relative_mse"]]
            for m in metrics if m["step"] in wanted]
    title = f"run {run.path.name}: {run.task.describe()}, {recipe.steps} steps of {recipe.batch_size} sequences"
    table = format_table(["step", "seqs (k)", "train loss", "eval loss", "MSE / target variance"], rows)
    hint = f"probes over training: induction-probes probe {run.path.name} --all-steps"
    return "\n".join([title, table, hint] + figure_lines(figures))


def report_data(run):
    """The run's task, recipe, metrics, strategy baselines (last-token KL(true || s) on its evaluation
    set) and phases; refuses a run that is not an ICL-MC training run or has no metrics yet."""
    from induction_probes.circuits.tasks.markov.task import MarkovTask
    from induction_probes.probes.behaviour import strategy_phases
    from induction_probes.probes.summary import run_task

    task, recipe, metrics = run_task(run, MarkovTask), run.recipe, run.metrics()
    if not metrics:
        raise ValueError(f"run {run.path} has no metrics yet")
    eval_set = task.eval_set(recipe.eval_seqs, recipe.eval_seed)
    baselines = {name: kl.mean().item() for name, kl in eval_set.strategy_kl().items()}
    return task, recipe, metrics, baselines, strategy_phases(metrics)


def report_json(run, directory: Path | None) -> dict:
    _, recipe, metrics, baselines, phases = report_data(run)
    figures = plot_report(run, metrics, baselines, phases, directory) if directory else []
    result = provenance(run, [m["step"] for m in metrics], recipe.eval_seqs, recipe.eval_seed)
    result |= {"baselines": baselines, "phases": [vars(p) for p in phases]}
    return result | {"metrics": metrics, "figures": [str(f) for f in figures]}


def report_text(run, directory: Path | None) -> tuple[str, list[Path]]:
    """The report's text, and its figures written into ``directory`` (none without one)."""
    task, recipe, metrics, baselines, phases = report_data(run)
    figures = plot_report(run, metrics, baselines, phases, directory) if directory else []
    title = f"run {run.path.name}: {task.describe()}, {recipe.steps} steps of {recipe.batch_size} sequences"
    baseline_text = ", ".join(f"{name} {value:.4f}" for name, value in baselines.items())
    lines = [
        title,
        f"strategy baselines on its {recipe.eval_seqs} evaluation sequences, last-token KL(true||s): {baseline_text}",
        "",
        metrics_table(metrics, list(baselines), phases),
        "",
        "phases (closest strategy): " + " -> ".join(map(phase_text, phases)),
    ]
    return "\n".join(lines), figures


def metrics_table(metrics: list[dict], strategies: list[str], phases: list) -> str:
    """Checkpoints evenly spread in step, plus the first checkpoint of every phase."""
    from induction_probes.circuits.tasks.markov.strategies import closest_strategy

    wanted = spread_steps([m["step"] for m in metrics]) | {p.first_step for p in phases}
    headers = ["step", "seqs (k)", "train loss", "KL(true||model)", *(f"KL({s}||model)" for s in strategies), "closest"]
    rows = [
        [m["step"], f"{m['sequences_seen'] / 1000:.1f}", m["train_loss"], m["last_token_kl"]["true"],
         *(m["last_token_kl"][s] for s in strategies), closest_strategy(m["last_token_kl"])]
        for m in metrics if m["step"] in wanted
    ]
    return format_table(headers, rows)


def phase_text(phase) -> str:
    seen = f"{phase.first_sequences / 1000:.1f}k-{phase.last_sequences / 1000:.1f}k seqs"
    return f"{phase.strategy} (steps {phase.first_step}-{phase.last_step}, {seen})"


def plot_report(run, metrics: list[dict], baselines: dict[str, float], phases: list, directory: Path) -> list[Path]:
    from induction_probes.probes.behaviour import plateau_step
    from induction_probes.probes.figures.plots import plot_distance_to_strategies, plot_loss_against_baselines, step_caption
    from induction_probes.probes.figures.plots_circuit import plot_minimal_parameters

    name = run.path.name
    figures = [
        plot_distance_to_strategies(metrics, list(baselines), name, directory / f"{name}_strategies.png"),
        plot_loss_against_baselines(metrics, baselines, name, directory / f"{name}_loss.png"),
    ]
    if run.config.get("model_class") == "MinimalModel":  # v and W on the plateau, at the drop, at the end
        drop = min(run.steps, key=lambda step: abs(step - phases[-1].first_step))  # the nearest saved step
        steps = sorted({plateau_step(phases, run.steps), drop, run.steps[-1]})
        by_step = {m["step"]: m for m in metrics}
        captions = {s: step_caption(by_step[s]) for s in steps}
        figures += plot_minimal_parameters({s: run.load(step=s) for s in steps}, captions, name, directory, name)
    return figures
