"""When things happen in a run of a task sweep (:mod:`induction_probes.probes.sweeps.task_summary`): the step at
which each curve settles past half its change, the plateau of the loss at the bigram predictor's level, and the
paired tests over seeds of what comes first.

Definitions (steps are checkpoint steps):

- **half-way step** of a curve v_0 … v_T: the first checkpoint from which on v stays past half its change in the
  direction of that change, (v_t − v_0)·sign(v_T − v_0) ≥ |v_T − v_0| / 2. A curve that swings the other way
  first (the text task's in-context score rises on the plateau, then falls) is not counted half-way on the
  swing, as |v_t − v_0| ≥ |v_T − v_0| / 2 would count it. None where the net change is below :data:`FLAT` of
  the curve's range (a flat curve, or one that swings out and comes back: its half-way step would time noise).
- **plateau** of the loss at the bigram predictor's loss b (for a task with baselines): ``arrival``, the first
  step with loss ≤ b + :data:`NEAR`; ``escape``, the first step from which on the loss stays ≤ b − NEAR;
  ``length`` = escape − arrival. None where the loss never settles below b − NEAR (settled: from a checkpoint
  before the last one on).
- **tests** over seeds (paired t and Wilcoxon): ``attention_minus_positions``, the earliest half-way step of the
  attention maps' distance from their start (W_Q, W_K of any layer) minus the positions' (W_pos, W_rel or the
  ALiBi slopes; Wang et al.: positions first); ``escape_minus_last_keys``, the plateau's escape minus the half-way
  step of the last layer's W_K (Wang et al.: the loss escapes when W_K and W_Q grow).
"""

from __future__ import annotations

from induction_probes.probes.sweeps.condition_tests import paired_comparison

CURVE_AXES = ("steps", "sequences_seen")  # what a record's curves hold besides its metrics
PLATEAU_BASELINE = "bigram"
NEAR = 0.05  # nats: about 2 % of the text's bigram loss (2.54): within it, the loss is at the bigram level
FLAT = 0.1  # a curve whose net change is below this share of its range has no half-way step


def settled_halfway(steps: list[int], values: list[float]) -> int | None:
    """The half-way step of the module docstring; None for a curve whose net change is below :data:`FLAT` of its
    range (its half-way step would time noise: a flat curve, or one that swings out and comes back)."""
    change = values[-1] - values[0]
    if abs(change) <= FLAT * (max(values) - min(values)) or change == 0:
        return None
    past = [(v - values[0]) * (1 if change > 0 else -1) >= abs(change) / 2 for v in values]
    index = len(past) - 1
    while index > 0 and past[index - 1]:
        index -= 1
    return steps[index]


def reached_steps(curves: dict, weights: dict) -> dict[str, int | None]:
    """Per metric, and per tracked weight's distance from its start (``moved.NAME``), its half-way step."""
    steps = curves["steps"]
    reached = {name: settled_halfway(steps, values) for name, values in curves.items() if name not in CURVE_AXES}
    moved = weights["moved"].items()
    return reached | {f"moved.{name}": settled_halfway(weights["steps"], values) for name, values in moved}


def plateau(steps: list[int], losses: list[float], level: float) -> dict:
    """The plateau of ``losses`` at ``level`` (the module docstring's arrival, escape and length)."""
    arrival = next((step for step, loss in zip(steps, losses) if loss <= level + NEAR), None)
    below = [loss <= level - NEAR for loss in losses]
    index = len(below)
    while index > 0 and below[index - 1]:
        index -= 1
    escape = steps[index] if index < len(steps) - 1 else None  # settled: at least the last two checkpoints
    length = None if arrival is None or escape is None else escape - arrival
    return {"arrival": arrival, "escape": escape, "length": length}


def layer_of(name: str) -> int:
    return int(name.rsplit("layer", 1)[1])


def earliest(reached: dict, names: list[str]) -> int | None:
    steps = [reached[name] for name in names if reached[name] is not None]
    return min(steps) if steps else None


def paired_steps(records: list[dict], first, second) -> tuple[list[float], list[float]]:
    """``first(record)`` and ``second(record)`` of every seed that has both."""
    pairs = [(first(r), second(r)) for r in records]
    kept = [(a, b) for a, b in pairs if a is not None and b is not None]
    return [a for a, _ in kept], [b for _, b in kept]


def order_tests(records: list[dict]) -> dict:
    """The paired tests of the module docstring, from the per-seed ``reached`` steps and plateaus (each over the
    seeds that have both of its steps)."""
    names = list(records[0]["reached"])
    positions = [name for name in names if name.startswith(("moved.W_pos", "moved.W_rel", "moved.alibi"))]
    maps = [name for name in names if name.startswith(("moved.W_Q", "moved.W_K"))]
    tests = {}
    if positions and maps:
        first, then = paired_steps(
            records, lambda r: earliest(r["reached"], positions), lambda r: earliest(r["reached"], maps)
        )
        tests["attention_minus_positions"] = paired_comparison(first, then, bounded=False) | {
            "n_positions_first": sum(p < m for p, m in zip(first, then))
        }
    keys = [name for name in maps if name.startswith("moved.W_K")]
    if keys and "plateau" in records[0]:
        last_keys = max(keys, key=layer_of)
        grown, escaped = paired_steps(records, lambda r: r["reached"][last_keys], lambda r: r["plateau"]["escape"])
        tests["escape_minus_last_keys"] = paired_comparison(grown, escaped, bounded=False) | {
            "keys": last_keys,
            "n_escaped": len(escaped),
        }
    return tests
