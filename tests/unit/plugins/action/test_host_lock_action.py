# -*- coding: utf-8 -*-
"""Action plugin host_lock: the run's holder record made on the controller, the module run once on the host.

The module runs in-process on a real lock directory, with the arguments the
action gave it plus the ones ActionBase adds (check mode among them); the
run's processes are real stand-ins for ansible-playbook and its workers. The
last test runs ansible-playbook itself on two local hosts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar

from ansible_collections.gpufleet.inference.plugins.action import host_lock as action_plugin
from ansible_collections.gpufleet.inference.plugins.module_utils.host_lock import read_lock
from ansible_collections.gpufleet.inference.plugins.modules import host_lock as module
from ansible_collections.gpufleet.inference.tests.unit.plugins.module_utils.playbook_processes import Trees
from ansible_collections.gpufleet.inference.tests.unit.plugins.modules.module_harness import run_case

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


@pytest.fixture(name="playbooks")
def playbooks_fixture(tmp_path):
    with Trees(str(tmp_path / "runs")) as trees:
        yield trees


@pytest.fixture(name="lock")
def lock_fixture(tmp_path):
    return str(tmp_path / "lock" / "gpufleet")


@pytest.fixture(name="act")
def act_fixture(monkeypatch):
    """act(args, worker, check_mode=False): run the action as the worker process
    ``worker`` would; returns (its result, [(module name, module args, module result)])."""

    def act(args, worker, check_mode=False):
        monkeypatch.setattr(action_plugin, "worker_pid", lambda: worker)
        task = MagicMock()
        task.args = dict(args)
        task.action = "gpufleet.inference.host_lock"
        task.async_val = 0
        task.check_mode = check_mode
        task.diff = False
        task.no_log = False
        connection = MagicMock()
        connection._shell.tmpdir = None
        connection._shell.get_option.return_value = "~/.ansible/tmp"
        connection.socket_path = None
        connection.become = None
        loader = DataLoader()
        action = action_plugin.ActionModule(task, connection, PlayContext(), loader, Templar(loader=loader), None)
        calls = []

        def execute_module(module_name, module_args, task_vars):
            sent = dict(module_args)
            action._update_module_args(module_name, module_args, task_vars)
            result, dummy = run_case(module.main, {"input": module_args}, monkeypatch)
            calls.append((module_name, sent, result))
            return dict(result)
        action._execute_module = execute_module
        return action.run(task_vars={"inventory_hostname": "h1"}), calls
    return act


def test_every_worker_of_one_run_takes_the_lock_as_one_run(act, lock, playbooks):
    a = playbooks.start()
    r1, calls = act({"path": lock, "playbook": "deploy.yml"}, a.workers[0])
    name, sent, module_result = calls[0]
    assert name == "gpufleet.inference.host_lock" and len(calls) == 1
    assert sent["state"] == "acquire" and (sent["stale_after"], sent["wait"], sent["force"]) == (43200, 0, False)
    # the module's result back unchanged, with the run id, reached and not refused
    assert r1 == dict(module_result, run_id=sent["holder"]["run_id"], refused=False)
    assert r1["acquired"] and r1["changed"] is False
    holder = read_lock(lock)[1]
    assert holder["run_id"] == r1["run_id"] and holder["pid"] == a.pid and holder["playbook"] == "deploy.yml"
    assert [a.pid, holder["pid_start"]] in sent["live"]["pids"]
    # another worker of the same run: the same run id, so the lock is already its own
    r2, calls = act({"path": lock, "playbook": "deploy.yml"}, a.workers[1])
    assert r2["run_id"] == r1["run_id"] and calls[0][1]["holder"] == sent["holder"]
    assert r2["acquired"] and r2["changed"] is False and r2["held"] is False
    # and its release, with the run id it computes itself, removes the lock
    r3, calls = act({"path": lock, "state": "release"}, a.workers[1])
    assert calls[0][1] == {"path": lock, "state": "release", "run_id": r1["run_id"]}
    assert r3["released"] is True and r3["changed"] is False and r3["run_id"] == r1["run_id"]
    assert not os.path.exists(lock)


def test_another_run_is_refused_while_the_holder_lives_and_breaks_its_lock_once_killed(act, lock, playbooks):
    a, b = playbooks.start(), playbooks.start()
    first, dummy = act({"path": lock, "playbook": "deploy.yml"}, a.workers[0])
    r, dummy = act({"path": lock, "playbook": "rollback.yml"}, b.workers[0])
    assert r["run_id"] != first["run_id"]
    assert r["acquired"] is False and r["held"] is True and r["changed"] is False
    # refused: the task fails, naming the holder and why it is not stale, then the caller's hint
    assert r["failed"] is True and r["refused"] is True
    assert r["reason"] == "its process %d is running on this controller" % a.pid
    assert "pid %d, playbook deploy.yml, run %s" % (a.pid, first["run_id"][:12]) in r["holder_text"]
    assert r["msg"].startswith("another gpufleet run holds the lock on h1 %s: its process %d is running"
                               % (r["holder_text"], a.pid))
    assert "(lock %s, held for " % lock in r["msg"]
    r, dummy = act({"path": lock, "playbook": "rollback.yml", "refuse_hint": "Wait for it."}, b.workers[0])
    assert r["msg"].endswith(" waited 0 s). Wait for it.")
    assert read_lock(lock)[1]["run_id"] == first["run_id"]
    a.kill()
    r, dummy = act({"path": lock, "playbook": "rollback.yml"}, b.workers[1])
    assert r["acquired"] is True and r["changed"] is True and r["broke"]["run_id"] == first["run_id"]
    assert not r.get("failed") and r["refused"] is False
    # breaking a stale lock is said, as a warning that names the run it was
    assert len(r["warnings"]) == 1 and r["warnings"][0].startswith("h1: ") and first["run_id"][:12] in r["warnings"][0]
    assert read_lock(lock)[1]["run_id"] == r["run_id"]


def test_check_mode_reaches_the_module_and_changes_nothing(act, lock, playbooks):
    a, b = playbooks.start(), playbooks.start()
    r, calls = act({"path": lock}, a.workers[0], check_mode=True)
    assert calls[0][2]["check"] is True and r["acquired"] is False and r["changed"] is False
    assert not os.path.exists(os.path.dirname(lock))
    act({"path": lock}, a.workers[0])
    a.kill()
    before = read_lock(lock)[1]
    r, dummy = act({"path": lock}, b.workers[0], check_mode=True)
    assert r["stale"] is True and r["broke"] is None and r["changed"] is False
    # check mode is not refused by a stale lock a real run would break, and says so
    assert not r.get("failed") and len(r["warnings"]) == 1
    r, dummy = act({"path": lock, "state": "release", "run_id": before["run_id"]}, b.workers[0], check_mode=True)
    assert r["released"] is False and r["ours"] is True
    assert read_lock(lock)[1] == before and os.listdir(os.path.dirname(lock)) == ["gpufleet"]


def test_a_release_by_another_run_leaves_the_lock(act, lock, playbooks):
    a, b = playbooks.start(), playbooks.start()
    first, dummy = act({"path": lock}, a.workers[0])
    r, dummy = act({"path": lock, "state": "release"}, b.workers[0])
    assert r["released"] is False and r["ours"] is False and r["run_id"] != first["run_id"]
    assert r["warnings"] == ["h1: the host lock %s was not this run's any more (broken by another run?): %s"
                             % (lock, json.dumps(r["holder"], sort_keys=True))]
    r, dummy = act({"path": lock, "state": "release", "run_id": "someone-else"}, a.workers[0])
    assert r["released"] is False and r["run_id"] == "someone-else"
    assert read_lock(lock)[1]["run_id"] == first["run_id"]


def test_the_playbook_defaults_to_the_playbooks_ansible_playbook_was_given(act, lock, playbooks, monkeypatch):
    monkeypatch.setattr(action_plugin.context, "CLIARGS", {"args": ["/src/playbooks/deploy.yml"]})
    act({"path": lock}, playbooks.start().workers[0])
    assert read_lock(lock)[1]["playbook"] == "deploy.yml"


@pytest.mark.parametrize("args,msg", [
    ({"path": "/l", "run_id": "x"}, "run_id only with state=release"),
    ({"path": "/l", "state": "release", "wait": 5}, "wait only with state=acquire"),
    ({"path": "/l", "holder": {"run_id": "x"}}, "Invalid options for gpufleet.inference.host_lock: holder"),
    ({"path": "/l", "state": "take"}, "value of state must be one of"),
])
def test_wrong_arguments_fail_before_the_host_is_reached(act, args, msg):
    with pytest.raises(AnsibleActionFail) as caught:
        act(args, os.getpid())
    assert msg in str(caught.value)


def test_one_ansible_playbook_run_is_one_run_on_every_host(tmp_path):
    playbook_bin = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.access(playbook_bin, os.X_OK):
        pytest.skip("no ansible-playbook beside %s" % sys.executable)
    (tmp_path / "ansible.cfg").write_text("[defaults]\ncollections_path = %s\nlocal_tmp = %s\n" % (
        os.path.join(ROOT, ".collections"), tmp_path / "tmp"))
    (tmp_path / "hosts.ini").write_text("h1\nh2\n\n[all:vars]\nansible_connection=local\nansible_python_interpreter=%s\n"
                                        % sys.executable)
    (tmp_path / "site.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - gpufleet.inference.host_lock:\n        path: '%s/{{ inventory_hostname }}'\n"
        "    - gpufleet.inference.host_lock:\n        path: '%s/{{ inventory_hostname }}'\n        state: release\n"
        "      when: release | default(false) | bool\n" % (tmp_path / "locks", tmp_path / "locks"))
    env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")

    def play(*extra):
        proc = subprocess.run([playbook_bin, "-i", "hosts.ini", "site.yml", "-f", "2"] + list(extra), cwd=str(tmp_path),
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        tasks = json.loads(proc.stdout)["plays"][0]["tasks"]
        return [{h: t["hosts"][h] for h in ("h1", "h2")} for t in tasks]

    take, dummy = play()
    first = take["h1"]["run_id"]
    assert take["h2"]["run_id"] == first and all(take[h]["acquired"] and not take[h]["changed"] for h in take)
    holders = [read_lock(str(tmp_path / "locks" / h))[1] for h in ("h1", "h2")]
    assert holders[0] == holders[1] and holders[0]["run_id"] == first and holders[0]["playbook"] == "site.yml"
    assert holders[0]["pid"]
    # check mode: the first run is gone, so its locks are stale; nothing is broken
    take, dummy = play("--check")
    assert all(take[h]["stale"] and take[h]["broke"] is None and take[h]["run_id"] != first for h in take)
    assert [read_lock(str(tmp_path / "locks" / h))[1] for h in ("h1", "h2")] == holders
    # a real run breaks them (a change), takes them as one run, and releases them
    take, release = play("-e", "release=true")
    assert take["h1"]["run_id"] == take["h2"]["run_id"] != first
    assert all(take[h]["changed"] and take[h]["broke"]["run_id"] == first for h in take)
    assert all(release[h]["released"] and not release[h]["changed"] for h in release)
    assert os.listdir(str(tmp_path / "locks")) == []


@pytest.mark.parametrize("path", ["relative/lock", "/var/lock/my lock", "/"])
def test_a_bad_path_is_refused_naming_the_variable_before_the_host_is_reached(act, playbooks, path):
    with pytest.raises(AnsibleActionFail) as err:
        act({"path": path, "path_name": "gpufleet_host_lock_path", "playbook": "deploy.yml"},
            playbooks.start().workers[0])
    assert str(err.value).startswith("gpufleet_host_lock_path must be an absolute path without spaces")
    assert repr(path) in str(err.value) and "Nothing was changed" in str(err.value)
