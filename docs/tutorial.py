# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Tutorial: an induction head, from a shipped run to Proposition 2.1
#
# `markov-k3` is a two-layer attention-only transformer trained on ICL-MC with k = 3 states
# (Edelman et al. 2024): every sequence comes from its own Markov chain, so the model can only predict
# well by reading the chain's transitions from the context. This notebook loads it, watches its phases,
# probes its two heads, ablates them, patches them with TransformerLens, and compares the trained model
# with the paper's hand-made construction (Proposition 2.1). It runs on a CPU in well under a minute.
#
# The notebook is kept as `docs/tutorial.py` (a jupytext percent script); `docs/tutorial.ipynb` is
# generated from it without outputs, and the test suite executes it.

# %%
# %matplotlib inline
import matplotlib.pyplot as plt
import torch

from induction_probes import Run

torch.set_num_threads(1)
run = Run.open("markov-k3")
print(run.task, "|", len(run.steps), "checkpoints, steps", run.steps[0], "to", run.steps[-1])

# %% [markdown]
# ## The phases of training
#
# `metrics.jsonl` holds, at every checkpoint, the last-token KL from each in-context strategy to the
# model on 2,000 evaluation sequences. The closest strategy moves from uniform to unigram (token
# frequencies) to bigram (transition frequencies: the statistical induction head's target).

# %%
metrics = run.metrics()
seen = [max(m["sequences_seen"], 1) for m in metrics]
fig, ax = plt.subplots(figsize=(7, 3.5))
for strategy in ("uniform", "unigram", "bigram"):
    ax.plot(seen, [m["last_token_kl"][strategy] for m in metrics], label=f"KL({strategy} ‖ model)")
ax.plot(seen, [m["last_token_kl"]["true"] for m in metrics], "k--", label="KL(true ‖ model)")
ax.set(
    xscale="log",
    xlabel="training sequences seen",
    ylabel="last-token KL (nats)",
    title="markov-k3: the closest strategy changes twice",
)
ax.legend()
plt.show()

# %% [markdown]
# The same phases in one call each: `phases` groups the checkpoints by their closest strategy, and
# `transition` is the first step of the last phase (its definition is in its docstring).

# %%
from induction_probes import first_crossings, phases, transition

for phase in phases(run):
    print(f"{phase.strategy:8s} steps {phase.first_step}-{phase.last_step}")
change = transition(run)
print("transition:", change)
assert [p.strategy for p in phases(run)][-1] == "bigram"

# %% [markdown]
# ## Probing the heads
#
# Layer 0 should become a previous-token head and layer 1 a bigram-matching head: for query i it
# attends to keys j whose previous token x_{j-1} equals x_i. The probes read `hook_pattern` only.

# %%
from induction_probes import probe_eval_set, probe_model, probe_run

eval_set = probe_eval_set(run, n_seqs=200, seed=0)
model = run.load(index=-1)
final = probe_model(model, eval_set, step=run.steps[-1])
print("layer 0 previous-token score", round(final.previous_token[0][0].item(), 3))
print("layer 1 bigram-matching mass", round(final.bigram_matching[1][0].item(), 3))
print("closest strategy", final.behaviour.closest_strategy)
assert final.behaviour.closest_strategy == "bigram"

# %% [markdown]
# The attention patterns of one sequence show both heads at work (the first 30 positions).

# %%
tokens = eval_set.sample.inputs[:1]
_, cache = model.run_with_cache(tokens)
fig, axes = plt.subplots(1, 2, figsize=(8, 3.8))
for layer, ax in enumerate(axes):
    ax.imshow(cache["pattern", layer][0, 0, :30, :30].detach(), cmap="Blues")
    ax.set(title=f"layer {layer}", xlabel="key position", ylabel="query position")
plt.show()

# %% [markdown]
# Over training: both heads form within a few hundred steps of the transition, so checkpoints spread over
# the whole run show them jumping together. Probed on every checkpoint from five before the transition to
# five after, layer 1's bigram matching crosses its threshold (halfway from uniform attention to 1) before
# layer 0's previous-token score crosses its own. `first_crossings` gives, per head and measure, the first
# probed step from which it stays at or past its threshold.

# %%
at = run.steps.index(change.step)
steps = run.steps[max(at - 5, 0) : at + 6]  # around the transition, computed from the run
print("probed steps", steps)
over_training = probe_run(run, eval_set, steps)
table = over_training.to_frame()  # long form: step, sequences_seen, layer, head, measure, value, low, high
crossings = first_crossings(over_training)
crossed = {}
fig, ax = plt.subplots(figsize=(7, 3.5))
for measure, layer, color in (("bigram_matching", 1, "C1"), ("previous_token", 0, "C0")):
    rows = table[(table.measure == measure) & (table.layer == layer)]
    first = crossings[(crossings.measure == measure) & (crossings.layer == layer)].iloc[0]
    crossed[measure] = int(first.step)
    ax.plot(rows.step, rows.value, "o-", color=color, label=f"layer {layer} {measure}: past at step {first.step}")
    ax.axhline(first.threshold, color=color, linestyle="--", linewidth=0.8)  # its threshold
    ax.axvline(first.step, color=color, linestyle=":", linewidth=1.2)  # its first probed step past it
ax.axvline(change.step, color="grey", linewidth=3, alpha=0.3, label=f"transition to bigram, step {change.step}")
ax.set(xlabel="training step", ylabel="score (dashed: threshold)", title="layer 1 matches before layer 0 is a previous-token head")
ax.legend(fontsize=8)
plt.show()
print(
    f"first past the threshold: layer 1 bigram_matching at step {crossed['bigram_matching']}, "
    f"layer 0 previous_token at step {crossed['previous_token']}"
)
assert steps[0] < crossed["bigram_matching"] < crossed["previous_token"]  # the order the text claims, shown

# %% [markdown]
# The same heads, interactively: a run's probes show CircuitsVis's attention explorer in a notebook, offline
# (its JavaScript is inlined; nothing is fetched). Hover or click a head to enlarge its pattern, hover a token
# to see where it looks. `over_training.attention(step)` gives another step's, and `induction-probes movie
# markov-k3 --out DIR` puts the explorer on a slider over training (see docs/views.md).

# %%
over_training  # the explorer: every head at the last probed step, on one probe sequence

# %% [markdown]
# Every measure's first crossing on these checkpoints: the progress measures read from the weights (halfway
# from chance to Proposition 2.1) and the attention probes. A measure already past its threshold at the first
# probed step shows that step; probe every checkpoint (`steps=run.steps`) for the exact one.

# %%
print(crossings[["measure", "layer", "head", "threshold", "step"]].round(3).to_string(index=False))
for caveat in crossings.caveat.dropna():
    print("caveat:", caveat)

# %% [markdown]
# ## Ablating the heads
#
# Zero-ablating a head's output (`hook_z`) shows what it carries: without layer 0 the model falls back
# to the unigram strategy, without layer 1 towards uniform.

# %%
from induction_probes import ablation_study, single_heads

reference = probe_eval_set(run, n_seqs=200, seed=1).inputs
baseline, ablated = ablation_study(model, eval_set, single_heads(model), "zero", reference)
names = ["none"] + [f"L{a.heads[0][0]}H{a.heads[0][1]}" for a in ablated]
kls = [baseline.last_token_kl["true"]] + [a.behaviour.last_token_kl["true"] for a in ablated]
for name, result in zip(names[1:], ablated):
    print(f"{name} zeroed: closest strategy {result.behaviour.closest_strategy}")
assert [a.behaviour.closest_strategy for a in ablated] == ["unigram", "uniform"]
fig, ax = plt.subplots(figsize=(5, 3))
ax.bar(names, kls)
ax.set(ylabel="last-token KL(true ‖ model)", title="zero ablation of each head")
plt.show()

# %% [markdown]
# ## Patching with TransformerLens
#
# TransformerLens's own activation patching runs on our model. Two sequences that end in the same token
# but get different answers: patching each head's output from the clean run into the corrupted one
# shows which head carries the in-context evidence.

# %%
from transformer_lens import patching

sequences = eval_set.sample.inputs[:40]
predicted = model(sequences)[:, -1].argmax(-1)
i, j = next(
    (i, j)
    for i in range(40)
    for j in range(40)
    if sequences[i, -1] == sequences[j, -1] and predicted[i] != predicted[j]
)
clean, corrupted = sequences[i : i + 1], sequences[j : j + 1]
answer, wrong = predicted[i], predicted[j]


def logit_diff(logits):
    return logits[0, -1, answer] - logits[0, -1, wrong]


_, clean_cache = model.run_with_cache(clean)
patched = patching.get_act_patch_attn_head_out_all_pos(model, corrupted, clean_cache, logit_diff)
print(
    "logit difference: clean",
    round(logit_diff(model(clean)).item(), 3),
    "corrupted",
    round(logit_diff(model(corrupted)).item(), 3),
)
for layer in range(2):
    print(f"patching L{layer}H0 from clean: {patched[layer, 0].item():.3f}")
assert logit_diff(model(corrupted)) < 0 < patched[1, 0]  # layer 1's head alone flips the answer back

# %% [markdown]
# ## Against Proposition 2.1
#
# Edelman et al.'s construction solves the task by hand: d_model = 3k in blocks [current token |
# previous token | output], a previous-token layer and a matching layer at scale c. At c = 100 its
# logits equal the exact c → ∞ limit to float rounding; the trained model is compared with it in terms
# that do not depend on the trained model's basis.

# %%
from induction_probes import behaviour, compare_with_prop21, load_construction, prop21, prop21_limit

construction = load_construction(*prop21(k=3, c=100.0, n_ctx=100))
limit_error = (construction(tokens) - prop21_limit(tokens, k=3)).abs().max().item()
print(f"construction vs its exact limit: max |error| {limit_error:.1e}")
assert limit_error < 1e-8  # float64 rounding at c = 100 (verify prop21 prints 1.36e-10 on 1,000 sequences)
versus = compare_with_prop21(model, eval_set.sample.inputs[:100], k=3)
print("attention TV to the construction per layer", [round(tv, 2) for tv in versus.attention_tv])
print("layer 1 OV top-1 diagonal accuracy", versus.ov_top1_diagonal)
print("the trained model has the construction's signatures:", versus.matches, versus.failures)
fig, axes = plt.subplots(1, 2, figsize=(8, 3.5))
pairs = zip(axes, (versus.token_matching, versus.token_matching_analytic), ("trained", "Proposition 2.1"))
for ax, matrix, title in pairs:
    ax.imshow(matrix.detach(), cmap="Blues")
    ax.set(title=f"layer 1 token matching: {title}", xlabel="key's previous token b", ylabel="query token a")
plt.show()
