"""Clamped training: the target patterns, a run that records its clamp, and the pattern that training
actually used, read through the hooks."""

from dataclasses import replace

import pytest
import torch

from induction_probes.circuits.recipes.clamps import induction_pattern, previous_token_pattern
from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
from induction_probes.circuits.runs.reader import Run
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.training.train_loop import Trainer, train_run

TINY = MarkovRecipe(task=MarkovTask(k=3, seq_len=20), steps=6, batch_size=8, eval_seqs=50, n_checkpoints=3)


def brute_force_induction(tokens: torch.Tensor) -> torch.Tensor:
    """The statistical induction pattern by loops: keys 1 ≤ j ≤ i with x_{j−1} = x_i, else every j ≤ i."""
    batch, n = tokens.shape
    out = torch.zeros(batch, n, n)
    for b in range(batch):
        for i in range(n):
            keys = [j for j in range(1, i + 1) if tokens[b, j - 1] == tokens[b, i]] or list(range(i + 1))
            out[b, i, keys] = 1.0 / len(keys)
    return out


def test_target_patterns():
    tokens = torch.randint(0, 3, (4, 12), generator=torch.Generator().manual_seed(0))
    assert torch.equal(induction_pattern(tokens), brute_force_induction(tokens))
    expected = torch.zeros(12, 12)
    for i in range(12):
        expected[i, max(i - 1, 0)] = 1.0  # query 0 has no previous token: its only key is itself
    assert torch.equal(previous_token_pattern(tokens), expected.expand(4, -1, -1))


def used_patterns(trainer: Trainer, layer: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Hooks on z and v of ``layer`` that record, at every training forward pass, the pattern A that
    produced z = A v (recovered by least squares on each query) and the batch's tokens."""
    records = []
    values = {}
    model = trainer.model
    model.add_hook(f"blocks.{layer}.attn.hook_v", lambda v, hook: values.__setitem__("v", v.detach()))

    def keep(z, hook):
        v = values["v"][:, :, 0]  # [batch, pos, d_head], head 0
        records.append((z.detach()[:, :, 0], v))

    model.add_hook(f"blocks.{layer}.attn.hook_z", keep)
    return records


@pytest.mark.parametrize(
    "clamp, layer, target", [("previous-token", 0, previous_token_pattern), ("induction", 1, induction_pattern)]
)
def test_the_clamped_pattern_is_exactly_the_target_during_training(tmp_path, clamp, layer, target):
    recipe = replace(TINY, clamp=(clamp,))
    trainer = Trainer.create(recipe, writer=None)
    records = used_patterns(trainer, layer)
    batches = []
    original = recipe.task.inputs_and_targets
    first = {name: p.detach().clone() for name, p in trainer.model.named_parameters()}
    for _ in range(3):
        state = trainer.data.get_state()
        inputs, _ = original(trainer.data.take(recipe.batch_size))
        trainer.data.set_state(state)  # the step draws the same batch again
        batches.append(inputs)
        trainer.train_step()
    assert len(records) == 3
    for (z, v), tokens in zip(records, batches):
        assert torch.allclose(z, target(tokens).to(v.dtype) @ v, atol=1e-6)
    if clamp == "previous-token":  # the clamped layer's queries and keys get no gradient, so no update
        for name in ("blocks.0.attn.W_Q", "blocks.0.attn.W_K", "blocks.0.attn.W_rel"):
            assert torch.equal(dict(trainer.model.named_parameters())[name], first[name])


def test_a_clamp_from_a_later_step_leaves_earlier_steps_free(tmp_path):
    recipe = replace(TINY, clamp=("previous-token",), clamp_from=2)
    trainer = Trainer.create(recipe, writer=None)
    records = used_patterns(trainer, 0)
    for _ in range(3):
        state = trainer.data.get_state()
        tokens, _ = recipe.task.inputs_and_targets(trainer.data.take(recipe.batch_size))
        trainer.data.set_state(state)
        trainer.train_step()
        z, v = records[-1]
        clamped = torch.allclose(z, previous_token_pattern(tokens).to(v.dtype) @ v, atol=1e-6)
        assert clamped == (trainer.step > 2)


def test_a_clamped_run_records_its_clamp_and_trains_differently(tmp_path):
    run = train_run(replace(TINY, clamp=("previous-token", "induction")), tmp_path / "clamped", progress=False)
    assert Run.open(run.path).recipe.clamp == ("previous-token", "induction")
    free = train_run(TINY, tmp_path / "free", progress=False)
    assert Run.open(free.path).recipe.clamp is None
    assert run.metrics()[-1]["eval_loss"] != free.metrics()[-1]["eval_loss"]


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"clamp": ("bogus",)}, "previous-token, induction"),
        ({"clamp_from": 3}, "needs a clamp"),
        ({"clamp": ("induction",), "n_layers": 1}, "layer 1"),
        ({"clamp": ("previous-token",), "mask": "strict"}, "causal"),
        ({"clamp": ("induction",), "task": MarkovTask(k=3, seq_len=20, n=3)}, "n = 2"),
        ({"clamp": ("previous-token",), "clamp_from": 6}, "below steps"),
    ],
)
def test_clamps_that_cannot_apply_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        replace(TINY, **changes)
