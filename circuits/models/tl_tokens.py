"""TransformerLens's token helpers for models without a tokenizer: token ids in, ids or their strings out,
and ``generate``, which continues sequences by sampling from the model's own next-token distribution.

A mixin of :class:`induction_probes.circuits.models.tl_interface.TransformerLensInterface`. A token task's tokens
are the states 0..k−1 of a chain, so the string of token ``a`` is ``str(a)``: what CircuitsVis and
TransformerLens's plotting helpers need to label positions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn
from tqdm.auto import tqdm

from induction_probes.circuits.errors import BadInput

RETURN_TYPES = ("input", "str", "tokens")  # TransformerLens's generate(return_type=...)

if TYPE_CHECKING:
    MixedIntoModule = nn.Module  # the checker reads a mixin of an nn.Module as one: self(...), super() reach it
else:
    MixedIntoModule = object  # at run time the mixin stays out of the way: the model lists its nn.Module base

# token ids: a tensor, or a list of ints (one sequence) or of lists of ints (a batch)
TokenIds = Tensor | Sequence[int] | Sequence[Sequence[int]]


class TokenInterface(MixedIntoModule):
    """Needs ``cfg`` (``input_type``, ``n_ctx``, ``d_vocab``) and a forward pass giving logits."""

    cfg: Any  # the model's config, whatever its class (declared for the type checker: the model sets it)

    tokenizer = None  # as a TransformerLens model built from a config without one: these models have none

    def to_tokens(self, tokens: Tensor | str | Sequence[str], **_: object) -> Int[Tensor, "batch pos"]:
        """Token ids as [batch, pos]: a tensor passes through (a 1-D one gains a batch dimension), and a string
        of ids separated by spaces, as :meth:`to_string` writes them (``"0 2 1"``), or a list of such strings, is
        read back. Keyword options of TransformerLens (``prepend_bos``...) are accepted and ignored: there is no
        tokenizer and no BOS."""
        if isinstance(tokens, str):
            tokens = [tokens]
        if isinstance(tokens, (list, tuple)) and tokens and all(isinstance(t, str) for t in tokens):
            tokens = torch.tensor([self._ids_of(text) for text in tokens])
        if not isinstance(tokens, Tensor):
            raise BadInput(
                "this model has no tokenizer: pass token ids as a tensor, or a string of ids such as '0 2 1'"
            )
        return tokens[None] if tokens.dim() == 1 else tokens

    def _ids_of(self, text: str) -> list[int]:
        """The ids of a string ``to_string`` wrote; every sequence of a batch must have as many."""
        words = text.split()
        if not words or not all(word.isdigit() and int(word) < self.cfg.d_vocab for word in words):
            raise BadInput(
                f"this model has no tokenizer: a string of tokens is ids 0..{self.cfg.d_vocab - 1} separated by "
                f"spaces, got {text[:200]!r}"
            )
        return [int(word) for word in words]

    def to_single_token(self, token: int | str) -> int:
        """TransformerLens's name for one token's id: here the id itself, which must be in the vocabulary."""
        if isinstance(token, str):
            raise BadInput(f"this model has no tokenizer: give token {token!r} as an integer id")
        if not 0 <= int(token) < self.cfg.d_vocab:
            raise BadInput(f"token ids are 0..{self.cfg.d_vocab - 1}, got {token}")
        return int(token)

    def _token_ids(self, tokens: TokenIds) -> Tensor:
        if self.cfg.input_type != "tokens":
            raise BadInput("a vector-input model has no tokens to write as strings")
        if isinstance(tokens, str):
            raise BadInput("this model has no tokenizer: pass token ids (a tensor or a list of ints)")
        return torch.as_tensor(tokens)

    def to_str_tokens(self, tokens: TokenIds, **_: object) -> list[str] | list[list[str]]:
        """The string of each token, ``str(id)``: a list for one sequence ([pos] or [1, pos]), a list of
        lists for a batch. Keyword options of TransformerLens (``prepend_bos``...) are accepted and ignored."""
        ids = self._sequence_ids(tokens)
        return [str(i) for i in ids.tolist()] if ids.dim() == 1 else [[str(i) for i in row] for row in ids.tolist()]

    def _sequence_ids(self, tokens: TokenIds) -> Tensor:
        """The ids as [pos] for one sequence (given as [pos] or [1, pos]), [batch, pos] for a batch."""
        ids = self._token_ids(tokens)
        if ids.dim() == 2 and ids.shape[0] == 1:
            ids = ids[0]
        if ids.dim() == 0:
            ids = ids[None]
        if ids.dim() > 2:
            raise BadInput(f"tokens must be [pos] or [batch, pos], got shape {tuple(ids.shape)}")
        return ids

    def to_string(self, tokens: TokenIds) -> str | list[str]:
        """The tokens of one sequence as one string, ids separated by spaces (``[0, 2, 1]`` → ``"0 2 1"``);
        a list of strings for a batch (an empty batch: the empty string). :meth:`to_tokens` reads it back."""
        ids = self._sequence_ids(tokens)
        if ids.dim() == 1 or ids.shape[0] == 0:
            return " ".join(str(i) for i in ids.flatten().tolist())
        return [" ".join(str(i) for i in row) for row in ids.tolist()]

    def generate(
        self,
        input: Int[Tensor, "batch pos"] | str | list[str] = "",
        max_new_tokens: int = 10,
        stop_at_eos: bool = True,
        eos_token_id: int | None = None,
        do_sample: bool = True,
        top_k: int | None = None,
        top_p: float | None = None,
        temperature: float = 1.0,
        freq_penalty: float = 0.0,
        use_past_kv_cache: bool = True,
        prepend_bos: bool | None = None,
        padding_side: str | None = None,
        return_type: str = "input",
        verbose: bool = True,
        seed: int | None = None,
    ) -> Int[Tensor, "batch new_pos"] | str | list[str]:
        """``input`` continued by ``max_new_tokens`` tokens, with TransformerLens's arguments and meanings: each
        token drawn from softmax(logits / temperature) at the last position, after ``freq_penalty`` times each
        token's count so far is taken off its logit and only the ``top_k`` most likely tokens (or the smallest
        set whose probability reaches ``top_p``) are kept; ``do_sample=False`` or ``temperature=0`` takes the
        most likely token. ``return_type`` "input" gives what was given (a tensor or a string of ids, as
        :meth:`to_string` writes), "tokens" a tensor, "str" strings. ``verbose`` shows a progress bar.

        The draws come from torch's global CPU generator, so ``torch.manual_seed`` decides them, as in
        TransformerLens; ``seed`` (ours) draws from a generator of its own instead, the same on any device.
        These models have no tokenizer, no end-of-sequence token and no cache: ``stop_at_eos``, ``eos_token_id``
        (unless given: generation then stops once every sequence has produced it), ``use_past_kv_cache``,
        ``prepend_bos`` and ``padding_side`` change nothing. The whole sequence must fit the context:
        pos + max_new_tokens ≤ n_ctx."""
        if return_type not in RETURN_TYPES:
            raise BadInput(f"return_type must be input, str or tokens, got {str(return_type)[:200]!r}")
        tokens = self.to_tokens(input if isinstance(input, (str, list, tuple)) else self._token_ids(input))
        check_generation(self.cfg.n_ctx, tokens.shape[1], max_new_tokens, do_sample, temperature, top_k, top_p)
        generator = None if seed is None else torch.Generator().manual_seed(seed)
        finished = torch.zeros(tokens.shape[0], dtype=torch.bool)
        with torch.no_grad():
            for _ in tqdm(range(max_new_tokens), disable=not verbose, desc="generating", leave=False):
                logits = self(tokens)[:, -1].double().cpu()
                new = next_tokens(logits, tokens.cpu(), do_sample, top_k, top_p, temperature, freq_penalty, generator)
                tokens = torch.cat([tokens, new[:, None].to(tokens.device)], dim=1)
                if eos_token_id is not None and stop_at_eos:
                    finished |= new == eos_token_id
                    if finished.all():
                        break
        wants_text = return_type == "str" or (return_type == "input" and isinstance(input, (str, list, tuple)))
        if not wants_text:
            return tokens
        text = self.to_string(tokens)
        return [text] if isinstance(input, (list, tuple)) and isinstance(text, str) else text


def check_generation(n_ctx, n_pos, max_new_tokens, do_sample, temperature, top_k, top_p) -> None:
    if not isinstance(max_new_tokens, int) or isinstance(max_new_tokens, bool) or max_new_tokens < 0:
        raise BadInput(f"max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
    if n_pos + max_new_tokens > n_ctx:
        raise BadInput(f"{n_pos} tokens + {max_new_tokens} new exceed the context of {n_ctx}")
    if do_sample and not temperature >= 0:
        raise BadInput(f"temperature must be >= 0, got {temperature!r}")
    if top_k is not None and (not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 1):
        raise BadInput(f"top_k must be a positive integer or None, got {top_k!r}")
    if top_p is not None and not 0 < top_p <= 1:
        raise BadInput(f"top_p must be in (0, 1] or None, got {top_p!r}")


def next_tokens(
    logits: Float[Tensor, "batch d_vocab"],
    tokens: Int[Tensor, "batch pos"],
    do_sample: bool,
    top_k: int | None,
    top_p: float | None,
    temperature: float,
    freq_penalty: float,
    generator: torch.Generator | None,
) -> Int[Tensor, " batch"]:
    """One token per sequence from the last position's logits, as TransformerLens's ``sample_logits``."""
    if not do_sample or temperature == 0:
        return logits.argmax(-1)
    logits = logits / temperature
    if freq_penalty:
        counts = torch.zeros_like(logits).scatter_add_(1, tokens, torch.ones_like(tokens, dtype=logits.dtype))
        logits = logits - freq_penalty * counts
    if top_k is not None:
        kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
    if top_p is not None:
        ordered, order = logits.sort(-1, descending=True)
        before = ordered.softmax(-1).cumsum(-1) - ordered.softmax(-1)  # probability of the tokens above each
        drop = torch.zeros_like(logits, dtype=torch.bool).scatter_(1, order, before >= top_p)
        logits = logits.masked_fill(drop, -math.inf)
    return torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(-1)
