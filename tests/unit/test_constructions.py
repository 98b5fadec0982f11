"""Proposition 2.1 loaded into the model: exact at large c, probes calibrated on it."""

import json

import pytest
import torch

from induction_probes.circuits.constructions.edelman import empirical_bigram, prop21, prop21_limit
from induction_probes.circuits.tasks.markov.chains import sample_markov
from induction_probes.cli import main
from induction_probes.probes.comparison.construction_limits import check_prop21, construction_errors


def sequences(kind: str, k: int, seq_len: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(k * 100 + seq_len)
    if kind == "uniform":
        return torch.randint(0, k, (40, seq_len), generator=generator)
    return sample_markov(40, k, seq_len, generator=generator).inputs


@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("seq_len", [17, 100])
@pytest.mark.parametrize("kind", ["uniform", "markov"])
def test_exact_at_c_100(k, seq_len, kind):
    tokens = sequences(kind, k, seq_len)
    assert construction_errors(tokens, k, 100.0, "float64")[1].max() < 1e-6
    assert construction_errors(tokens, k, 100.0, "float32")[1].max() < 1e-5


def test_limit_is_the_bigram_statistic_except_where_position_0_keys_itself():
    tokens = sequences("markov", 3, 60)
    limit, pure = prop21_limit(tokens, 3), empirical_bigram(tokens, 3)
    clean = ~pure.isnan().any(-1) & (tokens != tokens[:, :1])  # x_i has a successor and x_i ≠ x_0
    assert clean.sum() > 1000
    assert torch.allclose(limit[clean], pure[clean], atol=1e-12)
    assert not torch.allclose(limit[~pure.isnan().any(-1)], pure[~pure.isnan().any(-1)])


def test_error_against_c():
    result = check_prop21(3, 100.0, seq_len=100, n_seqs=300)
    worst = {c: w for c, w, _ in result.error_by_c}
    mean = {c: m for c, _, m in result.error_by_c}
    assert worst[10.0] > worst[30.0] > worst[100.0]
    assert mean[10.0] > mean[3.0]  # not monotone: see probes/comparison/construction_limits.py for why
    assert result.max_abs_error < 1e-6


def test_probes_are_calibrated_on_the_construction():
    result = check_prop21(3, 100.0, seq_len=100, n_seqs=300)
    assert result.previous_token >= 0.999
    assert 0.95 < result.bigram_matching < 0.98  # below 1 only through the position-0 self-key
    assert abs(result.bigram_matching - result.bigram_matching_predicted) < 1e-3
    assert result.bigram_matching_skip_first_key >= 0.999


def test_weights_have_the_documented_blocks():
    cfg, weights = prop21(2, 7.0, 10)
    assert cfg.d_model == 6 and cfg.layer_positional(1) == "none" and cfg.normalization is None
    assert torch.equal(weights["blocks.1.attn.W_K"][0, 2:4, 0:2], 7.0 * torch.eye(2, dtype=torch.float64))
    assert weights["blocks.0.attn.W_rel"][0].sum(-1).tolist() == [0.0, 6.0] + [0.0] * 8


@pytest.mark.parametrize(
    "args,message",
    [
        (["--k", "3", "--c", "0"], "c must be a finite number > 0"),
        (["--k", "1"], "k must be an integer >= 2"),
        (["--k", "2", "--against", "markov-k3"], "has k=3, but --k is 2"),
    ],
)
def test_bad_input(args, message, capsys):
    assert main(["verify", "prop21", *args]) == 2
    assert message in capsys.readouterr().err


def test_the_construction_compared_with_itself_is_perfect():
    from induction_probes.circuits.constructions.loading import load_construction
    from induction_probes.probes.comparison.trained_vs_prop21 import compare_with_prop21

    k = 3
    model = load_construction(*prop21(k, 100.0, 40))
    tokens = sequences("markov", k, 40)
    result = compare_with_prop21(model, tokens, k)
    assert max(result.attention_tv) < 1e-9 and result.positional_profile_tv < 1e-9
    assert torch.allclose(
        result.token_matching, 100.0**2 / (3 * k) ** 0.5 * torch.eye(k, dtype=torch.float64), atol=1e-6
    )
    assert torch.allclose(result.ov_circuit, torch.eye(k, dtype=torch.float64))
    assert torch.allclose(result.ov_eigenvalues.real, torch.ones(k - 1, dtype=torch.float64))
    assert result.matches and result.failures == []


def test_an_untrained_model_lacks_the_signatures():
    from induction_probes.circuits.models.model import HookedTransformer, HookedTransformerConfig
    from induction_probes.probes.comparison.trained_vs_prop21 import compare_with_prop21

    cfg = HookedTransformerConfig(n_layers=2, d_model=16, n_ctx=40, d_vocab=3, normalization="LN", seed=5)
    result = compare_with_prop21(HookedTransformer(cfg), sequences("markov", 3, 40), 3)
    assert len(result.failures) >= 2 and not result.matches
    assert min(result.attention_tv) > 0.3


@pytest.mark.parametrize("step", [364, 4000])  # on the plateau (two pieces short of halfway), at the end
def test_matches_and_failures_are_the_verdict_verify_prints(step, capsys):
    from induction_probes import Run, compare_with_prop21, probe_eval_set

    run = Run.open("markov-k3")
    result = compare_with_prop21(run.load(step=step), probe_eval_set(run, 40, 5).inputs, 3)
    assert isinstance(result.failures, list) and result.matches == (step == 4000)
    argv = ["verify", "prop21", "--against", "markov-k3", "--step", str(step), "--n-seqs", "40", "--seed", "5"]
    assert main(argv) == 0
    verdict = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(f"step {step}: "))
    if result.matches:
        assert verdict == f"step {step}: matches the construction's signatures"
    else:
        assert verdict == f"step {step}: differs: " + "; ".join(result.failures)
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["checkpoints"][0]["failures"] == result.failures


def test_the_construction_read_as_frequencies_scores_as_the_bigram_strategy():
    """Proposition 2.1 outputs frequencies: read as logits it looks nearly uniform; read as frequencies, with
    the task's pseudo-counts, its loss is the bigram strategy's within 0.01 nats (measured: 0.0013 here)."""
    from induction_probes import MarkovTask, behaviour, load_construction

    eval_set = MarkovTask(k=3).eval_set(1000, seed=4)
    with torch.no_grad():
        outputs = load_construction(*prop21(3, 100.0, 100))(eval_set.inputs)
    bigram = behaviour(eval_set.strategies["bigram"].log(), eval_set)
    as_logits = behaviour(outputs, eval_set)
    assert as_logits.closest_strategy == "uniform" and as_logits.loss - bigram.loss > 0.05
    as_frequencies = behaviour(outputs, eval_set, readout="frequencies")
    assert as_frequencies.closest_strategy == "bigram"
    assert abs(as_frequencies.loss - bigram.loss) < 0.01
    assert as_frequencies.last_token_kl["bigram"] < 0.002


def test_wang_theorem_4_1_converges_to_ih2_as_beta_grows():
    from induction_probes.probes.comparison.construction_limits import check_wang_ih2

    result = check_wang_ih2(d=2, beta=20.0, seq_len=20, n_seqs=1000)
    errors = [error for _, error in result.error_by_beta]
    assert all(a > b for a, b in zip(errors, errors[1:]))  # strictly decreasing over β = 1, 2, 5, 10, 20
    assert result.relative_error <= 1e-3
    assert result.previous_token > 0.999


def test_wang_theorem_4_1_with_a_general_w_star():
    from induction_probes.circuits.constructions.loading import load_construction
    from induction_probes.circuits.constructions.wang import wang_ih2
    from induction_probes.circuits.tasks.gaussian.sequences import induction_head, sample_sequences

    g = torch.Generator().manual_seed(7)
    W = torch.randn(3, 3, generator=g, dtype=torch.float64)
    x = sample_sequences(200, 12, 3, generator=g)
    with torch.no_grad():
        out = load_construction(*wang_ih2(3, 25.0, W, 12))(x)[:, -1]
    assert torch.allclose(out, induction_head(x, 2, W), atol=1e-8)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--beta", "0"], "beta must be a finite number > 0"),
        (["--seq-len", "3"], "seq_len must be an integer >= 4"),
        (["--d", "0"], "d must be an integer >= 1"),
    ],
)
def test_wang_bad_input(args, message, capsys):
    assert main(["verify", "wang-ih2", *args]) == 2
    assert message in capsys.readouterr().err


def test_wang_theorem_4_3_error_falls_with_heads():
    from induction_probes.probes.comparison.construction_limits import check_wang_ihn

    for n in (3, 4):
        result = check_wang_ihn(d=1, n=n, seq_len=16, n_seqs=300)
        errors = [error for _, error in result.error_by_heads]
        assert all(a > b for a, b in zip(errors, errors[1:])), n  # strictly decreasing in H
        assert errors[-1] < 1e-6 and result.fitted_q > 1


def test_distance_indicator_fit_is_exact_on_its_heads():
    from induction_probes.circuits.constructions.wang import distance_indicator_fit

    alpha, z = distance_indicator_fit(2, 4)
    values = [(alpha * z**t).sum().item() for t in range(4)]
    assert values == pytest.approx([0.0, 1.0, 0.0, 0.0], abs=1e-10)
    with pytest.raises(ValueError, match="at least 3 heads"):
        distance_indicator_fit(3, 2)


def test_wang_theorem_4_3_with_d_2_and_a_general_w_star():
    from induction_probes.circuits.constructions.loading import load_construction
    from induction_probes.circuits.constructions.wang import wang_ihn
    from induction_probes.circuits.tasks.gaussian.sequences import induction_head, sample_sequences

    g = torch.Generator().manual_seed(8)
    W = 0.5 * torch.randn(4, 4, generator=g, dtype=torch.float64)
    x = sample_sequences(200, 14, 2, generator=g)
    with torch.no_grad():
        out = load_construction(*wang_ihn(2, 3, 11, W, 14))(x)[:, -1]
    target = induction_head(x, 3, W)
    assert ((out - target) ** 2).sum(-1).mean() / (target**2).sum(-1).mean() < 1e-6


def test_a_residual_layouts_map_moves_one_named_block_into_another():
    from induction_probes.circuits.constructions.residual import ResidualLayout

    layout = ResidualLayout(("current", "previous", "output"), width=2)
    x = torch.arange(1.0, 7.0, dtype=torch.float64)  # current = (1, 2), previous = (3, 4), output = (5, 6)
    moved = x @ layout.map(
        ("current", "output", 3.0), ("previous", "current", torch.tensor([[0.0, 1], [1, 0]], dtype=torch.float64))
    )
    assert moved.tolist() == [4.0, 3.0, 0.0, 0.0, 3.0, 6.0]  # previous swapped into current; 3·current in output
    assert (torch.tensor([[7.0, 8.0]], dtype=torch.float64) @ layout.embedding("previous")).tolist() == [
        [0, 0, 7, 8, 0, 0]
    ]
    assert (x @ layout.readout("output")).tolist() == [5.0, 6.0] and layout.d_model == 6
    with pytest.raises(ValueError, match="repeat"):
        ResidualLayout(("current", "current"), width=2)
