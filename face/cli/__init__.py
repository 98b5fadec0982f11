"""The ``induction-probes`` command: one table of commands (:data:`COMMANDS`: name, module, summary) and one
module per group of commands, each a thin layer that parses, calls one function of the report layer
(:mod:`induction_probes.probes.report`) and prints.

Every sub-command prints a readable table, or JSON with ``--json``. Bad input of any kind (argparse's errors,
the API's :class:`~induction_probes.circuits.errors.BadInput`) ends with one line on stderr and exit
status 2; anything else is a bug of ours: one line, status 1, its traceback in a file the line names.
Only the module of the command given is imported, with plain imports at its top: ``--help`` lists every command
from the table alone, so it (and a mistyped command) answers without torch. No command module imports another
(tests/unit/test_layers.py). Plugins (installed entry points, and the modules named in
``$INDUCTION_PROBES_PLUGINS``: :mod:`~induction_probes.circuits.plugins`) are imported first, so that what they
register is on the command line.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from induction_probes.circuits.errors import BAD_INPUT, bug_report
from induction_probes.circuits.lazy import lazy_module
from induction_probes.circuits.plugins import load_plugins
from induction_probes.circuits.validation import IncompleteResult, terminal_safe
from induction_probes.cli.common import PROG, Parser, UsageError

# --help and a language model's info need no torch: it loads once a command computes (the thread policy's module
# imports it) or checks its --device
devices = lazy_module("induction_probes.circuits.devices")
threads = lazy_module("induction_probes.circuits.threads")


@dataclass(frozen=True)
class Command:
    name: str
    module: str  # the module of induction_probes.cli whose PARSERS fills this command's parser
    summary: str  # what --help says of it


COMMANDS = (
    Command("baselines", "baselines", "in-context strategy baselines of a task"),
    Command("train", "train", "train a model and write a run directory"),
    Command("sweep", "sweep", "train every cell of an experiment spec (TOML): conditions x grid x seeds"),
    Command("summarize", "sweep", "mean and 95%% intervals over seeds of a sweep's runs"),
    Command("info", "info", "task, recipe, architecture, checkpoint steps and final metrics of a run"),
    Command("report", "report", "loss against the strategies over an ICL-MC run, phases, figures"),
    Command("probe", "probe", "attention and behaviour probes of a checkpoint or a whole run"),
    Command("ablate", "probe", "ablate heads and measure what in-context learning loses"),
    Command("llc", "llc", "the local learning coefficient over training (calibrated SGLD estimator)"),
    Command("circuit", "circuit", "path patching of every edge: the circuit and its faithfulness, over training"),
    Command("verify", "verify", "check a hand-made construction"),
    Command("toy", "experiments", "Wang et al.'s toy model: four phases, and the plateau sweep"),
    Command("experiment", "experiments", "the rebuttal experiments that need several runs"),
    Command("paper", "paper", "redraw both papers' figures from the shipped files, on one offline page"),
    Command("movie", "movie", "a circuit forming over training, as one offline HTML page"),
)
OUT_OF_MEMORY = "not enough memory for this command (try smaller sizes)"


def build_parser(chosen: Collection[str] = ()) -> Parser:
    """Every command, by its summary; the ``chosen`` ones with their options, from their modules."""
    parser = Parser(prog=PROG, description="Probe induction heads in small attention-only transformers.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in COMMANDS:
        subparser = commands.add_parser(command.name, help=command.summary)
        if command.name in chosen:  # only its module is imported: it loads what its handlers need
            importlib.import_module(f"{__name__}.{command.module}").PARSERS[command.name](subparser)
    return parser


def chosen_command(argv: Sequence[str]) -> list[str]:
    """The command ``argv`` names (its first word, since the top level takes no option but --help), if any."""
    return [command.name for command in COMMANDS if argv and argv[0] == command.name]


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        load_plugins()  # tasks, recipes, probes and priors registered outside the package: before the parser
        parser = build_parser(chosen_command(argv))  # train's resolves the recipes: a plugin's non-recipe is refused
    except BAD_INPUT as error:
        return fail(error, 2)
    if not argv:  # a bare command: say what it can do
        print(parser.format_help(), file=sys.stderr)
        return 2
    try:
        args = parser.parse_args(argv)
        refuse_undecodable(args)
    except UsageError as error:
        return fail(error, 2)
    try:
        # These models are tiny: on the 2-core machine one thread beat two (bench/bench_model.py). A command that
        # computes nothing (info) leaves torch unloaded: importing it is most of such a command's time.
        if not getattr(args, "computes_nothing", False):
            threads.one_thread_for_the_process()
        # a device this machine lacks: one line, status 2, before anything is written (but a sweep's may be a cluster's)
        if "device" in vars(args) and not getattr(args, "checks_its_device", False):
            devices.resolve_device(args.device)
        print(terminal_safe(args.handler(args)), flush=True)
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
    print(terminal_safe(f"{PROG}: error: {error}"), file=sys.stderr)
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
