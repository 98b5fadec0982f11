"""When things happen in a run of a task sweep (:mod:`induction_probes.probes.sweeps.task_summary`): the step at
which each curve settles past half its change, the plateau of the loss at the bigram predictor's level, and the
paired tests over seeds of what comes first.

Definitions (steps are checkpoint steps):

- **half-way step** of a curve v_0 … v_T: the first checkpoint from which on v stays past half its change in the
  direction of that change, (v_t − v_0)·sign(v_T − v_0) ≥ |v_T − v_0| / 2. A curve that swings the other way
  first (the text task's in-context score rises on the plateau, then falls) is not counted half-way on the
  swing, as |v_t − v_0| ≥ |v_T − v_0| / 2 would count it.
- **plateau** of the loss at the bigram predictor's loss b (for a task with baselines): ``arrival``, the first
  step with loss ≤ b + :data:`NEAR`; ``escape``, the first step from which on the loss stays ≤ b − NEAR;
  ``length`` = escape − arrival. None where the loss never settles below b − NEAR.
- **tests** over seeds (paired t and Wilcoxon): ``attention_minus_positions``, the earliest half-way step of the
  attention maps' distance from their start (W_Q, W_K of any layer) minus the positions' (W_pos, W_rel or the
  ALiBi slopes; Wang et al.: positions first); ``escape_minus_last_keys``, the plateau's escape minus the half-way
  step of the last layer's W_K (Wang et al.: the loss escapes when W_K and W_Q grow).
"""

from __future__ import annotations

from induction_probes.probes.sweeps.statistics import paired_comparison

CURVE_AXES = ("steps", "sequences_seen")  # what a record's curves hold besides its metrics
PLATEAU_BASELINE = "bigram"
NEAR = 0.05  # nats: about 2 % of the text's bigram loss (2.54): within it, the loss is at the bigram level


def settled_halfway(steps: list[int], values: list[float]) -> int:
    """The half-way step of the module docstring (the last step at least qualifies)."""
    change = values[-1] - values[0]
    past = [(v - values[0]) * (1 if change >= 0 else -1) >= abs(change) / 2 for v in values]
    index = len(past) - 1
    while index > 0 and past[index - 1]:
        index -= 1
    return steps[index]


def reached_steps(curves: dict, weights: dict) -> dict[str, int]:
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
    escape = steps[index] if index < len(steps) else None
    length = None if arrival is None or escape is None else escape - arrival
    return {"arrival": arrival, "escape": escape, "length": length}


def layer_of(name: str) -> int:
    return int(name.rsplit("layer", 1)[1])


def order_tests(records: list[dict]) -> dict:
    """The paired tests of the module docstring, from the per-seed ``reached`` steps and plateaus."""
    reached = [r["reached"] for r in records]
    positions = [name for name in reached[0] if name.startswith(("moved.W_pos", "moved.W_rel", "moved.alibi"))]
    maps = [name for name in reached[0] if name.startswith(("moved.W_Q", "moved.W_K"))]
    tests = {}
    if positions and maps:
        first_position = [min(r[name] for name in positions) for r in reached]
        first_map = [min(r[name] for name in maps) for r in reached]
        tests["attention_minus_positions"] = paired_comparison(first_position, first_map, bounded=False) | {
            "n_positions_first": sum(p < m for p, m in zip(first_position, first_map))
        }
    keys = [name for name in maps if name.startswith("moved.W_K")]
    escaped = [r for r in records if r.get("plateau", {}).get("escape") is not None]
    if keys and escaped:
        last_keys = max(keys, key=layer_of)
        tests["escape_minus_last_keys"] = paired_comparison(
            [r["reached"][last_keys] for r in escaped], [r["plateau"]["escape"] for r in escaped], bounded=False
        ) | {"keys": last_keys, "n_escaped": len(escaped)}
    return tests
