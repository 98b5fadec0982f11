"""A head that attends a fixed distance back by position alone is not an induction head, at any |R|.

The model is built by hand: a GPT-2 whose position embeddings are one-hot, and whose layer-1 head (and
layer-0 head) has W_Q and W_K set so that query i matches key i - DISTANCE only; every attention output and
MLP is zero, so it learns nothing in context (the repeat costs what the first copy costs). The probe's old
protocol (one fixed |R|, the raw score A[i, i - L + 1]) called it an induction head scoring about 0.97 at
|R| = DISTANCE + 1; the content-based score (repeat minus control) sees the same attention on both."""

import json

import pytest
import torch
from lm_models import N_CTX, VOCAB

from induction_probes import lm
from induction_probes.circuits.interop.model_sources import find_source

DISTANCE = 11
TOKEN_DIMS = 16
WIDTH = N_CTX + TOKEN_DIMS  # position one-hot in the first N_CTX dimensions, the token in the rest
SHARPNESS = 8.0  # W_Q and W_K entries: the matching key's score beats the others by ~50, a softmax of ~1


def positional_gpt2(directory):
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        n_layer=2, n_embd=WIDTH, n_head=1, vocab_size=VOCAB, n_positions=N_CTX, bos_token_id=None, eos_token_id=None
    )
    model = GPT2LMHeadModel(config)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        transformer = model.transformer
        transformer.wpe.weight[:, :N_CTX] = torch.eye(N_CTX)
        transformer.wte.weight[:, N_CTX:] = torch.randn(VOCAB, TOKEN_DIMS, generator=torch.Generator().manual_seed(0))
        transformer.ln_f.weight.fill_(1.0)
        for block in transformer.h:
            block.ln_1.weight.fill_(1.0)
            block.ln_2.weight.fill_(1.0)
            weight = block.attn.c_attn.weight  # [in, q | k | v]; nothing reaches c_proj (zero): no output
            for position in range(N_CTX):
                weight[position, position] = SHARPNESS  # query i: direction i
                if position + DISTANCE < N_CTX:
                    weight[position, WIDTH + position + DISTANCE] = SHARPNESS  # key j: direction j + DISTANCE
    model.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def bridge(tmp_path_factory):
    directory = positional_gpt2(tmp_path_factory.mktemp("positional") / "model")
    return lm.load_bridge(find_source(str(directory)))


def test_the_hand_made_head_attends_by_position_and_the_model_learns_nothing_in_context(bridge):
    repeated = lm.repeated_random_tokens(bridge, length=DISTANCE + 1, batch=32, seed=0)
    result = lm.probe_tokens(bridge, repeated)
    # what the old protocol reported: nearly all of the head's attention on the induction offset
    assert result.scores.induction.value[1, 0] > 0.95
    assert result.scores.positional_offset[1, 0] == DISTANCE and result.scores.positional_share.value[1, 0] > 0.95
    assert abs(result.loss.gap) < 1e-6  # nothing flows between positions: the repeat is no easier


@pytest.mark.parametrize("length", [DISTANCE + 1, 6, 20, (4, 24), (DISTANCE + 1, DISTANCE + 2)])
def test_a_positional_head_is_not_an_induction_head_at_any_length(bridge, length):
    result = lm.probe(bridge, length=length, batch=32, seed=1)
    assert result.induction_heads == []
    longest = result.repeated.length_range[1]
    for layer in (0, 1):
        content, _, high = result.scores.content.at(layer, 0)
        assert abs(content) < 0.02 and high < 0.4  # the control gets the same attention at that offset
        role = next(r for r in result.roles if (r.layer, r.head) == (layer, 0))
        assert "induction" not in role.labels
        if DISTANCE <= longest:  # a distance the second R's queries can look back (beyond it, it reaches no R)
            assert any(name.startswith("positional") for name in role.labels), role
    if length == DISTANCE + 1:  # where the old protocol was fooled, the role says why
        role = next(r for r in result.roles if (r.layer, r.head) == (1, 0))
        assert role.labels[0] == "positional, not induction" and "non-repeated tokens" in role.reasons[0]


def test_the_command_line_reports_no_induction_head_and_says_why(bridge, tmp_path, capsys):
    from induction_probes.cli import main

    directory = positional_gpt2(tmp_path / "model")
    assert main(["probe", str(directory), "--length", str(DISTANCE + 1), "--n-seqs", "16"]) == 0
    out = capsys.readouterr().out
    assert "induction heads (content-based score >= 0.4, interval above 0): none" in out
    assert "L1H0: positional, not induction" in out
    assert main(["probe", str(directory), "--length", "4-24", "--n-seqs", "16", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["induction_heads"] == []
    head = next(h for h in answer["heads"] if h["head"] == "L1H0")
    assert head["positional_offset"] == DISTANCE and "positional" in head["labels"]
