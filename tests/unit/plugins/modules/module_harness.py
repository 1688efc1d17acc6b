# -*- coding: utf-8 -*-
"""Run a module's main() against a table case with run_command mocked.

A case (YAML) gives the module ``input``, the ``bin_paths`` that get_bin_path
finds, and the ``run_command_calls`` the module must make, in order, each with
the ``command`` it must pass (or ``command_startswith``) and the recorded
``rc``/``out``/``err`` (``out_base64`` for bytes that are not UTF-8, decoded
with the module's own ``errors`` argument as run_command does). ``output`` is
matched as a subset of the module's result; ``msg_contains`` lists substrings.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import os

import pytest
import yaml

from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.testing import patch_module_args

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, 'fixtures')


class ModuleExit(Exception):
    def __init__(self, result):
        super(ModuleExit, self).__init__(result.get('msg'))
        self.result = result


def load_cases(name):
    with open(os.path.join(HERE, name)) as handle:
        cases = yaml.safe_load(handle)
    return pytest.mark.parametrize('case', cases, ids=[case['id'] for case in cases])


def fixture_text(name):
    with open(os.path.join(FIXTURES, name), 'rb') as handle:
        return handle.read()


def _recorded_output(call, key):
    if key + '_base64' in call:
        return base64.b64decode(call[key + '_base64'])
    if key + '_fixture' in call:
        return fixture_text(call[key + '_fixture'])
    return call.get(key, '').encode('utf-8')


def _finish(self, result, failed):
    result = dict(result)
    if failed:
        result['failed'] = True
    # What Ansible does with a result: it must survive UTF-8 JSON.
    json.dumps(result, ensure_ascii=False).encode('utf-8')
    raise ModuleExit(result)


def assert_subset(expected, actual, path='result'):
    if isinstance(expected, dict):
        assert isinstance(actual, dict), '%s: expected a dict, found %r' % (path, actual)
        for key, value in expected.items():
            assert key in actual, '%s: missing key %r in %r' % (path, key, sorted(actual))
            assert_subset(value, actual[key], '%s.%s' % (path, key))
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), \
            '%s: expected %r, found %r' % (path, expected, actual)
        for index, (item, found) in enumerate(zip(expected, actual)):
            assert_subset(item, found, '%s[%d]' % (path, index))
    else:
        assert expected == actual, '%s: expected %r, found %r' % (path, expected, actual)


def run_case(main, case, monkeypatch, command_matcher=None):
    calls = list(case.get('run_command_calls', []))
    seen = []
    bin_paths = case.get('bin_paths', {})

    def run_command(self, args, **kwargs):
        assert calls, 'unexpected run_command %r' % (args,)
        call = calls.pop(0)
        seen.append((args, kwargs, dict(self.run_command_environ_update)))
        if 'command' in call:
            expected = call['command']
            found = command_matcher(args) if command_matcher else args
            assert found == expected, 'command: expected %r, found %r' % (expected, found)
        if 'command_startswith' in call:
            prefix = call['command_startswith']
            assert list(args[:len(prefix)]) == prefix, 'command: expected %r..., found %r' % (prefix, args)
        if 'environ_update' in call:
            assert kwargs.get('environ_update') == call['environ_update']
        errors = kwargs.get('errors', 'surrogate_or_strict')
        out = to_text(_recorded_output(call, 'out'), errors=errors)
        err = to_text(_recorded_output(call, 'err'), errors=errors)
        return call.get('rc', 0), out, err

    def get_bin_path(self, arg, required=False, opt_dirs=None):
        return bin_paths.get(arg)

    monkeypatch.setattr(basic.AnsibleModule, 'run_command', run_command)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', get_bin_path)
    monkeypatch.setattr(basic.AnsibleModule, 'exit_json', lambda self, **kw: _finish(self, kw, False))
    monkeypatch.setattr(basic.AnsibleModule, 'fail_json', lambda self, **kw: _finish(self, kw, True))
    with patch_module_args(case.get('input', {})):
        with pytest.raises(ModuleExit) as caught:
            main()
    result = caught.value.result
    assert not calls, 'run_command calls not made: %r' % calls
    assert_subset(case.get('output', {}), result)
    for text in case.get('msg_contains', []):
        assert text in result.get('msg', ''), 'msg: expected to contain %r, found %r' % (text, result.get('msg'))
    return result, seen


def probe_command(args):
    """A command matcher for torch_verify's probe run: the probe source is long; check it is the
    module_utils probe and show it as <probe>, with its JSON parameters parsed."""
    from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import probe_source

    if '-c' not in args:
        return list(args)
    index = args.index('-c') + 1
    assert args[index] == probe_source()
    return list(args[:index]) + ['<probe>'] + [json.loads(arg) for arg in args[index + 1:]]
