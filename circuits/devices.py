"""Where a model runs: the ``--device`` option of every command that runs one, its check, and the
deterministic settings of each kind of device.

A device is named as torch names it (``cpu``, ``cuda``, ``cuda:1``, ``mps``). One this machine lacks is
refused in one line (:class:`DeviceError`, a ValueError) before anything is computed or written. Runs
record the device's kind (``cpu``, ``cuda``), not its index: the same cell of a sweep gives the same
``config.json`` on whichever GPU it landed.

Like the configs, this module imports torch only inside its functions: the command line parses without it.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from induction_probes.circuits.config import Config, option
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.lazy import lazy_module
from induction_probes.circuits.validation import quoted

# the command line checks --device while it parses: torch loads when a device is first used
torch = lazy_module("torch")

if TYPE_CHECKING:
    from torch import nn

if TYPE_CHECKING:
    import torch

DEFAULT_DEVICE = "cpu"
# cuBLAS is deterministic only with a fixed workspace; torch reads this when CUDA starts, so it is set
# before any CUDA call (torch's "Reproducibility" notes).
CUBLAS_WORKSPACE = ":4096:8"


class DeviceError(BadInput):
    """A device this machine does not have, or a name torch does not know."""


@dataclass(frozen=True)
class DeviceOptions(Config):
    """The ``--device`` option, generated like every other option from its field."""

    device: str = option(DEFAULT_DEVICE, "where the model runs: cpu, cuda, cuda:N or mps")

    name = "device"


def parse_device(name: str | torch.device | None) -> torch.device:
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


def resolve_device(name: str | torch.device | None) -> torch.device:
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


def model_device(model: nn.Module) -> torch.device:
    """Where a model's weights are (cpu for a model without parameters)."""
    first = next(model.parameters(), None)
    return torch.device("cpu") if first is None else first.device


def on_cpu(model: nn.Module):
    """The model itself if it is on the CPU, else a CPU copy: for probes that read the weights alone."""
    return model if model_device(model).type == "cpu" else copy.deepcopy(model).cpu()
