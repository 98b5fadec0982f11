"""One thread policy for the API and the command line: one thread for a small model, torch's default for a large
one, an explicit count over both; the same call through either runs at the same count, and a bad count is refused
in one line."""

import pytest
import torch
from lm_models import save_model

from induction_probes import lm
from induction_probes.circuits import threads
from induction_probes.circuits.models.model import HookedTransformer, HookedTransformerConfig
from induction_probes.cli import main
from induction_probes.probes.lm import ablate_heads


def test_the_policy_gives_one_thread_to_a_small_model_and_the_default_to_a_large_one(monkeypatch):
    model = HookedTransformer(HookedTransformerConfig(n_layers=2, d_model=8, n_heads=1, n_ctx=8, d_vocab=3))
    assert threads.policy_threads(model) == 1
    monkeypatch.setattr(threads, "DEFAULT_THREADS", 5)
    monkeypatch.setattr(threads, "LARGE_MODEL_PARAMETERS", sum(p.numel() for p in model.parameters()))
    assert threads.policy_threads(model) == 5  # at the size the policy calls large
    assert threads.policy_threads(model, 3) == 3
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="threads"):
            threads.policy_threads(model, bad)
    before = torch.get_num_threads()
    with threads.thread_policy(model, 3) as chosen:
        assert chosen == 3 == torch.get_num_threads()
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("given", [None, 3])
def test_the_api_and_the_command_line_ablate_at_the_same_thread_count(tmp_path, monkeypatch, capsys, large, given):
    folder = save_model("gpt2", tmp_path / "gpt2")
    monkeypatch.setattr(threads, "DEFAULT_THREADS", 2)  # apart from 1 and from 3, whatever this machine has
    if large:
        monkeypatch.setattr(threads, "LARGE_MODEL_PARAMETERS", 1)
    seen, clean = [], ablate_heads.clean_per_token
    monkeypatch.setattr(ablate_heads, "clean_per_token", lambda *a: seen.append(torch.get_num_threads()) or clean(*a))
    bridge = lm.as_hooked(str(folder))
    repeated = lm.repeated_random_tokens(bridge, length=6, batch=4)
    lm.ablate(bridge, repeated, [[(0, 0)]], threads=given)
    argv = ["ablate", str(folder), "--n-seqs", "4", "--length", "6", "--heads", "L0H0", "--json"]
    assert main(argv + ([] if given is None else ["--threads", str(given)])) == 0
    expected = given or (2 if large else 1)
    assert seen == [expected, expected], seen


def test_a_bad_thread_count_is_refused_in_one_line(tmp_path, capsys):
    folder = save_model("gpt2", tmp_path / "gpt2")
    for bad in ("0", "-2", "many"):
        assert main(["ablate", str(folder), "--threads", bad]) == 2
        err = capsys.readouterr().err.strip()
        assert "--threads" in err and err.count("\n") == 0, err
    assert main(["ablate", "markov-k3", "--threads", "2"]) == 2
    assert "applies to language models only" in capsys.readouterr().err


def test_the_command_line_keeps_torchs_own_count_for_a_large_model(tmp_path):
    """The command line sets one thread for the process; the policy's default for a large model must still be
    the count torch started with, whatever the command line imported first."""
    import subprocess
    import sys

    folder = save_model("gpt2", tmp_path / "gpt2")
    script = (
        "import torch; torch.set_num_threads(3); from induction_probes.cli import main; "
        f"argv = ['ablate', {str(folder)!r}, '--heads', 'L0H0', '--n-seqs', '2', '--length', '4', '--quiet']; "
        "assert main(argv) == 0; "
        "from induction_probes.circuits import threads; print(threads.DEFAULT_THREADS, torch.get_num_threads())"
    )
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert found.stdout.split()[-2:] == ["3", "1"], found.stdout[-500:]
