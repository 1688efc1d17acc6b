# -*- coding: utf-8 -*-
"""Action plugin build_wait: one readable line per poll, the last status line returned, a timeout that says what to raise."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar

from ansible_collections.gpufleet.inference.plugins.action import build_wait
from ansible_collections.gpufleet.inference.plugins.action.build_wait import ActionModule, progress_line

ARGV = ["bash", "/w/bin/build-wheel.sh", "status", "/w/logs/build-k.log"]
T0 = 1767225600  # the builder's clock when the build started


def status(finished=False, rc=None, progress="", done=None, total=None, started=T0, now=T0):
    return json.dumps({"finished": finished, "rc": rc, "progress": progress, "done": done, "total": total,
                       "started": started, "now": now})


class Clock:
    """time.monotonic / time.sleep of the plugin: sleeping moves the clock."""

    def __init__(self):
        self.now = 1000.0
        self.sleeps = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture(name="wait")
def wait_fixture(monkeypatch):
    """wait(args, outputs) runs the action with the status command printing outputs
    one per poll (a dict is the module's whole result); returns (result, lines, calls, clock)."""
    clock = Clock()
    shown = MagicMock()
    monkeypatch.setattr(build_wait, "time", clock)
    monkeypatch.setattr(build_wait, "display", shown)

    def run(args, outputs=(), check_mode=False, task_vars=None):
        task = MagicMock()
        task.args = args
        task.async_val = 0
        task.check_mode = check_mode
        task.diff = False
        connection = MagicMock()
        connection._shell.tmpdir = None
        loader = DataLoader()
        action = ActionModule(task, connection, PlayContext(), loader, Templar(loader=loader), None)
        replies = [o if isinstance(o, dict) else {"rc": 0, "stdout": o + "\n", "stderr": ""} for o in outputs]
        action._execute_module = MagicMock(side_effect=replies)
        result = action.run(task_vars=task_vars if task_vars is not None else {"inventory_hostname": "sbx1"})
        lines = [c.args[0] for c in shown.display.call_args_list]
        return result, lines, action._execute_module.call_args_list, clock
    return run


# ------------------------------------------------------------ one line per poll

LINES = [
    ("configure stage: the last log line",
     dict(progress="-- Detected CUDA_VERSION=13.0", now=T0 + 40),
     "sbx1: sgl-kernel build configuring, 0m40s elapsed: -- Detected CUDA_VERSION=13.0"),
    ("before the log has a line: the time waited",
     dict(progress="", started=None, now=T0 + 3),
     "sbx1: sgl-kernel build configuring, 0m03s elapsed"),
    ("ninja [12/40]: count, percent, ETA, the step",
     dict(progress="[12/40] Building CUDA object csrc/x.cu.o", done=12, total=40, now=T0 + 80),
     "sbx1: sgl-kernel build 12/40 (30%), 1m20s elapsed, about 3m06s left: Building CUDA object csrc/x.cu.o"),
    ("hours: h m s",
     dict(progress="[1/3] Building CXX object a.o", done=1, total=3, now=T0 + 3 * 3600 + 5),
     "sbx1: sgl-kernel build 1/3 (33%), 3h00m05s elapsed, about 6h00m10s left: Building CXX object a.o"),
    ("a step of a verbose build is cut to one line",
     dict(progress="[2/4] /usr/local/cuda/bin/nvcc " + "-DX " * 40, done=2, total=4, now=T0 + 10),
     "sbx1: sgl-kernel build 2/4 (50%), 0m10s elapsed, about 0m10s left: "
     + ("/usr/local/cuda/bin/nvcc " + "-DX " * 40)[:97] + "..."),
    ("a counter that does not add up is no count",
     dict(progress="[9/4] odd", done=9, total=4, now=T0 + 5),
     "sbx1: sgl-kernel build configuring, 0m05s elapsed: odd"),
    ("finished: the exit status",
     dict(finished=True, rc=2, progress="[3/40] FAILED: x.o", done=3, total=40, now=T0 + 250),
     "sbx1: sgl-kernel build finished (rc 2), 4m10s elapsed"),
]


@pytest.mark.parametrize("case,fields,line", LINES, ids=[c[0] for c in LINES])
def test_the_line_of_a_poll(case, fields, line):
    st = json.loads(status(**fields))
    elapsed = build_wait.build_elapsed(st, waited=st["now"] - T0)  # both clocks agree here
    assert progress_line("sbx1", st, elapsed) == line, case


def test_eta_is_the_time_per_step_so_far_times_the_steps_left():
    st = json.loads(status(progress="[10/40] x", done=10, total=40, now=T0 + 100))
    assert "about 5m00s left" in progress_line("h", st, 100)
    # no ETA before the first step finished
    st = json.loads(status(progress="[0/40] x", done=0, total=40))
    assert progress_line("h", st, 30) == "h: sgl-kernel build 0/40 (0%), 0m30s elapsed: x"


@pytest.mark.parametrize("started,now,waited,elapsed", [
    (T0, T0 + 80, 70, 80),              # the builder's clock: the build started a little before the wait
    (None, None, 70, 70),               # no start in the status: the time waited
    (T0 - 86400, T0, 70, 70),           # a log from a day ago (a reused wheel): the time waited
    (T0 + 50, T0, 70, 70),              # a start in the future: the time waited
])
def test_elapsed_by_the_builders_clock_where_it_is_plausible(started, now, waited, elapsed):
    assert build_wait.build_elapsed({"started": started, "now": now}, waited) == elapsed


def test_every_poll_prints_one_line_and_the_last_status_is_returned(wait):
    outputs = [status(progress="-- Configuring done", now=T0 + 2),
               status(progress="[1/3] Building CXX object a.o", done=1, total=3, now=T0 + 5),
               status(progress="[3/3] Linking CXX shared module m.so", done=3, total=3, now=T0 + 8),
               status(finished=True, rc=0, progress="[3/3] Linking CXX shared module m.so", done=3, total=3, now=T0 + 11)]
    res, lines, calls, clock = wait({"argv": ARGV, "interval": 3, "timeout": 60}, outputs)
    assert lines == [
        "sbx1: sgl-kernel build configuring, 0m02s elapsed: -- Configuring done",
        "sbx1: sgl-kernel build 1/3 (33%), 0m05s elapsed, about 0m10s left: Building CXX object a.o",
        "sbx1: sgl-kernel build 3/3 (100%), 0m08s elapsed, about 0m00s left: Linking CXX shared module m.so",
        "sbx1: sgl-kernel build finished (rc 0), 0m11s elapsed",
    ]
    assert not res.get("failed") and res["changed"] is False
    assert res["stdout"] == outputs[-1] and json.loads(res["stdout"])["rc"] == 0
    assert res["polls"] == 4 and res["elapsed"] == 11
    assert clock.sleeps == [3, 3, 3]
    # the status command as an argument list, on the target, through the command module
    assert all(c.kwargs["module_name"] == "ansible.legacy.command" and c.kwargs["module_args"] == {"argv": ARGV}
               for c in calls)


def test_a_failed_build_is_passed_through_for_the_role_to_fail_on(wait):
    outputs = [status(progress="[2/40] Building CUDA object a.o", done=2, total=40, now=T0 + 3),
               status(finished=True, rc=2, progress="[3/40] FAILED: b.o", done=3, total=40, now=T0 + 6)]
    res, lines, _calls, _clock = wait({"argv": ARGV, "interval": 3, "timeout": 60, "label": "sbx1/abc123"}, outputs)
    assert not res.get("failed")
    assert json.loads(res["stdout"])["rc"] == 2
    assert lines[-1] == "sbx1/abc123: sgl-kernel build finished (rc 2), 0m06s elapsed"


def test_a_reused_wheel_finishes_at_the_first_poll(wait):
    res, lines, _calls, clock = wait({"argv": ARGV, "interval": 15, "timeout": 60},
                                     [status(finished=True, rc=0, progress="wheel already in /w/d: not rebuilt",
                                             started=T0 - 86400, now=T0)])
    assert res["polls"] == 1 and res["elapsed"] == 0 and clock.sleeps == []
    assert lines == ["sbx1: sgl-kernel build finished (rc 0), 0m00s elapsed"]


def test_timeout_names_the_variable_and_the_last_progress(wait):
    outputs = [status(progress="[%d/40] Building CUDA object x%d.o" % (i, i), done=i, total=40, now=T0 + 4 * i)
               for i in range(1, 5)]
    res, lines, _calls, clock = wait({"argv": ARGV, "interval": 4, "timeout": 10}, outputs)
    assert res["failed"]
    assert "sgl_kernel_build_timeout" in res["msg"]
    assert res["msg"] == ("sgl-kernel build on sbx1 not finished after 0m10s (timeout 10 s: raise sgl_kernel_build_timeout "
                          "for a longer build); last progress: [4/40] Building CUDA object x4.o")
    # polls at 0, 4, 8 and at the deadline, never past it
    assert clock.sleeps == [4, 4, 2] and res["polls"] == 4 and len(lines) == 4
    assert json.loads(res["stdout"])["done"] == 4


@pytest.mark.parametrize("reply,message", [
    ({"rc": 127, "stdout": "", "stderr": "bash: /w/bin/build-wheel.sh: No such file", "failed": True, "msg": "non-zero return code"},
     "failed (rc 127): non-zero return code"),
    ({"rc": 0, "stdout": "usage: build-wheel.sh ...\n", "stderr": ""}, "printed no JSON status line"),
    ({"rc": 0, "stdout": '{"rc": 0}\n', "stderr": ""}, "with 'finished'"),
])
def test_a_status_command_that_fails_or_prints_no_status_fails_the_task(wait, reply, message):
    res, lines, _calls, _clock = wait({"argv": ARGV, "interval": 3, "timeout": 60}, [reply])
    assert res["failed"] and message in res["msg"], res
    assert res["polls"] == 0 and lines == []


def test_check_mode_does_nothing(wait):
    res, lines, calls, _clock = wait({"argv": ARGV, "interval": 3, "timeout": 60}, [], check_mode=True)
    assert res["skipped"] and res["changed"] is False
    assert calls == [] and lines == []


@pytest.mark.parametrize("args,message", [
    ({"interval": 3, "timeout": 60}, "argv"),
    ({"argv": [], "interval": 3, "timeout": 60}, "argv must be a non-empty list of strings (got [])"),
    ({"argv": ARGV, "interval": 3}, "timeout"),
    ({"argv": ARGV, "interval": "soon", "timeout": 60}, "interval"),
    ({"argv": ARGV, "interval": 0, "timeout": 60}, "interval must be an integer >= 1 (got 0)"),
    ({"argv": ARGV, "interval": 3, "timeout": -5}, "timeout must be an integer >= 1 (got -5)"),
    ({"argv": "bash /w/bin/build-wheel.sh status /w/l.log", "timeout": 60},
     "argv must be a list of strings, an argument list and no shell string (got 'bash /w/bin/build-wheel.sh status /w/l.log')"),
    ({"argv": ARGV, "timeout": 60, "retries": 3}, "retries"),
])
def test_bad_arguments_name_the_argument(wait, args, message):
    with pytest.raises(AnsibleActionFail, match=re.escape(message)) as err:
        wait(args, [])
    assert message in str(err.value)
