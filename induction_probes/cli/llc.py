"""``induction-probes llc``: the local learning coefficient of a run's checkpoints, by devinterp's SGLD
sampler, beside the strategy phases; the model at initialisation (step 0) and, for ICL-MC runs,
Proposition 2.1's construction are estimated with the same settings as reference points."""

from __future__ import annotations

import argparse
from pathlib import Path

from induction_probes.cli.common import (
    add_device_option, add_output_options, add_run_argument, device_of, figure_lines, format_table, json_text, provenance,
    seed,
)


def register(commands) -> None:
    llc = commands.add_parser("llc", help="the local learning coefficient over training (devinterp's SGLD estimator)")
    add_run_argument(llc)
    llc.add_argument("--checkpoints", type=int, default=12,
                     help="checkpoints to estimate, spread evenly in log(sequences seen), step 0 included (default 12)")
    llc.add_argument("--lr", type=float, default=1e-4, help="SGLD step size (default 1e-4)")
    llc.add_argument("--localization", type=float, default=100.0, help="SGLD pull towards the checkpoint, gamma (default 100)")
    llc.add_argument("--n-beta", type=float, help="inverse temperature n*beta (default batch / ln batch)")
    llc.add_argument("--chains", type=int, default=4, help="SGLD chains (default 4)")
    llc.add_argument("--draws", type=int, default=200, help="draws per chain (default 200)")
    llc.add_argument("--batch-size", type=int, default=64, help="sequences per SGLD step (default 64)")
    llc.add_argument("--n-seqs", type=int, default=4096, help="fresh sequences the sampler draws its batches from (default 4096)")
    llc.add_argument("--seed", type=seed, default=12345, help="seed of those sequences and of the sampler (default 12345)")
    add_output_options(llc)
    add_device_option(llc)
    llc.set_defaults(handler=run_llc)


def log_spread(steps: list[int], sequences: list[int], count: int) -> list[int]:
    """Step 0 and about ``count − 1`` steps evenly spread in log(sequences seen) over the rest."""
    from induction_probes.probes.behaviour import log_spread_steps

    if count < 1:
        raise ValueError(f"--checkpoints must be at least 1, got {count}")
    return sorted({steps[0]} | log_spread_steps(dict(zip(steps, sequences)), count - 1))


def run_llc(args: argparse.Namespace) -> str:
    from induction_probes.circuits.checkpoint import Run
    from induction_probes.probes.llc import SamplerSettings, estimate_llc

    settings = SamplerSettings(lr=args.lr, localization=args.localization, n_beta=args.n_beta, chains=args.chains,
                               draws=args.draws, batch_size=args.batch_size, seed=args.seed)
    from induction_probes.circuits.limits import MAX_CHECKPOINTS, require_at_most

    require_at_most("--checkpoints", args.checkpoints, MAX_CHECKPOINTS)
    if args.batch_size > args.n_seqs:
        raise ValueError(f"--batch-size {args.batch_size} is more than the {args.n_seqs} sequences (--n-seqs) to draw from")
    run = Run.open(args.run)
    if run.task.name != "markov":
        raise ValueError(f"run {run.path.name} is not an ICL-MC run: the llc command samples a next-token loss")
    steps = log_spread(run.steps, [run.entry(s)["sequences_seen"] for s in run.steps], args.checkpoints)
    tokens = run.task.eval_set(args.n_seqs, args.seed).inputs
    device = device_of(args)
    estimates = [estimate_llc(run.load(step=step, device=device), tokens, settings, step) for step in steps]
    construction = construction_estimate(run, tokens, settings, device)
    figures = plot(run, estimates, construction, args.plot) if args.plot else []
    if args.json:
        return json_text(provenance(run, steps, args.n_seqs, args.seed) | {
            "settings": settings.to_json(), "checkpoints": [e.to_json() for e in estimates],
            "construction": construction.to_json()})
    return text(run, settings, estimates, construction) + "".join("\n" + line for line in figure_lines(figures))


def construction_estimate(run, tokens, settings, device=None):
    """Proposition 2.1 (c = 100) on the same sequences with the same settings: a reference point."""
    from induction_probes.circuits.constructions import load_construction, prop21
    from induction_probes.probes.llc import estimate_llc

    model = load_construction(*prop21(run.task.k, 100.0, run.task.seq_len, "float32"))
    return estimate_llc(model, tokens, settings, device=device)


def text(run, settings, estimates, construction) -> str:
    metrics = {m["step"]: m for m in run.metrics()}
    rows = [[e.step, metrics[e.step]["sequences_seen"], closest(metrics[e.step]), e.llc, e.llc_std, e.loss_rise,
             "-" if e.drift is None else e.drift] for e in estimates]
    rows.append(["Prop. 2.1", "-", "-", construction.llc, construction.llc_std, construction.loss_rise,
                 "-" if construction.drift is None else construction.drift])
    s = settings.to_json()
    lines = [
        f"run {run.path.name}: local learning coefficient by devinterp's SGLD (lr {s['lr']:g}, localization "
        f"{s['localization']:g}, n*beta {s['n_beta']:.2f}, {s['chains']} chains x {s['draws']} draws, batch {s['batch_size']})",
        format_table(["step", "sequences", "closest", "LLC", "std over chains", "loss rise", "drift / rise"], rows),
        "loss rise: mean sampled loss minus the checkpoint's (must be > 0); drift: last quarter of draws minus the "
        "third, as a share of the rise (near 0: the chains have settled)",
    ]
    return "\n".join(lines)


def closest(metrics: dict) -> str:
    from induction_probes.circuits.tasks.markov import closest_strategy

    return closest_strategy(metrics["last_token_kl"])


def plot(run, estimates, construction, directory: Path) -> list[Path]:
    from induction_probes.probes.plots import plot_llc

    metrics = {m["step"]: m for m in run.metrics()}
    name = run.path.name
    return [plot_llc(estimates, run.metrics(), [metrics[e.step]["sequences_seen"] for e in estimates], construction,
                     name, directory / f"{name}_llc.png")]
