"""``induction-probes info`` and ``report``: what a run is, and its phases over training."""

from __future__ import annotations

import argparse

import induction_probes.probes.report.views as views
from induction_probes.cli.common import (
    add_device_option,
    add_output_options,
    add_run_argument,
    answer,
    device_of,
    format_table,
    json_text,
    language_model,
    path,
)

# Loaded to build the parser, before a command is chosen: the handlers below import the library they call
# (torch, matplotlib) inside themselves, so that --help and usage errors load neither (tests/unit/test_structure.py).


def register(commands) -> None:
    info = commands.add_parser("info", help="task, recipe, architecture, checkpoint steps and final metrics of a run")
    add_run_argument(info)
    info.add_argument("--step", type=int, help="checkpoint to load and verify (default: the last)")
    add_output_options(info, plot=False)
    info.set_defaults(handler=run_info)

    report = commands.add_parser("report", help="loss against the strategies over an ICL-MC run, phases, figures")
    add_run_argument(report)
    add_output_options(report)
    report.add_argument(
        "--html",
        type=path,
        metavar="DIR",
        help="write RUN_report.html into DIR: phases, probes, ablations and the construction on one "
        "offline page (about half a minute)",
    )
    add_device_option(report)
    report.set_defaults(handler=run_report)


def describe_model(model_class: str, model: dict) -> str:
    """The architecture in one line, from a run's resolved model config."""
    if model_class != "HookedTransformer":
        return f"{model_class}: " + ", ".join(f"{key}={value}" for key, value in model.items())
    heads = model.get("layer_heads") or [model["n_heads"]] * model["n_layers"]
    parts = [
        f"{model['n_layers']} layers",
        "heads " + ",".join(map(str, heads)),
        f"d_model {model['d_model']}",
        f"d_head {model['d_head']}",
        f"positional {model['positional']}",
        f"mask {model['mask']}",
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
        return (
            f"final step {last['step']}: eval MSE {last['eval_loss']:.4g}, "
            f"MSE / target variance {last['relative_mse']:.4g}"
        )
    if "loss" in last:  # a toy-model run
        return f"final step {last['step']}: loss {last['loss']:.4g}"
    shown = [
        f"{name} {value:.4g}"
        for name, value in last.items()  # a registered task's own metrics
        if name not in ("step", "sequences_seen") and isinstance(value, float)
    ]
    return f"final step {last['step']} ({last['sequences_seen']} sequences): " + ", ".join(shown)


def run_info(args: argparse.Namespace) -> str:
    from induction_probes.circuits.runs.reader import Run

    if (source := language_model(args)) is not None:
        from induction_probes.probes.report.lm import language_model_info

        return answer(language_model_info(source, step=args.step, as_json=args.json))
    run = Run.open(args.run)
    text = info_text(run, args.step)
    if args.json:
        final = (run.metrics() or [None])[-1]
        return json_text({"path": str(run.path), "config": run.config, "steps": run.steps, "final": final})
    return text


def run_report(args: argparse.Namespace) -> str:
    """The main job: a run's loss against the strategies over training, its phases and figures; with
    --html, the whole argument (phases, probes, ablations, construction) on one page. The text, figures and
    page are the report's (:mod:`induction_probes.probes.report.views`: chosen by the run's task)."""
    from induction_probes.circuits.runs.reader import Run

    run = Run.open(args.run)
    device = device_of(args)
    page = views.html_report(run, args.html, device) if args.html else None  # refused first where it does not apply
    report = views.run_report(run, device=device, plot=args.plot, as_json=args.json)
    if page is None:
        return answer(report)
    return answer(report | {"report": str(page)}) if args.json else f"{report}\nreport: {page}"
