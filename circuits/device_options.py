"""The ``--device`` option of every command that runs a model, and the refusal of a device this machine lacks.

Torch-free, unlike :mod:`~induction_probes.circuits.devices` (which checks and uses a device): the command line
builds the option from this config while it parses."""

from __future__ import annotations

from dataclasses import dataclass

from induction_probes.circuits.config import Config, option
from induction_probes.circuits.errors import BadInput

DEFAULT_DEVICE = "cpu"


class DeviceError(BadInput):
    """A device this machine does not have, or a name torch does not know."""


@dataclass(frozen=True)
class DeviceOptions(Config):
    """The ``--device`` option, generated like every other option from its field."""

    device: str = option(DEFAULT_DEVICE, "where the model runs: cpu, cuda, cuda:N or mps")

    name = "device"
