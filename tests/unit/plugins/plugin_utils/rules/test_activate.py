# -*- coding: utf-8 -*-
"""The activate role's value rules (plugin_utils/rules/activate.py): each bad value gives its
message, word for word as the preflight's Jinja gave it; the role's defaults pass; a value of
the wrong type is left to the type check (passes_type, which the other roles' rules share)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.activate import ENTRY_POINTS, activate_main
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.common import passes_type
from ansible_collections.gpufleet.inference.plugins.plugin_utils.value_rules import rule_errors

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 5))

with open(os.path.join(ROOT, "roles", "activate", "defaults", "main.yml"), encoding="utf-8") as _handle:
    DEFAULTS = dict((k, v) for k, v in yaml.safe_load(_handle).items() if not (isinstance(v, str) and "{{" in v))
# the templated defaults as they render without the playbook's variables (their default() values)
GOOD = dict(DEFAULTS, activate_venv_link="~/ml-env", activate_keep_previous=2, activate_adopt_existing_venv=False)
LINK = "activate_venv_link (gpufleet_venv_link) must be an absolute or ~/ path without spaces, not ending in / " \
       "(got '%s')"
KEEP = "activate_keep_previous (gpufleet_keep_previous_venvs) must be an integer >= 0 (got %s)"


def test_the_defaults_pass():
    assert {"activate_adopt_to", "activate_adopt_record"} <= set(DEFAULTS)
    assert activate_main(GOOD) == []
    # main is the one entry point with a spec: the others take its options, judged there
    assert sorted(ENTRY_POINTS) == ["main"]
    for entry_point in ENTRY_POINTS:
        assert rule_errors("activate", entry_point, GOOD) == []


@pytest.mark.parametrize("changes, message", [
    ({"activate_venv_link": "ml-env"}, LINK % "ml-env"),
    ({"activate_venv_link": "~/ml-env/"}, LINK % "~/ml-env/"),
    ({"activate_venv_link": "/srv/ml env"}, LINK % "/srv/ml env"),
    ({"activate_venv_link": "~"}, LINK % "~"),
    # the str type takes these (converted); the rule judges the value as given
    ({"activate_venv_link": 5}, LINK % "5"),
    ({"activate_venv_link": None}, LINK % "None"),
    ({"activate_keep_previous": -1}, KEEP % "-1"),
    ({"activate_keep_previous": "-1"}, KEEP % "-1"),
    # the int type takes a bool
    ({"activate_keep_previous": True}, KEEP % "True"),
])
def test_each_rule_names_the_variable_and_the_value(changes, message):
    assert activate_main(dict(GOOD, **changes)) == [message]
    assert rule_errors("activate", "main", dict(GOOD, **changes)) == [message]


@pytest.mark.parametrize("changes", [
    # the wrong type: the type check reports it, not a rule
    {"activate_keep_previous": "abc"}, {"activate_keep_previous": None}, {"activate_keep_previous": 2.5},
    # right
    {"activate_venv_link": "/opt/ml-env"}, {"activate_keep_previous": 0}, {"activate_keep_previous": "3"},
])
def test_a_value_of_another_type_or_a_good_one_passes(changes):
    assert activate_main(dict(GOOD, **changes)) == []


@pytest.mark.parametrize("value, kind, takes", [
    (5, "int", True), ("5", "int", True), (True, "int", True), (5.0, "int", True),
    ("abc", "int", False), (2.5, "int", False), (None, "int", False),
    ("0", "float", True), ("lots", "float", False),
    ({}, "dict", True), ("A=1", "dict", True), ([1], "dict", False), ("A", "dict", False),
    (None, "str", True), ([1], "str", True),
])
def test_passes_type_is_the_type_checks_conversion(value, kind, takes):
    assert passes_type(value, kind) is takes
