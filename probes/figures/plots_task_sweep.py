"""Figures of the summary of a task sweep (:mod:`induction_probes.probes.sweeps.task_summary`: the text task, the
Gaussian task, a task from outside): every seed's metrics over training, the norms of its attention maps and
positions, and when each made half its change. They read only the summary's per-seed records."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from matplotlib.axes import Axes

from induction_probes.probes.figures import plots
from induction_probes.probes.figures.plots_toy import SEED_COLOURS
from induction_probes.probes.sweeps.task_timing import CURVE_AXES


def weight_style(name: str) -> tuple[str, str]:
    """A colour per kind of weight (positions, W_Q, W_K) and a line style per layer."""
    colour = (
        "tab:green"
        if name.startswith(("W_pos", "W_rel", "alibi"))
        else "tab:blue"
        if name.startswith("W_Q")
        else "tab:red"
    )
    return colour, "--" if name.endswith("layer0") else "-"


def shown(steps: list[int]) -> list[int]:
    """The checkpoints a log step axis can show: all but step 0."""
    return [i for i, step in enumerate(steps) if step > 0]


def metric_panel(ax: Axes, name: str, runs: list[dict], baselines: dict) -> None:
    """Every seed's ``name`` over training, its half-way step dotted; for the loss, the baselines as lines."""
    for k, run in enumerate(runs):
        curves = run["curves"]
        kept = shown(curves["steps"])
        steps = [curves["steps"][i] for i in kept]
        values = [curves[name][i] for i in kept]
        ax.plot(steps, values, color=SEED_COLOURS[k % 10], lw=1.5, label=f"seed {run['seed']}")
        at = steps.index(run["reached"][name]) if run["reached"][name] in steps else None
        if at is not None:
            ax.plot([steps[at]], [values[at]], "o", color=SEED_COLOURS[k % 10], ms=6)
    if name == "eval_loss":
        for (label, value), style in zip(baselines.items(), (":", "-.")):
            ax.axhline(value["mean"], color="black", ls=style, lw=1.2, label=f"{label} predictor")
    ax.set(xscale="log", ylabel=name.replace("_", " "))


def weight_panel(ax: Axes, runs: list[dict], part: str) -> None:
    """Each tracked weight's ``norm`` (log scale) or ``moved`` as a share of its final distance from its start,
    one line per weight and seed."""
    for run in runs:
        weights = run["weights"]
        kept = shown(weights["steps"])
        steps = [weights["steps"][i] for i in kept]
        for name, values in weights[part].items():
            colour, style = weight_style(name)
            scale = values[-1] if part == "moved" and values[-1] > 0 else 1.0
            label = name if run is runs[0] else None
            ax.plot(steps, [values[i] / scale for i in kept], color=colour, ls=style, lw=1.2, alpha=0.7, label=label)
    if part == "norm":
        ax.set(yscale="log", ylabel="Frobenius norm (log scale)")
    else:
        ax.axhline(0.5, color="gray", lw=0.8)
        ax.set(ylabel="‖W(t) − W(0)‖ / ‖W(T) − W(0)‖")
    ax.set(xscale="log")
    plots.legend_outside(ax)


def plot_task_sweep_training(summary: dict, name: str, condition: dict, path: Path) -> Path:
    """One condition: a panel per metric (every seed, its half-way step dotted), then the weights' norms and
    their distance from their start as a share of the final one."""
    plots.theme()
    runs = condition["runs"]
    # the training loss is one batch's: the evaluation's loss shows the same with less noise
    metrics = sorted(
        (key for key in runs[0]["curves"] if key not in (*CURVE_AXES, "train_loss")),
        key=lambda name: name != "eval_loss",
    )
    fig, axes = plots.subplots(len(metrics) + 2, 1, figsize=(9, 2.8 * (len(metrics) + 2)), sharex=True)
    for ax, metric in zip(axes, metrics):
        metric_panel(ax, metric, runs, condition.get("baselines", {}))
    plots.legend_outside(axes[0], title="dot: half of\nits change made")
    weight_panel(axes[-2], runs, "norm")
    weight_panel(axes[-1], runs, "moved")
    axes[-1].set_xlabel("step (log scale)")
    fig.suptitle(f"{Path(summary['sweep']).name} / {name}: {condition['task']}", fontsize=11)
    return plots.save(fig, path)


def timed_steps(run: dict) -> dict[str, int]:
    """A seed's half-way steps (but the training loss's, one batch's) and its escape from the bigram plateau."""
    steps = {name: step for name, step in run["reached"].items() if name != "train_loss" and step is not None}
    escape = run.get("plateau", {}).get("escape")
    return steps | ({"loss below the bigram level": escape} if escape is not None else {})


def in_order_of_moving(runs: Sequence[Mapping[str, float]]) -> list[str]:
    """The measures of every seed's half-way steps, by their mean step, then by name: measures that move together
    (the query and key of one layer) tie, and a set's order changes with the hash seed, which made the figure
    differ from one run of the same command to the next."""
    return sorted(set().union(*runs), key=lambda key: (sum(r.get(key, 0) for r in runs) / len(runs), key))


def plot_task_sweep_order(summary: dict, name: str, condition: dict, path: Path) -> Path:
    """Every seed's half-way step of each metric and of each weight's distance from its start, and its escape from
    the plateau: what moves first."""
    plots.theme()
    runs = [timed_steps(run) for run in condition["runs"]]
    measures = in_order_of_moving(runs)
    fig, ax = plots.subplots(figsize=(8, 0.45 * len(measures) + 1.6))
    for k, (run, steps) in enumerate(zip(condition["runs"], runs)):
        rows = [row for row, measure in enumerate(measures) if measure in steps]
        ax.plot(
            [steps[measures[row]] for row in rows],
            rows,
            "o",
            color=SEED_COLOURS[k % 10],
            alpha=0.8,
            label=f"seed {run['seed']}",
        )
    ax.set_yticks(range(len(measures)), measures)
    ax.invert_yaxis()
    ax.set(
        xscale="log",
        xlabel="step (log scale)",
        title=f"{name}: half-way steps, per seed",
    )
    plots.legend_outside(ax)
    return plots.save(fig, path)


WINDOW = (
    "window_r2_distance"  # the Gaussian probes' read-out of x_{s−i} after layer 0 (probes/behaviour/window_readout.py)
)


def window_distances(probes: dict) -> list[int]:
    return sorted(int(key[len(WINDOW) :].split("_")[0]) for key in probes if key.startswith(WINDOW))


def plot_task_sweep_readout(summary: dict, name: str, condition: dict, path: Path) -> Path:
    """Every seed's held-out R² of x_{s−i} from the residual stream after layer 0 against the distance i, and of
    the target there and at the output (1 − MSE / variance)."""
    plots.theme()
    runs = condition["runs"]
    distances = window_distances(runs[0]["probes"])
    fig, (left, right) = plots.subplots(1, 2, figsize=(10, 4.2), width_ratios=(3, 2))
    for k, run in enumerate(runs):
        colour = SEED_COLOURS[k % 10]
        values = [run["probes"][f"{WINDOW}{i}_layer0"] for i in distances]
        left.plot(distances, values, "o-", color=colour, lw=1.5, label=f"seed {run['seed']}")
        ends = [run["probes"]["target_r2_after_layer0_layer0"], 1 - run["final"]["relative_mse"]]
        right.plot([0, 1], ends, "o-", color=colour, lw=1.5)
    left.set(xticks=distances, xlabel="distance i back from position s", ylabel="held-out R²", ylim=(-0.1, 1.08))
    left.set_title("the token i back, x(s − i), read from the residual stream after layer 0", fontsize=10)
    plots.legend_outside(left, below=True, ncol=5)
    right.set(xticks=[0, 1], xticklabels=["after layer 0", "output"], ylim=(-0.1, 1.08), xlim=(-0.3, 1.3))
    right.set_title("the target (R²; output: 1 − MSE / variance)", fontsize=10)
    fig.suptitle(f"{Path(summary['sweep']).name} / {name}: {condition['task']}", fontsize=11)
    return plots.save(fig, path)


def plot_task_sweep(summary: dict, directory: Path) -> list[Path]:
    sweep = Path(summary["sweep"]).name
    paths = []
    for name, condition in summary["conditions"].items():
        paths.append(plot_task_sweep_training(summary, name, condition, directory / f"{sweep}-{name}-training.png"))
        paths.append(plot_task_sweep_order(summary, name, condition, directory / f"{sweep}-{name}-order.png"))
        if window_distances(condition["runs"][0]["probes"]):
            paths.append(plot_task_sweep_readout(summary, name, condition, directory / f"{sweep}-{name}-readout.png"))
    return paths
