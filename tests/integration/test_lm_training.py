"""A tiny GPT-NeoX trained here on repeated random tokens: the language-model probes must find the
induction head it forms, ablating that head must undo what induction bought, and ``--all-steps`` over
three of its checkpoints must show the head forming."""

import json

import pytest
import torch
from lm_models import N_CTX  # noqa: F401 (sets the Hugging Face environment offline before transformers loads)

from induction_probes import lm

VOCAB, STEPS, SAVED = 32, 700, (0, 300, 700)
LENGTHS = (8, 15)  # the probes' |R|: 8 offsets, inside the 4..16 tokens of training and the 32-token context


def train(directory):
    """700 AdamW steps of 32 sequences R + R, |R| drawn from 4..16 per step (a fixed |R| lets a rotary head
    attend a fixed distance back instead of forming induction). One head per layer, full rotary positions:
    the configuration that formed an induction circuit in under 700 steps for every seed tried (0, 1, 2)."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(0)
    config = GPTNeoXConfig(
        num_hidden_layers=2,
        hidden_size=32,
        num_attention_heads=1,
        intermediate_size=64,
        vocab_size=VOCAB,
        max_position_embeddings=32,
        rotary_pct=1.0,
        bos_token_id=None,
        eos_token_id=None,
    )
    model = GPTNeoXForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.0)
    generator = torch.Generator().manual_seed(100)
    for step in range(STEPS + 1):
        if step in SAVED:
            model.save_pretrained(directory / f"step_{step}")
        if step == STEPS:
            break
        half = torch.randint(0, VOCAB, (32, int(torch.randint(4, 17, (1,), generator=generator))), generator=generator)
        tokens = torch.cat([half, half], dim=1)
        logits = model(tokens).logits
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return directory


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    return train(tmp_path_factory.mktemp("trained") / "series")


def test_the_probes_find_the_induction_head_and_ablating_it_undoes_induction(series):
    bridge = lm.load_bridge(lm.find_source(str(series)).at(STEPS))
    repeated = lm.repeated_random_tokens(bridge, length=LENGTHS, batch=64, seed=5)
    result = lm.probe_tokens(bridge, repeated)
    assert result.induction_heads == [(1, 0)]  # the layer-1 head, and only it
    assert result.previous_token_heads == [(0, 0)]  # fed by a previous-token head in layer 0
    scores, clean = result.scores, result.loss
    assert scores.content.low[1, 0] > 0.4  # its score needs the repeat: the control's is far lower
    assert scores.copying.low[1, 0] > 0  # it raises the logit of the token it attends to
    (composition,) = result.compositions  # K-composition: it reads the previous-token head
    assert composition.reader == (1, 0) and composition.writer == (0, 0) and composition.drop[1] > 0.3
    assert clean.gap > 2.0  # the repeat is far easier than the first copy (ln 32 = 3.47 nats at chance)
    baseline, results = lm.ablate(bridge, repeated, [[(1, 0)]], "zero")
    # the same clean loss, by two roads: the probe's log-sum-exp over whole rows of logits, the ablation's over
    # blocks (streamed_loss). Each is a float32 sum within about 1e-6 of float64 (3.9e-7 apart here); a wrong row
    # or an ablated head would move a sequence's loss by 1e-2 or more.
    torch.testing.assert_close(baseline.repeated_half_per_sequence, clean.repeated_half_per_sequence, rtol=0, atol=1e-5)
    # the acceptance bound: ablating the head raises the repeat's loss by at least half the gap, surely
    assert results[0].increase.low >= 0.5 * clean.gap
    other = lm.repeated_random_tokens(bridge, length=LENGTHS, batch=64, seed=6)
    _, resampled = lm.ablate(bridge, repeated, [[(1, 0)]], "resample", other)
    assert resampled[0].share.low >= 0.5


def test_all_steps_gives_the_per_step_table_json_and_figure(series, tmp_path, capsys):
    from induction_probes.cli import main

    length = f"{LENGTHS[0]}-{LENGTHS[1]}"
    argv = ["probe", str(series), "--all-steps", "--n-seqs", "32", "--length", length, "--plot", str(tmp_path)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.split() and line.split()[0].isdigit()]
    assert [int(row[0]) for row in rows] == list(SAVED)
    figure = tmp_path / "series_induction_steps.png"
    assert figure.is_file() and figure.stat().st_size > 10_000 and f"figure: {figure}" in out
    assert main(argv[:-2] + ["--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    steps = answer["checkpoints"]
    assert [s["step"] for s in steps] == list(SAVED) and answer["steps"] == list(SAVED)
    content = [next(h["content"]["value"] for h in s["heads"] if h["head"] == "L1H0") for s in steps]
    assert content[0] < 0.2 < 0.4 < content[-1]  # the head forms over training
    assert steps[0]["induction_heads"] == [] and steps[-1]["induction_heads"] == ["L1H0"]
    assert steps[-1]["induction_loss"]["value"] < steps[0]["induction_loss"]["value"] - 2.0


def test_ablating_every_head_at_every_step_shows_since_when_induction_needs_the_head(series, capsys):
    """Issue 62: ``ablate SERIES --all-steps`` names the step from which ablating the induction head removes at
    least half the gap, and never names the untrained model's heads."""
    from induction_probes.cli import main

    length = f"{LENGTHS[0]}-{LENGTHS[1]}"
    assert main(["ablate", str(series), "--all-steps", "--n-seqs", "32", "--length", length, "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert [(r["step"], r["heads"][0]) for r in answer["rows"]] == [
        (step, head) for step in SAVED for head in ("L0H0", "L1H0")
    ]
    last = {r["heads"][0]: r for r in answer["rows"] if r["step"] == STEPS}
    assert last["L1H0"]["gap_removed"]["low"] >= 0.5  # the induction head carries the gap at the end
    formation = {f["heads"]: f["step"] for f in answer["formation"]}
    assert formation["L1H0"] in SAVED[1:]  # from a trained checkpoint on, never from step 0
