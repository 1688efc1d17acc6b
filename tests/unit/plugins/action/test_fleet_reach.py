# -*- coding: utf-8 -*-
"""Action plugin fleet_reach: venv_link_info on the host and deploy.yml's choice between
the fast path and the full chain, in one task; an unreachable host is recorded, not failed."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
from unittest.mock import MagicMock

import pytest
import yaml
from ansible.errors import AnsibleConnectionFailure
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar

from ansible_collections.gpufleet.inference.plugins.action import fleet_reach
from ansible_collections.gpufleet.inference.plugins.action.fleet_reach import ActionModule, choose

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
LINK = {"changed": False, "link_path": "/home/deploy/ml-env", "target": "/home/deploy/ml-env-abc",
        "markers": {"gpufleet-deployed.json": {"key": "k1", "venv": "/home/deploy/ml-env-abc"}}}
TASK_VARS = {"inventory_hostname": "sbx1", "hostvars": {"sbx1": {}}, "ansible_run_tags": ["all"],
             "ansible_skip_tags": []}


def reach(args, module, task_vars=None, key="k1", monkeypatch=None):
    task = MagicMock()
    task.args = dict({"link": "~/ml-env", "root": "/srv/collection"}, **args)
    task.async_val = 0
    task.check_mode = False
    task.diff = False
    loader = DataLoader()
    act = ActionModule(task, MagicMock(), PlayContext(), loader, Templar(loader=loader), None)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, module_args))
        if isinstance(module, Exception):
            raise module
        return dict(module)

    act._execute_module = execute
    monkeypatch.setattr(fleet_reach, "deploy_key", lambda hostvars, root: key)
    return act.run(task_vars=dict(TASK_VARS, **(task_vars or {}))), calls


def test_the_active_venvs_key_is_this_runs_the_fast_path(monkeypatch):
    res, calls = reach({"mode": "deploy", "first_stage": "lock"}, LINK, monkeypatch=monkeypatch)
    assert calls == [(fleet_reach.MODULE, {"link": "~/ml-env", "markers": ["gpufleet-deployed.json"], "adopt": False})]
    assert (res["fast"], res["stage"], res["deploy_key"], res["record"]) == (True, "verify", "k1", {"status": "running"})
    assert res["whole_run"] is True and not res.get("failed") and res["target"] == "/home/deploy/ml-env-abc"
    assert res["take_lock"] is True  # no lock path given: whether a lock is there is unknown


LOCK = "/var/lock/gpufleet"


@pytest.mark.parametrize("mode, key, there, take", [
    ("deploy", "k1", False, False),   # the fast path, no lock there: it only verifies, like verify.yml
    ("deploy", "k1", True, True),     # the fast path, a lock there: waited for, refused or broken as always
    ("deploy", "k1", None, True),     # not read (the module failed on the stable path): taken
    ("deploy", "k2", False, True),    # the full chain changes the host
    ("rollback", "k1", False, True),  # a rollback switches the stable path
])
def test_the_lock_is_skipped_only_on_the_fast_path_with_none_there(monkeypatch, mode, key, there, take):
    module = dict(LINK, exists={LOCK: there}) if there is not None else dict(LINK)
    res, calls = reach({"mode": mode, "first_stage": "lock", "lock_path": LOCK}, module, key=key,
                       monkeypatch=monkeypatch)
    assert res["take_lock"] is take, res
    asked = calls[0][1].get("exists")
    assert asked == ([LOCK] if mode == "deploy" else None)


def test_a_lock_path_that_is_not_absolute_is_left_to_the_lock_step(monkeypatch):
    res, calls = reach({"mode": "deploy", "first_stage": "lock", "lock_path": "var/lock/gpufleet"},
                       dict(LINK, exists={}), monkeypatch=monkeypatch)
    assert "exists" not in calls[0][1] and res["take_lock"] is True and res["fast"] is True


@pytest.mark.parametrize("args, task_vars, key", [
    ({}, {}, "k2"),                                        # another key: the full chain
    ({"full_run": "yes"}, {}, "k1"),                       # gpufleet_full_run
    ({}, {"ansible_run_tags": ["torch"]}, "k1"),           # a part of the chain only
    ({}, {"ansible_skip_tags": ["sgl_kernel"]}, "k1"),
    ({}, {"ansible_skip_tags": ["notest", "flashinfer_warm"]}, "k1"),  # a role's own phase
    ({}, {"ansible_skip_tags": ["always"]}, "k1"),
    ({}, {"ansible_skip_tags": ["untagged"]}, "k1"),
])
def test_the_full_chain_otherwise(monkeypatch, args, task_vars, key):
    res, dummy = reach(dict({"mode": "deploy", "first_stage": "lock"}, **args), LINK, task_vars, key, monkeypatch)
    assert res["fast"] is False and res["stage"] == "lock" and res["record"] == {"status": "running"}


def test_an_unreachable_host_is_recorded_not_failed(monkeypatch):
    res, dummy = reach({"mode": "deploy"}, AnsibleConnectionFailure("ssh: connect to host: Connection refused"),
                       monkeypatch=monkeypatch)
    assert not res.get("failed") and "unreachable" not in res
    assert res["host_unreachable"] is True and res["deploy_key"] == "" and res["stage"] == "connect"
    assert res["record"] == {"status": "unreachable", "stage": "connect",
                             "message": "ssh: connect to host: Connection refused"}


def test_a_stable_path_the_module_refuses_is_left_to_the_validation(monkeypatch):
    res, dummy = reach({"mode": "deploy", "first_stage": "lock"},
                       {"failed": True, "msg": "~/ml-env is not a symlink"}, monkeypatch=monkeypatch)
    assert not res.get("failed") and res["link_failed"] is True and res["msg"] == "~/ml-env is not a symlink"
    assert res["fast"] is False and res["record"] == {"status": "running"}


def test_rollback_has_no_fast_path_and_no_key(monkeypatch):
    res, dummy = reach({"mode": "rollback", "first_stage": "lock"}, LINK, monkeypatch=monkeypatch)
    assert (res["fast"], res["deploy_key"], res["stage"]) == (False, "", "lock")


def test_choose_needs_a_key():
    assert choose({"markers": {}}, "deploy", "", True, "lock") == ({"status": "running"}, "lock", False)


def test_skipping_tags_the_chain_does_not_use_keeps_the_fast_path(monkeypatch):
    # molecule runs every converge with --skip-tags molecule-notest,notest,molecule-idempotence-notest
    skip = {"ansible_skip_tags": ["molecule-notest", "notest", "molecule-idempotence-notest"]}
    res, dummy = reach({"mode": "deploy", "first_stage": "lock"}, LINK, skip, monkeypatch=monkeypatch)
    assert (res["fast"], res["whole_run"], res["stage"]) == (True, True, "verify")


def test_every_tag_of_the_chain_counts_as_one():
    """Each tag a task of the collection carries is one whole_run knows: a new
    tag outside them would let --skip-tags leave a part out unnoticed."""
    tags = set()

    def walk(node):
        if isinstance(node, dict):
            value = node.get("tags")
            if isinstance(value, str):
                value = [value]
            if isinstance(value, list) and "name" in node:  # a task or play, not galaxy_tags
                tags.update(str(t) for t in value)
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    for folder in ("roles", "playbooks"):
        for path in glob.glob(os.path.join(ROOT, folder, "**", "*.yml"), recursive=True):
            if os.sep + "meta" + os.sep in path:
                continue
            with open(path, encoding="utf-8") as handle:
                walk(yaml.safe_load(handle))
    assert {"torch", "sgl_kernel", "uv_venv_install", "always"} <= tags, tags  # the walk found them
    assert sorted(t for t in tags if not fleet_reach.chain_tag(t)) == []
    assert not fleet_reach.chain_tag("notest") and not fleet_reach.chain_tag("molecule-idempotence-notest")
