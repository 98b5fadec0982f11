"""A GPT-2 whose weights are set by hand to an induction circuit (Elhage et al. 2021; Edelman et al.'s Proposition
2.1 in GPT-2's shape), saved with ``save_pretrained``: a Hugging Face model whose circuit is known, for the tests
of path patching through TransformerLens's bridge.

The residual stream has four blocks of one-hot vectors: the token, the position (GPT-2's learned positions), the
previous token (written by layer 0) and the output (written by layer 1, read by the unembedding). Head 0 of layer
0 attends from each position to the one before it (its query reads the position p, its key the position p − 1)
and copies that token into the previous-token block; head 0 of layer 1 attends from each token to the positions
whose previous token it is (its query reads the token block, its key the previous-token block) and copies the
token found there into the output block. Head 1 of each layer is a decoy: no query or key (it attends uniformly)
and it writes the current token, at ``decoy``, into the output block. The MLPs, biases and LayerNorm shifts are 0,
the gains 1: every position's stream holds the same number of ones, so LayerNorm scales it by one constant."""

from __future__ import annotations

from pathlib import Path

import torch

VOCAB, N_CTX = 64, 48


def induction_gpt2(directory: Path, scale: float = 10.0, decoy: float = 0.1, readout: float = 6.0) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    d = 3 * VOCAB + N_CTX
    d_head = d // 2
    token, position, previous, output = (
        slice(0, VOCAB),
        slice(VOCAB, VOCAB + N_CTX),
        slice(VOCAB + N_CTX, 2 * VOCAB + N_CTX),
        slice(2 * VOCAB + N_CTX, d),
    )
    config = GPT2Config(
        n_layer=2,
        n_embd=d,
        n_head=2,
        n_inner=4,
        vocab_size=VOCAB,
        n_positions=N_CTX,
        tie_word_embeddings=False,
        bos_token_id=None,
        eos_token_id=None,
        attn_implementation="eager",
    )
    model = GPT2LMHeadModel(config)
    state = {name: torch.zeros_like(value) for name, value in model.state_dict().items()}
    for name in state:
        if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            state[name] = torch.ones_like(state[name])
    state["transformer.wte.weight"][:, token] = torch.eye(VOCAB)
    state["transformer.wpe.weight"][:, position] = torch.eye(N_CTX)
    eye = torch.eye(VOCAB)
    # c_attn: x @ W, columns [q | k | v], each [head 0 | head 1] of d_head; c_proj: rows [head 0 | head 1]
    attn0, attn1 = (state[f"transformer.h.{layer}.attn.c_attn.weight"] for layer in (0, 1))
    proj0, proj1 = (state[f"transformer.h.{layer}.attn.c_proj.weight"] for layer in (0, 1))
    q, k, v = 0, d, 2 * d
    attn0[position, q : q + N_CTX] = scale * torch.eye(N_CTX)  # query at p reads position p ...
    attn0[VOCAB : VOCAB + N_CTX - 1, k + 1 : k + N_CTX] = scale * torch.eye(
        N_CTX - 1
    )  # ... its key at p − 1 matches it
    attn0[token, v : v + VOCAB] = eye
    proj0[:VOCAB, previous] = eye
    attn1[token, q : q + VOCAB] = scale * eye  # query: the token; key: the previous token
    attn1[previous, k : k + VOCAB] = scale * eye
    attn1[token, v : v + VOCAB] = eye
    proj1[:VOCAB, output] = eye
    for attn, proj in ((attn0, proj0), (attn1, proj1)):  # the decoys: head 1, values only
        attn[token, v + d_head : v + d_head + VOCAB] = eye
        proj[d_head : d_head + VOCAB, output] = decoy * eye
    state["lm_head.weight"][:, output] = readout * eye
    model.load_state_dict(state)
    model.save_pretrained(directory)
    return directory
