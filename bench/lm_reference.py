"""The hand-written Hugging Face loop that ``bench_lm.py`` times ``probe`` and ``ablate`` against: what a researcher
writes with transformers alone (eager attention, ``output_attentions=True``, a forward pre-hook on each
attention's output projection to ablate a head), on the sequences the driver saved, in one process.

    python bench/lm_reference.py probe MODEL_DIR TOKENS.safetensors
    python bench/lm_reference.py ablate MODEL_DIR TOKENS.safetensors

It prints JSON: per head the mean induction score on the repeat and on the control (probe), or the mean rise of
the repeated copy's loss (ablate), which the driver checks against the project's numbers, so that both sides
are known to compute the same thing. It computes less than ``probe`` does (no copying score, no intervals, no
composition check): the reference is the floor, not a twin.
"""

from __future__ import annotations

import json
import sys

import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

OUTPUT_PROJECTION = {"gpt2": "attn.c_proj", "gpt_neox": "attention.dense", "llama": "self_attn.o_proj"}


def second_copy(n_pos: int, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions of each sequence's second R (padded to the longest) and which are real."""
    offsets = torch.arange(int(lengths.max()))
    positions = (n_pos - lengths[:, None] + offsets[None]).clamp_max(n_pos - 1)
    return positions, offsets[None] < lengths[:, None]


def induction_scores(attentions, lengths: torch.Tensor) -> torch.Tensor:
    """[layer, head]: the mean over sequences of A[i, i - L + 1] over the second R's queries."""
    n_pos = attentions[0].shape[-1]
    positions, valid = second_copy(n_pos, lengths)
    rows = torch.arange(len(lengths))[:, None]
    per_layer = []
    for pattern in attentions:  # [batch, head, query, key]
        values = pattern[rows, :, positions, positions - lengths[:, None] + 1]  # [batch, query, head]
        per_layer.append(((values * valid[..., None]).sum(1) / valid.sum(1, keepdim=True)).mean(0))
    return torch.stack(per_layer)


def repeated_loss(logits: torch.Tensor, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Per sequence, the mean loss on the tokens R[1:] of the repeat."""
    losses = -torch.log_softmax(logits[:, :-1].double(), -1).gather(-1, tokens[:, 1:, None]).squeeze(-1)
    positions, valid = second_copy(tokens.shape[1], lengths)
    counted = valid.clone()
    counted[:, 0] = False
    return (losses.gather(1, positions - 1) * counted).sum(1) / counted.sum(1)


def probe(model, data: dict) -> dict:
    with torch.no_grad():
        repeat = model(data["tokens"], output_attentions=True)
        control = model(data["control"], output_attentions=True)
    return {
        "induction": induction_scores(repeat.attentions, data["lengths"]).tolist(),
        "control": induction_scores(control.attentions, data["lengths"]).tolist(),
        "loss": repeated_loss(repeat.logits, data["tokens"], data["lengths"]).mean().item(),
    }


def ablate(model, data: dict) -> dict:
    config = model.config
    n_heads, d_head = config.num_attention_heads, config.hidden_size // config.num_attention_heads
    layers = model.base_model.h if config.model_type == "gpt2" else model.base_model.layers
    tokens, lengths = data["tokens"], data["lengths"]
    with torch.no_grad():
        clean = repeated_loss(model(tokens).logits, tokens, lengths)
    rises = {}
    for layer, block in enumerate(layers):
        projection = block.get_submodule(OUTPUT_PROJECTION[config.model_type])
        for head in range(n_heads):

            def zero_head(module, args, head=head):
                z = args[0].clone()
                z[..., head * d_head : (head + 1) * d_head] = 0
                return (z, *args[1:])

            handle = projection.register_forward_pre_hook(zero_head)
            try:
                with torch.no_grad():
                    ablated = repeated_loss(model(tokens).logits, tokens, lengths)
            finally:
                handle.remove()
            rises[f"L{layer}H{head}"] = (ablated - clean).mean().item()
    return {"rise": rises}


def main() -> None:
    command, folder, tokens = sys.argv[1:4]  # at torch's default threads, as a researcher's loop runs
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32).eval()
    data = load_file(tokens)
    print(json.dumps(probe(model, data) if command == "probe" else ablate(model, data)))


if __name__ == "__main__":
    main()
