"""Ray for the length of a block (:func:`ray_session`): a local instance bound to this machine's loopback address
only, or a running cluster, checked to answer within seconds; its workers get an empty working directory and the
declared plugin paths (:mod:`.worker_start`). Sweeps (:mod:`~induction_probes.circuits.sweeps.ray_backend`) and
language-model series (:mod:`~induction_probes.probes.lm.ray_series`) run their tasks in it. Ray is imported only
when a session starts."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from induction_probes.circuits.errors import BadInput
from induction_probes.circuits.workers.worker_start import declared_paths, empty_working_dir

RAY_CONNECT_SECONDS = 10  # to reach a cluster's address before Ray's own, much longer, retries begin


def ray_address_answers(address: str) -> None:
    """Refuse a ``host:port`` (or ``ray://host:port``) where nothing listens, within seconds: ``ray.init``
    itself retries such an address for minutes. Other forms (``auto``) are left to Ray."""
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=RAY_CONNECT_SECONDS).close()
    except OSError as error:
        raise BadInput(
            f"no Ray cluster answers at {address} ({error.strerror or error}): start one with "
            "`ray start --head`, or leave out --address for a local instance"
        ) from None


def keep_local_ray_on_loopback() -> None:
    """Ray reads its clusters switch once, when it is imported, and the processes it starts read it from the
    environment: a program that imported Ray before the sweep set the variable would still get this machine's
    network address, so the in-process constant follows the variable too (unless the user set it to 1)."""
    from ray._private import ray_constants  # Ray is the ray extra's: imported only by a sweep on Ray

    if os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER") == "0":
        ray_constants.ENABLE_RAY_CLUSTER = False


def answers_on_loopback_only(address: str) -> bool:
    """Whether ``address`` is a cluster on this machine's loopback that answers there only (its nodes started
    with ``--node-ip-address 127.0.0.1``). Ray replaces a loopback address by this machine's network address,
    where such a cluster does not listen, and then retries for minutes; its own loopback mode keeps it."""
    # the ray extra's, as above
    from ray._private.services import node_ip_address_from_perspective  # type: ignore[attr-defined]  # not in its stub

    host, _, port = address.rpartition(":")
    if address.startswith("ray://") or host.strip("[]") not in ("127.0.0.1", "localhost", "::1") or not port.isdigit():
        return False
    try:
        socket.create_connection((node_ip_address_from_perspective(), int(port)), timeout=2).close()
    except OSError:
        return True
    return False


@contextmanager
def ray_session(workers: int, address: str | None, report=print) -> Iterator:
    """Ray, started for the length of the block: on the cluster at ``address``, or on a local Ray instance of
    ``workers`` CPUs bound to this machine's loopback address only; shut down whatever happens."""
    if address is None:
        # Ray takes this machine's network address for a node unless clusters are off, as on macOS: then its
        # head, its workers and the processes they start listen on the loopback address only
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray  # the ray extra's: without it, refused in one line
        from ray._private.worker import RayContext
    except ImportError:
        raise BadInput("the ray backend needs Ray: pip install 'induction-probes[ray]'") from None
    if address is None or answers_on_loopback_only(address):
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
        keep_local_ray_on_loopback()
    with empty_working_dir() as folder:
        # a working directory of its own, empty: else Ray puts this process's current folder on its workers' path
        runtime_env: dict[str, Any] = {"working_dir": folder}
        if declared_paths():  # the plugins' folders, absolute: a relative one would name the empty folder
            runtime_env["env_vars"] = {"PYTHONPATH": os.pathsep.join(declared_paths())}
        if address is None:
            # "local": a new instance, never the cluster that a `ray start` on this machine last recorded
            context = ray.init(
                address="local",
                num_cpus=workers,
                include_dashboard=False,
                log_to_driver=False,
                runtime_env=runtime_env,
            )
            if not isinstance(context, RayContext):  # what ray.init gives without a client address
                raise BadInput(f"ray.init gave a {type(context).__name__}, not a local instance's RayContext")
            where = str(context.address_info["gcs_address"])
            local = where.rpartition(":")[0] in ("127.0.0.1", "localhost", "[::1]")
            report(f"a local Ray instance at {where}" + (" (this machine only)" if local else ""))
        else:
            ray.init(address=address, log_to_driver=False, runtime_env=runtime_env)
        try:
            yield ray
        finally:
            ray.shutdown()
