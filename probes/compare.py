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

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from circuits.constructions import empirical_bigram, load_construction, prop21, prop21_limit, wang_ih2, wang_ihn
from circuits.tasks.gaussian import induction_head, sample_sequences
from circuits.metrics import kl_divergence
from circuits.tasks.markov import matching_keys, sample_markov, strategy_predictions
from circuits.validation import require_int, require_positive
from probes.attention import (
    bigram_matching_score,
    positional_profiles,
    previous_token_score,
    run_with_captures,
    run_with_patterns,
)

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
    n_match = matching_keys(tokens).sum(-1)
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


# --- a trained model against the construction ------------------------------------------------------


@dataclass(frozen=True)
class Prop21Comparison:
    """How close a trained ICL-MC model is to Proposition 2.1, in gauge-invariant terms."""

    attention_tv: list[float]  # per layer: mean over queries of TV(trained row, construction row)
    positional_profile: Tensor  # trained layer 0, [distance]
    positional_profile_tv: float  # TV to the construction's (≈ one-hot at distance 1)
    token_matching: Tensor  # [k, k]: mean layer-1 content score, query token a vs key's previous token b
    token_matching_analytic: Tensor
    diagonal_is_row_max: float  # share of rows a whose largest entry is (a, a)
    ov_circuit: Tensor  # [k, k]: token a's value through layer 1's OV to the logits of b
    ov_circuit_analytic: Tensor
    ov_top1_diagonal: float
    ov_eigenvalues: Tensor  # on the k − 1 directions that change a softmax (logit shifts dropped)

    def to_json(self) -> dict:
        return {
            "attention_tv": self.attention_tv,
            "positional_profile_peak": int(self.positional_profile.argmax()),
            "positional_profile_at_1": self.positional_profile[1].item(),
            "positional_profile_tv": self.positional_profile_tv,
            "token_matching": self.token_matching.tolist(),
            "diagonal_is_row_max": self.diagonal_is_row_max,
            "ov_circuit": self.ov_circuit.tolist(),
            "ov_top1_diagonal": self.ov_top1_diagonal,
            "ov_eigenvalues_real": self.ov_eigenvalues.real.tolist(),
            "ov_eigenvalues_positive": bool((self.ov_eigenvalues.real > 0).all()),
        }

    def failures(self) -> list[str]:
        """Which of the construction's signatures the trained model lacks, in words."""
        problems = []
        if int(self.positional_profile.argmax()) != 1:
            problems.append(f"layer 0's positional profile peaks at distance {int(self.positional_profile.argmax())}, not 1")
        if self.diagonal_is_row_max < 1.0:
            problems.append(f"layer 1's token matching is diagonal-dominant in only {self.diagonal_is_row_max:.0%} of rows")
        if self.ov_top1_diagonal < 1.0:
            problems.append(f"layer 1's OV circuit copies only {self.ov_top1_diagonal:.0%} of tokens")
        if not (self.ov_eigenvalues.real > 0).all():
            problems.append("layer 1's OV circuit has a non-positive eigenvalue")
        return problems


def token_matching_matrix(model, tokens: Tensor, k: int) -> Tensor:
    """Mean content score q_i·k_j/√d_head of layer 1 over the pairs j ≤ i with x_i = a and x_{j−1} = b.

    Measured on the model's own activations, so LayerNorm, the layer-0 output and any basis change
    are all accounted for: the effective matrix through the layer-0 OV circuit, whatever the gauge.
    """
    names = ["blocks.1.attn.hook_q", "blocks.1.attn.hook_k"]
    _, captured = run_with_captures(model, tokens, names)
    q, key = captured[names[0]][:, :, 0], captured[names[1]][:, :, 0]
    scores = torch.einsum("bqe,bke->bqk", q, key) / q.shape[-1] ** 0.5
    n_pos = tokens.shape[1]
    previous = torch.cat([torch.full_like(tokens[:, :1], -1), tokens[:, :-1]], dim=1)
    causal = torch.ones(n_pos, n_pos, dtype=torch.bool).tril()
    matrix = torch.zeros(k, k, dtype=torch.float64)
    for a in range(k):
        for b in range(k):
            pairs = (tokens[:, :, None] == a) & (previous[:, None, :] == b) & causal
            matrix[a, b] = scores[pairs].double().mean()
    return matrix


def ov_circuit(model) -> Tensor:
    """W_E (through layer 1's LayerNorm, if any) W_V W_O (through the final LayerNorm's centring and
    gain, if any) W_U for layer 1's head: what attending to token a adds to the logit of b. The
    LayerNorms' positive scale factors are left out; they change no sign and no argmax."""
    embed = model.W_E.detach().double()
    block = model.blocks[1]
    if hasattr(block.ln1, "w"):
        embed = torch.nn.functional.layer_norm(embed, embed.shape[-1:], block.ln1.w.double(), block.ln1.b.double())
    out = embed @ block.attn.W_V[0].double() @ block.attn.W_O[0].double()
    if hasattr(model.ln_final, "w"):
        out = (out - out.mean(-1, keepdim=True)) * model.ln_final.w.double()
    return (out @ model.W_U.double()).detach()


def compare_with_prop21(model, tokens: Tensor, k: int, c: float = 100.0) -> Prop21Comparison:
    """Trained ``model`` against Proposition 2.1 at scale ``c`` on the same ``tokens``."""
    analytic = load_construction(*prop21(k, c, model.cfg.n_ctx, model.cfg.dtype))
    _, trained_patterns = run_with_patterns(model, tokens)
    _, analytic_patterns = run_with_patterns(analytic, tokens)
    attention_tv = [
        (0.5 * (t[:, 0] - a[:, 0]).abs().sum(-1)).mean().item() for t, a in zip(trained_patterns, analytic_patterns)
    ]
    profile = positional_profiles(model, tokens, 0)[0]
    analytic_profile = positional_profiles(analytic, tokens, 0)[0]
    matching = token_matching_matrix(model, tokens, k)
    ov, ov_analytic = ov_circuit(model), ov_circuit(analytic)
    return Prop21Comparison(
        attention_tv=attention_tv,
        positional_profile=profile,
        positional_profile_tv=0.5 * (profile - analytic_profile).abs().sum().item(),
        token_matching=matching,
        token_matching_analytic=token_matching_matrix(analytic, tokens, k),
        diagonal_is_row_max=(matching.argmax(-1) == torch.arange(k)).double().mean().item(),
        ov_circuit=ov,
        ov_circuit_analytic=ov_analytic,
        ov_top1_diagonal=(ov.argmax(-1) == torch.arange(k)).double().mean().item(),
        ov_eigenvalues=torch.linalg.eigvals(shift_free(ov)),
    )


def shift_free(matrix: Tensor) -> Tensor:
    """``matrix`` on the k − 1 directions orthogonal to all-ones, in both its input and its output.

    Adding a constant to every logit changes no prediction, and a final LayerNorm removes exactly that
    direction, so eigenvalues are only meaningful on the rest: Qᵀ M Q with Q an orthonormal basis of it.
    """
    k = matrix.shape[0]
    centre = torch.eye(k, dtype=matrix.dtype) - 1.0 / k
    basis = torch.linalg.svd(centre).U[:, : k - 1]
    return basis.T @ matrix @ basis


# --- Wang et al.'s Theorem 4.1 -----------------------------------------------------------------------

DEFAULT_BETAS = (1.0, 2.0, 5.0, 10.0, 20.0)


@dataclass(frozen=True)
class WangIH2Check:
    d: int
    beta: float
    seq_len: int
    n_seqs: int
    relative_error: float  # E‖f(X) − IH_2(X)‖² / E‖IH_2(X)‖² at the last position
    error_by_beta: list[tuple[float, float]]
    previous_token: float  # layer 0's previous-token score at beta

    def to_json(self) -> dict:
        return {
            "d": self.d, "beta": self.beta, "seq_len": self.seq_len, "n_seqs": self.n_seqs,
            "relative_error": self.relative_error,
            "error_by_beta": [list(pair) for pair in self.error_by_beta],
            "probe_scores": {"previous_token_layer0": self.previous_token},
        }


def relative_error(output: Tensor, target: Tensor) -> float:
    """Mean squared error over the target's mean square: 0 is exact, 1 is as bad as predicting 0."""
    return (((output - target) ** 2).sum(-1).mean() / (target**2).sum(-1).mean()).item()


def check_wang_ih2(d: int = 2, beta: float = 20.0, seq_len: int = 20, n_seqs: int = 1000, seed: int = 0,
                   betas: tuple[float, ...] = DEFAULT_BETAS) -> WangIH2Check:
    """Theorem 4.1's construction against IH_2 (W* = I) on fresh Gaussian sequences, over a grid of β."""
    require_positive("beta", beta)
    require_int("seq_len", seq_len, 4)
    x = sample_sequences(n_seqs, seq_len, d, generator=torch.Generator().manual_seed(seed))
    W_star = torch.eye(d, dtype=torch.float64)
    target = induction_head(x, 2, W_star)

    def last_output(value: float) -> Tensor:
        with torch.no_grad():
            return load_construction(*wang_ih2(d, value, W_star, seq_len))(x)[:, -1]

    error_by_beta = [(value, relative_error(last_output(value), target)) for value in sorted(set(betas) | {beta})]
    _, patterns = run_with_patterns(load_construction(*wang_ih2(d, beta, W_star, seq_len)), x)
    return WangIH2Check(
        d=d, beta=beta, seq_len=seq_len, n_seqs=n_seqs,
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

    def to_json(self) -> dict:
        return {
            "d": self.d, "n": self.n, "heads": self.heads, "seq_len": self.seq_len, "n_seqs": self.n_seqs,
            "relative_error": self.relative_error,
            "error_by_heads": [list(pair) for pair in self.error_by_heads],
            "fitted_q": self.fitted_q, "paper_scale_n_e": self.paper_scale,
        }


def check_wang_ihn(d: int = 1, n: int = 3, heads: int | None = None, seq_len: int = 20, n_seqs: int = 1000,
                   seed: int = 0) -> WangIHnCheck:
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
        with torch.no_grad():
            return relative_error(load_construction(*wang_ihn(d, n, h, W_star, seq_len))(x)[:, -1], target)

    grid = sorted(set(range(minimum, minimum + 4 * (n - 1) + 1, n - 1)) | {heads})
    error_by_heads = [(h, error(h)) for h in grid]
    log_h = torch.tensor([math.log(h) for h, _ in error_by_heads], dtype=torch.float64)
    log_e = torch.tensor([math.log(max(e, 1e-300)) for _, e in error_by_heads], dtype=torch.float64)
    slope = ((log_h - log_h.mean()) * (log_e - log_e.mean())).sum() / ((log_h - log_h.mean()) ** 2).sum()
    return WangIHnCheck(d=d, n=n, heads=heads, seq_len=seq_len, n_seqs=n_seqs,
                        relative_error=dict(error_by_heads)[heads], error_by_heads=error_by_heads,
                        fitted_q=-slope.item())
