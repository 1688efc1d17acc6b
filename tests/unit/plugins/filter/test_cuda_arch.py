# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.inference.plugins.filter.cuda_arch import FilterModule, cuda_arch_list

CASES = [
    # (id, input, expected)
    ('blackwell_sm120', ['12.0'], ['12.0a']),
    ('hopper_sm90', ['9.0'], ['9.0a']),
    ('blackwell_sm100', ['10.0'], ['10.0a']),
    ('b300_sm103', ['10.3'], ['10.3a']),
    ('ada_plain', ['8.9'], ['8.9']),
    ('ampere_plain', ['8.6', '8.0'], ['8.0', '8.6']),
    ('deduplicated_sorted_numerically', ['12.0', '9.0', '12.0', '8.9', '9.0'], ['8.9', '9.0a', '12.0a']),
    ('sm_forms', ['sm_90', 'sm120', '89', 'sm_90a'], ['8.9', '9.0a', '12.0a']),
    ('numbers', [9.0, 12.0, 8.6], ['8.6', '9.0a', '12.0a']),
    ('single_value', '12.0', ['12.0a']),
    ('empty', [], []),
    ('tuples', [(9, 0), [12, 0]], ['9.0a', '12.0a']),
]


@pytest.mark.parametrize('value, expected', [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_cuda_arch_list(value, expected):
    assert cuda_arch_list(value) == expected


@pytest.mark.parametrize('value', [['nine'], ['9'], [None], [True], ['9.0.1'], ['sm_9']])
def test_not_a_compute_capability(value):
    with pytest.raises(AnsibleFilterError, match='cuda_arch_list: not a compute capability'):
        cuda_arch_list(value)


def test_registered_under_contract_name():
    assert FilterModule().filters()['cuda_arch_list'] is cuda_arch_list
