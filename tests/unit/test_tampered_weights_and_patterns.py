"""A tampered TransformerLens state dict (weights that are not finite, junk keys, a non-causal mask, wrong
shapes) is one ValueError, and an attention pattern with no diagonal to score gets no score."""

import logging

import pytest
import torch
from tiny_models import tiny_model

from induction_probes.circuits.interop.transformer_lens_io import (
    load_transformer_lens_state_dict,
    transformer_lens_state_dict,
)
from induction_probes.circuits.models.model import HookedTransformer
from induction_probes.probes.attention.patterns import bigram_matching_score, previous_token_score

logging.getLogger("transformer_lens").setLevel(logging.ERROR)


def model() -> HookedTransformer:
    config = dict(d_model=8, n_heads=1, n_ctx=6, d_vocab=3, positional="standard", normalization="LN")
    return tiny_model(**config, init_range=0.3, seed=1)


def tampered(edit) -> dict:
    state = transformer_lens_state_dict(model())
    edit(state)
    return state


def test_the_untampered_format_still_loads_exactly():
    source, target = model(), HookedTransformer(model().cfg)
    with torch.no_grad():
        for p in target.parameters():
            p.add_(1.0)
    load_transformer_lens_state_dict(target, transformer_lens_state_dict(source))
    assert all(torch.equal(a, b) for a, b in zip(source.state_dict().values(), target.state_dict().values()))


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s["embed.W_E"].view(-1).__setitem__(0, float("nan")), "embed.W_E is not finite"),
        (lambda s: s["embed.W_E"].view(-1).__setitem__(0, float("inf")), "embed.W_E is not finite"),
        (lambda s: s.__setitem__("junk.b_Q", torch.zeros(3)), "junk.b_Q has no place"),
        (lambda s: s.__setitem__("blocks.7.attn.b_Q", torch.zeros(3)), "blocks.7.attn.b_Q has no place"),
        (lambda s: s.__setitem__("blocks.0.attn.mask", torch.ones(6, 6, dtype=torch.bool)), "not the causal mask"),
        (lambda s: s.__setitem__("blocks.0.attn.mask", torch.zeros(6, 6, dtype=torch.bool)), "not the causal mask"),
        (lambda s: s.__setitem__("embed.W_E", torch.zeros(4, 8)), "embed.W_E has shape (4, 8)"),
        (lambda s: s.pop("embed.W_E"), "has no embed.W_E"),
    ],
)
def test_a_tampered_transformer_lens_state_dict_is_one_value_error(edit, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_transformer_lens_state_dict(model(), tampered(edit))


@pytest.mark.parametrize("shape", [(2, 1, 5, 4), (2, 1, 4, 5), (1, 5, 5)])
def test_a_pattern_without_one_key_per_query_gets_no_score(shape):
    pattern = torch.full(shape, 0.2)
    with pytest.raises(ValueError, match="as many keys as queries"):
        previous_token_score(pattern)
    with pytest.raises(ValueError, match="as many keys as queries"):
        bigram_matching_score(pattern, torch.zeros(2, 5, dtype=torch.long))


def test_tokens_that_do_not_fit_the_pattern_are_refused():
    with pytest.raises(ValueError, match="do not fit"):
        bigram_matching_score(torch.full((2, 1, 5, 5), 0.2), torch.zeros(2, 4, dtype=torch.long))
