"""Behaviour probes: per-position loss and KL to the truth and to each strategy, the ICL score, the
closest strategy, and the phases of a run (read from its ``metrics.jsonl`` at no cost)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from jaxtyping import Float, Int
from torch import Tensor

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.models.attention_masks import matching_keys
from induction_probes.circuits.tasks.markov.strategies import MarkovEvalSet, closest_strategy
from induction_probes.probes.intervals import Estimate, mean_interval
from induction_probes.probes.tidy import Tidy, behaviour_records


@dataclass(frozen=True)
class Phase:
    """A stretch of checkpoints over which the model stays closest to one strategy."""

    strategy: str
    first_step: int
    last_step: int
    first_sequences: int
    last_sequences: int


def strategy_phases(metrics: list[dict]) -> list[Phase]:
    """Consecutive checkpoints grouped by their closest strategy, in training order.

    A new phase starts at every checkpoint whose closest strategy differs from the previous one, so
    the phase-transition steps are ``[p.first_step for p in phases[1:]]``.
    """
    phases: list[Phase] = []
    for entry in metrics:
        strategy = closest_strategy(entry["last_token_kl"])
        step, seen = entry["step"], entry["sequences_seen"]
        if phases and phases[-1].strategy == strategy:
            last = phases[-1]
            phases[-1] = Phase(strategy, last.first_step, step, last.first_sequences, seen)
        else:
            phases.append(Phase(strategy, step, step, seen, seen))
    return phases


def plateau_step(phases: list[Phase], steps: list[int]) -> int:
    """The step of ``steps`` nearest the middle of the plateau: the phase the model leaves at its last
    transition (the only phase when there was none). There the circuit is half built, so a figure of
    step 0, this step and the last shows it forming, where a middle index can land after the transition."""
    plateau = phases[-2] if len(phases) > 1 else phases[0]
    middle = (plateau.first_step + plateau.last_step) / 2
    return min(steps, key=lambda step: abs(step - middle))


def illustrative_steps(phases: list[Phase], steps: list[int]) -> list[int]:
    """First, plateau and last of ``steps`` (fewer when they coincide), for figures at a few checkpoints."""
    return sorted({steps[0], plateau_step(phases, steps), steps[-1]})


def log_spread_steps(sequences_by_step: dict[int, int], n: int = 12) -> set[int]:
    """About ``n`` steps evenly spread in log sequences seen, the first and last included (one: the last;
    step 0 has seen none and is left out)."""
    seen = {step: n_seen for step, n_seen in sequences_by_step.items() if n_seen > 0}
    if not seen or n < 1:
        return set()
    low, high = math.log(min(seen.values())), math.log(max(seen.values()))
    grid = [low + (high - low) * i / (n - 1) for i in range(n)] if n > 1 else [high]
    return {min(seen, key=lambda step: abs(math.log(seen[step]) - point)) for point in grid}


def even_sequence(tokens: Int[Tensor, "batch pos"], n_pos: int = 30, candidates: int = 100) -> Int[Tensor, " pos"]:
    """The sequence of the first ``candidates`` whose first ``n_pos`` tokens are spread most evenly over the
    states (the highest entropy of their counts): where one token dominates, nearly every key matches and
    an attention heatmap shows no pattern."""
    share = torch.nn.functional.one_hot(tokens[:candidates, :n_pos]).sum(1).double() / n_pos
    entropy = -(share * share.clamp_min(1e-12).log()).sum(-1)
    return tokens[int(entropy.argmax())]


# --- behaviour of one model on an evaluation set -------------------------------------------------

ICL_EARLY, ICL_LATE = 10, -1  # input positions (0-indexed) compared by the ICL score
ICL_WINDOW = 10  # positions averaged at each end by the windowed ICL score


@dataclass(frozen=True)
class Behaviour(Tidy):
    """How a model predicts on an ICL-MC evaluation set, position by position.

    ``per_position_kl[s][t]`` is KL(s ‖ model) at input position t, averaged over sequences, for s =
    "true" (the sequence's own chain) and each strategy. ``icl_score`` is the windowed ICL score
    (:func:`icl_score`: the mean loss over the ``window`` positions ending at ``late`` minus that over
    the ``window`` positions ending at ``early``), ``icl_score_single_position`` Olsson et al.'s loss at
    ``late`` minus loss at ``early``; both negative when the model uses its context. ``intervals`` holds
    each behavioural score as an :class:`~induction_probes.probes.intervals.Estimate` over the evaluation
    sequences: "loss", "icl_score", "icl_score_single_position" and "last_token_kl.<s>". Use
    ``last_token_kl["true"]`` to compare with the paper's test loss and ``closest_strategy`` to place a
    model in a phase.
    """

    loss: float
    per_position_loss: Tensor
    per_position_kl: dict[str, Tensor]
    last_token_kl: dict[str, float]
    icl_score: float
    closest_strategy: str
    icl_score_single_position: float
    intervals: dict[str, Estimate]
    # the values the intervals are over, one per evaluation sequence: what a paired comparison (an ablation's
    # effect on the same sequences) reads
    per_sequence: dict[str, Tensor] = field(default_factory=dict, compare=False, repr=False)

    def to_records(self, sequences_seen: int | None = None, step: int | None = None) -> list[dict[str, Any]]:
        return behaviour_records(self, step, sequences_seen)


def icl_positions(n_pos: int, early: int, late: int, window: int = 1) -> tuple[int, int]:
    """``early`` and ``late`` as positions in 0..n_pos − 1, each with ``window`` positions ending there."""
    if not isinstance(window, int) or window < 1:
        raise BadInput(f"ICL window must be a positive integer, got {window!r}")
    resolved = []
    for name, position in (("early", early), ("late", late)):
        if not -n_pos <= position < n_pos:
            raise BadInput(f"ICL {name} position {position} is outside 0..{n_pos - 1}")
        position %= n_pos
        if position - window + 1 < 0:
            raise BadInput(f"an ICL window of {window} positions ending at {name} position {position} starts before 0")
        resolved.append(position)
    return resolved[0], resolved[1]


def icl_scores(
    loss: Float[Tensor, "... pos"], early: int = ICL_EARLY, late: int = ICL_LATE, window: int = ICL_WINDOW
) -> Float[Tensor, ...]:
    """The windowed ICL score of each row of ``loss`` (per sequence, or already averaged): the mean over
    positions late − window + 1..late minus the mean over early − window + 1..early (window 1: the
    single-position score)."""
    first, last = icl_positions(loss.shape[-1], early, late, window)
    return loss[..., last - window + 1 : last + 1].mean(-1) - loss[..., first - window + 1 : first + 1].mean(-1)


def icl_score(
    per_position_loss: Float[Tensor, " pos"], early: int = ICL_EARLY, late: int = ICL_LATE, window: int = ICL_WINDOW
) -> float:
    """The windowed ICL score of a per-position loss curve (:func:`icl_scores`). Averaging ``window``
    positions at each end makes it steadier from one evaluation set to the next than
    :func:`single_position_icl_score`, whose two positions each carry one sampled token per sequence."""
    return icl_scores(per_position_loss, early, late, window).item()


def single_position_icl_score(per_position_loss: Tensor, early: int = ICL_EARLY, late: int = ICL_LATE) -> float:
    """Olsson et al.'s in-context learning score: loss at position ``late`` minus loss at ``early``
    (0-indexed input positions)."""
    return icl_scores(per_position_loss, early, late, window=1).item()


READOUTS = ("logits", "frequencies")
FREQUENCY_TOLERANCE = 1e-4  # how far a frequency vector may miss the simplex: float32 rounding, not a model


def frequency_log_probs(
    frequencies: Float[Tensor, "batch pos k"], eval_set: MarkovEvalSet
) -> Float[Tensor, "batch pos k"]:
    """Log-probabilities from an output that is a vector of in-context bigram frequencies, as Proposition 2.1's
    is (it tends to c(x_t → b) / N_t, the share of the N_t transitions out of x_t in x_0..x_t that went to b).

    A frequency is 0 for every state not yet seen after x_t (5.7 % of the targets on 500 sequences of
    ``markov-k3``'s probe set, seed 12345), so it cannot be scored as it is. It is smoothed as Edelman et al.'s
    bigram strategy turns its counts into a prediction, with the task's Dirichlet(α) pseudo-counts:
    q_t(b) = (N_t · f_t(b) + α) / (N_t + kα). N_t · f_t(b) are the counts the output stands for, so an output
    equal to the frequencies reads as exactly the bigram strategy (uniform where N_t = 0, as the strategy), and
    what is compared is what the model counts, not the prior it lacks. A fixed mixture with the uniform
    distribution cannot do that, since the smoothing needed shrinks as 1 / N_t: on those sequences
    (1 − ε) f + ε/k scores 1.065 nats at ε = 0.01 and 0.917 at ε = 0.2, pseudo-counts 0.886, the bigram
    strategy 0.885.
    """
    if eval_set.sample.n != 2:
        raise BadInput(
            f"readout 'frequencies' reads in-context bigram frequencies; these are n={eval_set.sample.n} chains"
        )
    f = frequencies.double()
    on_simplex = (f >= -FREQUENCY_TOLERANCE).all() and ((f.sum(-1) - 1).abs() <= FREQUENCY_TOLERANCE).all()
    if not on_simplex:  # a NaN fails too
        raise BadInput("readout 'frequencies' needs outputs >= 0 that sum to 1 at every position (not logits)")
    n_seen = matching_keys(eval_set.inputs).sum(-1, keepdim=True).to(f)  # N_t, as the bigram strategy counts
    k, alpha = f.shape[-1], eval_set.alpha
    return ((n_seen * f.clamp_min(0.0) + alpha) / (n_seen + k * alpha)).log()


def behaviour(
    outputs: Tensor,
    eval_set: MarkovEvalSet,
    early: int = ICL_EARLY,
    late: int = ICL_LATE,
    window: int = ICL_WINDOW,
    readout: Literal["logits", "frequencies"] = "logits",
) -> Behaviour:
    """Every behaviour probe from one forward pass's outputs on ``eval_set.sample.inputs``, each with its
    interval over the evaluation sequences. On sequences too short for the early position, the ICL scores
    compare the middle position instead, with a window that fits before it, so that a short run is probed,
    not refused.

    ``readout`` says what the outputs are: ``"logits"`` (a trained model's), or ``"frequencies"`` for a model
    whose output is a vector of in-context bigram frequencies, as Proposition 2.1's construction is
    (:func:`frequency_log_probs`: smoothed with the task's pseudo-counts, as the bigram strategy is). Read as
    logits, such an output is scored as softmax(f), which is nearly uniform.
    """
    if readout not in READOUTS:
        raise BadInput(f"unknown readout {readout!r}: use one of {', '.join(READOUTS)}")
    logits = frequency_log_probs(outputs, eval_set) if readout == "frequencies" else outputs
    loss, kl = eval_set.per_position(logits, per_sequence=True)  # [batch, pos] each
    if early >= 0 and early >= loss.shape[-1] // 2:
        early = loss.shape[-1] // 2
        window = min(window, early + 1)
    per_sequence = {
        "loss": loss.mean(-1),
        "icl_score": icl_scores(loss, early, late, window),
        "icl_score_single_position": icl_scores(loss, early, late, 1),
    }
    per_sequence |= {f"last_token_kl.{name}": values[:, -1] for name, values in kl.items()}
    intervals = {name: mean_interval(values) for name, values in per_sequence.items()}
    last = {name: intervals[f"last_token_kl.{name}"].value for name in kl}
    return Behaviour(
        loss=intervals["loss"].value,
        per_position_loss=loss.mean(0),
        per_position_kl={name: values.mean(0) for name, values in kl.items()},
        last_token_kl=last,
        icl_score=intervals["icl_score"].value,
        closest_strategy=closest_strategy(last),
        icl_score_single_position=intervals["icl_score_single_position"].value,
        intervals=intervals,
        per_sequence=per_sequence,
    )
