"""Analytic constructions against their exact limits (and, later, against trained weights).

Proposition 2.1's output tends to :func:`circuits.constructions.prop21_limit` as c grows. How the
error behaves on the way is worth knowing before comparing a trained model with it:

- For small c (≲ 5 at k = 3) both layers are nearly uniform: the output is close to the unigram
  frequencies of the prefix, a fair guess of the bigram limit, so the mean error is moderate.
- Around c = 10 the second layer is already sharp (its logits scale with c²) while the first is still
  blurred (its logits scale with c): layer 1 then commits to the keys whose *blurred* previous-token
  block best matches x_i, a wrong subset, and the mean error rises above its small-c value.
- From c ≈ 30 the first layer is sharp too and the error falls fast, to float rounding by c = 100.

So the mean error is not monotone in c, while the error decreases strictly over c = 10, 30, 100.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from circuits.constructions import empirical_bigram, load_construction, prop21, prop21_limit
from circuits.metrics import kl_divergence
from circuits.tasks.markov import sample_markov, strategy_predictions
from circuits.validation import require_int, require_positive
from probes.attention import bigram_matching_score, previous_token_score, run_with_patterns

DEFAULT_CS = (1.0, 3.0, 10.0, 30.0, 100.0, 300.0)


@dataclass(frozen=True)
class Prop21Check:
    k: int
    c: float
    seq_len: int
    n_seqs: int
    max_abs_error: float  # logits against the exact limit, every position
    mean_abs_error: float
    error_by_c: list[tuple[float, float, float]]  # (c, max, mean)
    bigram_gap: float  # max |limit − pure bigram frequencies| where the latter are defined
    kl_bigram_by_position: Tensor  # KL(Bayes bigram strategy ‖ softmax(logits)), mean over sequences
    previous_token: float  # layer 0
    bigram_matching: float  # layer 1
    bigram_matching_skip_first_key: float
    bigram_matching_predicted: float  # what the position-0 self-key alone predicts

    def to_json(self) -> dict:
        return {
            "k": self.k, "c": self.c, "seq_len": self.seq_len, "n_seqs": self.n_seqs,
            "max_abs_error": self.max_abs_error, "mean_abs_error": self.mean_abs_error,
            "error_by_c": [[c, worst] for c, worst, _ in self.error_by_c],
            "mean_error_by_c": [[c, mean] for c, _, mean in self.error_by_c],
            "bigram_gap": self.bigram_gap,
            "kl_bigram_by_position": self.kl_bigram_by_position.tolist(),
            "probe_scores": {
                "previous_token_layer0": self.previous_token,
                "bigram_matching_layer1": self.bigram_matching,
                "bigram_matching_layer1_skip_first_key": self.bigram_matching_skip_first_key,
                "bigram_matching_layer1_predicted_by_self_key": self.bigram_matching_predicted,
            },
        }


def construction_errors(tokens: Tensor, k: int, c: float, dtype: str = "float64") -> tuple[Tensor, Tensor]:
    """The construction's logits at c and their absolute error against the exact limit."""
    model = load_construction(*prop21(k, c, tokens.shape[1], dtype))
    with torch.no_grad():
        logits = model(tokens)
    return logits, (logits.double() - prop21_limit(tokens, k)).abs()


def self_key_prediction(tokens: Tensor) -> float:
    """Layer 1's bigram-matching score if it attends exactly uniformly over its keys: for a query with
    n ≥ 1 matching keys, n / (n + [x_0 = x_i]), since position 0 (key of itself) joins them when x_0 = x_i."""
    previous = torch.cat([torch.full_like(tokens[:, :1], -1), tokens[:, :-1]], dim=1)
    n_pos = tokens.shape[1]
    n_match = ((previous[:, None, :] == tokens[:, :, None]) & torch.ones(n_pos, n_pos, dtype=torch.bool).tril()).sum(-1)
    self_key = (tokens == tokens[:, :1]).long()
    has = n_match > 0
    return (n_match[has] / (n_match[has] + self_key[has])).double().mean().item()


def check_prop21(k: int, c: float = 100.0, seq_len: int = 100, n_seqs: int = 500, seed: int = 0,
                 cs: tuple[float, ...] = DEFAULT_CS) -> Prop21Check:
    """Verify Proposition 2.1 on ICL-MC sequences: exactness, the error as c grows, how its output
    compares with the Bayes bigram predictor, and the probe scores it earns."""
    require_int("k", k, 2)
    require_positive("c", c)
    require_int("n_seqs", n_seqs, 1)
    tokens = sample_markov(n_seqs, k, seq_len, generator=torch.Generator().manual_seed(seed)).inputs
    error_by_c = []
    for value in sorted(set(cs) | {c}):
        _, error = construction_errors(tokens, k, value)
        error_by_c.append((value, error.max().item(), error.mean().item()))
    logits, error = construction_errors(tokens, k, c)
    limit, pure = prop21_limit(tokens, k), empirical_bigram(tokens, k)
    defined = ~pure.isnan()
    bayes = strategy_predictions("bigram", tokens, k)
    kl = kl_divergence(bayes, torch.log_softmax(logits.double(), -1)).mean(0)

    model = load_construction(*prop21(k, c, seq_len))
    _, patterns = run_with_patterns(model, tokens)
    return Prop21Check(
        k=k, c=c, seq_len=seq_len, n_seqs=n_seqs,
        max_abs_error=error.max().item(), mean_abs_error=error.mean().item(),
        error_by_c=error_by_c,
        bigram_gap=(limit - pure)[defined].abs().max().item(),
        kl_bigram_by_position=kl,
        previous_token=previous_token_score(patterns[0]).item(),
        bigram_matching=bigram_matching_score(patterns[1], tokens)[0].item(),
        bigram_matching_skip_first_key=bigram_matching_score(patterns[1], tokens, skip_first_key=True)[0].item(),
        bigram_matching_predicted=self_key_prediction(tokens),
    )
