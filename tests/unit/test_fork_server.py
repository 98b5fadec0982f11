"""The sweeps restart multiprocessing's fork server when the environment changes (circuits/workers/worker_start.py),
through CPython's private names, since multiprocessing offers no public way: this test fails, naming the name,
the day a Python renames one, rather than a sweep's workers silently computing in a stale environment."""

import multiprocessing
import multiprocessing.forkserver

from induction_probes.circuits.workers.worker_start import stop_fork_server


def test_the_private_names_the_restart_reads_exist():
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    assert server is not None, "multiprocessing.forkserver._forkserver is gone: rewrite stop_fork_server"
    assert hasattr(server, "_forkserver_pid"), "the fork server has no _forkserver_pid: rewrite stop_fork_server"
    assert callable(getattr(server, "_stop", None)), "the fork server has no _stop(): rewrite stop_fork_server"


def test_a_running_fork_server_is_stopped():
    context = multiprocessing.get_context("forkserver")
    with context.Pool(1) as pool:
        assert pool.apply(abs, (-3,)) == 3
    assert multiprocessing.forkserver._forkserver._forkserver_pid is not None  # the pool started one
    stop_fork_server()
    assert multiprocessing.forkserver._forkserver._forkserver_pid is None
    stop_fork_server()  # none running: nothing to do
