"""Run directories: save and load checkpoints without pickle.

    <run>/config.json       the task, the recipe (its seeds included), the resolved model config, package version
    <run>/manifest.json     [{step, sequences_seen, file, sha256}], ordered by step
    <run>/metrics.jsonl     one JSON object per evaluation
    <run>/checkpoints/step_00001234.safetensors   model weights only
    <run>/resume/           latest optimiser + RNG state (safetensors + JSON), for exact resume

Weights are safetensors and everything else is JSON, so opening a run never executes code from it.
Every file is written whole to a new temporary file with an unpredictable name, fsync'ed and renamed into
place: a crash leaves either the old file or the new one, the manifest only ever lists checkpoints that
were completely written, and a symbolic link planted in the run directory is never written through.
"""

from __future__ import annotations


def checkpoint_file(step: int) -> str:
    return f"checkpoints/step_{step:08d}.safetensors"
