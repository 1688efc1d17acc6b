# -*- coding: utf-8 -*-
"""probe_program.PROBE_HELPERS is the one list of the module_utils the probe
loads by name: each entry a real file the module ships, every by-name load in
the probe's code one of them, every attribute the probe reads of one a real
one, and the built program carrying exactly them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os
import re

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import probe_program
from ansible_collections.gpufleet.inference.plugins.module_utils.probe_program import (
    PROBE_HELPERS, helper_module, module_source, probe_source)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
PACKAGE = 'ansible_collections.gpufleet.inference.plugins.module_utils'
# The probe's own code: torch_probe and the helpers themselves (model_checks reaches kernel_checks by name).
PROBE_FILES = ['plugins/module_utils/torch_probe.py'] + list(PROBE_HELPERS.values())


def _tree(path):
    with open(os.path.join(ROOT, path)) as handle:
        return ast.parse(handle.read())


def _by_name(node):
    """The helper a node loads by name - helper('X') or sys.modules.get('gpufleet_X') - else None."""
    if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
        return None
    value = str(node.args[0].value)
    if isinstance(node.func, ast.Name) and node.func.id == 'helper':
        return value
    if ast.unparse(node.func) == 'sys.modules.get' and value.startswith('gpufleet_'):
        return value[len('gpufleet_'):]
    return None


def _loads(path):
    """[(helper, attribute or None)] of every by-name load in a file, with each attribute read of
    the helper: helper('X').attr, a name bound to helper('X'), or the call of a function that looks
    the helper up itself (model_checks' _kc)."""
    functions = [node for node in ast.walk(_tree(path)) if isinstance(node, ast.FunctionDef)]
    loaders = dict((function.name, _by_name(node)) for function in functions for node in ast.walk(function)
                   if _by_name(node))

    def loaded(node):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in loaders:
            return loaders[node.func.id]
        return _by_name(node)

    found = []
    for function in functions:
        bound = dict((node.targets[0].id, loaded(node.value)) for node in ast.walk(function)
                     if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and loaded(node.value))
        for node in ast.walk(function):
            if _by_name(node):
                found.append((_by_name(node), None))
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
                found.append((bound[node.value.id], node.attr))
            elif isinstance(node, ast.Attribute) and loaded(node.value):
                found.append((loaded(node.value), node.attr))
    return found


@pytest.mark.parametrize('name', sorted(PROBE_HELPERS))
def test_each_helper_is_a_real_file_that_the_module_ships(name):
    path = PROBE_HELPERS[name]
    assert os.path.isfile(os.path.join(ROOT, path)), path
    assert path == 'plugins/module_utils/%s.py' % name
    module = helper_module(path)
    assert module.__name__ == PACKAGE + '.' + name
    assert os.path.realpath(module.__file__) == os.path.realpath(os.path.join(ROOT, path))
    # AnsiballZ ships a module_utils file only where an import names it
    imported = [alias.name for node in ast.walk(_tree('plugins/module_utils/probe_program.py'))
                if isinstance(node, ast.ImportFrom) and node.module == PACKAGE for alias in node.names]
    assert name in imported


def test_every_helper_the_probe_loads_by_name_is_in_the_table_and_nothing_else():
    loaded = set(name for path in PROBE_FILES for name, dummy in _loads(path))
    assert loaded == set(PROBE_HELPERS)


@pytest.mark.parametrize('path', PROBE_FILES)
def test_what_the_probe_reads_of_a_helper_exists(path):
    for name, attribute in _loads(path):
        assert name in PROBE_HELPERS, '%s loads %s by name' % (path, name)
        if attribute is not None:
            assert hasattr(helper_module(PROBE_HELPERS[name]), attribute), '%s reads %s.%s' % (path, name, attribute)


def test_the_program_builds_exactly_the_helpers_of_the_table_in_its_order_then_torch_probe():
    source = probe_source()
    built = re.findall(r"^_gpufleet_sys\.modules\['gpufleet_(\w+)'\] = _gpufleet_m$", source, re.M)
    assert built == list(PROBE_HELPERS)
    for name, path in PROBE_HELPERS.items():
        assert repr(module_source(helper_module(path))) in source
        assert 'exec(compile(_gpufleet_m.__gpufleet_source__, %r, "exec")' % os.path.basename(path) in source
    assert source.index('"""The probe that gpufleet.inference.torch_verify runs') > source.rindex("_gpufleet_sys.modules[")
    assert probe_program.probe_argv('/x/python', {})[3] == source
