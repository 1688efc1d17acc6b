"""Host lock (tools/gpufleet_hostlock.py): taking, refusing, stale locks, release."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TOOL = os.path.join(ROOT, "tools", "gpufleet_hostlock.py")
sys.path.insert(0, os.path.join(ROOT, "tools"))

import gpufleet_hostlock as hl  # noqa: E402  pylint: disable=wrong-import-position

CTL = {"hostname": "ctl", "machine_id": "m1", "boot_id": "b1", "pid_ns": "pid:[1]"}
LIVE = {"boot_id": "b1", "pid_ns": "pid:[1]", "ticks_now": 5000, "pids": [[100, 1000], [200, 2000]]}


def holder(run_id, pid=100, start=1000, controller=None, started="2026-03-08T12:00:00Z"):
    return {"run_id": run_id, "controller": dict(controller or CTL), "pid": pid, "pid_start": start,
            "user": "ops", "playbook": "deploy.yml", "started": started}


class Clock:
    def __init__(self, t=1_000_000.0):
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


def test_cli_contract(tmp_path):
    lock = str(tmp_path / "gpufleet")
    me = json.loads(subprocess.run([sys.executable, TOOL, "whoami", "--playbook", "deploy.yml"], check=True,
                                   capture_output=True, text=True).stdout)
    assert me["holder"]["playbook"] == "deploy.yml" and len(me["holder"]["run_id"]) == 32
    assert set(me["live"]) == {"boot_id", "pid_ns", "ticks_now", "pids"}

    def run(*args):
        proc = subprocess.run([sys.executable, TOOL] + list(args), capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr
    rc, out, dummy = run("acquire", "--path", lock, "--holder", json.dumps(me["holder"]), "--live", json.dumps(me["live"]))
    assert rc == 0 and json.loads(out)["acquired"]
    rc, out, dummy = run("release", "--path", lock, "--run-id", me["holder"]["run_id"])
    assert rc == 0 and json.loads(out)["released"]
    rc, dummy, err = run("acquire", "--path", "relative/lock", "--holder", json.dumps(me["holder"]))
    assert rc == 2 and "--path must be absolute" in err
