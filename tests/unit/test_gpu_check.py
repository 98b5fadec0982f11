"""bench/gpu_check.py's comparison, on made-up metrics, and its pass over the commands, on the CPU (its GPU part needs
a GPU; its answer without one is tested)."""

import importlib.util
from pathlib import Path

import pytest
import torch

BENCH = Path(__file__).resolve().parents[2] / "bench"
SPEC = importlib.util.spec_from_file_location("gpu_check", BENCH / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(gpu_check)


def metrics(closest: list[str], final_kl: float) -> list[dict]:
    """One checkpoint per entry every 100 steps, whose closest strategy is the named one (KL 0.01 to it,
    0.5 to the others) and whose last KL(true || model) is ``final_kl``."""
    names = ("uniform", "unigram", "bigram")
    rows = [
        {"step": 100 * i, "last_token_kl": {"true": 0.3} | {n: 0.01 if n == c else 0.5 for n in names}}
        for i, c in enumerate(closest)
    ]
    rows[-1]["last_token_kl"]["true"] = final_kl
    return rows


STORY = ["uniform"] * 3 + ["unigram"] * 4 + ["bigram"] * 5  # transition at step 700
SEEDS = [
    metrics(["uniform"] * 3 + ["unigram"] * (4 + shift) + ["bigram"] * (5 - shift), kl)
    for shift, kl in ((-1, 0.010), (0, 0.012), (1, 0.014), (2, 0.011))
]  # transitions 600..900: sd 129 steps


def test_the_same_story_within_seed_noise_passes():
    assert gpu_check.compare(metrics(STORY, 0.012), metrics(STORY, 0.0121), SEEDS) == []
    flicker = STORY[:5] + ["bigram"] + STORY[6:]  # one checkpoint near a tie is rounding, not a phase
    assert gpu_check.lasting_phases(metrics(flicker, 0.01)) == ["uniform", "unigram", "bigram"]
    shifted = ["uniform"] * 3 + ["unigram"] * 5 + ["bigram"] * 4  # 100 steps later: within 2 sd (258)
    assert gpu_check.compare(metrics(STORY, 0.012), metrics(shifted, 0.012), SEEDS) == []


def test_a_different_story_fails_and_says_what_differs():
    late = ["uniform"] * 3 + ["unigram"] * 7 + ["bigram"] * 2  # 300 steps later: beyond 2 sd (258)
    problems = gpu_check.compare(metrics(STORY, 0.012), metrics(late, 0.012), SEEDS)
    assert [p.split(":")[0] for p in problems] == ["transition"]
    never = ["uniform"] * 3 + ["unigram"] * 9
    problems = gpu_check.compare(metrics(STORY, 0.012), metrics(never, 0.012), SEEDS)
    assert problems[0].startswith("phases differ") and problems[1].startswith("transition")
    # final KL sd over seeds is 0.0018: 0.02 is beyond two of them
    assert gpu_check.compare(metrics(STORY, 0.012), metrics(STORY, 0.02), SEEDS)[0].startswith("final KL")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_without_cuda_it_says_so_in_one_line_and_exits_0(capsys):
    assert gpu_check.main() == 0
    assert capsys.readouterr().out.count("\n") == 1


def test_a_command_that_fails_on_the_device_is_named_with_its_status_and_last_line(tmp_path):
    # the GPU pass runs every command of COMMANDS_ON_CUDA with --device cuda; here two on the CPU, one failing
    commands = [["probe", "markov-k3", "--step", "0"], ["probe", "no-such-run"]]
    failed = gpu_check.failing_commands(tmp_path, "cpu", commands)
    assert len(failed) == 1
    assert failed[0].startswith("induction-probes probe no-such-run --device cpu: status 2: ")
    assert "no-such-run" in failed[0].split(": status 2: ")[1]  # the command's own one-line error
    assert {words[0] for words in gpu_check.COMMANDS_ON_CUDA} == {"probe", "ablate", "verify", "report", "llc"}
