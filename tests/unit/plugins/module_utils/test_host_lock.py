# -*- coding: utf-8 -*-
"""Host lock (module_utils host_lock): taking, refusing, stale locks, release, and the run's identity."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import glob
import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import host_lock as hl
from ansible_collections.gpufleet.inference.tests.unit.plugins.module_utils.playbook_processes import Trees

CTL = {"hostname": "ctl", "machine_id": "m1", "boot_id": "b1", "pid_ns": "pid:[1]"}
LIVE = {"boot_id": "b1", "pid_ns": "pid:[1]", "ticks_now": 5000, "pids": [[100, 1000], [200, 2000]]}


def holder(run_id, pid=100, start=1000, controller=None, started="2026-03-08T12:00:00Z"):
    return {"run_id": run_id, "controller": dict(controller or CTL), "pid": pid, "pid_start": start,
            "user": "ops", "playbook": "deploy.yml", "started": started}


class Clock:
    def __init__(self, t=1000000.0):
        self.t = t

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


@pytest.fixture(name="lock")
def lock_fixture(tmp_path):
    return str(tmp_path / "run" / "gpufleet")


def test_free_lock_is_taken_with_its_holder_inside(lock):
    r = hl.acquire(lock, holder("a"), LIVE)
    assert r["acquired"] and not r["held"] and r["broke"] is None
    with open(os.path.join(lock, "holder.json"), encoding="utf-8") as fh:
        assert json.load(fh)["run_id"] == "a"
    # the same run asking again holds it already
    assert hl.acquire(lock, holder("a"), LIVE)["acquired"]
    # nothing left beside it but the lock
    assert os.listdir(os.path.dirname(lock)) == ["gpufleet"]


def test_a_live_holder_refuses_and_names_itself(lock):
    hl.acquire(lock, holder("a", pid=100, start=1000), LIVE)
    r = hl.acquire(lock, holder("b", pid=200, start=2000), LIVE)
    assert not r["acquired"] and r["held"] and not r["stale"]
    assert r["holder"]["run_id"] == "a"
    assert "its process 100 is running on this controller" in r["reason"]
    assert "controller ctl, pid 100, playbook deploy.yml" in r["holder_text"]
    assert r["message"].startswith("another gpufleet run holds the lock")
    assert hl.read_lock(lock)[1]["run_id"] == "a"


def test_waiting_gives_up_after_the_wait_and_takes_a_lock_freed_meanwhile(lock):
    clock = Clock()
    hl.acquire(lock, holder("a"), LIVE)
    r = hl.acquire(lock, holder("b", pid=200, start=2000), LIVE, wait=10, clock=clock, sleep=clock.sleep)
    assert not r["acquired"] and r["waited"] == 10

    def release_then_sleep(s):
        clock.sleep(s)
        hl.release(lock, "a")
    r = hl.acquire(lock, holder("b", pid=200, start=2000), LIVE, wait=60, clock=clock, sleep=release_then_sleep)
    assert r["acquired"] and r["waited"] == 2 and r["broke"] is None


def test_a_killed_run_of_this_controller_is_broken(lock):
    hl.acquire(lock, holder("a", pid=300, start=1500), LIVE)
    r = hl.acquire(lock, holder("b", pid=200, start=2000), LIVE)
    assert r["acquired"] and r["broke"]["run_id"] == "a"
    assert "process 300 is no longer running on this controller" in r["broke"]["reason"]
    assert "broke the stale lock" in r["message"]
    assert hl.read_lock(lock)[1]["run_id"] == "b"


def test_a_reused_pid_does_not_keep_a_dead_run_alive(lock):
    # pid 100 runs, but it started at 1000, not 900: another process
    hl.acquire(lock, holder("a", pid=100, start=900), LIVE)
    assert hl.acquire(lock, holder("b", pid=200, start=2000), LIVE)["broke"]["run_id"] == "a"


@pytest.mark.parametrize("other", [
    {"boot_id": "b2"},                   # another boot: another machine, or this one restarted
    {"pid_ns": "pid:[2]"},               # another pid namespace (a container beside this one)
    {"boot_id": ""},                     # a controller without /proc
])
def test_a_holder_elsewhere_is_not_judged_by_this_controller_processes(lock, other):
    hl.acquire(lock, holder("a", pid=300, start=1500, controller=dict(CTL, **other)), LIVE)
    r = hl.acquire(lock, holder("b", pid=200, start=2000), LIVE)
    assert not r["acquired"] and r["held"] and not r["stale"]
    assert "another controller" in r["reason"]


def test_a_holder_that_started_after_this_run_looked_counts_as_alive(lock):
    hl.acquire(lock, holder("a", pid=300, start=6000), LIVE)
    r = hl.acquire(lock, holder("b", pid=200, start=2000), LIVE)
    assert not r["acquired"] and "started after this run began" in r["reason"]


def test_age_and_override_break_any_holder(lock):
    other = dict(CTL, boot_id="b2")
    hl.acquire(lock, holder("a", controller=other), LIVE)
    clock = Clock(os.stat(os.path.join(lock, "holder.json")).st_mtime + 100)
    r = hl.acquire(lock, holder("b"), LIVE, stale_after=3600, clock=clock)
    assert not r["acquired"] and r["age"] == 100
    clock.t += 3600
    r = hl.acquire(lock, holder("b"), LIVE, stale_after=3600, clock=clock)
    assert r["acquired"] and "more than gpufleet_host_lock_stale_after (3600s)" in r["broke"]["reason"]
    r = hl.acquire(lock, holder("c"), LIVE, force=True)
    assert r["acquired"] and r["broke"]["run_id"] == "b" and "override" in r["broke"]["reason"]


def test_check_mode_neither_takes_nor_breaks(lock):
    r = hl.acquire(lock, holder("a"), LIVE, check=True)
    assert not r["acquired"] and not r["held"] and not os.path.exists(lock)
    # not even the lock's parent directory is made
    assert not os.path.exists(os.path.dirname(lock))
    assert r["message"] == "host lock %s is free (check mode: not taken)" % lock
    hl.acquire(lock, holder("a", pid=300, start=1500), LIVE)
    r = hl.acquire(lock, holder("b", pid=200, start=2000), LIVE, check=True)
    assert not r["acquired"] and r["held"] and r["stale"] and r["broke"] is None
    assert "a real run would break it" in r["message"]
    assert hl.read_lock(lock)[1]["run_id"] == "a"


def test_a_lock_without_holder_record_is_held_until_old_or_overridden(lock):
    os.makedirs(lock)
    r = hl.acquire(lock, holder("b"), LIVE)
    assert not r["acquired"] and r["held"] and r["holder"] == {}
    assert hl.acquire(lock, holder("b"), LIVE, force=True)["acquired"]


def test_release_removes_only_the_holders_own_lock(lock):
    hl.acquire(lock, holder("a"), LIVE)
    assert hl.release(lock, "b") == {"released": False, "ours": False, "held": True,
                                     "holder": hl.read_lock(lock)[1], "check": False}
    assert hl.release(lock, "a", check=True)["released"] is False and os.path.exists(lock)
    assert hl.release(lock, "a")["released"] is True
    assert not os.path.exists(lock) and os.listdir(os.path.dirname(lock)) == []
    assert hl.release(lock, "a")["released"] is False


def test_whoami_finds_the_playbook_process_through_its_forks(monkeypatch):
    procs = {  # pid: (ppid, start, argv)
        40: (30, 400, ["/usr/bin/python3", "/tmp/gpufleet_hostlock.py", "whoami"]),
        30: (20, 300, ["/bin/sh", "-c", "python3 module"]),
        20: (10, 200, ["/venv/bin/python3", "/venv/bin/ansible-playbook", "-i", "inv", "deploy.yml"]),
        10: (5, 100, ["/venv/bin/python3", "/venv/bin/ansible-playbook", "-i", "inv", "deploy.yml"]),
        5: (1, 50, ["bash"]),
    }
    monkeypatch.setattr(hl, "_cmdline", lambda pid: procs.get(pid, (0, 0, []))[2])
    monkeypatch.setattr(hl, "_stat", lambda pid: procs[pid][:2] if pid in procs else None)
    assert hl.playbook_process(40) == 10
    assert hl.playbook_process(5) is None


# ---------------------------------------------------------------- the run, from real processes

@pytest.fixture(name="playbooks")
def playbooks_fixture(tmp_path):
    with Trees(str(tmp_path / "runs")) as trees:
        yield trees


def test_every_worker_of_one_run_has_its_run_id_and_another_run_another(playbooks):
    a, b = playbooks.start(), playbooks.start()
    runs = [hl.this_run(pid) for pid in [a.pid] + a.workers]
    assert {r[3] for r in runs} == {runs[0][3]} and len(runs[0][3]) == 32
    assert {r[0] for r in runs} == {a.pid}
    # the start time of the main process, as /proc has it
    assert runs[0][1] == hl._stat(a.pid)[1]
    assert hl.this_run(b.workers[0])[3] != runs[0][3]
    # two calls from one worker agree (nothing random in the id)
    assert hl.this_run(a.workers[1]) == hl.this_run(a.workers[1])


def test_the_holder_names_the_playbook_process_and_its_start(playbooks):
    a = playbooks.start()
    me = [hl.whoami("deploy.yml", pid) for pid in a.workers]
    assert me[0]["holder"] == me[1]["holder"]
    h = me[0]["holder"]
    assert h["pid"] == a.pid and h["pid_start"] == hl._stat(a.pid)[1] and h["playbook"] == "deploy.yml"
    assert h["controller"] == hl.controller_identity() and h["controller"]["boot_id"]
    # started: when the main process started, a moment ago
    started = datetime.datetime.strptime(h["started"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)
    assert abs((datetime.datetime.now(datetime.timezone.utc) - started).total_seconds()) < 60
    assert set(me[0]["live"]) == {"boot_id", "pid_ns", "ticks_now", "pids"}
    assert [a.pid, h["pid_start"]] in me[0]["live"]["pids"]
    # the workers are forks with the playbook's command line: listed as well
    assert all(pid in [p[0] for p in me[0]["live"]["pids"]] for pid in a.workers)


def test_outside_a_playbook_the_parent_names_the_run_and_no_pid_is_recorded(playbooks):
    adhoc = playbooks.start(name="ansible")
    runs = [hl.this_run(pid) for pid in adhoc.workers]
    assert runs[0][3] == runs[1][3] and runs[0][0] is None
    assert runs[0][3] == hl.make_run_id(hl.controller_identity(), adhoc.pid, hl._stat(adhoc.pid)[1])
    holder = hl.whoami("", adhoc.workers[0])["holder"]
    assert holder["pid"] is None and holder["pid_start"] is None
    # another parent, another run
    assert hl.this_run(playbooks.start(name="ansible").workers[0])[3] != runs[0][3]


def test_the_run_id_is_the_process_identity():
    ident = {"hostname": "ctl", "machine_id": "m1", "boot_id": "b1", "pid_ns": "pid:[1]"}
    one = hl.make_run_id(ident, 100, 1000)
    assert one == hl.make_run_id(dict(ident), 100, 1000)
    others = [hl.make_run_id(ident, 100, 1001), hl.make_run_id(ident, 101, 1000),
              hl.make_run_id(dict(ident, boot_id="b2"), 100, 1000),
              hl.make_run_id(dict(ident, pid_ns="pid:[2]"), 100, 1000),
              hl.make_run_id(dict(ident, machine_id="m2"), 100, 1000)]
    assert len(set(others + [one])) == 6
    # the salt counts only where there is no start time
    assert hl.make_run_id(ident, 100, 1000, salt="x") == one
    assert hl.make_run_id(ident, 100, None, salt="x") != hl.make_run_id(ident, 100, None, salt="y")


def test_a_live_run_holds_the_lock_and_its_killed_run_loses_it(lock, playbooks):
    a, b = playbooks.start(), playbooks.start()
    first = hl.whoami("deploy.yml", a.workers[0])
    assert hl.acquire(lock, first["holder"], first["live"])["acquired"]
    second = hl.whoami("rollback.yml", b.workers[0])
    r = hl.acquire(lock, second["holder"], second["live"])
    assert not r["acquired"] and r["held"] and not r["stale"] and r["broke"] is None
    assert r["reason"] == "its process %d is running on this controller" % a.pid
    assert "pid %d, playbook deploy.yml, run %s" % (a.pid, first["holder"]["run_id"][:12]) in r["holder_text"]
    a.kill()
    # the snapshot of a later look no longer lists the killed run
    second = hl.whoami("rollback.yml", b.workers[0])
    r = hl.acquire(lock, second["holder"], second["live"])
    assert r["acquired"] and r["broke"]["run_id"] == first["holder"]["run_id"]
    assert r["broke"]["reason"] == "its ansible-playbook process %d is no longer running on this controller" % a.pid
    assert hl.read_lock(lock)[1] == second["holder"]


HOST_SIDE = r'''
import importlib.util, json, os, sys
spec = importlib.util.spec_from_file_location("host_lock", sys.argv[1])
hl = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hl)
me = hl.whoami("deploy.yml")
lock = os.path.join(sys.argv[2], "run", "gpufleet")
taken = hl.acquire(lock, me["holder"], me["live"], stale_after=43200)
print(json.dumps({"taken": taken, "released": hl.release(lock, me["holder"]["run_id"])}))
'''


def find_python(name):
    """An interpreter that runs: on PATH, or one pyenv installed without selecting it."""
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    for exe in [shutil.which(name)] + sorted(glob.glob(os.path.join(root, "versions", "*", "bin", name))):
        if exe and subprocess.run([exe, "-c", ""], check=False, stderr=subprocess.DEVNULL).returncode == 0:
            return exe
    return None


@pytest.mark.parametrize("python", ["python3.6"])
def test_the_host_side_runs_on_the_oldest_python_it_supports(tmp_path, python):
    exe = find_python(python)
    if not exe:
        pytest.skip("no %s here" % python)
    out = subprocess.run([exe, "-c", HOST_SIDE, hl.__file__, str(tmp_path)], check=True, stdout=subprocess.PIPE,
                         universal_newlines=True).stdout
    r = json.loads(out)
    assert r["taken"]["acquired"] and r["taken"]["holder"]["playbook"] == "deploy.yml" and r["released"]["released"]
