"""TransformerLens's token helpers for models without a tokenizer: token ids in, ids or their strings out,
and ``generate``, which continues sequences by sampling from the model's own next-token distribution.

A mixin of :class:`induction_probes.circuits.models.tl_interface.TransformerLensInterface`. A token task's tokens
are the states 0..k−1 of a chain, so the string of token ``a`` is ``str(a)``: what CircuitsVis and
TransformerLens's plotting helpers need to label positions.
"""

from __future__ import annotations

import torch
from jaxtyping import Int
from torch import Tensor


class TokenInterface:
    """Needs ``cfg`` (``input_type``, ``n_ctx``, ``d_vocab``) and a forward pass giving logits."""

    def to_tokens(self, tokens, **_: object) -> Int[Tensor, "batch pos"]:
        """Token tensors pass through (a 1-D one gains a batch dimension): these models have no tokenizer."""
        if not isinstance(tokens, Tensor):
            raise ValueError("this model has no tokenizer: pass token ids as a tensor")
        return tokens[None] if tokens.dim() == 1 else tokens

    def to_single_token(self, token) -> int:
        if isinstance(token, str):
            raise ValueError(f"this model has no tokenizer: give token {token!r} as an integer id")
        return int(token)

    def _token_ids(self, tokens) -> Tensor:
        if self.cfg.input_type != "tokens":
            raise ValueError("a vector-input model has no tokens to write as strings")
        if isinstance(tokens, str):
            raise ValueError("this model has no tokenizer: pass token ids (a tensor or a list of ints)")
        return torch.as_tensor(tokens)

    def to_str_tokens(self, tokens, **_: object) -> list[str] | list[list[str]]:
        """The string of each token, ``str(id)``: a list for one sequence ([pos] or [1, pos]), a list of
        lists for a batch. Keyword options of TransformerLens (``prepend_bos``...) are accepted and ignored."""
        ids = self._token_ids(tokens)
        if ids.dim() == 2 and ids.shape[0] == 1:
            ids = ids[0]
        if ids.dim() == 0:
            ids = ids[None]
        if ids.dim() > 2:
            raise ValueError(f"tokens must be [pos] or [batch, pos], got shape {tuple(ids.shape)}")
        return [str(i) for i in ids.tolist()] if ids.dim() == 1 else [[str(i) for i in row] for row in ids.tolist()]

    def to_string(self, tokens) -> str | list[str]:
        """The tokens of one sequence as one string, ids separated by spaces (``[0, 2, 1]`` → ``"0 2 1"``);
        a list of strings for a batch."""
        strings = self.to_str_tokens(tokens)
        return " ".join(strings) if not strings or isinstance(strings[0], str) else [" ".join(row) for row in strings]

    def generate(
        self,
        input: Int[Tensor, "batch pos"],
        max_new_tokens: int = 10,
        seed: int = 0,
        temperature: float = 1.0,
        do_sample: bool = True,
        **_: object,
    ) -> Int[Tensor, "batch new_pos"]:
        """``input`` continued by ``max_new_tokens`` tokens, each drawn from softmax(logits / temperature)
        at the last position (``do_sample=False``: the most likely token). The draws come from a CPU
        generator seeded with ``seed`` alone, so the same seed gives the same continuation on any device.
        The whole sequence must fit the context: pos + max_new_tokens ≤ n_ctx."""
        tokens = self.to_tokens(self._token_ids(input))
        if not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
        if tokens.shape[1] + max_new_tokens > self.cfg.n_ctx:
            raise ValueError(f"{tokens.shape[1]} tokens + {max_new_tokens} new exceed the context of {self.cfg.n_ctx}")
        if do_sample and not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature!r}")
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for _ in range(max_new_tokens):
                logits = self(tokens)[:, -1].double().cpu()
                if do_sample:
                    probs = torch.softmax(logits / temperature, dim=-1)
                    new = torch.multinomial(probs, 1, generator=generator)
                else:
                    new = logits.argmax(-1, keepdim=True)
                tokens = torch.cat([tokens, new.to(tokens.device)], dim=1)
        return tokens
