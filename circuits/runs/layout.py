"""A run directory's layout and its file names, in one place: the writer (:mod:`.writer`), the reader
(:mod:`.reader`), the trainer and the sweep name a run's files through this module.

    <run>/config.json       the task, the recipe (its seeds included), the resolved model config, package version
    <run>/manifest.json     [{step, sequences_seen, file, sha256}], ordered by step
    <run>/metrics.jsonl     one JSON object per evaluation
    <run>/checkpoints/step_00001234.safetensors   model weights only
    <run>/resume/           latest optimiser + RNG state (safetensors + JSON), for exact resume
    <run>/lock              held by the one process that writes the run

Weights are safetensors and everything else is JSON, so opening a run never executes code from it.
"""

from __future__ import annotations

RESUME_FILE = "resume/state.safetensors"
LOCK_FILE = "lock"


def checkpoint_file(step: int) -> str:
    return f"checkpoints/step_{step:08d}.safetensors"
