"""Probes on hand-made patterns and models, where the right answer is known exactly."""

import itertools
import math

import pytest
import torch
from tiny_models import tiny_model
from transformer_lens import HookedRootModule
from transformer_lens.head_detector import (
    compute_head_attention_similarity_score,
    get_previous_token_head_detection_pattern,
)
from transformer_lens.hook_points import HookPoint

from induction_probes.circuits.tasks.markov.markov_task import MarkovTask
from induction_probes.probes.ablation.head_ablation import parse_heads, run_ablated
from induction_probes.probes.attention.patterns import (
    alternation_fading,
    bigram_matching_score,
    last_token_matching_mass,
    odd_even_excess,
    positional_profiles,
    previous_is_heaviest,
    previous_token_score,
    run_with_patterns,
)
from induction_probes.probes.behaviour.icl_behaviour import behaviour, icl_score

# A causal pattern over 5 positions: rows are queries, columns keys; every row sums to 1.
PATTERN = torch.tensor(
    [
        [1.0, 0.0, 0.0, 0.0, 0.0],
        [0.3, 0.7, 0.0, 0.0, 0.0],
        [0.2, 0.5, 0.3, 0.0, 0.0],
        [0.1, 0.2, 0.6, 0.1, 0.0],
        [0.1, 0.3, 0.2, 0.2, 0.2],
    ]
)[None, None]  # [batch 1, head 1, q, k]
TOKENS = torch.tensor([[0, 1, 0, 0, 1]])
# Matching keys (j ≥ 1, j ≤ i, x_{j−1} = x_i): query 2 → {1}; query 3 → {1, 3}; query 4 → {2}.


def test_previous_token_score_by_hand():
    assert previous_token_score(PATTERN).item() == pytest.approx((0.3 + 0.5 + 0.6 + 0.2) / 4)


def test_previous_token_score_against_transformer_lens_mul():
    detection = get_previous_token_head_detection_pattern(TOKENS)
    tl = compute_head_attention_similarity_score(
        PATTERN[0, 0], detection, exclude_bos=False, exclude_current_token=False, error_measure="mul"
    )
    # TL divides by all 5 queries, query 0 (no previous token) included.
    assert previous_token_score(PATTERN).item() == pytest.approx(tl * 5 / 4)
    strict = PATTERN.clone()
    strict[..., 0, :] = 0.0  # a strict-mask head: query 0 attends nowhere, and the two agree exactly
    tl_strict = compute_head_attention_similarity_score(
        strict[0, 0], detection, exclude_bos=False, exclude_current_token=False, error_measure="mul"
    )
    assert previous_token_score(strict).item() == pytest.approx(tl_strict)


def test_bigram_matching_by_hand():
    mass, ideal, fraction = bigram_matching_score(PATTERN, TOKENS)
    assert fraction == pytest.approx(3 / 5)  # queries 0 and 1 have no matching key
    assert mass.item() == pytest.approx((0.5 + (0.2 + 0.1) + 0.2) / 3)
    # 1 − TV to uniform over the matching keys: Σ_j min(A_j, 1/n) over matching j.
    assert ideal.item() == pytest.approx((0.5 + (0.2 + 0.1) + 0.2) / 3)
    sharp = PATTERN.clone()
    sharp[0, 0, 3] = torch.tensor([0.0, 0.5, 0.0, 0.5, 0.0])  # exactly uniform over {1, 3}
    _, ideal_sharp, _ = bigram_matching_score(sharp, TOKENS)
    assert ideal_sharp.item() == pytest.approx((0.5 + 1.0 + 0.2) / 3)


def brute_force_bigram(pattern, tokens):
    masses, ideals = [], []
    for b, i in itertools.product(range(tokens.shape[0]), range(tokens.shape[1])):
        keys = [j for j in range(1, i + 1) if tokens[b, j - 1] == tokens[b, i]]
        if keys:
            row = pattern[b, 0, i]
            target = torch.zeros_like(row)
            target[keys] = 1 / len(keys)
            masses.append(row[keys].sum())
            ideals.append(1 - 0.5 * (row - target).abs().sum())
    return torch.stack(masses).mean(), torch.stack(ideals).mean(), len(masses) / tokens.numel()


def test_bigram_matching_against_brute_force_on_random_patterns():
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 3, (4, 12), generator=g)
    scores = torch.randn(4, 1, 12, 12, generator=g).masked_fill(
        ~torch.ones(12, 12, dtype=torch.bool).tril(), -torch.inf
    )
    pattern = torch.softmax(scores, -1).double()
    mass, ideal, fraction = bigram_matching_score(pattern, tokens)
    expected = brute_force_bigram(pattern, tokens)
    assert mass.item() == pytest.approx(expected[0].item())
    assert ideal.item() == pytest.approx(expected[1].item())
    assert fraction == pytest.approx(expected[2])


def test_skip_first_key_renormalises_rows():
    mass, _, _ = bigram_matching_score(PATTERN, TOKENS, skip_first_key=True)
    rows = [0.5 / 0.8, (0.2 + 0.1) / 0.9, 0.2 / 0.9]
    assert mass.item() == pytest.approx(sum(rows) / 3)


def test_no_matching_key_is_an_error():
    with pytest.raises(ValueError, match="no query has a matching key"):
        bigram_matching_score(PATTERN, torch.tensor([[0, 1, 2, 3, 4]]))


def small_model(**overrides):
    return tiny_model(**(dict(d_model=8, n_ctx=20, d_vocab=3, n_heads=2, seed=3, dtype="float64") | overrides))


def no_hooks_left(model) -> bool:
    return not any(h.fwd_hooks or h.bwd_hooks for h in model.hook_dict.values())


def test_probes_leave_no_hooks_even_when_the_forward_raises():
    model = small_model()
    run_with_patterns(model, torch.randint(0, 3, (2, 10)))
    assert no_hooks_left(model)
    with pytest.raises(ValueError):
        run_with_patterns(model, torch.full((2, 10), 7))  # out-of-vocabulary tokens raise inside forward
    assert no_hooks_left(model)
    with pytest.raises(ValueError):
        run_ablated(model, torch.full((2, 10), 7), [(0, 1)], "zero")
    assert no_hooks_left(model)


def test_probes_do_not_change_a_cache():
    model = small_model()
    tokens = torch.randint(0, 3, (3, 15), generator=torch.Generator().manual_seed(1))
    _, cache = model.run_with_cache(tokens)
    before = {name: t.clone() for name, t in cache.cache_dict.items()}
    previous_token_score(cache["pattern", 0])
    bigram_matching_score(cache["pattern", 1], tokens, skip_first_key=True)
    assert all(torch.equal(before[name], cache.cache_dict[name]) for name in before)


class TinyHooked(HookedRootModule):
    """Not our model: a fixed previous-token layer with TransformerLens hook names, and nothing else."""

    class Cfg:
        n_layers, n_heads = 1, 1

    def __init__(self):
        super().__init__()
        self.cfg = self.Cfg()
        self.blocks = torch.nn.ModuleList([torch.nn.Module()])
        self.blocks[0].attn = torch.nn.Module()
        self.blocks[0].attn.hook_pattern = HookPoint()
        self.blocks[0].attn.hook_z = HookPoint()
        self.setup()

    def forward(self, tokens):
        n = tokens.shape[1]
        pattern = torch.eye(n).roll(-1, dims=1).tril()  # query t attends to t − 1
        pattern[0, 0] = 1.0
        pattern = self.blocks[0].attn.hook_pattern(pattern.expand(tokens.shape[0], 1, n, n))
        z = self.blocks[0].attn.hook_z(torch.einsum("bhqk,bk->bqh", pattern, tokens.float())[..., None])
        return z[..., 0, :]


def test_probes_run_on_a_hooked_model_that_is_not_ours():
    model = TinyHooked()
    tokens = torch.tensor([[2, 0, 1, 2, 2, 1]])
    out, patterns = run_with_patterns(model, tokens)
    assert previous_token_score(patterns[0]).item() == pytest.approx(1.0)
    assert torch.equal(out[0, 1:, 0], tokens[0, :-1].float())  # it copies the previous token
    ablated = run_ablated(model, tokens, [(0, 0)], "zero")
    assert torch.equal(ablated, torch.zeros_like(ablated))


def test_zero_ablation_equals_removing_the_head_from_w_o():
    model = small_model()
    tokens = torch.randint(0, 3, (4, 16), generator=torch.Generator().manual_seed(2))
    ablated = run_ablated(model, tokens, [(1, 0)], "zero")
    with torch.no_grad():
        model.blocks[1].attn.W_O[0] = 0.0
        assert torch.allclose(ablated, model(tokens), atol=1e-12)


def test_mean_and_resample_ablation_write_reference_values():
    model = small_model()
    g = torch.Generator().manual_seed(3)
    tokens, reference = torch.randint(0, 3, (4, 16), generator=g), torch.randint(0, 3, (6, 16), generator=g)
    _, ref_cache = model.run_with_cache(reference)
    ref = ref_cache["z", 0][:, :, 1]
    picks = torch.randint(0, 6, (4,), generator=torch.Generator().manual_seed(0))  # what seed 0 draws
    written = {"mean": ref.mean(dim=(0, 1)).expand(4, 16, -1), "resample": ref[picks]}
    for mode, value in written.items():

        def overwrite(z, hook, value=value):
            z = z.clone()
            z[:, :, 1] = value
            return z

        expected = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_z", overwrite)])
        assert torch.equal(run_ablated(model, tokens, [(0, 1)], mode, reference, seed=0), expected), mode
    assert no_hooks_left(model)


def test_odd_even_excess_by_hand():
    # a linear trend is no alternation: w_d = d gives d − ((d − 1) + (d + 1)) / 2 = 0 at every odd d
    assert odd_even_excess([float(d) for d in range(21)]) == 0.0
    # odd distances at 0.07, even at 0.03: each odd one stands 0.04 above its neighbours; 0, 1 and 21 are not read
    alternating = [0.07 if d % 2 else 0.03 for d in range(22)]
    alternating[0] = alternating[1] = alternating[21] = 5.0
    assert odd_even_excess(alternating) == pytest.approx(0.04, abs=1e-15)
    # one odd distance raised by 0.09: the mean over the nine odd distances 3..19 moves by 0.01
    bump = [0.01] * 21
    bump[7] += 0.09
    assert odd_even_excess(bump) == pytest.approx(0.01, abs=1e-15)


def test_alternation_fading_by_hand():
    # odd distances lead by 0.04 up to distance 10 and by 0.01 from 10 on (distance 10 at 0.01 on both sides),
    # on a falling trend that neither measure reads
    profile = [0.0] * 21
    for d in range(2, 21):
        profile[d] = 0.2 - 0.005 * d + ((0.04 if d < 10 else 0.01) if d % 2 else 0.0)
    assert odd_even_excess(profile, range(3, 10, 2)) == pytest.approx(0.04, abs=1e-15)
    assert alternation_fading(profile) == pytest.approx(0.03, abs=1e-15)
    assert alternation_fading([0.05 if d % 2 else 0.01 for d in range(21)]) == pytest.approx(0.0, abs=1e-15)


def test_positional_profile_peaks_where_r_points():
    model = small_model(n_heads=1)
    with torch.no_grad():
        attn = model.blocks[0].attn
        attn.W_rel.zero_()
        attn.W_Q.zero_()
        attn.W_Q[0, :, 0] = 1.0  # q_i = (Σ x_i) e_0 ...
        model.embed.W_E.fill_(1.0)  # ... = d_model · e_0 for every token
        attn.W_rel[0, 1, 0] = 4.0  # only distance 1 scores
    profile = positional_profiles(model, torch.randint(0, 3, (2, 10)), 0)[0]
    score = 8 * 4.0 / 8**0.5  # q·r_1 / sqrt(d_head), d_head = 8
    expected_peak = torch.exp(torch.tensor(score, dtype=torch.float64)) / (
        torch.exp(torch.tensor(score, dtype=torch.float64)) + 19
    )
    assert profile.argmax().item() == 1
    assert profile[1].item() == pytest.approx(expected_peak.item())


def test_behaviour_probes():
    eval_set = MarkovTask(k=3).eval_set(2000, seed=4)
    bigram_logits = eval_set.strategies["bigram"].log()
    result = behaviour(bigram_logits, eval_set)
    assert result.closest_strategy == "bigram"
    assert result.last_token_kl["bigram"] == pytest.approx(0.0, abs=1e-12)
    assert result.per_position_kl["bigram"].abs().max() < 1e-12
    loss = result.per_position_loss  # by hand: positions 90..99 against 1..10, and 99 against 10
    assert result.icl_score == pytest.approx((loss[90:].mean() - loss[1:11].mean()).item(), rel=1e-12)
    assert result.icl_score_single_position == pytest.approx((loss[-1] - loss[10]).item(), rel=1e-12)
    assert result.icl_score < 0  # the bigram strategy learns in context
    uniform = behaviour(torch.zeros_like(bigram_logits), eval_set)
    assert uniform.closest_strategy == "uniform" and abs(uniform.icl_score) < 0.05
    with pytest.raises(ValueError, match="ICL early position 140"):
        icl_score(result.per_position_loss, early=140)


def test_frequencies_that_are_the_bigram_counts_read_as_exactly_the_bigram_strategy():
    """readout="frequencies" adds the task's Dirichlet(α) pseudo-counts to N_t · f_t, as the bigram strategy does
    to its counts: the in-context frequencies themselves (anything where nothing followed x_t yet) give it back."""
    from induction_probes.circuits.constructions.edelman import empirical_bigram

    eval_set = MarkovTask(k=3, alpha=0.5).eval_set(200, seed=3)
    frequencies = empirical_bigram(eval_set.inputs, 3).nan_to_num(1.0 / 3)  # NaN: x_t not followed yet
    assert (frequencies == 0).any()  # zeros that a plain log would make infinite
    result = behaviour(frequencies, eval_set, readout="frequencies")
    assert result.per_position_kl["bigram"].abs().max() < 1e-12 and result.closest_strategy == "bigram"
    assert result.loss == pytest.approx(eval_set.strategy_ce()["bigram"].mean().item(), rel=1e-12)


@pytest.mark.parametrize(
    "outputs,n,message",
    [
        ("logits", 2, "outputs >= 0 that sum to 1"),
        ("nan", 2, "outputs >= 0 that sum to 1"),
        ("frequencies", 3, "bigram frequencies; these are n=3 chains"),
    ],
)
def test_the_frequencies_readout_refuses_what_is_no_bigram_frequency_vector(outputs, n, message):
    eval_set = MarkovTask(k=3, n=n).eval_set(20, seed=0)
    frequencies = eval_set.strategies["unigram"]
    given = {"logits": frequencies.log(), "nan": frequencies * torch.nan, "frequencies": frequencies}[outputs]
    with pytest.raises(ValueError, match=message):
        behaviour(given, eval_set, readout="frequencies")
    with pytest.raises(ValueError, match="unknown readout 'probabilities': use one of logits, frequencies"):
        behaviour(frequencies, eval_set, readout="probabilities")


@pytest.mark.parametrize(
    "text,message",
    [
        ("0.0,2.0", r"layer 2 \(in head 2.0\) is out of range: the model has 2 layers"),
        ("0.5", "head 0.5 is out of range: layer 0 has 2 head"),
        ("a.b", "must look like L.H"),
    ],
)
def test_bad_heads(text, message):
    with pytest.raises(ValueError, match=message):
        parse_heads(text, 2, lambda layer: 2)


def test_unknown_mode():
    with pytest.raises(ValueError, match="unknown ablation mode"):
        run_ablated(small_model(), torch.zeros(1, 4, dtype=torch.long), [(0, 0)], "shuffle")


def test_induction_score_is_1_on_theorem_4_1_and_lower_on_uniform_attention():
    from induction_probes.circuits.constructions.loading import load_construction
    from induction_probes.circuits.constructions.wang import wang_ih2
    from induction_probes.circuits.tasks.gaussian.sequences import sample_sequences
    from induction_probes.probes.attention.patterns import induction_score

    x = sample_sequences(100, 12, 2, generator=torch.Generator().manual_seed(5))
    W = torch.eye(2, dtype=torch.float64)
    _, patterns = run_with_patterns(load_construction(*wang_ih2(2, 30.0, W, 12)), x)
    assert induction_score(patterns[1], x, W).item() == pytest.approx(1.0, abs=1e-9)
    uniform = torch.zeros(100, 1, 12, 12, dtype=torch.float64)
    uniform[:, :, -1, 1:11] = 0.1  # uniform over the right keys s = 2..L−1
    score = induction_score(uniform, x, W).item()
    target = torch.softmax(torch.einsum("bd,bsd->bs", x[:, -1], x[:, 0:10]), -1)
    assert score == pytest.approx((1 - 0.5 * (target - 0.1).abs().sum(-1)).mean().item())
    assert score < 0.9


def test_per_head_probes_report_every_head_of_layers_with_different_head_counts():
    """A trigram model with two first-layer heads and one second-layer head: no head is dropped."""
    from induction_probes.circuits.models.model_classes import build_model
    from induction_probes.circuits.recipes.markov_recipes import MarkovRecipe
    from induction_probes.probes.attention.patterns import run_with_patterns
    from induction_probes.probes.run_level.checkpoint_probes import probe_model

    recipe = MarkovRecipe(task=MarkovTask(k=3, n=3, seq_len=20), heads=(2, 1))
    model = build_model(recipe.model_config()).eval()
    eval_set = recipe.task.eval_set(60, seed=1)
    result = probe_model(model, eval_set, chunk=25)
    assert [len(layer) for layer in result.previous_token] == [2, 1]
    assert [len(layer) for layer in result.bigram_matching] == [2, 1]
    assert result.positional_profile.shape[0] == 2
    _, patterns = run_with_patterns(model, eval_set.inputs)
    for layer, pattern in enumerate(patterns):
        assert torch.allclose(result.previous_token[layer], previous_token_score(pattern), atol=1e-6)
    assert model.all_head_labels() == ["L0H0", "L0H1", "L1H0"]
    assert [len(layer) for layer in result.to_json()["previous_token"]] == [2, 1]


def test_even_sequence_is_the_one_whose_counts_have_the_most_entropy():
    from induction_probes.probes.behaviour.icl_behaviour import even_sequence

    tokens = torch.tensor([[0, 0, 0, 1, 0, 0], [0, 1, 2, 0, 1, 2], [0, 1, 1, 1, 2, 2], [2, 2, 2, 2, 2, 2]])
    assert torch.equal(even_sequence(tokens, n_pos=6), tokens[1])  # two of each of three states

    def entropy(row):  # by hand, over the states that occur
        counts = [row.tolist().count(s) / len(row) for s in set(row.tolist())]
        return -sum(p * math.log(p) for p in counts)

    random = torch.randint(4, (50, 40), generator=torch.Generator().manual_seed(0))
    chosen = even_sequence(random)
    assert any(torch.equal(chosen, row) for row in random)
    assert entropy(chosen[:30]) == pytest.approx(max(entropy(row[:30]) for row in random), abs=1e-12)


def test_the_heaviest_key_is_the_previous_one_for_the_queries_counted_by_hand():
    # argmax per query t >= 1: t=1 -> key 1 (0.7, not 0); t=2 -> 1 = t-1; t=3 -> 2 = t-1; t=4 -> 1 (0.3), not 3
    assert previous_is_heaviest(PATTERN).tolist() == [0.5]


def test_last_token_matching_mass_by_hand_and_only_where_the_last_token_has_a_match():
    # sequence 0: the last token 1 followed key 2's 0 at position 1 (x_1 = 1), so key 2 matches: mass 0.2;
    # sequence 1 ends in a 1 that never occurred before: left out, whatever its pattern says
    tokens = torch.cat([TOKENS, torch.tensor([[0, 0, 0, 0, 1]])])
    other = torch.tril(torch.ones(5, 5)) / torch.arange(1, 6)[:, None]
    pattern = torch.cat([PATTERN, other[None, None]])
    assert last_token_matching_mass(pattern, tokens).item() == pytest.approx(0.2)
    with pytest.raises(ValueError, match="last token"):
        last_token_matching_mass(other[None, None], tokens[1:])
