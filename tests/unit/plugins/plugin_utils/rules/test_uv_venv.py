# -*- coding: utf-8 -*-
"""The uv_venv role's value rules (plugin_utils/rules/uv_venv.py): each bad value gives the message the
role's preflight asserts gave, the defaults pass with a stack, a value of the wrong type is left to the
type check."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.common import nothing_changed, text
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.uv_venv import uv_venv_main
from ansible_collections.gpufleet.inference.plugins.plugin_utils.value_rules import rule_errors

ROLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "..", "roles", "uv_venv")


def _load(*parts):
    with open(os.path.join(ROLE, *parts), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


DEFAULTS = {k: v for k, v in _load("defaults", "main.yml").items() if "{{" not in str(v)}
# the templated defaults as they render for a role used on its own
RENDERED = {"uv_venv_link": "~/ml-env", "uv_venv_deploy_user": "", "uv_venv_wheelhouse": "",
            "uv_venv_remote_wheelhouse": "~/.cache/gpufleet/wheelhouse"}
# the stack as the molecule scenario gives it (the default {} is refused: the stack names the venv)
STACK = {"uv_venv_stack": {"torch": "2.13.0+cpu", "flashinfer": "0.6.0.dev20260307"}}
GOOD = dict(DEFAULTS, **dict(RENDERED, **STACK))
STACK_MESSAGE = "uv_venv_stack must be a non-empty dict of the pinned stack ({name: version}); it names the venv"


def test_the_defaults_pass_with_a_stack():
    assert "uv_venv_uv_version" in DEFAULTS and "uv_venv_python_search_paths" in DEFAULTS
    assert uv_venv_main(dict(DEFAULTS, **STACK)) == []
    assert uv_venv_main(GOOD) == [] and rule_errors("uv_venv", "main", GOOD) == []
    # the role's own default stack is empty: a caller must give one
    assert uv_venv_main(DEFAULTS) == [STACK_MESSAGE]


def test_the_defaults_and_the_scenarios_values_type_check():
    spec = _load("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    for values in (GOOD, dict(GOOD, uv_venv_python_version="3.12", uv_venv_wheelhouse="/srv/wheelhouse")):
        values = {k: v for k, v in values.items() if k in spec}
        assert ArgumentSpecValidator(spec).validate(values, validate_role_argument_spec=True).error_messages == []


@pytest.mark.parametrize("values, message", [
    ({"uv_venv_uv_version": "0.13"}, "uv_venv_uv_version must be an exact X.Y.Z version (got '0.13')"),
    ({"uv_venv_uv_version": ">=0.13.9"}, "uv_venv_uv_version must be an exact X.Y.Z version (got '>=0.13.9')"),
    ({"uv_venv_uv_prefix": "opt/uv"}, "uv_venv_uv_prefix must be an absolute path (got 'opt/uv')"),
    ({"uv_venv_uv_prefix": "~/uv"}, "uv_venv_uv_prefix must be an absolute path (got '~/uv')"),
    ({"uv_venv_python_version": "3"}, "uv_venv_python_version must be '' (auto) or 3.X (got '3')"),
    ({"uv_venv_python_version": "2.7"}, "uv_venv_python_version must be '' (auto) or 3.X (got '2.7')"),
    ({"uv_venv_python_version": "python3.12"},
     "uv_venv_python_version must be '' (auto) or 3.X (got 'python3.12')"),
    ({"uv_venv_link": "ml-env"}, "uv_venv_link (gpufleet_venv_link) must be an absolute path or start with ~/ and "
                                 "not end with / (got 'ml-env')"),
    ({"uv_venv_link": "~/ml-env/"}, "uv_venv_link (gpufleet_venv_link) must be an absolute path or start with ~/ "
                                    "and not end with / (got '~/ml-env/')"),
    ({"uv_venv_link": "~/ml env"}, "uv_venv_link (gpufleet_venv_link) must be an absolute path or start with ~/ "
                                   "and not end with / (got '~/ml env')"),
    ({"uv_venv_remote_wheelhouse": "wheels"},
     "uv_venv_remote_wheelhouse must be an absolute path or start with ~/ (got 'wheels')"),
    ({"uv_venv_remote_wheelhouse": "~/a b"},
     "uv_venv_remote_wheelhouse must be an absolute path or start with ~/ (got '~/a b')"),
    ({"uv_venv_stack": {}}, STACK_MESSAGE),
    # a string the dict type would convert ("k=v")
    ({"uv_venv_stack": "torch=2.13.0"}, STACK_MESSAGE),
    ({"uv_venv_fingerprint_length": 7}, "uv_venv_fingerprint_length must be between 8 and 64 (got 7)"),
    ({"uv_venv_fingerprint_length": "65"}, "uv_venv_fingerprint_length must be between 8 and 64 (got 65)"),
    ({"uv_venv_fingerprint_length": 0}, "uv_venv_fingerprint_length must be between 8 and 64 (got 0)"),
    ({"uv_venv_wheelhouse": "/nonexistent/wheelhouse"},
     "uv_venv_wheelhouse (gpufleet_wheelhouse) must be '' (install from the indexes) or a folder of wheels on the "
     "controller (got '/nonexistent/wheelhouse', which is not a folder)"),
    ({"uv_venv_python_search_paths": "/usr/bin,/usr/local/bin"},
     "uv_venv_python_search_paths must be a list (got string '/usr/bin,/usr/local/bin'); nothing was changed."),
    ({"uv_venv_python_search_paths": ["/usr/bin", 5]},
     "uv_venv_python_search_paths must be a list of strings (got number 5); nothing was changed."),
])
def test_each_bad_value_gives_its_message(values, message):
    assert uv_venv_main(dict(GOOD, **values)) == [message]


@pytest.mark.parametrize("values", [
    {"uv_venv_python_version": "3.12"}, {"uv_venv_python_version": 3.12}, {"uv_venv_python_version": ""},
    {"uv_venv_link": "/srv/venvs/ml-env"}, {"uv_venv_remote_wheelhouse": "/srv/wheelhouse"},
    {"uv_venv_fingerprint_length": 8}, {"uv_venv_fingerprint_length": "64"},
    # another type: the type check's
    {"uv_venv_fingerprint_length": "many"}, {"uv_venv_fingerprint_length": None}, {"uv_venv_stack": None},
    {"uv_venv_stack": ["torch"]}, {"uv_venv_python_search_paths": None},
])
def test_good_values_and_other_types_pass(values):
    assert uv_venv_main(dict(GOOD, **values)) == []


def test_the_wheelhouse_is_a_folder_on_the_controller(tmp_path):
    (tmp_path / "a-file").write_text("")
    assert uv_venv_main(dict(GOOD, uv_venv_wheelhouse=str(tmp_path))) == []
    assert uv_venv_main(dict(GOOD, uv_venv_wheelhouse=str(tmp_path / "a-file"))) == [
        "uv_venv_wheelhouse (gpufleet_wheelhouse) must be '' (install from the indexes) or a folder of wheels on the "
        "controller (got '%s', which is not a folder)" % (tmp_path / "a-file")]


def test_every_message_at_once_the_list_one_last():
    errors = uv_venv_main(dict(GOOD, uv_venv_uv_prefix="uv", uv_venv_python_search_paths="/usr/bin",
                               uv_venv_fingerprint_length=4))
    assert [e.split(" ")[0] for e in errors] == [
        "uv_venv_uv_prefix", "uv_venv_fingerprint_length", "uv_venv_python_search_paths"]
    assert errors[2].endswith("; nothing was changed.") and not errors[1].endswith("nothing was changed.")


def test_a_variable_not_given_is_not_judged():
    # check_vars gives the rules only the variables that are set (the spec's default applies to the others)
    assert uv_venv_main({}) == []
    assert text({}, "uv_venv_link") is None and text({"uv_venv_link": None}, "uv_venv_link") == ""
    assert nothing_changed([]) == [] and nothing_changed(["a", "b"]) == ["a", "b; nothing was changed."]
