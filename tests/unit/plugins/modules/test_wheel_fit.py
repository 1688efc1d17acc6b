# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.inference.plugins.modules import wheel_fit


# requires_torch as wheel_info joins it: the Requires-Dist lines on torch, '; ' between them.
@pytest.mark.parametrize('pin, version, met', [
    # A specifier without a local label ignores the version's (PEP 440).
    ('torch==2.14.1', '2.14.1+cu130', True),
    ('torch==2.14.1', '2.14.1', True),
    ('torch == 2.14.1', '2.14.1+cu130', True),
    ('torch (==2.14.1)', '2.14.1+cu130', True),
    ('torch==2.14.*', '2.14.1+cu130', True),
    ('torch==2.14.1', '2.14.0+cu130', False),
    ('torch==2.14.1', '2.14.1rc1+cu130', False),
    ('torch==2.9.1', '2.14.1+cu130', False),
    # A specifier with a local label compares it.
    ('torch==2.14.1+cu130', '2.14.1+cu130', True),
    ('torch==2.14.1+cu128', '2.14.1+cu130', False),
    # Ranges compare the public version: a local build of 2.15.0 is not below 2.15.
    ('torch>=2.14', '2.14.1+cu130', True),
    ('torch>=2.14.1', '2.14.1+cu130', True),
    ('torch>=2.15', '2.14.1+cu130', False),
    ('torch<2.15', '2.14.1+cu130', True),
    ('torch<2.14.1', '2.14.1+cu130', False),
    ('torch<2.15', '2.15.0+cu130', False),
    ('torch>=2.9,<2.15', '2.14.1+cu130', True),
    ('torch>=2.9,<2.14', '2.14.1+cu130', False),
    # Markers are not evaluated; every line on torch must be met.
    ('torch==2.14.1; platform_machine == "x86_64"', '2.14.1+cu130', True),
    ('torch>=2.9; torch<2.14', '2.14.1+cu130', False),
    ('torch', '2.14.1+cu130', True),
    # What cannot be read is not met.
    ('torch @ https://example.invalid/torch.whl', '2.14.1+cu130', None),
    ('torch==2.14.1', 'not-a-version', None),
])
def test_torch_pin_met(pin, version, met):
    assert wheel_fit.torch_pin_met(pin, version) is met


def test_a_met_pin_is_not_named():
    assert wheel_fit.torch_pin_reason('torch==2.14.1', '2.14.1+cu130') is None


@pytest.mark.parametrize('pin, version, sentence', [
    ('torch==2.9.1', '2.14.1+cu130', "the wheel's metadata requires torch==2.9.1; the venv has torch 2.14.1+cu130"),
    ('torch==2.14.1+cu128', '2.14.1+cu130',
     "the wheel's metadata requires torch==2.14.1+cu128; the venv has torch 2.14.1+cu130"),
    ('torch @ https://example.invalid/torch.whl', '2.14.1+cu130',
     "the wheel's metadata requires torch @ https://example.invalid/torch.whl; the venv has torch 2.14.1+cu130"),
    ('', '2.14.1+cu130', "the wheel's metadata names no torch it was built for; the venv has torch 2.14.1+cu130"),
    (None, '2.9.1+cu128', "the wheel's metadata names no torch it was built for; the venv has torch 2.9.1+cu128"),
])
def test_a_pin_that_is_not_met_or_absent_is_named(pin, version, sentence):
    assert wheel_fit.torch_pin_reason(pin, version) == sentence
