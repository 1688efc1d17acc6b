# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.inference.plugins.filter.cuda_arch import (
    FilterModule,
    arch_target_errors,
    cuda_arch_list,
    gencode_flags,
)

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


@pytest.mark.parametrize('arch_list, flags', [
    (['12.0a'], ['-gencode=arch=compute_120a,code=sm_120a']),
    ('9.0a', ['-gencode=arch=compute_90a,code=sm_90a']),
    ('9.0a;12.0a', ['-gencode=arch=compute_90a,code=sm_90a', '-gencode=arch=compute_120a,code=sm_120a']),
    (['8.9+PTX'], ['-gencode=arch=compute_89,code=sm_89', '-gencode=arch=compute_89,code=compute_89']),
    (['10.0f'], ['-gencode=arch=compute_100f,code=sm_100f']),
], ids=['sm120a', 'string', 'two', 'ptx', 'family'])
def test_gencode_flags_compile_exactly_the_list(arch_list, flags):
    assert gencode_flags(arch_list) == flags


def test_gencode_flags_refuse_a_non_target():
    with pytest.raises(AnsibleFilterError, match='gencode_flags'):
        gencode_flags(['12.0b'])


@pytest.mark.parametrize('arch_list, cuda, expected', [
    (['12.0a', '9.0a'], '13.0', []),
    (['12.0a'], '12.8', []),
    (['12.0a'], '12.4', ['sgl_kernel_arch_list: 12.0a needs CUDA >= 12.8, the toolkit is CUDA 12.4']),
    (['10.0f'], '12.8', ['sgl_kernel_arch_list: 10.0f needs CUDA >= 12.9, the toolkit is CUDA 12.8']),
    (['10.1a'], '13.0', ['sgl_kernel_arch_list: 10.1a is not compiled by CUDA 13.0 (its last release is 12.9)']),
    (['12.0a'], '12.10', []),  # numeric, not string, comparison
    (['12.0a+PTX'], '13.0', []),
    (['9.1a'], None, ["sgl_kernel_arch_list: '9.1a' is not a CUDA target; allowed: 7.5, 8.0"]),
], ids=['ok', 'minimum', 'too-old', 'family-too-old', 'dropped', 'numeric', 'ptx', 'unknown'])
def test_arch_target_errors(arch_list, cuda, expected):
    errors = arch_target_errors(arch_list, cuda)
    assert len(errors) == len(expected)
    for error, start in zip(errors, expected):
        assert error.startswith(start), error
