"""The ``induction-probes`` command.

Every sub-command prints a readable table, or JSON with ``--json``. Bad input of any kind ends with one
line on stderr and exit status 2, never a traceback: argparse errors and the ``ValueError``s that the
API raises for invalid arguments are both reported that way.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

PROG = "induction-probes"


class UsageError(Exception):
    """Raised instead of argparse's usage dump, so that every error is one line."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse would print the usage too
        raise UsageError(message)


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned first column, right-aligned numbers, 4 decimals."""
    cells = [[f"{c:.4f}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    widths = [max(len(str(h)), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        first = values[0].ljust(widths[0])
        return "  ".join([first, *(v.rjust(w) for v, w in zip(values[1:], widths[1:]))])

    return "\n".join([line(list(headers)), line(["-" * w for w in widths]), *map(line, cells)])


def run_baselines(args: argparse.Namespace) -> str:
    from circuits.tasks.markov import strategy_baselines

    result = strategy_baselines(
        args.k, args.seq_len, n=args.n, alpha=args.alpha, n_seqs=args.n_seqs, seed=args.seed
    )
    if args.json:
        return json.dumps(vars(result) | {"task": "markov"}, indent=2)
    rows = [["true", "-", result.mean_ce["true"]]]
    rows += [[name, kl, result.mean_ce[name]] for name, kl in result.last_token_kl.items()]
    title = (
        f"ICL-MC strategy baselines: k={result.k}, n={result.n}, T={result.seq_len}, "
        f"alpha={result.alpha:g}, {result.n_seqs} sequences, seed {result.seed}"
    )
    table = format_table(["strategy", "last-token KL(true||s)", "mean CE over positions"], rows)
    return f"{title}\n{table}"


def build_parser() -> Parser:
    parser = Parser(prog=PROG, description="Probe induction heads in small attention-only transformers.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    baselines = commands.add_parser("baselines", help="in-context strategy baselines of a task")
    tasks = baselines.add_subparsers(dest="task", required=True, parser_class=Parser)
    markov = tasks.add_parser("markov", help="ICL-MC: last-token KL and mean CE of each strategy")
    markov.add_argument("--k", type=int, required=True, help="number of states (>= 2)")
    markov.add_argument("--seq-len", type=int, default=100, help="input tokens per sequence (>= 2)")
    markov.add_argument("--n", type=int, default=2, help="chain of order n-1: 2 is the bigram task")
    markov.add_argument("--alpha", type=float, default=1.0, help="Dirichlet parameter of each row")
    markov.add_argument("--n-seqs", type=int, default=20_000, help="sequences to average over")
    markov.add_argument("--seed", type=int, default=0, help="seed of the sampled chains")
    markov.add_argument("--json", action="store_true", help="machine-readable output")
    markov.set_defaults(run=run_baselines)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        print(args.run(args))
    except (UsageError, ValueError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
