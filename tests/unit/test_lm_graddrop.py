"""GradDrop, AtP*'s guard against cancellation (Kramár et al. 2024): each layer's dropped gradient is the gradient of a
pass whose layer output is cut from the graph, and on a circuit where a head's direct effect and its effect through a
later MLP cancel to first order, the signed estimate misses the head while GradDrop's size finds it."""

import pytest
import torch
from lm_models import save_model

from induction_probes import lm
from induction_probes.circuits.constructions.edelman import prop21
from induction_probes.circuits.constructions.residual import ResidualLayout
from induction_probes.circuits.models.model import HookedTransformer, HookedTransformerConfig
from induction_probes.probes.lm.attribution import per_sequence_attributions, screen_estimates, screen_heads
from induction_probes.probes.lm.losses import per_token_loss
from induction_probes.probes.lm.protocols import from_tokens, induction_loss

VOCAB, N_CTX = 24, 40
SCALE = 100.0  # Prop. 2.1's c: both softmaxes saturated, as in test_lm_screen.py
READOUT = 3.0  # the unembedding reads the output block at 3 nats a unit
DIRECT = 3.0  # the copy head's direct logit for the token it predicts, which the MLP's first-order path cancels
GATE = 1.5  # the MLP neuron of token v fires by (induction + copy − GATE): 0.5 with both heads, 0 with one
DECOY = 0.3  # a decoy head copies every token it sees, uniformly, into the output at this weight
WEAK = 0.4  # a weak induction head's direct logit for the token it predicts: it helps, by little, on one path


def cancelling_circuit() -> HookedTransformer:
    """Prop. 2.1's previous-token head (L0H0) and induction head (L1H0), which writes the next token into the output
    block; beside it a copy head (L1H1) with the induction head's pattern that writes the same token into a block of
    its own, which the unembedding reads at DIRECT; and in layer 2 an MLP neuron per token, ReLU(output + copy −
    GATE), that takes DIRECT / READOUT off that token's output. Removing the copy head takes DIRECT off the logit
    and silences the neuron: to first order the neuron gives DIRECT back (slope 1 over a drop of 1), exactly it gives
    half (it drops by 0.5), so the exact effect is half the direct one and the first-order estimate is 0. The
    induction head's own paths cancel in the same way. L0H1 is a mild decoy, as in test_lm_screen.py; L2H1 a weak
    induction head that writes the next token into a block the unembedding alone reads, at WEAK: a small effect
    on one path, which the signed estimate ranks above the cancelled heads."""
    _, weights = prop21(VOCAB, SCALE, N_CTX, dtype="float32")
    # Prop. 2.1's three blocks, then the copy head's and the weak head's
    layout = ResidualLayout(("current", "previous", "output", "copy", "weak"), width=VOCAB)
    v, d = VOCAB, layout.d_model
    output, copy, weak = layout["output"], layout["copy"], layout["weak"]
    cfg = HookedTransformerConfig(
        n_layers=3,
        d_model=d,
        d_head=d,
        n_heads=2,
        n_ctx=N_CTX,
        d_vocab=v,
        d_mlp=v,
        use_bias=True,
        positional=("relative", "none", "none"),
    )
    model = HookedTransformer(cfg)
    state = {name: torch.zeros_like(value) for name, value in model.state_dict().items()}
    state["embed.W_E"][:, : 3 * v] = weights["embed.W_E"]
    state["unembed.W_U"][: 3 * v] = READOUT * weights["unembed.W_U"]
    state["unembed.W_U"][copy] = DIRECT * torch.eye(v)
    state["unembed.W_U"][weak] = WEAK * torch.eye(v)
    for name, value in weights.items():
        if name.startswith("blocks."):
            target = state[name][0]
            target[tuple(slice(0, size) for size in value[0].shape)] = value[0]
    for layer, block in ((1, "copy"), (2, "weak")):  # the induction head's pattern, another output block
        for part in ("W_Q", "W_K"):
            state[f"blocks.{layer}.attn.{part}"][1] = state[f"blocks.1.attn.{part}"][0]
        state[f"blocks.{layer}.attn.W_V"][1] = layout.map(("current", block, 1.0))
        state[f"blocks.{layer}.attn.W_O"][1] = torch.eye(d)
    state["blocks.0.attn.W_V"][1] = layout.map(("current", "output", DECOY))
    state["blocks.0.attn.W_O"][1] = torch.eye(d)
    state["blocks.2.mlp.W_in"][output] = torch.eye(v)
    state["blocks.2.mlp.W_in"][copy] = torch.eye(v)
    state["blocks.2.mlp.b_in"][:] = -GATE
    state["blocks.2.mlp.W_out"][:, output] = -DIRECT / READOUT * torch.eye(v)
    model.load_state_dict(state)
    return model


def distinct_repeats(batch: int, length: int, seed: int):
    """R + R with R of ``length`` distinct tokens: the induction head's output is one token, never a mixture, so
    the MLP neuron fires on the repeat wherever the copy head does."""
    generator = torch.Generator().manual_seed(seed)
    first = torch.stack([torch.randperm(VOCAB, generator=generator)[:length] for _ in range(batch)])
    return from_tokens(torch.cat([first, first], dim=1))


@pytest.fixture(scope="module")
def circuit():
    model = cancelling_circuit()
    repeated = distinct_repeats(batch=32, length=16, seed=1)
    baseline, exact = lm.ablate(model, repeated, lm.single_heads(model))
    return model, repeated, baseline, {tuple(r.heads[0]): r for r in exact}


def test_the_copy_head_matters_though_its_paths_cancel_to_first_order(circuit):
    model, repeated, baseline, exact = circuit
    assert baseline.has_gap
    shares = {head: r.share.value for head, r in exact.items()}
    # measured: previous-token 0.84, induction and copy 0.12 each, the weak head 0.02, the decoy -0.002
    assert shares[(1, 1)] >= 0.1 and shares[(2, 1)] < 0.1, shares
    estimates = screen_estimates(model, repeated)
    copy_rise = exact[(1, 1)].loss_increase
    # the signed AtP* estimate cancels: under a fifth of the exact rise (measured 0.024 against 0.42)
    assert abs(estimates.rise.value[1, 1].item()) < 0.2 * copy_rise, (estimates.rise.value[1, 1], copy_rise)
    assert estimates.rise.value[1, 1] < estimates.rise.value[2, 1]  # so it ranks the weak head higher
    matter = [head for head, share in shares.items() if share >= 0.1]
    rest = [head for head in shares if head not in matter]
    size = estimates.size.value
    assert min(size[h].item() for h in matter) > max(size[h].item() for h in rest), (size, shares)
    assert ((estimates.size.low <= size + 1e-12) & (size <= estimates.size.high + 1e-12)).all()
    assert (estimates.size.low >= 0).all()  # a sum of sizes
    _, screen = screen_heads(model, repeated, top=len(matter))
    assert sorted(tuple(r.heads[0]) for r in screen.checked) == sorted(matter)


def dropped_by_detaching(model, repeated, layer: int, dropped: int) -> torch.Tensor:
    """The first-order estimate of every head of ``layer`` with layer ``dropped``'s outputs detached in the pass
    itself (its gradient is then 0), by autograd on z: the brute-force GradDrop term."""
    names = {f"blocks.{dropped}.hook_attn_out", f"blocks.{dropped}.hook_mlp_out"} & set(model.hook_dict)
    kept = {}

    def keep(z, hook):
        z = z.detach().requires_grad_(True)
        kept["z"] = z
        return z

    hooks = [(f"blocks.{layer}.attn.hook_z", keep)] + [(name, lambda x, hook: x.detach()) for name in names]
    with torch.enable_grad():
        logits = model.run_with_hooks(repeated.tokens, fwd_hooks=hooks)
        loss = induction_loss(per_token_loss(logits, repeated.tokens), repeated).repeated_half_per_sequence.sum()
        (gradient,) = torch.autograd.grad(loss, [kept["z"]], allow_unused=True)
    if gradient is None:
        return torch.zeros(repeated.tokens.shape[0], model.cfg.n_heads, dtype=torch.float64)
    return (-kept["z"].detach() * gradient).sum(dim=(1, 3)).double()


@pytest.mark.parametrize("architecture", ["gpt2", "neox", "ours"])
def test_each_dropped_gradient_is_that_of_a_pass_with_the_layer_cut(architecture, tmp_path):
    model = (
        cancelling_circuit() if architecture == "ours" else lm.as_hooked(str(save_model(architecture, tmp_path / "m")))
    )
    repeated = lm.repeated_random_tokens(model, length=(5, 9), batch=4, seed=3)
    ours = per_sequence_attributions(model, repeated, "zero", None, qk_fix=False, graddrop=True)
    assert ours.shape[1] == model.cfg.n_layers + 1
    for dropped in range(model.cfg.n_layers):
        for layer in range(model.cfg.n_layers):
            expected = dropped_by_detaching(model, repeated, layer, dropped)
            # the same gradient by two routes: float32 sums in another order (1e-5 of estimates of ~1e-2 to 1)
            assert torch.allclose(ours[:, 1 + dropped, layer], expected, atol=1e-5, rtol=1e-4), (dropped, layer)
