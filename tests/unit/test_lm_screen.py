"""The screen on a saturated circuit: Edelman et al.'s Proposition 2.1 weights at a large scale (a previous-token head
whose output reaches the induction head only through its keys, both softmaxes saturated) beside two mild decoy
heads, in one model of ours. Exact ablation says which heads matter; the screen's estimates alone must rank those
heads above the decoys, which plain attribution patching fails to do (its gradient through the saturated keys
vanishes)."""

import pytest
import torch

from induction_probes import lm
from induction_probes.circuits.constructions.edelman import prop21
from induction_probes.circuits.models.model import HookedTransformer, HookedTransformerConfig
from induction_probes.probes.lm.attribution import (
    attribution_rises,
    per_sequence_attributions,
    screen_estimates,
    screen_heads,
)

VOCAB, N_CTX = 24, 40
SCALE = 100.0  # Prop. 2.1's c: layer 0's score margin c / sqrt(d_head) = 11.8, layer 1's c^2 / sqrt(d_head) = 1,178
READOUT = 3.0  # the unembedding reads the copied token at 3 nats a unit: the loss itself is not saturated
DECOY = 0.3  # a decoy head copies every token it sees, uniformly, into the output at this weight


def saturated_circuit() -> HookedTransformer:
    """Two layers of two heads: head 0 of each is Prop. 2.1's (previous-token, then induction), head 1 of each a
    decoy that attends uniformly and writes what it reads, weakly, into the output block."""
    _, weights = prop21(VOCAB, SCALE, N_CTX, dtype="float32")
    d = 3 * VOCAB
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=d, d_head=d, n_heads=2, n_ctx=N_CTX, d_vocab=VOCAB, positional=("relative", "none")
    )
    model = HookedTransformer(cfg)
    state = {name: torch.zeros_like(value) for name, value in model.state_dict().items()}
    state["embed.W_E"], state["unembed.W_U"] = weights["embed.W_E"], READOUT * weights["unembed.W_U"]
    for name, value in weights.items():
        if name.startswith("blocks."):
            state[name][0] = value[0]
    output = slice(2 * VOCAB, 3 * VOCAB)
    for layer in (0, 1):
        state[f"blocks.{layer}.attn.W_V"][1][:VOCAB, output] = DECOY * torch.eye(VOCAB)
        state[f"blocks.{layer}.attn.W_O"][1] = torch.eye(d)
    model.load_state_dict(state)
    return model


@pytest.fixture(scope="module")
def circuit():
    model = saturated_circuit()
    repeated = lm.repeated_random_tokens(model, length=(10, 18), batch=32, seed=1)
    baseline, exact = lm.ablate(model, repeated, lm.single_heads(model))
    shares = {tuple(r.heads[0]): r.share.value for r in exact}
    return model, repeated, baseline, shares


def test_the_circuit_is_what_the_test_needs(circuit):
    _, _, baseline, shares = circuit
    assert baseline.has_gap
    assert shares[(0, 0)] >= 0.5 and shares[(1, 0)] >= 0.5  # measured 0.81 and 0.85
    assert all(abs(shares[decoy]) < 0.1 for decoy in [(0, 1), (1, 1)]), shares


def test_the_screen_ranks_every_head_that_matters_above_every_head_that_does_not(circuit):
    model, repeated, _, shares = circuit
    matter = [head for head, share in shares.items() if share >= 0.1]
    rest = [head for head in shares if head not in matter]
    screened = attribution_rises(model, repeated)
    assert min(screened.value[h].item() for h in matter) > max(screened.value[h].item() for h in rest)
    plain = attribution_rises(model, repeated, qk_fix=False)  # what the QK fix guards against
    assert plain.value[0, 0].item() < max(plain.value[h].item() for h in rest)
    sizes = screen_estimates(model, repeated).size.value  # what the screen ranks by
    assert min(sizes[h].item() for h in matter) > max(sizes[h].item() for h in rest)
    _, screen = screen_heads(model, repeated, top=len(matter))
    assert sorted(tuple(r.heads[0]) for r in screen.checked) == sorted(matter)


def test_graddrop_alone_misses_the_previous_token_head_of_a_two_layer_model(circuit):
    """Its one path runs through its own layer and the induction head's: dropping either layer's gradient removes
    it, so GradDrop's score, (1 / (L − 1)) Σ_ℓ |ĉ_ℓ|, is about 0, which is why the screen's size takes the larger
    of it and |AtP*|."""
    model, repeated, _, _ = circuit
    dropped = per_sequence_attributions(model, repeated, "zero", None, graddrop=True)[:, 1:].mean(0)
    graddrop = dropped.abs().sum(0) / (model.cfg.n_layers - 1)
    assert graddrop[0, 0] < 0.05 * attribution_rises(model, repeated).value[0, 0]


def test_the_rank_correlation_ranks_ties_together_and_is_not_defined_for_all_ties():
    from induction_probes.probes.lm.attribution import rank_correlation, rank_interval

    assert rank_correlation(torch.zeros(5), torch.arange(5.0)) is None  # every estimate 0: no order to compare
    assert rank_correlation(torch.tensor([1.0, 1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0, 4.0])) == pytest.approx(
        0.9486833,
        abs=1e-6,  # scipy.stats.spearmanr with average ranks
    )
    low, high = rank_interval(0.5, 20)  # tanh(atanh(0.5) -+ 1.96 x 1.06 / sqrt(17))
    assert (low, high) == pytest.approx((0.0454, 0.7830), abs=1e-4)
    assert rank_interval(1.0, 30) is None and rank_interval(0.5, 9) is None
