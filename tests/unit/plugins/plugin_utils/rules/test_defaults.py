# -*- coding: utf-8 -*-
"""The value rules read a variable's default from its role's defaults/main.yml
(plugin_utils/rules/defaults.py), where a value was not given."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules import defaults
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.fleet import fleet_hosts, serving_errors
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.verify import model_errors

from ansible_collections.gpufleet.inference.tests.unit.plugins.plugin_utils.rules.role_files import role_defaults


@pytest.mark.parametrize("role, name", [
    ("fleet", "gpufleet_busy_memory_mib"), ("fleet", "gpufleet_serial"), ("fleet", "gpufleet_max_fail_percentage"),
    ("fleet", "gpufleet_drain_wait_seconds"), ("fleet", "gpufleet_run_id"), ("verify", "verify_timeout"),
])
def test_a_missing_value_is_the_roles_default(role, name):
    assert defaults.given({}, role, name) == role_defaults(role)[name]


def test_a_chained_default_gives_its_fallback():
    # {{ gpufleet_busy_memory_mib | default(N) }}: N, what the verify role has on its own
    assert defaults.given({}, "verify", "verify_busy_memory_mib") == role_defaults("fleet")["gpufleet_busy_memory_mib"]
    assert defaults.given({}, "verify", "verify_model") == ""


@pytest.mark.parametrize("value", [None, "", 0, [], "{{ x }}"])
def test_a_given_value_is_taken_as_it_is(value):
    assert defaults.given({"gpufleet_busy_memory_mib": value}, "fleet", "gpufleet_busy_memory_mib") == value


def test_the_defaults_are_read_once():
    assert defaults.role_defaults("fleet") is defaults.role_defaults("fleet")


def test_an_unknown_variable_is_an_error_not_a_silent_none():
    with pytest.raises(KeyError):
        defaults.given({}, "fleet", "gpufleet_no_such_variable")


def test_rules_called_without_the_defaulted_variables_judge_the_defaults(monkeypatch):
    assert serving_errors({}) == []
    assert fleet_hosts({}) == []
    assert model_errors({}) == []
    # the threshold the rule judges is the one the role's defaults give
    monkeypatch.setattr(defaults, "role_default", lambda role, name: 0 if name.endswith("busy_memory_mib") else
                        defaults.effective(defaults.role_defaults(role)[name]))
    assert serving_errors({}) == ["gpufleet_busy_memory_mib must be a number of MiB > 0 (got 0)"]
