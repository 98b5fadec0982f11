"""Where a model runs: a device's check, where a model's weights are, and the deterministic settings of each
kind of device.

A device is named as torch names it (``cpu``, ``cuda``, ``cuda:1``, ``mps``). One this machine lacks is
refused in one line (:class:`DeviceError`, a ValueError) before anything is computed or written. Runs
record the device's kind (``cpu``, ``cuda``), not its index: the same cell of a sweep gives the same
``config.json`` on whichever GPU it landed.

The option itself and the refusal are in :mod:`~induction_probes.circuits.device_options`, which the command line
reads while it parses, without torch.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator
from typing import Protocol, TypeVar, cast

import torch
from torch import nn

from induction_probes.circuits.device_options import DEFAULT_DEVICE, DeviceError
from induction_probes.circuits.validation import quoted

# cuBLAS is deterministic only with a fixed workspace; torch reads this when CUDA starts, so it is set
# before any CUDA call (torch's "Reproducibility" notes).
CUBLAS_WORKSPACE = ":4096:8"

# Where a computation runs, as every function that takes a ``device`` accepts it: a name ("cpu", "cuda:1",
# "auto"), a torch.device, or None for the default (:func:`resolve_device`).
Device = str | torch.device | None


def parse_device(name: Device) -> torch.device:
    """The torch device named ``name`` (None: cpu), of a kind this tool runs on, whether or not this
    machine has it (a Ray cluster's nodes may, where its driver does not)."""
    if name is None:
        return torch.device(DEFAULT_DEVICE)
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise DeviceError(f"{quoted(name)} is not a device (use cpu, cuda, cuda:N or mps)") from None
    if device.type not in ("cpu", "cuda", "mps"):
        raise DeviceError(f"device {name}: only cpu, cuda and mps are supported")
    return device


def resolve_device(name: Device) -> torch.device:
    """The torch device named ``name`` (None: cpu), checked to exist on this machine; on CUDA, with
    deterministic algorithms switched on (:func:`use_deterministic`)."""
    device = parse_device(name)
    if device.type == "cuda":
        use_deterministic()  # before the first CUDA call below initialises CUDA
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise DeviceError(f"device {name}: this machine has no CUDA GPU (use --device cpu)")
        if device.index is not None and device.index >= count:
            raise DeviceError(f"device {name}: this machine has {count} CUDA GPU(s), cuda:0 to cuda:{count - 1}")
    elif device.type == "mps" and not torch.backends.mps.is_available():
        raise DeviceError(f"device {name}: this machine has no MPS (Apple GPU) device")
    return device


def use_deterministic() -> None:
    """Deterministic algorithms wherever torch has them (``warn_only``: the few ops without one warn
    instead of failing), and cuBLAS's fixed workspace. On CPU nothing changes: its kernels already give
    the same bits for the same inputs on the same machine."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False


def device_kind(device: torch.device | str) -> str:
    """What a run records: ``cuda`` for ``cuda:3``, ``cpu`` for ``cpu``."""
    return torch.device(device).type


def visible_gpus() -> int:
    """CUDA GPUs this process can use (0 without CUDA)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


class Weighted(Protocol):
    """Anything with parameters: an ``nn.Module``, or a :class:`~induction_probes.circuits.models.hooked_model.
    HookedModel` (which declares them)."""

    def parameters(self, recurse: bool = True) -> Iterator[nn.Parameter]: ...


Model = TypeVar("Model", bound=Weighted)


def model_device(model: Weighted) -> torch.device:
    """Where a model's weights are (cpu for a model without parameters)."""
    first = next(model.parameters(), None)
    return torch.device("cpu") if first is None else first.device


def on_cpu(model: Model) -> Model:
    """The model itself if it is on the CPU, else a CPU copy (the same class): for probes that read the weights
    alone."""
    if model_device(model).type == "cpu":
        return model
    copied = copy.deepcopy(model)
    cast("nn.Module", copied).cpu()  # every model here is an nn.Module underneath, which moves in place
    return copied
