# -*- coding: utf-8 -*-
"""The one list of the collection's own names (plugin_utils/internal_names.py) against the tree: every name
a role or playbook sets (set_fact, register, vars/main.yml, play and task vars) and every fact a module
returns is an input or internal, and every internal name is really set; the namespace has each role's prefix."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import glob
import os
import re

import yaml

from ansible_collections.gpufleet.inference.plugins.plugin_utils import internal_names
from ansible_collections.gpufleet.inference.tests.unit import test_house

ROOT = test_house.ROOT


def _vars_set():
    """name -> files, for the names roles and playbooks set with vars: a role's vars/main.yml, play vars,
    and the vars of a task (what an include or import hands the role or file it runs)."""
    found = {}

    def walk(node, path):
        if isinstance(node, dict):
            if isinstance(node.get("vars"), dict):
                for name in node["vars"]:
                    found.setdefault(name, set()).add(path)
            for value in node.values():
                walk(value, path)
        elif isinstance(node, list):
            for value in node:
                walk(value, path)

    for path in test_house._yaml_files():  # pylint: disable=protected-access
        with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
        if "/vars/" in path:
            for name in data or {}:
                found.setdefault(name, set()).add(path)
        elif "/tasks/" in path or path.startswith("playbooks/"):
            walk(data, path)
    return found


def _module_facts():
    """The host facts the modules return (the ansible_facts entry of RETURN, read alone: a module's other
    entries are no concern here), name -> module."""
    found = {}
    for path in glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py")):
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        for node in tree.body:
            if isinstance(node, ast.Assign) and [getattr(t, "id", "") for t in node.targets] == ["RETURN"]:
                entry = re.search(r"^ansible_facts:\n(?:[ #].*\n|\n)*", node.value.value, re.M)
                facts = yaml.safe_load(entry.group(0))["ansible_facts"] if entry else {}
                for name in facts.get("contains") or {}:
                    found[name] = os.path.basename(path)
    return found


def _set_names():
    names = {n: set(files) for n, files in test_house.SETTERS.items()}
    for name, files in _vars_set().items():
        names.setdefault(name, set()).update(files)
    for name, module in _module_facts().items():
        names.setdefault(name, set()).add(module)
    # private names (_x, __x) never leave their file or role; ansible_* are Ansible's own
    return {n: f for n, f in names.items() if not n.startswith(("_", "ansible_"))}


def test_every_name_the_collection_sets_is_an_input_or_internal():
    declared = set(internal_names.declared_names())
    missing = sorted("%s (%s)" % (n, ", ".join(sorted(f))) for n, f in _set_names().items()
                     if n not in declared and n not in internal_names.INTERNAL)
    assert missing == [], "set but neither declared nor in internal_names.INTERNAL"


def test_every_internal_name_is_set_and_none_is_an_input():
    set_names = _set_names()
    assert sorted(n for n in internal_names.INTERNAL if n not in set_names) == []
    assert sorted(internal_names.INTERNAL & set(internal_names.declared_names())) == []


def test_the_named_results_and_the_module_facts_are_internal():
    named = test_house._named_results()  # pylint: disable=protected-access
    assert named and sorted(set(named) - internal_names.INTERNAL) == []
    assert sorted(_module_facts()) == ["gpufleet_gpu", "gpufleet_torch"]


def test_the_namespace_has_each_roles_prefix():
    roles = sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
                   for p in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")))
    # the fleet role's inputs are the playbooks': gpufleet_
    assert sorted(p for p in internal_names.PREFIXES if p != "gpufleet_") >= sorted(
        r + "_" for r in roles if r != "fleet")
    declared = internal_names.declared_names()
    assert [n for n in declared if not internal_names.has_prefix(n)] == []


def test_unknown_names_and_the_nearest_input():
    assert internal_names.unknown_names(
        ["gpufleet_expext", "gpufleet_expect", "uv_venv_dir", "ansible_user", "mine", "gpufleet_mine"],
        allowed=["gpufleet_mine"]) == ["gpufleet_expext"]
    assert internal_names.nearest("gpufleet_expext") == "gpufleet_expect"
    assert internal_names.nearest("verify_tiemout") == "verify_timeout"
    # the prefix two names share does not make them near
    assert internal_names.nearest("gpufleet_sandbox_container") is None
