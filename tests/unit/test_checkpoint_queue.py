"""The background that evaluates and writes checkpoints beside training: order, failure, memory bound, and the
rule that decides where it runs."""

import threading

import pytest
import torch

from induction_probes.circuits.models.model import HookedTransformer, HookedTransformerConfig
from induction_probes.circuits.threads import spare_core, usable_cores
from induction_probes.circuits.training.checkpoint_queue import CheckpointQueue


def test_items_are_written_in_order_and_the_last_metrics_come_back():
    written = []
    queue = CheckpointQueue(lambda item: written.append(item) or {"step": item}, max_waiting=100)
    for item in range(20):
        queue.put(item)
    assert queue.finish() == {"step": 19}
    assert written == list(range(20))


def test_a_failed_write_stops_every_later_one_and_is_raised_in_the_trainers_thread():
    written, gate = [], threading.Event()

    def write(item):
        gate.wait()
        if item == 2:
            raise OSError("disk full")
        written.append(item)
        return {"step": item}

    queue = CheckpointQueue(write, max_waiting=100)
    for item in range(6):
        queue.put(item)  # all queued before the worker writes one
    gate.set()
    with pytest.raises(OSError, match="disk full"):
        queue.finish()
    assert written == [0, 1]  # 3, 4 and 5 were never written: a run's checkpoints have no gap


def test_the_trainer_waits_while_max_waiting_items_wait():
    release, started = threading.Event(), []

    def write(item):
        started.append(item)
        release.wait()
        return {"step": item}

    queue = CheckpointQueue(write, max_waiting=2)
    queue.put(0)
    queue.put(1)
    waiting = threading.Thread(target=queue.put, args=(2,))
    waiting.start()
    waiting.join(timeout=0.5)
    assert waiting.is_alive()  # the third put waits for the first write
    release.set()
    waiting.join(timeout=10)
    assert not waiting.is_alive()
    assert queue.finish() == {"step": 2} and started == [0, 1, 2]


def model_of(d_model: int) -> HookedTransformer:
    config = HookedTransformerConfig(n_layers=1, d_model=d_model, n_ctx=8, d_vocab=3, n_heads=1, d_head=d_model)
    return HookedTransformer(config)


def test_the_background_runs_only_beside_a_small_model_on_a_cpu_with_a_free_core(monkeypatch):
    small, cpu = model_of(8), torch.device("cpu")
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert spare_core(small, cpu) == (usable_cores() >= 2)
    assert not spare_core(small, torch.device("meta"))  # on another device the trainer evaluates in turn
    monkeypatch.setattr(torch, "get_num_threads", lambda: usable_cores())
    assert not spare_core(small, cpu)  # training's own threads fill every core
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    monkeypatch.setattr("induction_probes.circuits.threads.LARGE_MODEL_PARAMETERS", 100)
    assert not spare_core(small, cpu)  # a large model takes every core by the thread policy
