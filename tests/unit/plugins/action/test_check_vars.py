# -*- coding: utf-8 -*-
"""Action plugin check_vars: the type check and the caller's rules fail together, in one task."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleError
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar

from ansible_collections.gpufleet.inference.plugins.action.check_vars import ActionModule

SPEC = {"keep": {"type": "int"}, "smoke": {"type": "bool"}, "link": {"type": "str"}}


def run(args, task_vars=None):
    task = MagicMock()
    task.args = args
    task.async_val = 0
    task.check_mode = False
    task.diff = False
    loader = DataLoader()
    action = ActionModule(task, MagicMock(), PlayContext(), loader, Templar(loader=loader), None)
    return action.run(task_vars=task_vars or {})


def test_passes_when_types_and_rules_pass():
    res = run({"argument_spec": SPEC, "provided_arguments": {"keep": 2, "smoke": "yes"}, "errors": ["", " "]})
    assert not res.get("failed")
    assert res["msg"] == "The arg spec validation passed"


def test_rules_alone_fail_joined_like_an_assert():
    res = run({"argument_spec": SPEC, "provided_arguments": {"keep": 2},
               "errors": ["keep must be >= 0 (got -1)", "", "link must be absolute (got 'x')"]})
    assert res["failed"]
    assert res["msg"] == "keep must be >= 0 (got -1); link must be absolute (got 'x')"
    assert res["argument_errors"] == ["keep must be >= 0 (got -1)", "link must be absolute (got 'x')"]


def test_type_errors_and_rules_are_reported_together():
    res = run({"argument_spec": SPEC, "provided_arguments": {"smoke": "maybe"}, "errors": ["link must be absolute (got 'x')"]})
    assert res["failed"]
    lines = res["msg"].splitlines()
    assert lines[0] == "Validation of arguments failed:"
    assert "smoke" in lines[1] and "bool" in lines[1]
    assert lines[2] == "link must be absolute (got 'x')"


def test_values_not_provided_come_from_the_task_variables():
    res = run({"argument_spec": SPEC}, task_vars={"keep": "many"})
    assert res["failed"]
    assert "'keep' is of type str" in res["msg"]


@pytest.mark.parametrize("errors", ["one message", [1, 2], {"a": "b"}])
def test_errors_must_be_a_list_of_messages(errors):
    with pytest.raises(AnsibleError, match="errors must be a list of messages"):
        run({"argument_spec": SPEC, "errors": errors})


def test_a_roles_value_rules_run_on_the_same_values_before_the_callers_messages():
    spec = {"verify_timeout": {"type": "int"}, "verify_venv": {"type": "str"}}
    res = run({"argument_spec": spec, "rules": "verify.main", "errors": ["extra (got 1)"],
               "provided_arguments": {"verify_venv": "rel"}},
              task_vars={"verify_timeout": 0, "verify_venv_link": "~/ml-env", "verify_imports": []})
    assert res["failed"]
    # verify_venv_link and verify_imports are not in this spec: the rules see only the spec's values
    assert res["argument_errors"][:3] == [
        "verify_venv_link (gpufleet_venv_link) must be an absolute or ~/ path without spaces, not ending in / (got '')",
        "verify_venv must be '' (the active venv) or an absolute or ~/ path (got 'rel')",
        "verify_imports (gpufleet_verify_imports) must be a list of module names (got NoneType)"]
    assert "verify_timeout must be a number of seconds > 0 (got 0)" in res["argument_errors"]
    assert res["argument_errors"][-1] == "extra (got 1)"


def test_unknown_rules_are_an_error():
    # every role's main entry point has rules, and the message lists them all
    with pytest.raises(AnsibleError, match=r"rules must be one of (\S+, )*fleet\.validate, (\S+, )*uv_venv\.main.*got 'nope'"):
        run({"argument_spec": SPEC, "rules": "nope"})


def test_the_context_reaches_the_rules_but_not_the_type_check():
    # torch_nightly's rules read another role's results (uv_venv_dir): given in
    # the context, never type-checked, and a missing one is named
    with pytest.raises(AnsibleError, match="context must be a dict"):
        run({"argument_spec": {}, "rules": "flashinfer.main", "context": ["x"]})
    unset = "uv_venv_* / torch_nightly_constraints_file are not set"
    alone = run({"argument_spec": {}, "rules": "flashinfer.main", "context": {}})
    assert alone["failed"] and any(unset in e for e in alone["argument_errors"])
    ran = {"uv_venv_dir": "/home/deploy/ml-env-abc", "uv_venv_python": "/home/deploy/ml-env-abc/bin/python",
           "uv_venv_bin": "/usr/local/bin/uv", "torch_nightly_constraints_file": "/home/deploy/c.txt",
           # a context value of any type: the spec does not name it, so no type error
           "uv_venv_remote_wheelhouse_dir": None}
    after = run({"argument_spec": {}, "rules": "flashinfer.main", "context": ran})
    assert not any(unset in e for e in after.get("argument_errors", []))
    assert not any("uv_venv_remote_wheelhouse_dir" in e and "type" in e for e in after.get("argument_errors", []))
