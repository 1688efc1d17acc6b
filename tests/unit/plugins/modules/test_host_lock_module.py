# -*- coding: utf-8 -*-
"""gpufleet.inference.host_lock (the module, on the host) on a real lock directory."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils.host_lock import read_lock
from ansible_collections.gpufleet.inference.plugins.modules import host_lock
from ansible_collections.gpufleet.inference.tests.unit.plugins.modules.module_harness import run_case

CTL = {"hostname": "ctl", "machine_id": "m1", "boot_id": "b1", "pid_ns": "pid:[1]"}
# pid 100 (run a) runs; pid 300 does not
LIVE = {"boot_id": "b1", "pid_ns": "pid:[1]", "ticks_now": 5000, "pids": [[100, 1000], [200, 2000]]}


def holder(run_id, pid):
    return {"run_id": run_id, "controller": dict(CTL), "pid": pid, "pid_start": pid * 10, "user": "ops",
            "playbook": "deploy.yml", "started": "2026-03-08T12:00:00Z"}


def run(monkeypatch, check=False, **params):
    params.setdefault("live", LIVE)
    if check:
        params["_ansible_check_mode"] = True
    result, dummy = run_case(host_lock.main, {"input": params}, monkeypatch)
    return result


@pytest.fixture(name="lock")
def lock_fixture(tmp_path):
    return str(tmp_path / "lock" / "gpufleet")


def test_a_free_lock_is_taken_and_that_is_no_change(lock, monkeypatch):
    r = run(monkeypatch, path=lock, holder=holder("a", 100))
    assert r["changed"] is False and r["acquired"] is True and r["held"] is False and r["broke"] is None
    assert r["message"] == "host lock %s taken by run a" % lock
    assert read_lock(lock)[1] == holder("a", 100)
    # the same run again: still ours, still no change
    r = run(monkeypatch, path=lock, holder=holder("a", 100))
    assert r["changed"] is False and r["acquired"] is True


def test_the_playbook_option_names_the_playbook_in_the_record(lock, monkeypatch):
    run(monkeypatch, path=lock, holder=holder("a", 100), playbook="rollback.yml")
    assert read_lock(lock)[1]["playbook"] == "rollback.yml"


def test_a_held_lock_is_refused_naming_its_holder(lock, monkeypatch):
    run(monkeypatch, path=lock, holder=holder("a", 100))
    r = run(monkeypatch, path=lock, holder=holder("b", 200))
    assert r.get("failed") is None and r["changed"] is False
    assert r["acquired"] is False and r["held"] is True and r["stale"] is False
    assert r["holder"]["run_id"] == "a" and r["reason"] == "its process 100 is running on this controller"
    assert r["holder_text"] == "since 2026-03-08T12:00:00Z (controller ctl, pid 100, playbook deploy.yml, run a)"
    assert r["message"].startswith("another gpufleet run holds the lock %s since" % lock)
    assert read_lock(lock)[1]["run_id"] == "a"


def test_a_stale_lock_is_broken_and_that_is_a_change(lock, monkeypatch):
    run(monkeypatch, path=lock, holder=holder("a", 300))
    r = run(monkeypatch, path=lock, holder=holder("b", 200))
    assert r["changed"] is True and r["acquired"] is True and r["broke"]["run_id"] == "a"
    assert r["broke"]["reason"] == "its ansible-playbook process 300 is no longer running on this controller"
    assert read_lock(lock)[1]["run_id"] == "b"
    # force breaks a live one
    r = run(monkeypatch, path=lock, holder=holder("c", 100), force=True)
    assert r["changed"] is True and r["broke"]["run_id"] == "b"
    assert r["broke"]["reason"] == "the override gpufleet_host_lock_break is set"


def test_stale_after_defaults_to_twelve_hours(lock, monkeypatch):
    run(monkeypatch, path=lock, holder=holder("a", 100))
    old = os.path.join(lock, "holder.json")
    os.utime(old, (os.stat(old).st_atime - 43000, os.stat(old).st_mtime - 43000))
    assert run(monkeypatch, path=lock, holder=holder("b", 200))["acquired"] is False
    os.utime(old, (os.stat(old).st_atime - 300, os.stat(old).st_mtime - 300))
    r = run(monkeypatch, path=lock, holder=holder("b", 200))
    assert r["changed"] is True and "more than gpufleet_host_lock_stale_after (43200s)" in r["broke"]["reason"]
    # 0: never by age
    os.utime(old, (os.stat(old).st_atime - 10 ** 6, os.stat(old).st_mtime - 10 ** 6))
    assert run(monkeypatch, path=lock, holder=holder("c", 100), stale_after=0)["acquired"] is False


def test_check_mode_changes_nothing_on_disk(lock, monkeypatch):
    r = run(monkeypatch, check=True, path=lock, holder=holder("a", 100))
    assert r["changed"] is False and r["acquired"] is False and r["check"] is True
    assert not os.path.exists(os.path.dirname(lock))
    run(monkeypatch, path=lock, holder=holder("a", 300))
    before = sorted(os.listdir(os.path.dirname(lock))), read_lock(lock)[1]
    r = run(monkeypatch, check=True, path=lock, holder=holder("b", 200))
    assert r["changed"] is False and r["stale"] is True and r["broke"] is None
    assert "a real run would break it" in r["message"]
    r = run(monkeypatch, check=True, path=lock, state="release", run_id="a")
    assert r["changed"] is False and r["released"] is False and r["ours"] is True
    assert (sorted(os.listdir(os.path.dirname(lock))), read_lock(lock)[1]) == before


def test_release_by_another_run_leaves_the_lock(lock, monkeypatch):
    run(monkeypatch, path=lock, holder=holder("a", 100))
    r = run(monkeypatch, path=lock, state="release", run_id="b")
    assert r["changed"] is False and r["released"] is False and r["ours"] is False and r["held"] is True
    assert r["holder"]["run_id"] == "a" and read_lock(lock)[1]["run_id"] == "a"
    r = run(monkeypatch, path=lock, state="release", run_id="a")
    assert r["changed"] is False and r["released"] is True and not os.path.exists(lock)
    assert os.listdir(os.path.dirname(lock)) == []


@pytest.mark.parametrize("params,msg", [
    ({"path": "relative/lock", "holder": holder("a", 100)}, "path must be absolute (got 'relative/lock')"),
    ({"holder": {"pid": 100}}, "holder needs a run_id"),
    ({}, "holder needs a run_id"),
    ({"state": "release"}, "state=release needs the run_id of the lock to remove"),
])
def test_bad_arguments_fail_with_rc_2(lock, monkeypatch, params, msg):
    r = run(monkeypatch, **dict({"path": lock}, **params))
    assert r["failed"] is True and r["rc"] == 2 and r["msg"] == msg
    assert not os.path.exists(os.path.dirname(lock))


def test_a_lock_it_cannot_make_fails_with_rc_1(tmp_path, monkeypatch):
    # its parent is a file: even root cannot make the lock there
    (tmp_path / "file").write_text("")
    path = str(tmp_path / "file" / "gpufleet")
    r = run(monkeypatch, path=path, holder=holder("a", 100))
    assert r["failed"] is True and r["rc"] == 1 and r["msg"].startswith("host lock %s: " % path)
