# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import gpu


@pytest.mark.parametrize('value, text', [(13000, '13.0'), (12080, '12.8'), (12090, '12.9'), (13010, '13.1'), (None, None)])
def test_format_cuda_version(value, text):
    assert gpu.format_cuda_version(value) == text


def test_query_asks_for_every_fact_in_one_run():
    argv = gpu.nvidia_smi_argv('/usr/bin/nvidia-smi')
    assert argv == ['/usr/bin/nvidia-smi',
                    '--query-gpu=index,name,uuid,compute_cap,memory.total,pci.bus_id,driver_version',
                    '--format=csv,noheader,nounits']


def test_cuda_driver_version_without_libcuda(monkeypatch):
    import ctypes

    def no_library(name):
        raise OSError('%s: cannot open shared object file' % name)

    monkeypatch.setattr(ctypes, 'CDLL', no_library)
    assert gpu.cuda_driver_version() is None


def test_cuda_driver_version_from_libcuda(monkeypatch):
    import ctypes

    class FakeLibcuda(object):
        @staticmethod
        def cuDriverGetVersion(pointer):
            pointer._obj.value = 13000
            return 0

    monkeypatch.setattr(ctypes, 'CDLL', lambda name: FakeLibcuda())
    assert gpu.cuda_driver_version() == '13.0'


def test_empty_output_is_no_gpu():
    facts = gpu.facts_from_query('\n', '13.0')
    assert facts['present'] is False and facts['gpus'] == [] and facts['error'] == 'nvidia-smi listed no GPU'
