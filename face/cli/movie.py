"""``induction-probes movie RUN_OR_SERIES --out DIR``: a circuit forming, as one offline page, ``DIR/movie.html``
(:mod:`induction_probes.probes.report.movie_run`)."""

from __future__ import annotations

import argparse

import induction_probes.probes.report.movie_run as report_movie
from induction_probes.circuits.defaults import LM_PROBE_SEQS, MOVIE_FRAMES, PAGE_SEQS, PROBE_SEED
from induction_probes.cli.common import Parser, add_device_option, count, device_of, path, run_name, seed


def movie_parser(movie: Parser) -> None:
    movie.add_argument("run", type=run_name, help="run directory, shipped run name, or a language model's series")
    movie.add_argument("--out", type=path, required=True, metavar="DIR", help="write DIR/movie.html (DIR: a folder)")
    movie.add_argument("--frames", type=count, default=MOVIE_FRAMES, help="checkpoints shown (default %(default)s)")
    movie.add_argument(
        "--around",
        type=int,
        metavar="STEP",
        help="show the checkpoints nearest STEP, and the first and last (default: a run's frames spread by how much "
        "its loss changes, a series' evenly)",
    )
    movie.add_argument("--heads", help="heads shown, as L0H0,L1H0 (default: the previous-token and induction heads)")
    movie.add_argument("--n-seqs", type=count, help=f"probe sequences ({PAGE_SEQS}; {LM_PROBE_SEQS} on a series)")
    movie.add_argument("--seed", type=seed, default=PROBE_SEED, help="seed of those sequences (default %(default)s)")
    add_device_option(movie)
    movie.set_defaults(handler=run_movie)


PARSERS = {"movie": movie_parser}


def run_movie(args: argparse.Namespace) -> str:
    """The movie page of a run or series, written into --out; its path and what it shows."""
    options = {"frames": args.frames, "heads": args.heads, "n_seqs": args.n_seqs, "seed": args.seed}
    options |= {"around": args.around}
    return report_movie.write_movie(args.run, args.out, device=device_of(args), **options).summary()
