"""The natural-text task: its windows, split, loss, metrics and baselines against hand computations, and what it
refuses. Every text here is written by the test itself."""

from __future__ import annotations

import hashlib
import math
import os

import pytest
import torch

from induction_probes.circuits.recipes.text_recipe import TextRecipe
from induction_probes.circuits.tasks.text_task import BYTES, TextEvalSet, TextTask, read_corpus, windows


@pytest.fixture
def text_file(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text("the cat sat on the mat; the cat sat on the hat. " * 20, encoding="utf-8")
    return path


def test_a_task_records_the_files_hash_and_length(text_file):
    task = TextTask(file=str(text_file), seq_len=16)
    data = text_file.read_bytes()
    assert (task.sha256, task.n_bytes) == (hashlib.sha256(data).hexdigest(), len(data))
    assert task.split() == math.floor(len(data) * 0.9)
    assert bytes(task.tokens("train").tolist()) == data[: task.split()]
    assert bytes(task.tokens("held_out").tolist()) == data[task.split() :]


def test_windows_are_consecutive_bytes_at_every_offset():
    tokens = torch.arange(20, dtype=torch.uint8)
    drawn = windows(tokens, 2000, 5, torch.Generator().manual_seed(0))
    starts = drawn[:, 0]
    assert torch.equal(drawn, starts.unsqueeze(1) + torch.arange(5))  # tokens[i] = i: a window is i, i+1, ...
    assert set(starts.tolist()) == set(range(16))  # 20 - 5 + 1 offsets, each drawn among 2,000 windows


def test_training_windows_never_touch_the_held_out_text(tmp_path):
    path = tmp_path / "two-parts.txt"
    path.write_text("a" * 900 + "b" * 100, encoding="utf-8")  # the held-out tenth is the b's exactly
    task = TextTask(file=str(path), seq_len=8)
    batch = task.stream(seed=3).take(500)
    assert batch.shape == (500, 9) and set(batch.flatten().tolist()) == {ord("a")}
    held_out = task.eval_set(200, seed=4)
    assert set(held_out.windows.flatten().tolist()) == {ord("b")}


def test_targets_are_the_next_bytes(text_file):
    task = TextTask(file=str(text_file), seq_len=6)
    sample = task.stream(seed=0).take(3)
    inputs, targets = task.inputs_and_targets(sample)
    data = text_file.read_bytes()
    for window, x, y in zip(sample.tolist(), inputs.tolist(), targets.tolist()):
        start = data.find(bytes(window))  # the window is a piece of the text
        assert start >= 0 and x == list(data[start : start + 6]) and y == list(data[start + 1 : start + 7])


def test_metrics_match_a_hand_computation():
    generator = torch.Generator().manual_seed(0)
    eval_set = TextEvalSet(torch.randint(BYTES, (3, 9), generator=generator))
    outputs = torch.randn(3, 8, BYTES, generator=generator)
    metrics = eval_set.metrics(outputs)
    losses = [
        [
            -math.log(math.exp(outputs[b, t, eval_set.windows[b, t + 1]].item()) / outputs[b, t].double().exp().sum())
            for t in range(8)
        ]
        for b in range(3)
    ]
    mean = sum(map(sum, losses)) / 24
    late_minus_early = sum(row[6] + row[7] for row in losses) / 6 - sum(row[0] + row[1] for row in losses) / 6
    assert metrics["eval_loss"] == pytest.approx(mean, rel=1e-9)  # float64 both ways: only summation order differs
    assert metrics["late_minus_early_loss"] == pytest.approx(late_minus_early, rel=1e-9, abs=1e-12)
    hits = sum(outputs[b, t].argmax().item() == eval_set.windows[b, t + 1].item() for b in range(3) for t in range(8))
    assert metrics["accuracy"] == hits / 24


def test_uniform_logits_cost_log_256_per_byte():
    eval_set = TextEvalSet(torch.randint(BYTES, (4, 11), generator=torch.Generator().manual_seed(1)))
    metrics = eval_set.metrics(torch.zeros(4, 10, BYTES))
    assert metrics["eval_loss"] == pytest.approx(math.log(256), rel=1e-12)
    assert metrics["late_minus_early_loss"] == pytest.approx(0.0, abs=1e-12)


def test_baselines_match_counted_frequencies(tmp_path):
    path = tmp_path / "abc.txt"
    path.write_text("abcab" * 40 + "abcabcab" * 5, encoding="utf-8")
    task = TextTask(file=str(path), seq_len=4, held_out=0.2)
    eval_set = task.eval_set(30, seed=0)
    train = list(path.read_bytes()[: task.split()])
    unigram = {b: (train.count(b) + 1) / (len(train) + BYTES) for b in range(BYTES)}
    pairs = list(zip(train, train[1:]))
    after = {a: sum(1 for p, _ in pairs if p == a) for a in range(BYTES)}

    def bigram(a: int, b: int) -> float:
        return (pairs.count((a, b)) + 1) / (after[a] + BYTES)

    xs, ys = eval_set.inputs.flatten().tolist(), eval_set.targets.flatten().tolist()
    expected_unigram = -sum(math.log(unigram[y]) for y in ys) / len(ys)
    expected_bigram = -sum(math.log(bigram(x, y)) for x, y in zip(xs, ys)) / len(ys)
    baselines = task.baselines(eval_set)
    assert baselines["unigram"] == pytest.approx(expected_unigram, rel=1e-12)
    assert baselines["bigram"] == pytest.approx(expected_bigram, rel=1e-12)
    assert baselines["bigram"] < baselines["unigram"]  # "abc" repeats: the next byte is all but fixed by the last


def test_a_run_refuses_a_text_that_is_not_its_own(text_file):
    task = TextTask(file=str(text_file), seq_len=16)
    same = TextTask.from_dict({key: value for key, value in task.to_json().items() if key != "name"})  # as runs do
    assert same == task and len(same.stream(0).take(2)) == 2
    text_file.write_text("another text entirely, " * 40, encoding="utf-8")
    with pytest.raises(ValueError, match="not the text this task was made with"):
        same.stream(0)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_bytes(b"caf\xe9 au lait" * 30), "is not UTF-8 text"),
        (lambda p: p.write_text("short", encoding="utf-8"), "must each hold a window"),
        (lambda p: os.symlink(p.with_name("real.txt"), p), "symbolic link"),
        (lambda p: os.mkfifo(p), "not a regular file"),
        (lambda p: None, "does not exist"),
    ],
)
def test_bad_texts_are_refused_in_one_line(tmp_path, make, message):
    (tmp_path / "real.txt").write_text("a real text. " * 50, encoding="utf-8")
    path = tmp_path / "text.txt"
    make(path)
    with pytest.raises(ValueError, match=message) as error:
        TextTask(file=str(path), seq_len=16)
    assert "\n" not in str(error.value)


def test_a_length_that_is_not_the_files_is_refused(text_file):
    values = {key: value for key, value in TextTask(file=str(text_file), seq_len=16).to_json().items() if key != "name"}
    wrong = TextTask.from_dict(values | {"n_bytes": values["n_bytes"] // 2})  # a spec's, say: its split would move
    with pytest.raises(ValueError, match="not the 480 this task was made with"):
        wrong.stream(0)


def test_read_corpus_checks_the_hash(text_file):
    data = read_corpus(str(text_file), hashlib.sha256(text_file.read_bytes()).hexdigest())
    assert data == text_file.read_bytes()
    with pytest.raises(ValueError, match="SHA-256 differs"):
        read_corpus(str(text_file), "0" * 64)


def test_the_recipe_is_a_standard_two_head_transformer(text_file):
    cfg = TextRecipe(task=TextTask(file=str(text_file), seq_len=16)).model_config()
    assert (cfg.n_layers, cfg.layer_heads, cfg.n_heads, cfg.d_model, cfg.d_mlp) == (2, (2, 2), 2, 64, 256)
    assert (cfg.positional, cfg.d_vocab, cfg.n_ctx, cfg.normalization) == ("standard", 256, 16, "LN")
