"""Long language-model work shows its progress on stderr where someone watches (a terminal), names what it is
doing, and keeps stdout (the JSON) clean; --quiet turns it off, and so does a stderr that is not a terminal."""

import fcntl
import io
import json
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest
from lm_models import save_model

from induction_probes.cli import main


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return save_model("gpt2", tmp_path_factory.mktemp("lm") / "gpt2")


def on_a_terminal(*argv: str) -> tuple[int, str, str]:
    """The command with stderr on a pseudo-terminal (a user's), stdout a pipe: status, stdout, what the
    terminal showed."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # a terminal's size (tqdm fits
    # its bar to the width, and a new pseudo-terminal has none)
    command = [sys.executable, "-c", "import sys; from induction_probes.cli import main; sys.exit(main(sys.argv[1:]))"]
    process = subprocess.Popen([*command, *argv], stdout=subprocess.PIPE, stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the follower's side closed: the process has ended
            break
        if not chunk:
            break
        shown += chunk
    out = process.stdout.read().decode()
    os.close(leader)
    return process.wait(timeout=120), out, shown.decode(errors="replace")


class Terminal(io.StringIO):
    """A stderr that says it is a terminal, as a user's does."""

    def isatty(self) -> bool:
        return True


def test_ablate_shows_which_head_and_the_time_left_and_keeps_the_json_clean(model):
    """Through the installed command, on a pseudo-terminal: what a user sees."""
    code, out, shown = on_a_terminal("ablate", str(model), "--json", "--n-seqs", "4", "--length", "6")
    assert code == 0, shown
    assert len(json.loads(out)["ablations"]) == 8  # stdout is the JSON alone
    assert "zero ablation" in shown and "L1H3" in shown and "8/8" in shown  # what, which head, how far
    assert "<" in shown  # tqdm's elapsed<remaining


def test_quiet_or_a_stderr_that_is_no_terminal_shows_no_bar(model, capsys, monkeypatch):
    assert main(["probe", str(model), "--n-seqs", "4", "--length", "6"]) == 0
    assert main(["ablate", str(model), "--n-seqs", "4", "--length", "6", "--heads", "L1H0"]) == 0
    assert capsys.readouterr().err == ""  # pytest's captured stderr is no terminal
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["ablate", str(model), "--n-seqs", "4", "--length", "6", "--quiet"]) == 0
    assert "ablation" not in terminal.getvalue()


def test_probe_markov_and_every_checkpoint_of_a_series_show_their_passes(model, tmp_path, capsys, monkeypatch):
    series = tmp_path / "series"
    for step in (0, 10):
        save_model("gpt2", series / f"step_{step}", seed=step)
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(["probe", str(series), "--all-steps", "--n-seqs", "4", "--length", "6"]) == 0
    shown = terminal.getvalue()
    assert "checkpoints" in shown and "step 10" in shown and "probing step 0" in shown
    assert main(["probe", str(model), "--task", "markov", "--n-seqs", "4", "--id-draws", "2"]) == 0
    assert "chains:" in terminal.getvalue()[len(shown) :] and "/8 " in terminal.getvalue()[len(shown) :]  # 2 draws x 4
    assert "2 checkpoints" in capsys.readouterr().out


def test_importing_a_notebook_kernel_does_not_make_a_notebook():
    """A test suite (the tutorial's) imports ipykernel into a worker that is no notebook: no bar follows."""
    import ipykernel  # noqa: F401

    from induction_probes.probes.lm.progress_bars import in_notebook, progress_bar

    assert not in_notebook() and progress_bar(3, "x").disable
