"""The ``induction-probes`` command: one module per command group, each a thin layer that parses, calls
one function of the report layer (:mod:`induction_probes.probes.report`) and prints.

Every sub-command prints a readable table, or JSON with ``--json``. Bad input of any kind (argparse's errors,
the API's :class:`~induction_probes.circuits.errors.BadInput`) ends with one line on stderr and exit
status 2; anything else is a bug of ours: one line, status 1, its traceback in a file the line names.
Parsing imports no torch, so ``--help`` and usage errors answer at once: every command module is loaded to
build the parser, so each declares what its handlers call as a ``lazy_module`` (circuits/lazy.py),
loaded once a command runs. No command module imports another (tests/unit/test_layers.py). The modules named in
``$INDUCTION_PROBES_PLUGINS`` are imported first, so that what they register is on the command line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from induction_probes.circuits.devices import resolve_device
from induction_probes.circuits.errors import BAD_INPUT, bug_report
from induction_probes.circuits.lazy import lazy_module
from induction_probes.circuits.registry import load_plugins
from induction_probes.circuits.validation import IncompleteResult
from induction_probes.cli import baselines, experiments, llc, movie, paper, probe, runs, sweep, train, verify
from induction_probes.cli.common import PROG, Parser, UsageError

torch = lazy_module("torch")  # parsing needs no torch: it loads once a command runs

COMMAND_GROUPS = (baselines, train, sweep, runs, probe, llc, verify, experiments, paper, movie)
OUT_OF_MEMORY = "not enough memory for this command (try smaller sizes)"


def build_parser() -> Parser:
    parser = Parser(prog=PROG, description="Probe induction heads in small attention-only transformers.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for group in COMMAND_GROUPS:
        group.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        load_plugins()  # tasks, recipes, probes and priors registered outside the package: before the parser
        parser = build_parser()  # resolves the recipes: a plugin's that is no recipe is refused here
    except BAD_INPUT as error:
        return fail(error, 2)
    if not argv:  # a bare command: say what it can do
        print(parser.format_help(), file=sys.stderr)
        return 2
    try:
        args = parser.parse_args(argv)
        refuse_undecodable(args)
    except UsageError as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    try:
        # These models are tiny: on the 2-core machine one thread beat two (bench/bench_model.py). A command that
        # computes nothing (info) leaves torch unloaded: importing it is most of such a command's time.
        if not getattr(args, "computes_nothing", False):
            torch.set_num_threads(1)
        # a device this machine lacks: one line, status 2, before anything is written (but a sweep's may be a cluster's)
        if "device" in vars(args) and not getattr(args, "checks_its_device", False):
            resolve_device(args.device)
        print(args.handler(args), flush=True)
    except BrokenPipeError:  # the reader went away (| head): nothing left to say, and no traceback
        silence_stdout()
        return 1
    except BAD_INPUT as error:
        return fail(error, 2)
    except (FloatingPointError, IncompleteResult) as error:  # a diverged run, failed sweep cells: not bad input
        return fail(error, 1)
    except MemoryError:
        return fail(OUT_OF_MEMORY, 1)
    except OSError as error:  # a full disk, a read-only place, a file where a directory should be
        if error.filename is None:  # stdout on a full device: the exit must not try to flush it again
            silence_stdout()
        where = f": {error.filename}" if error.filename else ""
        return fail(f"{error.strerror or error}{where}", 1)
    except KeyboardInterrupt as interrupt:
        print(f"{PROG}: {interrupt.args[0] if interrupt.args else 'interrupted'}", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 -- not bad input: out of memory, or a bug of ours
        if isinstance(error, RuntimeError) and "can't allocate memory" in str(error):  # torch's CPU allocator
            return fail(OUT_OF_MEMORY, 1)
        return fail(f"internal error (a bug, not your input): {bug_report(error)}", 1)
    return 0


def fail(error: object, status: int) -> int:
    print(f"{PROG}: error: {error}", file=sys.stderr)
    return status


def silence_stdout() -> None:
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError:  # not a real file (inside a test): nothing will flush it at exit
        pass


def refuse_undecodable(args) -> None:
    """Every text and path argument must be UTF-8: a run written under a name that is not could never be
    named again in a config, a JSON answer or a table, so it is refused before anything is done."""
    for name, value in vars(args).items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, (str, os.PathLike)):
                try:
                    os.fspath(item).encode("utf-8")
                except UnicodeEncodeError:
                    raise UsageError(f"argument {name}: {os.fspath(item)!r} is not UTF-8 text") from None


if __name__ == "__main__":
    sys.exit(main())
