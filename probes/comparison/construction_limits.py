"""Hand-made constructions against their exact limits: Edelman et al.'s Proposition 2.1 and Wang et al.'s
Theorems 4.1 and 4.3. (Trained runs against the constructions:
:mod:`induction_probes.probes.comparison.trained_vs_prop21`.)

Proposition 2.1's output tends to :func:`induction_probes.circuits.constructions.edelman.prop21_limit` as c
grows. How the error behaves on the way is worth knowing before comparing a trained model with it:

- For small c (≲ 5 at k = 3) both layers are nearly uniform: the output is close to the unigram
  frequencies of the prefix, a fair guess of the bigram limit, so the mean error is moderate.
- Around c = 10 the second layer is already sharp (its logits scale with c²) while the first is still
  blurred (its logits scale with c): layer 1 then commits to the keys whose *blurred* previous-token
  block best matches x_i, a wrong subset, and the mean error rises above its small-c value.
- From c ≈ 30 the first layer is sharp too and the error falls fast, to float rounding by c = 100.

So the mean error is not monotone in c, while the error decreases strictly over c = 10, 30, 100.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from induction_probes.circuits.constructions.edelman import empirical_bigram, prop21, prop21_limit
from induction_probes.circuits.constructions.loading import load_construction
from induction_probes.circuits.constructions.wang import wang_ih2, wang_ihn
from induction_probes.circuits.devices import Device, model_device
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.metrics import kl_divergence, linear_fit, mse_over_mean_square
from induction_probes.circuits.models.attention_masks import matching_keys
from induction_probes.circuits.tasks.gaussian.sequences import induction_head, sample_sequences
from induction_probes.circuits.tasks.markov.chains import sample_markov
from induction_probes.circuits.tasks.markov.strategies import strategy_predictions
from induction_probes.circuits.validation import require_int, require_positive
from induction_probes.probes.attention.patterns import bigram_matching_score, previous_token_score, run_with_patterns

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

    def to_json(self) -> dict[str, Any]:
        return {
            "k": self.k,
            "c": self.c,
            "seq_len": self.seq_len,
            "n_seqs": self.n_seqs,
            "max_abs_error": self.max_abs_error,
            "mean_abs_error": self.mean_abs_error,
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


def output_on(construction, inputs: Tensor, device: Device = None) -> Float[Tensor, "batch ..."]:
    """A construction's output on ``inputs``, computed on ``device`` (default cpu), back on the CPU."""
    model = load_construction(*construction, device=device)
    with torch.no_grad():
        return model(inputs.to(model_device(model))).cpu()


def construction_errors(
    tokens: Tensor, k: int, c: float, dtype: str = "float64", device: Device = None
) -> tuple[Tensor, Tensor]:
    """The construction's logits at c and their absolute error against the exact limit."""
    logits = output_on(prop21(k, c, tokens.shape[1], dtype), tokens, device)
    require_computable(c, logits)
    return logits, (logits.double() - prop21_limit(tokens, k)).abs()


def require_computable(c: float, values: Tensor) -> None:
    """Refuse a scale whose construction overflows (its scores grow as c²): its numbers cannot be
    computed, and printing them as NaN would look like a result."""
    if not torch.isfinite(values).all():
        raise BadInput(f"c = {c:g} is too large to compute: the construction's attention scores (~c^2) overflow")


def self_key_prediction(tokens: Tensor) -> float:
    """Layer 1's bigram-matching score if it attends exactly uniformly over its keys: for a query with
    n ≥ 1 matching keys, n / (n + [x_0 = x_i]), since position 0 (key of itself) joins them when x_0 = x_i."""
    n_match = matching_keys(tokens).sum(-1)
    self_key = (tokens == tokens[:, :1]).long()
    has = n_match > 0
    return (n_match[has] / (n_match[has] + self_key[has])).double().mean().item()


def check_prop21(
    k: int,
    c: float = 100.0,
    seq_len: int = 100,
    n_seqs: int = 500,
    seed: int = 0,
    cs: tuple[float, ...] = DEFAULT_CS,
    device: Device = None,
) -> Prop21Check:
    """Verify Proposition 2.1 on ICL-MC sequences: exactness, the error as c grows, how its output
    compares with the Bayes bigram predictor, and the probe scores it earns."""
    require_int("k", k, 2)
    require_positive("c", c)
    require_int("n_seqs", n_seqs, 1)
    tokens = sample_markov(n_seqs, k, seq_len, generator=torch.Generator().manual_seed(seed)).inputs
    error_by_c = []
    for value in sorted(set(cs) | {c}):
        _, error = construction_errors(tokens, k, value, device=device)
        error_by_c.append((value, error.max().item(), error.mean().item()))
    logits, error = construction_errors(tokens, k, c, device=device)
    limit, pure = prop21_limit(tokens, k), empirical_bigram(tokens, k)
    defined = ~pure.isnan()
    bayes = strategy_predictions("bigram", tokens, k)
    kl = kl_divergence(bayes, torch.log_softmax(logits.double(), -1)).mean(0)

    model = load_construction(*prop21(k, c, seq_len), device=device)
    _, patterns = run_with_patterns(model, tokens)
    return Prop21Check(
        k=k,
        c=c,
        seq_len=seq_len,
        n_seqs=n_seqs,
        max_abs_error=error.max().item(),
        mean_abs_error=error.mean().item(),
        error_by_c=error_by_c,
        bigram_gap=(limit - pure)[defined].abs().max().item(),
        kl_bigram_by_position=kl,
        previous_token=previous_token_score(patterns[0]).item(),
        bigram_matching=bigram_matching_score(patterns[1], tokens)[0].item(),
        bigram_matching_skip_first_key=bigram_matching_score(patterns[1], tokens, skip_first_key=True)[0].item(),
        bigram_matching_predicted=self_key_prediction(tokens),
    )


# --- Wang et al.'s Theorem 4.1 -----------------------------------------------------------------------

DEFAULT_BETAS = (1.0, 2.0, 5.0, 10.0, 20.0)


@dataclass(frozen=True)
class WangIH2Check:
    d: int
    beta: float
    seq_len: int
    n_seqs: int
    relative_error: float  # E‖f(X) − IH_2(X)‖² / E‖IH_2(X)‖² at the last position (mse_over_mean_square)
    error_by_beta: list[tuple[float, float]]
    previous_token: float  # layer 0's previous-token score at beta

    def to_json(self) -> dict[str, Any]:
        return {
            "d": self.d,
            "beta": self.beta,
            "seq_len": self.seq_len,
            "n_seqs": self.n_seqs,
            "relative_error": self.relative_error,
            "error_by_beta": [list(pair) for pair in self.error_by_beta],
            "probe_scores": {"previous_token_layer0": self.previous_token},
        }


def check_wang_ih2(
    d: int = 2,
    beta: float = 20.0,
    seq_len: int = 20,
    n_seqs: int = 1000,
    seed: int = 0,
    betas: tuple[float, ...] = DEFAULT_BETAS,
    device: Device = None,
) -> WangIH2Check:
    """Theorem 4.1's construction against IH_2 (W* = I) on fresh Gaussian sequences, over a grid of β."""
    require_positive("beta", beta)
    require_int("seq_len", seq_len, 4)
    x = sample_sequences(n_seqs, seq_len, d, generator=torch.Generator().manual_seed(seed))
    W_star = torch.eye(d, dtype=torch.float64)
    target = induction_head(x, 2, W_star)

    def last_output(value: float) -> Tensor:
        return output_on(wang_ih2(d, value, W_star, seq_len), x, device)[:, -1]

    error_by_beta = [(value, mse_over_mean_square(last_output(value), target)) for value in sorted(set(betas) | {beta})]
    _, patterns = run_with_patterns(load_construction(*wang_ih2(d, beta, W_star, seq_len), device=device), x)
    return WangIH2Check(
        d=d,
        beta=beta,
        seq_len=seq_len,
        n_seqs=n_seqs,
        relative_error=dict(error_by_beta)[beta],
        error_by_beta=error_by_beta,
        previous_token=previous_token_score(patterns[0]).item(),
    )


@dataclass(frozen=True)
class WangIHnCheck:
    d: int
    n: int
    heads: int
    seq_len: int
    n_seqs: int
    relative_error: float
    error_by_heads: list[tuple[int, float]]
    fitted_q: float  # slope of −log(error) against log(H): error ≈ C / H^q over the grid

    @property
    def paper_scale(self) -> float:
        """n·e^{1+0.01n}: the H beyond which the paper's bound C (n e^{1+0.01n} / H)^q starts to fall."""
        return self.n * math.exp(1 + 0.01 * self.n)

    def to_json(self) -> dict[str, Any]:
        return {
            "d": self.d,
            "n": self.n,
            "heads": self.heads,
            "seq_len": self.seq_len,
            "n_seqs": self.n_seqs,
            "relative_error": self.relative_error,
            "error_by_heads": [list(pair) for pair in self.error_by_heads],
            "fitted_q": self.fitted_q,
            "paper_scale_n_e": self.paper_scale,
        }


def check_wang_ihn(
    d: int = 1,
    n: int = 3,
    heads: int | None = None,
    seq_len: int = 20,
    n_seqs: int = 1000,
    seed: int = 0,
    device: Device = None,
) -> WangIHnCheck:
    """Theorem 4.3's construction against IH_n (W* = I) over a grid of head counts, from the minimum
    n(n − 1)/2 upward in steps of n − 1, with a power law fitted to the error."""
    require_int("n", n, 2)
    require_int("seq_len", seq_len, n + 2)
    minimum = n * (n - 1) // 2
    heads = minimum + 3 * (n - 1) if heads is None else require_int("heads", heads, minimum)
    x = sample_sequences(n_seqs, seq_len, d, generator=torch.Generator().manual_seed(seed))
    W_star = torch.eye((n - 1) * d, dtype=torch.float64)
    target = induction_head(x, n, W_star)

    def error(h: int) -> float:
        return mse_over_mean_square(output_on(wang_ihn(d, n, h, W_star, seq_len), x, device)[:, -1], target)

    grid = sorted(set(range(minimum, minimum + 4 * (n - 1) + 1, n - 1)) | {heads})
    error_by_heads = [(h, error(h)) for h in grid]
    log_h = torch.tensor([math.log(h) for h, _ in error_by_heads], dtype=torch.float64)
    log_e = torch.tensor([math.log(max(e, 1e-300)) for _, e in error_by_heads], dtype=torch.float64)
    slope, _, _ = linear_fit(log_h, log_e)
    return WangIHnCheck(
        d=d,
        n=n,
        heads=heads,
        seq_len=seq_len,
        n_seqs=n_seqs,
        relative_error=dict(error_by_heads)[heads],
        error_by_heads=error_by_heads,
        fitted_q=-slope,
    )
