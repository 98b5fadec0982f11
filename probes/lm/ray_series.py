"""A checkpoint series spread over Ray: one task of one CPU per checkpoint (run again elsewhere if its worker
dies), on a local Ray instance bound to loopback or on the cluster at an address, gathered in step order. The
probes and the ablations of a series (:mod:`.series`, :mod:`.ablate_series`) both run through here, so every path
a task reads is made absolute before it ships: a worker starts in another folder, where a relative path would name
nothing (or be taken for a Hugging Face cache name)."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Sequence
from typing import Any

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.interop.model_sources import ModelSource, Series, require_one_model, require_series
from induction_probes.circuits.validation import quoted
from induction_probes.circuits.workers.ray_session import ray_address_answers, ray_session
from induction_probes.probes.lm.progress_bars import progress_bar

BACKENDS = ("local", "ray")


def shipped(source: ModelSource) -> ModelSource:
    """``source`` as a task elsewhere reads it: a directory's path made absolute (a cache name stays a name)."""
    if source.in_cache:
        return source
    return dataclasses.replace(source, location=os.path.abspath(source.location))


ADDRESS = re.compile(r"auto|(ray://)?\S+:\d{1,5}")  # Ray's forms: auto, HOST:PORT, ray://HOST:PORT


def check_address(address: str) -> None:
    """A Ray address as Ray takes one (``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``), else one line."""
    if not ADDRESS.fullmatch(address):
        raise BadInput(f"{quoted(address)} is not a Ray address: give HOST:PORT, ray://HOST:PORT or auto")


def local_only(backend: str, address: str | None) -> None:
    """``address`` names a Ray cluster: it means nothing to the local backend, which is refused, not ignored."""
    if address is not None and backend != "ray":
        raise BadInput("--address names a Ray cluster: give --backend ray too")


def series_threads(backend: str, threads: int | None, doing: str) -> dict:
    """The thread count a series' checkpoints take: ``threads`` here; a Ray task keeps its one, so ``threads``
    with Ray is refused, and no count is given (``doing``: what a task does to its checkpoint, for the message)."""
    if backend == "ray" and threads is not None:
        raise BadInput(f"--threads sets this process's threads; a Ray task {doing} its checkpoint on one")
    return {} if backend == "ray" else {"threads": threads}


def on_ray(series: Series, task: Callable[..., Any], address: str | None, bar, *arguments) -> list:
    """``task(source, *arguments)`` for every checkpoint of ``series``, each a Ray task of one CPU, the answers
    in step order; ``bar`` counts the checkpoints done. An ``address`` where nothing listens is refused within
    seconds (Ray itself retries it for minutes)."""
    if address is not None:
        check_address(address)
        ray_address_answers(address)
    if any(isinstance(argument, str) and argument.startswith("cuda") for argument in arguments):
        raise BadInput("a Ray task here asks for one CPU and no GPU: run --device cuda without --backend ray")
    sources = [shipped(source) for source in series.checkpoints]
    workers = min(len(sources), os.cpu_count() or 1)  # a local instance's CPUs
    with ray_session(workers, address, report=lambda line: None) as ray:
        remote = ray.remote(num_cpus=1, max_retries=3)(task)
        pending = {remote.remote(source, *arguments): source.step for source in sources}
        found = {}
        while pending:
            (ready,), _ = ray.wait(list(pending), num_returns=1)
            step = pending.pop(ready)
            found[step] = ray.get(ready)
            bar.set_postfix_str(f"step {step}")
            bar.update()
    return [found[source.step] for source in sources]


def checked_series(
    series: Series | str | os.PathLike, backend: str, address: str | None, threads: int | None, doing: str
) -> tuple[Series, dict]:
    """``series`` (a ``Series``, a folder of ``step_N/`` checkpoints or a cache name) if it is one model's, of two
    checkpoints or more, with a backend that takes the options given; and the thread count this process takes
    (:func:`series_threads`). ``doing``: what a task does to a checkpoint ("ablates"), for the messages."""
    series = one_model_series(series)
    check_backend(backend, address)
    if len(series.checkpoints) < 2:
        raise BadInput(f"{series.name} has one checkpoint (step {series.steps[0]}): one model is not a series")
    return series, series_threads(backend, threads, doing)


def one_model_series(series: Series | str | os.PathLike) -> Series:
    """``series`` as a ``Series``, if its checkpoints are one model's (:func:`require_one_model`)."""
    return require_one_model(series if isinstance(series, Series) else require_series(os.fspath(series)))


def check_backend(backend: str, address: str | None) -> None:
    if backend not in BACKENDS:
        raise BadInput(f"the backend is local or ray, not {str(backend)[:200]!r}")
    local_only(backend, address)


def each_checkpoint(
    checkpoints: Sequence[ModelSource],
    here: Callable[[ModelSource], Any],
    backend: str,
    address: str | None,
    progress: bool,
    remote: Callable[..., Any],
    *arguments,
) -> list:
    """``here(source)`` for every checkpoint in this process, or on Ray ``remote(source, *arguments)`` one task
    each; the answers in step order, with a progress bar of the checkpoints."""
    with progress_bar(len(checkpoints), "checkpoints", progress, unit="checkpoint", leave=True) as bar:
        if backend == "ray":
            return on_ray(Series("checkpoints", tuple(checkpoints)), remote, address, bar, *arguments)
        found = []
        for source in checkpoints:
            bar.set_postfix_str(f"step {source.step}")
            found.append(here(source))
            bar.update()
    return found
