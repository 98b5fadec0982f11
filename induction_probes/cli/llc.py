"""``induction-probes llc``: the local learning coefficient of a run's checkpoints beside the strategy phases,
by the calibrated estimator of ``probes/llc/estimator.py`` (devinterp's SGLD sampler). The estimator is first
run on the calibration models (known coefficients) at the same settings, and the answer carries that
calibration; Proposition 2.1's construction is asked as written and at its best scales, and is refused where
it is not a minimum."""

from __future__ import annotations

import argparse
from pathlib import Path

from induction_probes.cli.common import (
    add_device_option,
    add_output_options,
    add_run_argument,
    device_of,
    figure_lines,
    format_table,
    json_text,
    provenance,
    seed,
)

# Loaded to build the parser, before a command is chosen: the handlers below import the library they call
# (torch, matplotlib) inside themselves, so that --help and usage errors load neither (tests/unit/test_structure.py).

OVERRIDES = ("lr", "localization", "n_beta", "chains", "draws", "burn_in", "batch_size")


def register(commands) -> None:
    llc = commands.add_parser("llc", help="the local learning coefficient over training (calibrated SGLD estimator)")
    add_run_argument(llc)
    llc.add_argument(
        "--checkpoints",
        type=int,
        default=12,
        help="checkpoints to estimate, spread evenly in log(sequences seen), step 0 included (default 12)",
    )
    llc.add_argument(
        "--steps", type=step_list, help="comma-separated checkpoint steps to estimate instead of --checkpoints"
    )
    rule = "(default: the estimator's rule, see docs/learning-coefficient.md)"
    llc.add_argument("--lr", type=float, help=f"SGLD step size {rule}")
    llc.add_argument("--localization", type=float, help=f"pull towards the checkpoint, gamma {rule}")
    llc.add_argument("--n-beta", type=float, help=f"inverse temperature n*beta {rule}")
    llc.add_argument("--chains", type=int, help="SGLD chains (default 4)")
    llc.add_argument("--draws", type=int, help=f"draws per chain after the burn-in {rule}")
    llc.add_argument("--burn-in", type=int, help=f"SGLD steps per chain before the draws {rule}")
    llc.add_argument("--batch-size", type=int, help="sequences per SGLD step (default min(n, 256))")
    llc.add_argument(
        "--n-seqs", type=int, default=4096, help="fresh sequences the sampler draws its batches from (default 4096)"
    )
    llc.add_argument(
        "--seed", type=seed, default=12345, help="seed of those sequences and of the sampler (default 12345)"
    )
    add_device_option(llc)
    add_output_options(llc)
    llc.set_defaults(handler=run_llc)


def log_spread(steps: list[int], sequences: list[int], count: int) -> list[int]:
    """Step 0 and about ``count − 1`` steps evenly spread in log(sequences seen) over the rest."""
    from induction_probes.probes.behaviour import log_spread_steps

    if count < 1:
        raise ValueError(f"--checkpoints must be at least 1, got {count}")
    return sorted({steps[0]} | log_spread_steps(dict(zip(steps, sequences)), count - 1))


def step_list(text: str) -> list[int]:
    try:
        steps = sorted({int(part) for part in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--steps takes comma-separated integers, got {text!r}") from None
    if not steps or steps[0] < 0:
        raise argparse.ArgumentTypeError(f"--steps takes steps >= 0, got {text!r}")
    return steps


def estimator_settings(args: argparse.Namespace) -> dict:
    """The settings given on the command line (the rest follow the estimator's rule), checked before any work."""
    from induction_probes.probes.llc.estimator import LLCSettings

    overrides = {name: getattr(args, name) for name in OVERRIDES if getattr(args, name) is not None}
    LLCSettings(**({"n_beta": 1.0, "localization": 1.0, "lr": 1.0, "burn_in": 1, "draws": 3} | overrides))
    return overrides | {"seed": args.seed}


def run_llc(args: argparse.Namespace) -> str:
    from induction_probes.circuits.common.limits import MAX_CHECKPOINTS, require_at_most
    from induction_probes.circuits.runs.reader import Run
    from induction_probes.probes.llc.calibration import calibrate
    from induction_probes.probes.llc.markov import checkpoint_llc, construction_estimates

    settings = estimator_settings(args)
    require_at_most("--checkpoints", args.checkpoints, MAX_CHECKPOINTS)
    if args.batch_size is not None and args.batch_size > args.n_seqs:
        raise ValueError(
            f"--batch-size {args.batch_size} is more than the {args.n_seqs} sequences (--n-seqs) to draw from"
        )
    run = Run.open(args.run)
    if run.task.name != "markov":
        raise ValueError(f"run {run.path.name} is not an ICL-MC run: the llc command samples a next-token loss")
    steps = args.steps or log_spread(run.steps, [run.entry(s)["sequences_seen"] for s in run.steps], args.checkpoints)
    if set(steps) - set(run.steps):
        raise ValueError(f"run {run.path.name} has no checkpoint at steps {sorted(set(steps) - set(run.steps))}")
    device = device_of(args)
    tokens = run.task.eval_set(args.n_seqs, args.seed).inputs.to(device)  # drawn on the CPU, then moved once
    metrics = {m["step"]: m for m in run.metrics()}
    estimates = [
        {"step": step, "sequences_seen": metrics[step]["sequences_seen"], "closest": closest(metrics[step])}
        | checkpoint_llc(run.load(step=step, device=device), tokens, **settings).to_json()
        for step in steps
    ]
    refuse_broken_sampler(estimates)
    construction = construction_estimates(run.task.k, run.task.seq_len, tokens, **settings)
    calibration = {"settings": settings, "cases": calibrate(**settings)}
    figures = plot(run, estimates, construction, args.plot) if args.plot else []
    if args.json:
        return json_text(
            provenance(run, steps, args.n_seqs, args.seed)
            | {"settings": settings, "calibration": calibration, "checkpoints": estimates, "construction": construction}
        )
    lines = [text(run, settings, estimates, construction, calibration), *figure_lines(figures)]
    return "\n".join(lines)


SAMPLER_FAILURES = ("diverged", "never moved")  # problems of the sampler itself, not of the point


def refuse_broken_sampler(estimates: list[dict]) -> None:
    """A diverged or frozen sampler has no estimate to report at any point: one line with the reason and
    status 1 (a FloatingPointError), before the construction and the calibration are sampled."""
    for estimate in estimates:
        failure = next((p for p in estimate["problems"] if p.startswith(SAMPLER_FAILURES)), None)
        if failure is not None:
            raise FloatingPointError(f"the SGLD sampler at step {estimate['step']}: {failure}; change --lr or --n-beta")


def setting_cells(settings: dict | None) -> list[str]:
    """n*beta and gamma of one estimate (none where it was refused before any setting followed)."""
    return ["-", "-"] if settings is None else [f"{settings['n_beta']:.4g}", f"{settings['localization']:.3g}"]


def number(value, digits: int = 3) -> str:
    return "refused" if value is None else f"{value:.{digits}g}"


def text(run, settings, estimates, construction, calibration) -> str:
    rows = [
        [
            e["step"],
            e["sequences_seen"],
            e["closest"],
            number(e["llc"]),
            number(e["llc_std"]),
            *setting_cells(e["settings"]),
            "; ".join(e["problems"] + e["flags"]) or "-",
        ]
        for e in estimates
    ]
    for name, e in construction.items():
        rows.append(
            [
                f"Prop. 2.1 {name}",
                "-",
                "-",
                number(e["llc"]),
                number(e["llc_std"]),
                "-",
                "-",
                "; ".join(e["problems"] + e["flags"]) or "-",
            ]
        )
    cases = ", ".join(f"{c['name']} {number(c['estimate'])} (truth {c['truth']:g})" for c in calibration["cases"])
    return "\n".join(
        [
            f"run {run.path.name}: local learning coefficient (settings given: {settings or 'none'}; "
            "the rest by the rule)",
            format_table(
                ["step", "sequences", "closest", "LLC", "sd over chains", "n*beta", "gamma", "diagnostics"], rows
            ),
            f"calibration at the same settings: {cases}",
        ]
    )


def closest(metrics: dict) -> str:
    from induction_probes.circuits.tasks.markov.strategies import closest_strategy

    return closest_strategy(metrics["last_token_kl"])


def plot(run, estimates, construction, directory: Path) -> list[Path]:
    from induction_probes.probes.figures.plots import plot_llc

    name = run.path.name
    return [plot_llc(estimates, run.metrics(), construction["best_scales"], name, directory / f"{name}_llc.png")]
