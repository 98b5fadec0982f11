"""What TransformerLens users type, answered as they expect: property messages, head labels as a method,
string tokens, seeded generation, and one clear error for a hook the model lacks."""

import warnings

import pytest
import torch
from tiny_models import tiny_model

from induction_probes.circuits.models.model import HookedTransformer
from induction_probes.circuits.models.tl_hooks import MissingHookError


def small(positional="relative", d_mlp=None, input_type="tokens") -> HookedTransformer:
    config = dict(d_model=8, n_heads=2, n_ctx=12, d_vocab=4, positional=positional, d_mlp=d_mlp)
    return tiny_model(**config, input_type=input_type, init_range=0.5, seed=1).eval()


def test_w_pos_of_a_relative_model_says_why_and_hasattr_still_answers():
    model = small()
    with pytest.raises(AttributeError, match="a model with relative positions has no W_pos"):
        _ = model.W_pos
    assert not hasattr(model, "W_pos")
    assert small("standard").W_pos.shape == (12, 8)
    with pytest.raises(AttributeError, match="no attribute 'nonsense'"):  # ordinary misses are unchanged
        _ = model.nonsense


def test_all_head_labels_is_called_as_in_transformer_lens_and_the_old_list_warns():
    model = small()
    assert model.all_head_labels() == ["L0H0", "L0H1", "L1H0", "L1H1"]
    assert type(model.all_head_labels()) is list
    with pytest.warns(DeprecationWarning, match="call model.all_head_labels()"):
        assert list(model.all_head_labels) == ["L0H0", "L0H1", "L1H0", "L1H1"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # calling it never warns
        model.all_head_labels()


def test_string_tokens_are_the_ids_written_out():
    model = small()
    tokens = torch.tensor([[0, 3, 1], [2, 2, 0]])
    assert model.to_str_tokens(tokens[0]) == ["0", "3", "1"]
    assert model.to_str_tokens(tokens[:1]) == ["0", "3", "1"]  # TransformerLens squeezes a batch of one
    assert model.to_str_tokens(tokens) == [["0", "3", "1"], ["2", "2", "0"]]
    assert model.to_string(tokens[0]) == "0 3 1"
    assert model.to_string(tokens) == ["0 3 1", "2 2 0"]
    with pytest.raises(ValueError, match="no tokenizer"):
        model.to_str_tokens("0 3 1")
    assert torch.equal(model.to_tokens(model.to_string(tokens[0])), tokens[:1])  # read back what it writes
    assert torch.equal(model.to_tokens(model.to_string(tokens)), tokens)
    with pytest.raises(ValueError, match="ids 0..3 separated by spaces"):
        model.to_tokens("0 4 1")  # beyond the vocabulary
    assert model.tokenizer is None  # as TransformerLens's model without one
    assert model.to_single_token(3) == 3 and type(model.to_single_token(torch.tensor(2).item())) is int
    for bad, message in (("3", "no tokenizer: give token '3' as an integer id"), (4, r"token ids are 0..3, got 4")):
        with pytest.raises(ValueError, match=message):
            model.to_single_token(bad)
    with pytest.raises(ValueError, match="vector-input model"):
        small("alibi", input_type="vectors").to_str_tokens(tokens)


def test_generate_is_seeded_greedy_is_the_argmax_and_samples_follow_the_softmax():
    model = small()
    prefix = torch.tensor([[0, 1, 2, 3, 0]])
    first = model.generate(prefix, 6, seed=7, verbose=False)
    assert first.shape == (1, 11) and torch.equal(first[:, :5], prefix)
    assert torch.equal(model.generate(prefix, 6, seed=7), first)  # same seed, same continuation
    assert not all(torch.equal(model.generate(prefix, 6, seed=s), first) for s in range(8, 12))
    greedy, tokens = model.generate(prefix, 4, do_sample=False), prefix
    for _ in range(4):  # by hand: append the argmax of the last position's logits
        tokens = torch.cat([tokens, model(tokens)[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(greedy, tokens)
    # 20,000 one-token continuations: each token's share is within 5 binomial standard errors of its
    # softmax probability (one error is at most 0.0035), a test that fails if the draw ignored the logits or
    # the temperature
    batch = prefix.expand(20_000, -1)
    shares = torch.bincount(model.generate(batch, 1, seed=0, temperature=2.0)[:, -1], minlength=4) / 20_000
    probs = torch.softmax(model(prefix)[0, -1].double() / 2.0, -1)
    assert (shares.double() - probs).abs().max() < 5 * (0.25 / 20_000) ** 0.5
    with pytest.raises(ValueError, match="exceed the context of 12"):
        model.generate(prefix, 8)


def test_generate_takes_transformer_lens_arguments_and_refuses_others():
    model = small()
    prefix = torch.tensor([[0, 1, 2, 3, 0]])
    with pytest.raises(TypeError):
        model.generate(prefix, 5, temprature=1.0)  # a typo is an error, not a silent default
    greedy = model.generate(prefix, 5, do_sample=False)
    assert torch.equal(model.generate(prefix, 5, top_k=1, seed=3), greedy)  # top_k = 1 is greedy
    assert torch.equal(model.generate(prefix, 5, temperature=0.0, seed=3), greedy)
    assert torch.equal(model.generate(prefix, 5, top_p=1e-9, seed=3), greedy)  # only the likeliest survives
    assert model.generate(prefix, 5, do_sample=False, return_type="str") == model.to_string(greedy)
    assert model.generate("0 1 2 3 0", 5, do_sample=False) == model.to_string(greedy)  # input a string: out a string
    assert torch.equal(model.generate("0 1 2 3 0", 5, do_sample=False, return_type="tokens"), greedy)
    # top_k = 2: of 20,000 draws none falls outside the two likeliest tokens, whose shares follow their
    # renormalised probabilities (5 binomial errors, as above)
    batch = prefix.expand(20_000, -1)
    drawn = model.generate(batch, 1, top_k=2, seed=1)[:, -1]
    logits = model(prefix)[0, -1].double()
    top = logits.topk(2).indices
    assert set(drawn.unique().tolist()) <= set(top.tolist())
    expected = torch.softmax(logits[top], -1)
    shares = torch.stack([(drawn == t).double().mean() for t in top])
    assert (shares - expected).abs().max() < 5 * (0.25 / 20_000) ** 0.5
    with pytest.raises(ValueError, match="return_type"):
        model.generate(prefix, 2, return_type="text")


def test_unseeded_generation_is_decided_by_torch_manual_seed():
    model = small()
    prefix = torch.tensor([[0, 1, 2, 3, 0]]).expand(50, -1)
    torch.manual_seed(11)
    a = model.generate(prefix, 6)
    torch.manual_seed(11)
    b = model.generate(prefix, 6)
    c = model.generate(prefix, 6)  # the generator moved on
    assert torch.equal(a, b) and not torch.equal(b, c)


def test_one_sequence_gains_a_batch_dimension_as_in_transformer_lens():
    model, tokens = small(), torch.tensor([[0, 3, 1, 2]])
    assert torch.equal(model(tokens[0]), model(tokens))
    assert torch.equal(model(tokens[0], return_type="loss"), model(tokens, return_type="loss"))
    vectors = small("alibi", input_type="vectors")
    x = torch.randn(1, 5, 4, generator=torch.Generator().manual_seed(0))
    assert torch.equal(vectors(x[0]), vectors(x))


def test_a_hook_the_model_lacks_is_one_error_naming_the_hooks_it_has():
    model, tokens = small(), torch.tensor([[0, 1, 2]])
    asks = [
        lambda: model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.hook_mlp_out", lambda a, hook: None)]),
        lambda: model.add_hook("blocks.0.mlp.hook_post", lambda a, hook: None),
        lambda: model.run_with_cache(tokens, names_filter=["blocks.0.hook_mlp_out"]),
        lambda: model.run_with_cache(tokens)[1]["mlp_out", 0],
    ]
    for ask in asks:
        with pytest.raises(
            MissingHookError,
            match=r"no hook point 'blocks\.0\.(mlp\.hook_post|hook_mlp_out)' \(it has "
            r"no MLPs\); its hook points are .*blocks\.\{l\}\.attn\.hook_pattern",
        ):
            ask()
    assert isinstance(MissingHookError("x"), ValueError) and isinstance(MissingHookError("x"), KeyError)
    _, cache = model.run_with_cache(tokens, names_filter=["blocks.0.attn.hook_z"])
    with pytest.raises(
        MissingHookError,
        match="the cache holds no activation 'blocks.1.attn.hook_pattern'; it holds "
        r"blocks\.\{l\}\.attn\.hook_z",
    ):
        cache["pattern", 1]
    _, cache = small(d_mlp=16).run_with_cache(tokens)
    assert cache["mlp_out", 0].shape == (1, 3, 8)  # a model with MLPs has the hook
