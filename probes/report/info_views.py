"""What ``induction-probes info`` shows of a run of ours: its task, recipe, architecture, checkpoints and final
metrics, its checkpoint loaded (and so verified) on the way. Callable from Python with the command's text and
JSON:

>>> info_report("markov-k3", as_json=True)["steps"][-1]  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from induction_probes.circuits.runs.reader import Run, RunOrPath, as_run
from induction_probes.probes.report.tables import format_table


def info_report(run: RunOrPath, step: int | None = None, as_json: bool = False) -> str | dict[str, Any]:
    """The run's description as text, or with ``as_json`` its path, config, steps and final metrics; either way
    the checkpoint at ``step`` (default the last) is loaded, which verifies its sha256 and shapes."""
    run = as_run(run)
    text = info_text(run, step)
    if as_json:
        final = (run.metrics() or [None])[-1]
        return {"path": str(run.path), "config": run.config, "steps": run.steps, "final": final}
    return text


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


def info_text(run: Run, step: int | None = None) -> str:
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
