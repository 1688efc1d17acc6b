# -*- coding: utf-8 -*-
"""The value rules of the playbooks' and the verify role's inputs (plugin_utils/rules/fleet.py, verify.py):
the messages name the variable, what it may be and what it was; a value of the wrong
type is left to the type check."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.fleet import fleet_validate
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.verify import verify_main
from ansible_collections.gpufleet.inference.plugins.plugin_utils.value_rules import rule_errors

FLEET = {"gpufleet_venv_link": "~/ml-env", "gpufleet_keep_previous_venvs": 2, "gpufleet_collectives_sizes_mib": [1, 16, 64],
         "gpufleet_expect": {}, "gpufleet_textfile_dir": "", "gpufleet_outlier_ratio": 0.9, "gpufleet_min_free_gib": 20,
         "gpufleet_rollback_expect": None, "gpufleet_kernel_tolerances": {}, "gpufleet_rollback_ignore_expect": [],
         "gpufleet_serial": "100%", "gpufleet_max_fail_percentage": 100}
VERIFY = {"verify_venv_link": "~/ml-env", "verify_venv": "", "verify_imports": [], "verify_timeout": 900,
          "verify_expect": {"consistent": True}, "verify_kernel_tolerances": {}}


def test_the_defaults_pass():
    assert fleet_validate(FLEET) == [] and verify_main(VERIFY) == []
    assert rule_errors("fleet", "validate", FLEET) == [] and rule_errors("uv_venv", "main", {}) == []


@pytest.mark.parametrize("name, value, message", [
    ("gpufleet_venv_link", "ml-env",
     "gpufleet_venv_link must be an absolute or ~/ path without spaces, not ending in / (got 'ml-env')"),
    ("gpufleet_venv_link", "~/ml-env/",
     "gpufleet_venv_link must be an absolute or ~/ path without spaces, not ending in / (got '~/ml-env/')"),
    ("gpufleet_keep_previous_venvs", -1, "gpufleet_keep_previous_venvs must be an integer >= 0 (got -1)"),
    # the play keywords, checked on each host too (under --limit the controller's check is skipped)
    ("gpufleet_serial", "abc",
     'gpufleet_serial must be a number of hosts >= 1, a percentage 1%-100% or a list of them (got "abc")'),
    ("gpufleet_serial", [1, "150%"],
     'gpufleet_serial must be a number of hosts >= 1, a percentage 1%-100% or a list of them (got [1, "150%"])'),
    ("gpufleet_serial", [], "gpufleet_serial must be a number of hosts >= 1, a percentage 1%-100% or a list of them (got [])"),
    ("gpufleet_serial", 0, "gpufleet_serial must be a number of hosts >= 1, a percentage 1%-100% or a list of them (got 0)"),
    ("gpufleet_max_fail_percentage", "abc", "gpufleet_max_fail_percentage must be an integer 0-100 (got 'abc')"),
    ("gpufleet_max_fail_percentage", 101, "gpufleet_max_fail_percentage must be an integer 0-100 (got '101')"),
    ("gpufleet_keep_previous_venvs", "-3", "gpufleet_keep_previous_venvs must be an integer >= 0 (got -3)"),
    ("gpufleet_collectives_sizes_mib", [64, 0],
     "gpufleet_collectives_sizes_mib must be a non-empty list of different positive sizes in MiB (got [64, 0])"),
    ("gpufleet_collectives_sizes_mib", [64, 64],
     "gpufleet_collectives_sizes_mib must be a non-empty list of different positive sizes in MiB (got [64, 64])"),
    # a string would be split at its commas by the list type: refused here
    ("gpufleet_collectives_sizes_mib", "64,256",
     'gpufleet_collectives_sizes_mib must be a non-empty list of different positive sizes in MiB (got "64,256")'),
    ("gpufleet_expect", {"allreduce_size_mib": 256},
     "gpufleet_expect.allreduce_size_mib must be one of gpufleet_collectives_sizes_mib [1, 16, 64] (got 256)"),
    ("gpufleet_textfile_dir", "metrics", "gpufleet_textfile_dir must be an absolute path without spaces "
                                         "(node_exporter's --collector.textfile.directory) (got 'metrics')"),
    ("gpufleet_textfile_dir", "/var/lib/node exporter", "gpufleet_textfile_dir must be an absolute path without "
     "spaces (node_exporter's --collector.textfile.directory) (got '/var/lib/node exporter')"),
    ("gpufleet_outlier_ratio", 1.5, "gpufleet_outlier_ratio must be a number > 0 and <= 1 (got 1.5)"),
    ("gpufleet_outlier_ratio", "nope", "gpufleet_outlier_ratio must be a number > 0 and <= 1 (got nope)"),
    ("gpufleet_min_free_gib", -1, "gpufleet_min_free_gib must be a number of GiB >= 0 (got -1)"),
    # not a number: said by the rule, whose words name the unit (the type check's would name a Python class)
    ("gpufleet_min_free_gib", "60GB", "gpufleet_min_free_gib must be a number of GiB (got '60GB')"),
    ("gpufleet_min_free_gib", [60], "gpufleet_min_free_gib must be a number of GiB (got list [60])"),
])
def test_each_fleet_rule_names_the_variable_and_the_value(name, value, message):
    assert fleet_validate(dict(FLEET, **{name: value})) == [message]


@pytest.mark.parametrize("name, value", [
    # the wrong type: the type check reports it, not a rule
    ("gpufleet_venv_link", 5), ("gpufleet_keep_previous_venvs", "many"), ("gpufleet_collectives_sizes_mib", 5),
    # what the type check takes as a float
    ("gpufleet_min_free_gib", "60"), ("gpufleet_min_free_gib", True), ("gpufleet_min_free_gib", None),
    # right
    ("gpufleet_textfile_dir", "/srv/metrics"), ("gpufleet_expect", {"allreduce_size_mib": 16}),
    ("gpufleet_outlier_ratio", "0.5"),
])
def test_a_value_of_another_type_or_a_good_one_passes_the_rules(name, value):
    assert fleet_validate(dict(FLEET, **{name: value})) == []


def test_the_expectation_dicts_and_tolerances_are_checked_by_key():
    errors = fleet_validate(dict(FLEET, gpufleet_rollback_expect={"bogus": 1}, gpufleet_kernel_tolerances={"x": 1},
                                 gpufleet_rollback_ignore_expect=["torch_version", "nope"]))
    assert [e.split(" ")[0] for e in errors] == ["gpufleet_rollback_expect", "gpufleet_kernel_tolerances",
                                                 "gpufleet_rollback_ignore_expect"]
    assert errors[2].endswith("(got 'nope')")


@pytest.mark.parametrize("name, value, message", [
    ("verify_venv_link", "x", "verify_venv_link (gpufleet_venv_link) must be an absolute or ~/ path without spaces, "
                              "not ending in / (got 'x')"),
    ("verify_venv", "rel", "verify_venv must be '' (the active venv) or an absolute or ~/ path (got 'rel')"),
    ("verify_imports", "flashinfer", "verify_imports (gpufleet_verify_imports) must be a list of module names (got str)"),
    ("verify_timeout", 0, "verify_timeout must be a number of seconds > 0 (got 0)"),
    ("verify_timeout", True, "verify_timeout must be a number of seconds > 0 (got True)"),
])
def test_each_verify_rule(name, value, message):
    assert verify_main(dict(VERIFY, **{name: value})) == [message]
    assert verify_main(dict(VERIFY, verify_timeout="30", verify_venv="/opt/venv")) == []


@pytest.mark.parametrize("serial, max_fail", [(2, 0), ("25%", 100), ([1, 5, "100%"], "30"), ("1", 0)])
def test_valid_play_keywords_pass(serial, max_fail):
    assert fleet_validate(dict(FLEET, gpufleet_serial=serial, gpufleet_max_fail_percentage=max_fail)) == []


# --- the serving fleet's inputs: busy threshold, drain and return hooks, the wait after a drain ---------------

HOOK_FORMS = ("must be a command as a list of strings (argv, run without a shell), the path of a task file ending "
              "in .yml or .yaml, or [] for none")


@pytest.mark.parametrize("name", ["gpufleet_drain_hook", "gpufleet_return_hook"])
@pytest.mark.parametrize("value, got", [
    ("scontrol update nodename=gpu01 state=drain reason=verify",
     "(got the string 'scontrol update nodename=gpu01 state=drain reason=verify': a command must be a list of strings)"),
    ("  ", "(got the string '  ': a command must be a list of strings)"),
    (["scontrol", 5], '(got ["scontrol", 5])'),
    (["scontrol", ""], '(got ["scontrol", ""])'),
    (["scontrol", "  "], '(got ["scontrol", "  "])'),
    ([None], "(got [null])"),
    ({"argv": ["scontrol"]}, '(got {"argv": ["scontrol"]})'),
    (5, "(got 5)"),
])
def test_a_hook_that_is_not_a_command_list_or_a_task_file_is_refused(name, value, got):
    assert fleet_validate(dict(FLEET, **{name: value})) == ["%s %s %s" % (name, HOOK_FORMS, got)]


@pytest.mark.parametrize("suffix", [".yml", ".yaml"])
def test_a_hook_task_file_that_does_not_exist_is_refused_naming_the_path(tmp_path, suffix):
    path = str(tmp_path / ("drain" + suffix))
    assert fleet_validate(dict(FLEET, gpufleet_drain_hook=path)) == [
        "gpufleet_drain_hook: the task file %s does not exist on the controller" % path]


def test_a_hook_task_file_that_is_a_directory_is_refused(tmp_path):
    (tmp_path / "hooks.yml").mkdir()
    assert fleet_validate(dict(FLEET, gpufleet_return_hook=str(tmp_path / "hooks.yml"))) == [
        "gpufleet_return_hook: the task file %s does not exist on the controller" % (tmp_path / "hooks.yml")]


@pytest.mark.parametrize("value", [
    [], None, "",
    ["scontrol", "update", "nodename={{ inventory_hostname }}", "state=drain", "reason={{ fleet_hook_reason }}"],
    ["/usr/local/bin/drain"],
])
def test_a_hook_that_is_none_or_a_command_list_passes(value):
    assert fleet_validate(dict(FLEET, gpufleet_drain_hook=value, gpufleet_return_hook=value)) == []


def test_an_existing_task_file_passes(tmp_path):
    (tmp_path / "drain.yml").write_text("- ansible.builtin.debug: {msg: drain}\n")
    (tmp_path / "return.yaml").write_text("[]\n")
    assert fleet_validate(dict(FLEET, gpufleet_drain_hook=str(tmp_path / "drain.yml"),
                               gpufleet_return_hook=str(tmp_path / "return.yaml"))) == []


def test_a_task_file_under_home_is_looked_up_there(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert fleet_validate(dict(FLEET, gpufleet_drain_hook="~/absent.yml")) == [
        "gpufleet_drain_hook: the task file ~/absent.yml does not exist on the controller"]
    (tmp_path / "drain.yml").write_text("[]\n")
    assert fleet_validate(dict(FLEET, gpufleet_drain_hook="~/drain.yml")) == []


@pytest.mark.parametrize("name, value, message", [
    ("gpufleet_busy_memory_mib", 0, "gpufleet_busy_memory_mib must be a number of MiB > 0 (got 0)"),
    ("gpufleet_busy_memory_mib", -5, "gpufleet_busy_memory_mib must be a number of MiB > 0 (got -5)"),
    ("gpufleet_busy_memory_mib", "0", "gpufleet_busy_memory_mib must be a number of MiB > 0 (got 0)"),
    ("gpufleet_drain_wait_seconds", -1, "gpufleet_drain_wait_seconds must be a number of seconds >= 0 (got -1)"),
    ("gpufleet_drain_wait_seconds", "soon", "gpufleet_drain_wait_seconds must be a number of seconds >= 0 (got soon)"),
    ("gpufleet_expect", {"max_kernel_proof_age_hours": -1},
     "gpufleet_expect.max_kernel_proof_age_hours must be a number >= 0 (got -1)"),
    ("gpufleet_expect", {"max_kernel_proof_age_hours": "a day"},
     "gpufleet_expect.max_kernel_proof_age_hours must be a number >= 0 (got 'a day')"),
    ("gpufleet_rollback_expect", {"max_kernel_proof_age_hours": -0.5},
     "gpufleet_rollback_expect.max_kernel_proof_age_hours must be a number >= 0 (got -0.5)"),
])
def test_each_serving_rule_names_the_variable_and_the_value(name, value, message):
    assert fleet_validate(dict(FLEET, **{name: value})) == [message]


@pytest.mark.parametrize("name, value", [
    ("gpufleet_busy_memory_mib", 1), ("gpufleet_busy_memory_mib", "4096"), ("gpufleet_drain_wait_seconds", 0),
    ("gpufleet_drain_wait_seconds", "600"), ("gpufleet_expect", {"max_kernel_proof_age_hours": 0}),
    ("gpufleet_expect", {"max_kernel_proof_age_hours": 24.5}),
])
def test_good_serving_values_pass(name, value):
    assert fleet_validate(dict(FLEET, **{name: value})) == []


def test_the_serving_messages_follow_the_others_in_order():
    errors = fleet_validate(dict(FLEET, gpufleet_busy_memory_mib=0, gpufleet_drain_wait_seconds=-1,
                                 gpufleet_drain_hook="drain now", gpufleet_return_hook=[1],
                                 gpufleet_expect={"max_kernel_proof_age_hours": -1}))
    assert [error.split(" ")[0].rstrip(":") for error in errors] == [
        "gpufleet_busy_memory_mib", "gpufleet_drain_wait_seconds", "gpufleet_drain_hook", "gpufleet_return_hook",
        "gpufleet_expect.max_kernel_proof_age_hours"]


@pytest.mark.parametrize("value, message", [
    (0, "verify_busy_memory_mib (gpufleet_busy_memory_mib) must be a number of MiB > 0 (got 0)"),
    (-5, "verify_busy_memory_mib (gpufleet_busy_memory_mib) must be a number of MiB > 0 (got -5)"),
])
def test_the_verify_roles_busy_threshold(value, message):
    assert verify_main(dict(VERIFY, verify_busy_memory_mib=value)) == [message]
    assert verify_main(dict(VERIFY, verify_busy_memory_mib=1)) == []


def test_a_host_pattern_that_matches_nothing_is_named_with_the_inventory():
    from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.fleet import fleet_hosts
    context = {"gpufleet_hosts": "gpu*", "fleet_hosts_matched": [], "fleet_inventory_groups": ["sandbox"],
               "fleet_inventory_sources": ["/inv/hosts.yml"], "fleet_inventory_size": 3,
               "gpufleet_serial": 0, "gpufleet_max_fail_percentage": 100}
    errors = fleet_hosts(context)
    assert errors[0] == ("gpufleet_hosts must be a host pattern that matches at least one host of the inventory "
                         "(got 'gpu*'); the inventory /inv/hosts.yml has 3 host(s) in the groups sandbox. "
                         "Nothing was changed.")
    # the play keywords are judged in the same task
    assert errors[1].startswith("gpufleet_serial must be")
    assert fleet_hosts(dict(context, fleet_hosts_matched=["sbx1"], gpufleet_serial=1)) == []
    # an empty inventory has no groups to name
    assert fleet_hosts(dict(context, fleet_inventory_groups=[], fleet_inventory_size=0, gpufleet_serial=1))[0].endswith(
        "has 0 host(s). Nothing was changed.")
    # the per-host validation has no inventory context: the pattern is not judged there
    assert rule_errors("fleet", "validate", dict(FLEET, gpufleet_hosts="gpu*")) == []


@pytest.mark.parametrize("path", ["relative/lock", "/var/lock/gp fleet", "/", "//"])
def test_a_host_lock_path_that_is_not_absolute_or_is_the_root_is_refused(path):
    assert fleet_validate(dict(FLEET, gpufleet_host_lock_path=path)) == [
        "gpufleet_host_lock_path must be an absolute path without spaces, not / itself (got %r); the lock directory "
        "is made there as root (default /var/lock/gpufleet, on tmpfs)" % path]
    assert fleet_validate(dict(FLEET, gpufleet_host_lock_path="/run/lock/gpufleet")) == []


def test_every_entry_point_that_shares_main_options_shares_its_rules():
    import os
    import yaml
    from ansible_collections.gpufleet.inference.plugins.plugin_utils.value_rules import RULES
    roles = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "..", "roles")
    checked = 0
    for role in sorted(os.listdir(roles)):
        with open(os.path.join(roles, role, "meta", "argument_specs.yml"), encoding="utf-8") as handle:
            specs = yaml.safe_load(handle)["argument_specs"]
        main = specs.get("main", {}).get("options")
        if (role, "main") not in RULES:
            continue
        for entry, spec in specs.items():
            if spec.get("options") == main:
                assert RULES.get((role, entry)) is RULES[(role, "main")], (role, entry)
                checked += 1
    # main of the eight roles with main rules (their other entry points have no
    # argument spec of their own: they take main's options, checked by main's rules)
    assert checked >= 8


@pytest.mark.parametrize("unit", [True, "yes", "true"])
def test_a_serving_unit_without_a_model_is_refused(unit):
    # the unit's EnvironmentFile is written by the verification only for a served model
    assert fleet_validate(dict(FLEET, gpufleet_serving_unit=unit, gpufleet_model="")) == [
        "gpufleet_serving_unit needs gpufleet_model (or gpufleet_model_config): the unit's flags come from the env "
        "file the verification writes for the served model, and none is set"]
    assert fleet_validate(dict(FLEET, gpufleet_serving_unit=unit, gpufleet_model="qwen3-30b-a3b")) == []
    assert fleet_validate(dict(FLEET, gpufleet_serving_unit=unit, gpufleet_model_config={"hidden_size": 8})) == []
    assert fleet_validate(dict(FLEET, gpufleet_serving_unit=False, gpufleet_model="")) == []
