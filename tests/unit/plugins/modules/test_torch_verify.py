# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible_collections.gpufleet.inference.plugins.module_utils.verify import probe_source
from ansible_collections.gpufleet.inference.plugins.modules import torch_verify
from ansible_collections.gpufleet.inference.tests.unit.plugins.modules.module_harness import load_cases, run_case


def probe_command(args):
    """The probe source is long: check it is the module_utils probe, show it as <probe>."""
    if '-c' not in args:
        return list(args)
    index = args.index('-c') + 1
    assert args[index] == probe_source()
    return list(args[:index]) + ['<probe>'] + [json.loads(arg) for arg in args[index + 1:]]


@load_cases('test_torch_verify.yaml')
def test_torch_verify(case, monkeypatch):
    monkeypatch.setattr(torch_verify, 'is_executable', lambda path: case.get('python_exists', True))
    result, calls = run_case(torch_verify.main, case, monkeypatch, command_matcher=probe_command)
    for args, kwargs, environ in calls:
        assert isinstance(args, list)
        assert kwargs.get('errors') == 'replace'
        assert environ['LC_ALL'] == 'C'
    assert result['changed'] is False if 'changed' in result else True
    if result.get('failed'):
        # Facts travel with every failure after the probe ran, for rescue blocks and reports.
        assert 'gpufleet_torch' in result.get('ansible_facts', {}) or not calls
        assert result['msg']
    # The probe source never shows up in what the module returns.
    assert 'def main():' not in json.dumps(result)
