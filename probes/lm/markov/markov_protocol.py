"""The sequences of :mod:`.markov_probe`'s probe: ICL-MC chains (Edelman et al. 2024) written in k of a language model's
tokens, over several draws of the k ids. :mod:`.markov_measure` measures the model on them.

The protocol (:func:`markov_draws`; :func:`markov_tokens` is one draw of it):

- **Tokens.** ``id_draws`` draws (default :data:`ID_DRAWS`) of k distinct ordinary ids
  (:func:`~induction_probes.probes.lm.protocols.vocabulary`: no special token, no padded embedding row), each
  the first k of its own random permutation of them, the permutations drawn one after another by a generator
  seeded with ``seed``, in increasing order: state s is written as the s-th smallest. Draws are independent, so
  two may share ids, and a vocabulary of only k ordinary tokens gives the same ids in every draw. The first draw
  is the one ``id_draws=1`` gives. Or ``tokens=[...]``: state s is ``tokens[s]``, and there is one draw.
- **Sequences.** Per draw, ``n_seqs`` sequences of the ICL-MC task of our runs (``MarkovTask(k, seq_len)``:
  each sequence its own chain, rows Dir(1), the first state from its stationary distribution), the next
  ``n_seqs`` of the evaluation stream of ``seed``: draw d reads sequences d·n_seqs to (d + 1)·n_seqs − 1, its own
  and no other draw's, so that draws are independent clusters (below) and the first draw's are those of
  ``MarkovTask.eval_set(n_seqs, seed)``. Opened by the model's BOS when it has one, as the repeated-token
  protocol does. ``seq_len`` defaults to our runs' T = 100 cut to the context; a longer one is refused. The
  same seed gives the same ids and the same sequences. ``n_seqs`` defaults to :data:`N_SEQS` (the command line
  passes its ``--n-seqs``, with the command's own default).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from jaxtyping import Int
from torch import Tensor

from induction_probes.circuits.defaults import LM_PROBE_SEQS, PROBE_SEED
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.limits import (
    MAX_SEQUENCES,
    require_at_most,
    require_numbers,
    require_seed,
    require_sequences,
)
from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.circuits.tasks.markov.strategies import MarkovEvalSet
from induction_probes.circuits.validation import require_int
from induction_probes.probes.intervals import BOOTSTRAP_RESAMPLES
from induction_probes.probes.lm.protocols import bos_id, vocabulary

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel

SEQ_LEN = MarkovTask.seq_len  # T = 100, our runs' default: a dataclass's class attribute is its field's default
N_SEQS = LM_PROBE_SEQS  # per id draw: a language model's one default, the command line's and the API's
ID_DRAWS = 4  # draws of the k ids: t₀.₉₇₅ = 3.18 over the draws, against 4.30 with 3 and 12.7 with 2
MIN_SEQ_LEN = 4  # the early window (positions 1..⌈T/10⌉) must end before the late one (T/2..T − 1) begins


@dataclass(frozen=True, eq=False)
class MarkovTokens:
    """One id draw of the protocol (module docstring): chain states in ``eval_set`` (with the truth and every
    strategy), written as ``ids[state]`` after the BOS ``bos`` when there is one (:attr:`tokens`)."""

    ids: Int[Tensor, " k"]
    eval_set: MarkovEvalSet
    bos: int | None
    seed: int

    @property
    def k(self) -> int:
        return len(self.ids)

    @property
    def seq_len(self) -> int:
        return self.eval_set.inputs.shape[1]

    @property
    def n_seqs(self) -> int:
        return self.eval_set.inputs.shape[0]

    @property
    def prefix(self) -> int:
        return int(self.bos is not None)

    @property
    def tokens(self) -> Int[Tensor, "batch pos"]:
        """What the model reads: [BOS] + ids[x_0] ... ids[x_{T−1}]."""
        body = self.ids[self.eval_set.inputs]
        if self.bos is None:
            return body
        return torch.cat([torch.full((self.n_seqs, 1), self.bos, dtype=body.dtype), body], dim=1)

    def to_json(self) -> dict:
        return {
            "task": "ICL-MC, rows Dir(1), one chain per sequence",
            "k": self.k,
            "ids": self.ids.tolist(),
            "seq_len": self.seq_len,
            "n_seqs": self.n_seqs,
            "seed": self.seed,
            "bos": self.bos,
        }


@dataclass(frozen=True, eq=False)
class MarkovDraws:
    """The whole protocol (module docstring): one :class:`MarkovTokens` per id draw, each with its own
    ``n_seqs`` sequences of the same length, after the same BOS. Rows of everything measured on it are
    (draw, sequence) pairs, draw-major: row d·n_seqs + s is sequence s of draw d."""

    draws: tuple[MarkovTokens, ...]

    @property
    def n_draws(self) -> int:
        return len(self.draws)

    @property
    def first(self) -> MarkovTokens:
        return self.draws[0]

    # what every draw shares (markov_draws makes them so)
    @property
    def k(self) -> int:
        return self.first.k

    @property
    def seq_len(self) -> int:
        return self.first.seq_len

    @property
    def n_seqs(self) -> int:
        """Sequences per draw."""
        return self.first.n_seqs

    @property
    def bos(self) -> int | None:
        return self.first.bos

    @property
    def seed(self) -> int:
        return self.first.seed

    @property
    def ids(self) -> list[list[int]]:
        return [draw.ids.tolist() for draw in self.draws]

    @property
    def tokens(self) -> Int[Tensor, "batch pos"]:
        """Every draw's sequences, draw-major."""
        return torch.cat([draw.tokens for draw in self.draws])

    @property
    def coverage(self) -> str:
        """What every interval is over, in words."""
        draws = f"{self.n_draws} id draw" + ("s" if self.n_draws > 1 else "")
        return f"95 % over {draws} x {self.n_seqs} sequences"

    def to_json(self) -> dict:
        return self.first.to_json() | {
            "ids": self.ids,
            "id_draws": self.n_draws,
            "sequences": "n_seqs per id draw, each draw its own: the next n_seqs of the evaluation stream of seed",
        }


def as_draws(protocol: MarkovTokens | MarkovDraws) -> MarkovDraws:
    return protocol if isinstance(protocol, MarkovDraws) else MarkovDraws((protocol,))


def random_ids(model: HookedModel, k: int, seed: int, draws: int) -> list[Int[Tensor, " k"]]:
    """``draws`` sets of k distinct ordinary ids, each the first k of its own permutation, the permutations
    drawn one after another by one generator seeded with ``seed``, each set in increasing order."""
    ordinary = vocabulary(model)
    if k > len(ordinary):
        raise BadInput(f"k = {k} exceeds the {len(ordinary)} ordinary tokens of the model's vocabulary")
    generator = torch.Generator().manual_seed(seed)
    return [ordinary[torch.randperm(len(ordinary), generator=generator)[:k]].sort().values for _ in range(draws)]


def chain_ids(
    model: HookedModel, k: int, seed: int = PROBE_SEED, tokens: Iterable[int] | None = None
) -> Int[Tensor, " k"]:
    """The k ids state 0..k−1 are written as: ``tokens`` as given, or k distinct ordinary ids drawn with
    ``seed``, in increasing order: the first id draw (module docstring)."""
    k, seed = require_int("k", k, 2), require_seed("seed", seed)
    if tokens is None:
        return random_ids(model, k, seed, 1)[0]
    ordinary = vocabulary(model)
    given = list(tokens)
    if len(given) != k or any(isinstance(t, bool) or not isinstance(t, int) for t in given):
        raise BadInput(f"tokens must be {k} integer ids, one per state, got {given!r}")
    if len(set(given)) != k:
        raise BadInput(f"tokens must be {k} distinct ids, got {given!r}")
    outside = sorted(set(given) - set(ordinary.tolist()))
    if outside:
        raise BadInput(f"token {outside[0]} is a special token or outside the model's ordinary vocabulary")
    return torch.tensor(given, dtype=torch.long)


def markov_tokens(
    model: HookedModel,
    k: int,
    n_seqs: int = N_SEQS,
    seq_len: int | None = None,
    seed: int = PROBE_SEED,
    tokens: Iterable[int] | None = None,
) -> MarkovTokens:
    """``n_seqs`` ICL-MC sequences over k of the model's tokens: one id draw (module docstring)."""
    return markov_draws(model, k, n_seqs, seq_len, seed, tokens, id_draws=1).first


def markov_draws(
    model: HookedModel,
    k: int,
    n_seqs: int = N_SEQS,
    seq_len: int | None = None,
    seed: int = PROBE_SEED,
    tokens: Iterable[int] | None = None,
    id_draws: int | None = None,
) -> MarkovDraws:
    """``id_draws`` draws of k of the model's tokens (default :data:`ID_DRAWS`; one with ``tokens``), each with
    its own ``n_seqs`` ICL-MC sequences (module docstring)."""
    k, seed = require_int("k", k, 2), require_seed("seed", seed)
    draws = draw_count(id_draws, tokens)
    require_at_most("id draws x sequences", draws * require_int("n_seqs", n_seqs, 2), MAX_SEQUENCES)  # before any draw
    ids = [chain_ids(model, k, seed, tokens)] if tokens is not None else random_ids(model, k, seed, draws)
    bos = bos_id(model)
    task = MarkovTask(k=k, seq_len=chain_length(model, bos, seq_len))
    sets = eval_sets(task, require_int("n_seqs", n_seqs, 2), seed, draws)
    return MarkovDraws(tuple(MarkovTokens(i, eval_set, bos, seed) for i, eval_set in zip(ids, sets)))


def draw_count(id_draws: int | None, tokens: Iterable[int] | None) -> int:
    """How many id draws: ``id_draws``, by default :data:`ID_DRAWS`; ``tokens`` name the ids, so one."""
    if tokens is None:
        return ID_DRAWS if id_draws is None else require_int("id_draws", id_draws, 1)
    if id_draws not in (None, 1):
        raise BadInput(f"tokens name the k ids: there is one id draw, not id_draws = {id_draws}")
    return 1


def chain_length(model: HookedModel, bos: int | None, seq_len: int | None) -> int:
    """``seq_len``, by default T = 100 cut to the context the BOS leaves; refused where it does not fit."""
    room = model.cfg.n_ctx - int(bos is not None)
    seq_len = min(SEQ_LEN, room) if seq_len is None else require_int("seq_len", seq_len, MIN_SEQ_LEN)
    if seq_len > room:
        raise BadInput(f"seq_len {seq_len} does not fit the model's context of {model.cfg.n_ctx} tokens")
    if seq_len < MIN_SEQ_LEN:
        raise BadInput(f"the model's context of {model.cfg.n_ctx} tokens holds no chain of {MIN_SEQ_LEN} tokens")
    return seq_len


def eval_sets(task: MarkovTask, n_seqs: int, seed: int, draws: int) -> list[MarkovEvalSet]:
    """``draws`` blocks of ``n_seqs`` sequences, one after another from the evaluation stream of ``seed``: the
    first is ``task.eval_set(n_seqs, seed)``, and no draw shares a sequence with another."""
    require_sequences("id_draws x n_seqs", draws * n_seqs, task.numbers_per_sequence())  # all held at once
    require_numbers("the bootstrap's resampling weights", BOOTSTRAP_RESAMPLES * draws * n_seqs)  # cluster_weights
    stream = task.eval_task().stream(seed, purpose="eval")
    return [MarkovEvalSet.from_sample(stream.take(n_seqs), task.alpha) for _ in range(draws)]


def check_fits(model: HookedModel, protocol: MarkovTokens) -> None:
    """Refuse a model that cannot read ``protocol``'s tokens as drawn (another checkpoint's vocabulary)."""
    if int(protocol.ids.max()) >= model.cfg.d_vocab or protocol.prefix + protocol.seq_len > model.cfg.n_ctx:
        raise BadInput("the sequences do not fit this model's vocabulary or context: draw them for it")
    if bos_id(model) != protocol.bos:
        raise BadInput(f"the sequences open with BOS {protocol.bos}, the model's BOS is {bos_id(model)}")
