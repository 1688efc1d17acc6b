# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.inference.plugins.module_utils import gpu
from ansible_collections.gpufleet.inference.plugins.modules import gpu_facts
from ansible_collections.gpufleet.inference.tests.unit.plugins.modules.module_harness import load_cases, run_case


@load_cases('test_gpu_facts.yaml')
def test_gpu_facts(case, monkeypatch):
    monkeypatch.setattr(gpu, 'cuda_driver_version', lambda: case.get('cuda_driver_version'))
    result, calls = run_case(gpu_facts.main, case, monkeypatch)
    for args, kwargs, environ in calls:
        # Decoding must never raise on bytes that are not UTF-8, and nvidia-smi speaks C.
        assert kwargs.get('errors') == 'replace'
        assert environ['LC_ALL'] == 'C' and environ['LANG'] == 'C'
        assert isinstance(args, list)
    facts = result.get('ansible_facts', {}).get('gpufleet_gpu', {})
    if 'gpu_count' in case:
        assert len(facts['gpus']) == case['gpu_count']
        assert [gpu['index'] for gpu in facts['gpus']] == list(range(case['gpu_count']))
    if 'gpu_names' in case:
        assert [gpu['name'] for gpu in facts['gpus']] == case['gpu_names']
