# -*- coding: utf-8 -*-
"""gpufleet.inference.linear: with every worker busy it waits for one to end
(blocking on the workers' sentinels, a handful of looks, not one every
0.1 ms), then hands the host to ansible-core's linear strategy; a throttled
task goes straight to the linear strategy's own loop."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import multiprocessing
import time

from ansible.plugins.strategy.linear import StrategyModule as Linear

from ansible_collections.gpufleet.inference.plugins.strategy import linear

CTX = multiprocessing.get_context("fork")
_free_slot = linear.free_slot


class Task:
    def __init__(self, throttle=0):
        self.throttle = throttle


def _worker(seconds):
    proc = CTX.Process(target=time.sleep, args=(seconds,))
    proc.start()
    return proc


def _strategy(workers, monkeypatch, calls):
    def queued(self, host, task, task_vars, play_context):
        calls.append((host, time.monotonic(), [w is not None and w.is_alive() for w in self._workers]))
    monkeypatch.setattr(Linear, "_queue_task", queued)
    strategy = linear.StrategyModule.__new__(linear.StrategyModule)
    strategy._workers = workers
    return strategy


def test_waits_for_the_first_worker_to_end_without_spinning(monkeypatch):
    workers = [_worker(0.5), _worker(10)]
    calls = []
    try:
        strategy = _strategy(workers, monkeypatch, calls)
        looks = []
        monkeypatch.setattr(linear, "free_slot", lambda ws: looks.append(1) or _free_slot(ws))
        start = time.monotonic()
        strategy._queue_task("sbx3", Task(), {}, None)
        waited = calls[0][1] - start
        # handed over once the short worker ended, while the long one still runs
        assert calls[0][0] == "sbx3" and calls[0][2] == [False, True], calls
        assert 0.4 < waited < 5, waited
        # ansible-core's own loop looks at both workers every 0.1 ms: thousands in 0.5 s
        assert len(looks) < 10, len(looks)
    finally:
        for w in workers:
            w.kill()
            w.join()


def test_a_free_slot_is_taken_at_once(monkeypatch):
    workers = [None, _worker(10)]
    calls = []
    try:
        strategy = _strategy(workers, monkeypatch, calls)
        start = time.monotonic()
        strategy._queue_task("sbx1", Task(), {}, None)
        assert calls and calls[0][1] - start < 0.3, calls
    finally:
        workers[1].kill()
        workers[1].join()


def test_a_throttled_task_is_left_to_the_linear_strategy(monkeypatch):
    workers = [_worker(10), _worker(10)]
    calls = []
    try:
        strategy = _strategy(workers, monkeypatch, calls)
        start = time.monotonic()
        strategy._queue_task("sbx2", Task(throttle=1), {}, None)
        assert calls and calls[0][1] - start < 0.3 and calls[0][2] == [True, True], calls
    finally:
        for w in workers:
            w.kill()
            w.join()


def test_free_slot():
    done = _worker(0)
    done.join()
    busy = _worker(10)
    try:
        assert linear.free_slot([busy, None])
        assert linear.free_slot([busy, done])
        assert not linear.free_slot([busy])
    finally:
        busy.kill()
        busy.join()
