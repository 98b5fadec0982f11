"""What ``probe``, ``ablate`` and ``report`` show for a task's runs: a :class:`TaskView` of four functions, given
to :func:`~induction_probes.probes.report.task_registration.register_task`, which resolves it once (a
:class:`ResolvedView`) into :mod:`.run_views`' table of views.

A view's functions take their settings bundled: the fresh sequences to probe on (:class:`ProbeSet`) and how to
answer (:class:`Output`). Each returns its text (with a ``figure: PATH`` line per figure written into the
output's ``plot`` folder), or with ``as_json`` a JSON-ready dict (:data:`Shown`)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from induction_probes.circuits.defaults import PROBE_SEED, PROBE_SEQS
from induction_probes.circuits.devices import Device
from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.registry import Expects, imported, is_reference
from induction_probes.circuits.validation import quoted

if TYPE_CHECKING:
    from induction_probes.circuits.models.hooked_model import HookedModel
    from induction_probes.circuits.runs.reader import Run

Shown = str | dict[str, Any]  # a view's answer: the command's text, or with as_json its JSON-ready dict


@dataclass(frozen=True)
class ProbeSet:
    """The fresh sequences a view probes on: ``n_seqs`` of the run's task, drawn with ``seed``."""

    n_seqs: int = PROBE_SEQS
    seed: int = PROBE_SEED


@dataclass(frozen=True)
class Output:
    """How a view answers: the device its models run on, the folder its figures go into (None: no figures),
    and whether it answers in JSON."""

    device: Device = None
    plot: Path | None = None
    as_json: bool = False


class ProbeView(Protocol):
    """What ``probe`` shows: the probes of ``steps`` on the fresh sequences of ``probes``."""

    def __call__(self, run: Run, steps: list[int], probes: ProbeSet, output: Output, /) -> Shown: ...


class AblateView(Protocol):
    """What ``ablate`` shows: ``model`` (the run's checkpoint at ``step``) with each of ``head_sets`` ablated in
    ``mode``."""

    def __call__(
        self,
        run: Run,
        model: HookedModel,
        head_sets: list[list[tuple[int, int]]],
        step: int,
        mode: str,
        probes: ProbeSet,
        output: Output,
        /,
    ) -> Shown: ...


class ReportView(Protocol):
    """What ``report`` shows: the run over training."""

    def __call__(self, run: Run, output: Output, /) -> Shown: ...


class HtmlView(Protocol):
    """``report --html``: the one-page report, written into ``directory``; its path."""

    def __call__(self, run: Run, directory: Path, device: Device, /) -> Path: ...


@dataclass(frozen=True)
class TaskView:
    """A task's four views, each the function itself or its ``"module:function"`` reference, imported once when the
    task is registered."""

    probe: ProbeView | str
    ablate: AblateView | str
    report: ReportView | str
    html: HtmlView | str


@dataclass(frozen=True)
class ResolvedView:
    """A :class:`TaskView` whose functions are all resolved (none a ``"module:function"`` reference any more),
    called by name: ``view_of(run).probe(...)``."""

    probe: ProbeView
    ablate: AblateView
    report: ReportView
    html: HtmlView


def resolved(view: TaskView, whose: str) -> ResolvedView:
    """``view`` with each ``"module:function"`` imported; a part that cannot be, or is no function, refused in one
    line that names it as ``the PART view WHOSE``."""
    parts = [function_of(getattr(view, part.name), f"the {part.name} view {whose}") for part in fields(ResolvedView)]
    return ResolvedView(*parts)


def function_of(function: Any, what: str, expects: Expects | None = None) -> Any:
    """``function`` itself, or the function its ``"module:function"`` names, if it is one (``expects``, if given,
    accepts it); ``what`` names it in a refusal."""
    if isinstance(function, str):
        if not is_reference(function):
            raise BadInput(f"{what} is a function or 'package.module:function', got {quoted(function)}")
        function = imported(function, f"{what} is {quoted(function)}")
    if not callable(function) or (expects is not None and not expects.test(function)):
        raise BadInput(f"{what} is {expects.what if expects else 'a function'}, got {quoted(function)}")
    return function
