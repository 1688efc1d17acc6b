# -*- coding: utf-8 -*-
"""Action plugin check_vars: the type check and the caller's rules fail together, in one task."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
from unittest.mock import MagicMock

import pytest
import yaml
from ansible.errors import AnsibleError
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from ansible_collections.gpufleet.inference.plugins.action.check_vars import ActionModule
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.defaults import ROOT, role_defaults

with open(os.path.join(ROOT, "roles", "fleet", "meta", "argument_specs.yml"), encoding="utf-8") as _handle:
    FLEET_SPEC = _handle.read()

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


@pytest.mark.parametrize("value, shown", [("60GB", "'60GB'"), ([1], "list [1]"), ({"gb": 4}, 'dict {"gb": 4}')])
def test_a_float_type_error_names_no_python_class(value, shown):
    # a variable no rule judges: the type check's error, in the rules' words
    res = run({"argument_spec": {"sgl_kernel_gb_per_job": {"type": "float"}},
               "provided_arguments": {"sgl_kernel_gb_per_job": value}})
    assert res["argument_errors"] == ["sgl_kernel_gb_per_job must be a number (got %s)" % shown]
    assert "<class" not in res["msg"] and res["msg"].startswith("Validation of arguments failed:")


def test_a_float_a_rule_names_is_said_once_in_the_rules_words():
    spec = yaml.safe_load(FLEET_SPEC)["argument_specs"]["validate"]["options"]
    res = run({"argument_spec": spec, "rules": "fleet.validate",
               "provided_arguments": {"gpufleet_min_free_gib": "60GB", "gpufleet_outlier_ratio": "abc"}},
              task_vars=role_defaults("fleet"))
    assert res["msg"] == ("gpufleet_outlier_ratio must be a number > 0 and <= 1 (got abc); "
                          "gpufleet_min_free_gib must be a number of GiB (got '60GB')")


def _inventory(tmp_path, hosts_yml, group_vars, manager=None):
    """hostvars of an inventory written to TMP_PATH, as a play's task variables have them (MANAGER: a list that
    gets the variable manager, for what a run sets on a host)."""
    (tmp_path / "hosts.yml").write_text(hosts_yml)
    (tmp_path / "group_vars").mkdir()
    for group, text in group_vars.items():
        (tmp_path / "group_vars" / ("%s.yml" % group)).write_text(text)
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(tmp_path)])
    variables = VariableManager(loader=loader, inventory=inventory)
    if manager is not None:
        manager.append(variables)
    return {"hostvars": HostVars(inventory, variables, loader), "ansible_inventory_sources": [str(tmp_path)],
            "playbook_dir": str(tmp_path)}


CLUSTER = """
all:
  children:
    gpu_nodes:
      vars: {gpufleet_expect: {device_count: 1}}
      children:
        rtx_pro_6000:
          hosts: {gpu01: {gpufleet_verify_smoke: true}, gpu02: {}}
        h200:
          vars: {sgl_kernel_arch_list: ["9.0a"]}
          hosts: {gpu01: {}, h200-01: {}}
"""
MODELS = {"rtx_pro_6000": 'gpufleet_expect: {device_count: 8}\nsgl_kernel_arch_list: ["12.0a"]\n'
                          "gpufleet_expext: {device_count: 7}\n",
          "h200": "gpufleet_expect: {device_count: 8}\n",
          "all": 'torch_nightly_date: "20260310"\ntorch_nightly_versions: {torch: "2.12.0.dev20260307+cu130"}\n'}


def test_the_hosts_check_reads_what_the_hosts_set_and_their_groups(tmp_path):
    task_vars = _inventory(tmp_path, CLUSTER, MODELS)
    spec = yaml.safe_load(FLEET_SPEC)["argument_specs"]["hosts"]["options"]
    res = run({"argument_spec": spec, "rules": "fleet.hosts",
               "context": {"fleet_hosts_matched": ["gpu01", "gpu02", "h200-01"]}}, task_vars=task_vars)
    assert res["argument_errors"] == [
        "gpufleet_expext is not an input of this collection; did you mean gpufleet_expect? (set for gpu01 and gpu02; "
        "a variable of your own goes into gpufleet_allowed_variables)",
        # gpu_nodes sets gpufleet_expect too: the parent of both, whose value each child's overrides as meant
        "gpu01 is in h200 and rtx_pro_6000, which both set gpufleet_expect and sgl_kernel_arch_list: a host takes "
        "one GPU model's group",
        "torch_nightly_date must be the date of the nightly versions pinned in torch_nightly_versions, which win "
        "over it (got '20260310'; pinned: torch 2.12.0.dev20260307+cu130; on gpu01, gpu02 and h200-01)"]


def test_each_host_is_judged_on_what_it_set_itself_not_on_defaults(tmp_path):
    manager = []
    task_vars = _inventory(tmp_path, CLUSTER, dict(MODELS, all="gpufleet_allowed_variables: [gpufleet_expext]\n"),
                           manager)
    # a role's default and what this run set on the host are no operator's variables
    manager[0].set_host_facts("gpu02", {"uv_venv_dir": "/x"})
    spec = yaml.safe_load(FLEET_SPEC)["argument_specs"]["validate"]["options"]
    for host in ("gpu01", "gpu02", "h200-01"):
        res = run({"argument_spec": spec, "rules": "fleet.validate"},
                  task_vars=dict(role_defaults("fleet"), inventory_hostname=host, verify_tiemout=1, **task_vars))
        assert not res.get("failed"), res["msg"]


def test_a_value_that_does_not_render_is_left_to_the_hosts_own_validation(tmp_path):
    task_vars = _inventory(tmp_path, "all:\n  hosts:\n    gpu01:\n", {
        "all": 'gpufleet_report_dir: "{{ nowhere_defined }}"\ngpufleet_allowed_variables: "{{ nor_this }}"\n'
               "gpufleet_mine: 1\n"})
    spec = yaml.safe_load(FLEET_SPEC)["argument_specs"]["hosts"]["options"]
    res = run({"argument_spec": spec, "rules": "fleet.hosts", "context": {"fleet_hosts_matched": ["gpu01"]}},
              task_vars=task_vars)
    assert not res.get("failed"), res["msg"]
