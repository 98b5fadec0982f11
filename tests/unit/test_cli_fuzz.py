"""Arguments drawn at random for every sub-command: whatever a user types, the command answers (status 0),
refuses in one line (status 2: bad input; 1: the environment), and never prints a traceback.

The options of each sub-command are read from the parser itself, so a new option is drawn too. Every
example runs in a forked child (torch is already loaded, so a fork costs milliseconds) under a memory
limit, in a scratch directory of its own holding a file, an empty directory and a small run; a child
still running after a few seconds is stopped and counts as neither a pass nor a failure (it was
computing, not failing).
"""

import json
import os
import resource
import shutil
import signal
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from induction_probes.cli import build_parser, main

SECONDS_PER_EXAMPLE = 3
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "40"))  # more for a longer hunt: FUZZ_EXAMPLES=2000 pytest ...
MEMORY_HEADROOM = 2 << 30  # bytes of address space a child may add to what the test process already holds


def leaf_parsers(parser, prefix=()) -> dict[tuple[str, ...], object]:
    """Every runnable sub-command (``("train", "markov")``, ``("info",)``, ...) and its parser."""
    found = {}
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            for name, sub in action.choices.items():
                found |= leaf_parsers(sub, (*prefix, name))
    return found or {prefix: parser}


COMMANDS = leaf_parsers(build_parser())

# Numbers of every size and sign, the floats that are not numbers, and text that is not one.
NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.sampled_from(["0", "1", "2", "3", "-1", "1e9", "1e308", "1e-320", "nan", "inf", "-inf", "0.5", "10000000"]),
)
NON_UTF8 = "run\udcff"  # what Python makes of the byte 0xff in an argument
PLACES = st.sampled_from([
    "a-file", "missing", "empty", "run", "markov-k3", "spec.toml", "", ".", NON_UTF8,
    "/proc/self/no-such-place", "/proc/version", "a-file/below-a-file",
])
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
    from induction_probes.circuits.recipes import MarkovRecipe
    from induction_probes.circuits.tasks import MarkovTask
    from induction_probes.circuits.train import train_run

    root = tmp_path_factory.mktemp("template")
    recipe = MarkovRecipe(task=MarkovTask(k=2, seq_len=8), steps=4, batch_size=4, eval_seqs=20, n_checkpoints=3)
    train_run(recipe, root / "run", progress=False)
    (root / "run" / "lock").unlink()
    (root / "a-file").write_text("not a run\n")
    (root / "empty").mkdir()
    (root / "spec.toml").write_text("[[not toml")
    return root


def run_in_child(argv: list[str], scratch: Path) -> tuple[int | None, str, str]:
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
            signal.alarm(SECONDS_PER_EXAMPLE)
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


@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(argv=command_lines())
def test_no_arguments_make_a_traceback_or_an_unknown_status(argv, template, tmp_path):
    scratch = Path(tempfile.mkdtemp(dir=tmp_path))
    try:
        shutil.copytree(template, scratch, dirs_exist_ok=True)
        status, stdout, stderr = run_in_child(argv, scratch)
        if status is None:
            return  # still computing when its time was up
        assert "Traceback" not in stderr, f"{argv}:\n{stderr}"
        assert status in (0, 1, 2), f"{argv} exited {status}:\n{stderr}"
        if status:
            assert stderr.strip().count("\n") == 0 or "interrupted" in stderr, f"{argv}: more than one line:\n{stderr}"
        elif "--json" in argv:
            strict_json(stdout)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
