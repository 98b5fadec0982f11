"""Arguments drawn at random for every sub-command: whatever a user types, the command answers (status 0),
refuses in one line (status 2: bad input; 1: the environment), and never prints a traceback.

The options of each sub-command are read from the parser itself, so a new option is drawn too. Every
example runs in a forked child (torch is already loaded, so a fork costs milliseconds) under a memory
limit, in a scratch directory of its own holding a file, an empty directory, a small run and a finished
small sweep; a child still running after a few seconds is stopped and counts as neither a pass nor a
failure (it was computing, not failing). Drawn sweep specs, tampered sweeps and llc settings get their
own tests below, which also refuse a NaN or infinity printed as a result in a table.
"""

import json
import os
import re
import resource
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from induction_probes.cli import COMMANDS as CLI_COMMANDS
from induction_probes.cli import build_parser, main

SECONDS_PER_EXAMPLE = 3
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "40"))  # more for a longer hunt: FUZZ_EXAMPLES=2000 pytest ...
# CI draws the same examples every run (a submission's CI must not fail on an example no one has seen);
# elsewhere every run draws new ones, which is how the last two findings of this file were made.
FUZZ_SETTINGS = dict(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    derandomize=os.environ.get("CI") == "true",
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
MEMORY_HEADROOM = 2 << 30  # bytes of address space a child may add to what the test process already holds


def leaf_parsers(parser, prefix=()) -> dict[tuple[str, ...], object]:
    """Every runnable sub-command (``("train", "markov")``, ``("info",)``, ...) and its parser."""
    found = {}
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            for name, sub in action.choices.items():
                found |= leaf_parsers(sub, (*prefix, name))
    return found or {prefix: parser}


COMMANDS = leaf_parsers(build_parser([command.name for command in CLI_COMMANDS]))

# Numbers of every size and sign, the floats that are not numbers, and text that is not one.
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["0", "1", "2", "3", "-1", "1e9", "1e308", "1e-320", "nan", "inf", "-inf", "0.5", "10000000"]),
)
NON_UTF8 = "run\udcff"  # what Python makes of the byte 0xff in an argument
PLACES = st.sampled_from(
    [
        "a-file",
        "missing",
        "empty",
        "run",
        "markov-k3",
        "spec.toml",
        "sweep",
        "",
        ".",
        NON_UTF8,
        "/proc/self/no-such-place",
        "/proc/version",
        "a-file/below-a-file",
    ]
)
VALUES = st.one_of(NUMBERS, PLACES, st.text(max_size=6), st.sampled_from(["2,1", "relative,none", "x", " "]))


def option_values(action) -> st.SearchStrategy:
    if action.choices:
        return st.one_of(st.sampled_from(sorted(map(str, action.choices))), VALUES)
    return VALUES


@st.composite
def command_lines(draw) -> list[str]:
    command = draw(st.sampled_from(sorted(COMMANDS)))
    parser = COMMANDS[command]
    argv = list(command)
    for action in parser._actions:
        if not action.option_strings and action.dest != "help":  # a positional argument
            argv.append(draw(PLACES))
    options = [a for a in parser._actions if a.option_strings and a.dest != "help"]
    for action in draw(st.lists(st.sampled_from(options), max_size=4, unique_by=id)) if options else []:
        flag = draw(st.sampled_from(action.option_strings))
        argv += [flag] if action.nargs == 0 else [flag, draw(option_values(action))]
    return argv


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """What every example's scratch directory starts from: a file, an empty folder, a small run, a bad spec."""
    from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
    from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
    from induction_probes.circuits.training.train_loop import train_run

    root = tmp_path_factory.mktemp("template")
    recipe = MarkovRecipe(task=MarkovTask(k=2, seq_len=8), steps=4, batch_size=4, eval_seqs=20, n_checkpoints=3)
    train_run(recipe, root / "run", progress=False)
    (root / "run" / "lock").unlink()
    (root / "a-file").write_text("not a run\n")
    (root / "empty").mkdir()
    (root / "spec.toml").write_text("[[not toml")
    finished_sweep(root / "sweep")
    return root


def finished_sweep(out: Path) -> None:
    """A finished two-seed sweep, each cell trained in this process by the sweep's own run_cell."""
    from induction_probes.circuits.sweeps.sweep_runner import cell_json, parse_spec, prepare, run_cell

    spec = parse_spec(SWEEP_SPEC)
    prepare(spec, out)
    assert all(run_cell(str(out), cell_json(cell))["status"] == "trained" for cell in spec.cells())


SWEEP_SPEC = (
    'recipe = "markov"\nseeds = [0, 1]\n[base]\nk = 2\nseq_len = 8\nsteps = 2\nbatch_size = 4\n'
    "eval_seqs = 10\nn_checkpoints = 2\n"
)


def run_in_child(argv: list[str], scratch: Path, seconds: int = SECONDS_PER_EXAMPLE) -> tuple[int | None, str, str]:
    """``main(argv)`` in a forked child with a memory and a time limit: (status or None if it was
    stopped for time, stdout, stderr)."""
    limit = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024 + MEMORY_HEADROOM
    out, err = scratch / ".stdout", scratch / ".stderr"
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 3
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
            os.chdir(scratch)
            for fd, path in ((1, out), (2, err)):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
            import sys

            sys.stdout = open(1, "w", closefd=False)
            sys.stderr = open(2, "w", closefd=False, errors="backslashreplace")
            signal.alarm(seconds)
            status = main(argv)
            sys.stdout.flush()
        except BaseException:
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
        finally:
            os._exit(status)
    _, wait_status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(wait_status):
        assert os.WTERMSIG(wait_status) == signal.SIGALRM, f"{argv} died of signal {os.WTERMSIG(wait_status)}"
        return None, "", ""
    return os.WEXITSTATUS(wait_status), out.read_text(errors="replace"), err.read_text(errors="replace")


def strict_json(text: str) -> object:
    def refuse(constant: str):
        raise ValueError(f"{constant} is not strict JSON")

    return json.loads(text, parse_constant=refuse)


NOT_A_NUMBER = re.compile(r"(?<![\w.-])[-+]?(nan|inf)(?![\w])", re.IGNORECASE)


def check_answer(argv: list[str], status: int | None, stdout: str, stderr: str, numbers: bool = False) -> None:
    """What every answer must be: status 0, 1 or 2, no traceback, one line when it fails, strict JSON;
    with ``numbers``, no NaN or infinity printed as a result in a table either."""
    if numbers and status == 0:
        assert not NOT_A_NUMBER.search(stdout), f"{argv} printed a number that is not one:\n{stdout}"
    if status is None:
        return  # still computing when its time was up
    assert "Traceback" not in stderr, f"{argv}:\n{stderr}"
    assert status in (0, 1, 2), f"{argv} exited {status}:\n{stderr}"
    if status:
        assert stderr.strip().count("\n") == 0 or "interrupted" in stderr, f"{argv}: more than one line:\n{stderr}"
    elif "--json" in argv:
        strict_json(stdout)


def answer_in_scratch(
    argv: list[str], template: Path, tmp_path: Path, prepare=None, seconds=SECONDS_PER_EXAMPLE, numbers: bool = False
):
    scratch = Path(tempfile.mkdtemp(dir=tmp_path))
    try:
        shutil.copytree(template, scratch, dirs_exist_ok=True, symlinks=True)
        if prepare is not None:
            prepare(scratch)
        check_answer(argv, *run_in_child(argv, scratch, seconds), numbers=numbers)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@settings(**FUZZ_SETTINGS)
@given(argv=command_lines())
def test_no_arguments_make_a_traceback_or_an_unknown_status(argv, template, tmp_path):
    answer_in_scratch(argv, template, tmp_path)


# --- sweep specs, tampered sweeps and llc settings (issue 26) ------------------------------------------

HOSTILE_NAMES = [
    "../x",
    "a/b",
    "a\\u0000b",
    "é",
    "ｆｕｌｌ",
    "\\u202ex",
    "-x",
    ".hidden",
    "a" * 300,
    "spec.toml",
    "sweep.jsonl",
    "run$_$x",
    "",
    " ",
    "base",
    "ok-name",
]
TOML_VALUES = [
    "3",
    "0",
    "-1",
    '"2,1"',
    "[2, 1]",
    "1e400",
    "nan",
    "inf",
    '"x"',
    "{a = 1}",
    "true",
    "[]",
    "[" * 3000 + "]" * 3000,
]
SPEC_KEYS = ["k", "seq_len", "steps", "heads", "lr", "prior", "n_layers", "batch_size", "width", "data_seed"]


@st.composite
def spec_texts(draw) -> str:
    """Specs of every shape: valid tiny ones, hostile condition names, grids of up to 3 x 2,000 values,
    20,000 seeds, tables and arrays nested thousands deep, values of the wrong type."""
    lines = [
        draw(
            st.sampled_from(
                ['recipe = "markov"', 'recipe = "minimal"', 'recipe = "gaussian"', 'recipe = "toy"', "", "recipe = 3"]
            )
        )
    ]
    lines.append(
        draw(
            st.sampled_from(
                [
                    "seeds = [0]",
                    "seeds = [1, 0]",
                    "seeds = [-1]",
                    'seeds = "0"',
                    "",
                    "seeds = [" + ", ".join(map(str, range(20_000))) + "]",
                ]
            )
        )
    )
    depth = draw(st.sampled_from([0, 0, 10, 3000, 100_000]))
    if depth:
        lines.append("deep = " + "[" * depth + "]" * depth)
    lines.append("[base]\nk = 2\nseq_len = 8\nsteps = 2\nbatch_size = 4\neval_seqs = 10\nn_checkpoints = 2")
    for key, value in draw(
        st.lists(
            st.tuples(st.sampled_from(SPEC_KEYS), st.sampled_from(TOML_VALUES)), max_size=2, unique_by=lambda kv: kv[0]
        )
    ):
        lines.append(f"{key} = {value}")
    for name in draw(st.lists(st.sampled_from(HOSTILE_NAMES), max_size=2, unique=True)):
        lines.append(f'[conditions."{name}"]\nlr = 0.01')
    grid = draw(
        st.lists(
            st.tuples(st.sampled_from(["steps", "eval_seqs", "lr"]), st.sampled_from([1, 2, 2000])),
            max_size=3,
            unique_by=lambda kv: kv[0],
        )
    )
    if grid:
        lines.append("[grid]")
        lines += [f"{key} = [{', '.join(str(v + 2) for v in range(n))}]" for key, n in grid]
    return "\n".join(lines) + "\n"


@settings(**FUZZ_SETTINGS)
@given(text=spec_texts(), command=st.sampled_from(["sweep", "summarize"]))
def test_no_spec_makes_a_traceback(text, command, template, tmp_path):
    def write(scratch: Path) -> None:
        (scratch / "drawn.toml").write_text(text)
        (scratch / "drawn").mkdir()
        (scratch / "drawn" / "spec.toml").write_text(text)

    # the sweep goes to the finished sweep of another spec, so that nothing trains: it refuses, or skips all
    argv = ["sweep", "drawn.toml", "--out", "sweep"] if command == "sweep" else ["summarize", "drawn", "--json"]
    answer_in_scratch(argv, template, tmp_path, write, numbers=True)


def tamper(scratch: Path, how: str) -> None:
    """One way a stranger's sweep folder may differ from what the sweep wrote."""
    sweep, cell = scratch / "sweep", scratch / "sweep" / "base" / "seed-0"
    if how.startswith("spec "):
        (sweep / "spec.toml").unlink()
        if how == "spec link":
            (sweep / "spec.toml").symlink_to(scratch / "spec.toml")
        elif how == "spec pipe":
            os.mkfifo(sweep / "spec.toml")
        elif how == "spec huge":
            with open(sweep / "spec.toml", "wb") as handle:
                handle.truncate(3 << 30)
        else:
            (sweep / "spec.toml").write_text("recipe = " + "[" * 5000 + "]" * 5000)
    elif how in ("cell link", "condition link"):
        folder = cell if how == "cell link" else sweep / "base"
        folder.rename(scratch / how.replace(" ", "-"))
        folder.symlink_to(scratch / how.replace(" ", "-"), target_is_directory=True)
    elif not all((cell / name).is_file() for name in ("config.json", "metrics.jsonl")):
        # an earlier tampering made one a pipe (or moved the cell): nothing left to edit, and reading would block
        return
    elif how.startswith("metrics "):
        text = (cell / "metrics.jsonl").read_text()
        replace = {
            "metrics nan": ('"true": ', '"true": NaN, "x": '),
            "metrics inf": ('"true": ', '"true": -Infinity, "x": '),
            "metrics no kl": ('"last_token_kl"', '"other"'),
            "metrics string": ('"true": ', '"true": "x", "y": '),
            "metrics torn": (text[len(text) // 2 :], ""),
        }[how]
        (cell / "metrics.jsonl").write_text(text.replace(*replace))
    elif how in ("config pipe", "manifest pipe"):
        name = how.split()[0] + ".json"
        (cell / name).unlink()
        os.mkfifo(cell / name)
    else:
        config = json.loads((cell / "config.json").read_text())
        if how == "config model class":
            config["model_class"] = {"x": 1}
        else:  # another recipe's run in this cell
            config["task"]["k"] = 3
        (cell / "config.json").write_text(json.dumps(config))


TAMPERINGS = [
    "spec link",
    "spec pipe",
    "spec huge",
    "spec deep",
    "cell link",
    "condition link",
    "metrics nan",
    "metrics inf",
    "metrics no kl",
    "metrics string",
    "metrics torn",
    "config pipe",
    "manifest pipe",
    "config model class",
    "config other recipe",
]


@settings(**FUZZ_SETTINGS)
@given(
    how=st.lists(st.sampled_from(TAMPERINGS), min_size=1, max_size=2, unique=True),
    extra=st.lists(
        st.sampled_from(
            [["--json"], ["--count", "dirichlet"], ["--count", "unigram"], ["--probe-seqs", "3"], ["--probe-seqs", "0"]]
        ),
        max_size=2,
    ),
)
def test_no_tampered_sweep_makes_a_traceback_or_a_number_that_is_not_one(how, extra, template, tmp_path):
    def apply(scratch: Path) -> None:
        for one in how:
            if not (one.startswith("spec ") and (scratch / "sweep" / "spec.toml").is_symlink()):
                try:
                    tamper(scratch, one)
                except FileNotFoundError:  # an earlier tampering moved the cell away
                    pass

    answer_in_scratch(["summarize", "sweep", *sum(extra, [])], template, tmp_path, apply, numbers=True)


@pytest.fixture(scope="module")
def sampler_loaded():
    """devinterp loaded once here, so that every forked child samples at once instead of importing it."""
    import devinterp.slt.llc  # noqa: F401


# a burn-in of its own, so that the rule's (hundreds of steps) does not set it: with it, a run at sane settings
# finishes within the example's time and its numbers are read, not cut off by the alarm
LLC_FAST = ["--checkpoints", "1", "--chains", "1", "--batch-size", "4", "--n-seqs", "8", "--burn-in", "2"]


@settings(
    max_examples=max(EXAMPLES // 4, 5),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    options=st.lists(
        st.tuples(st.sampled_from(["--lr", "--n-beta", "--localization", "--draws", "--chains"]), NUMBERS),
        max_size=3,
        unique_by=lambda kv: kv[0],
    ),
    as_json=st.booleans(),
)
def test_no_llc_settings_make_a_traceback_or_print_a_diverged_chain(
    options, as_json, template, tmp_path, sampler_loaded
):
    argv = ["llc", "run", *LLC_FAST, "--draws", "4", *sum(map(list, options), []), *(["--json"] if as_json else [])]
    answer_in_scratch(argv, template, tmp_path, seconds=20, numbers=True)
