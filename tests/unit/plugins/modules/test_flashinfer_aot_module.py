# -*- coding: utf-8 -*-
"""gpufleet.inference.flashinfer_aot: inputs refused before the venv's
interpreter runs, check mode of a build, and the program's answer handed on
(run_command recorded; the program itself is tested in module_utils)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import flashinfer_aot as aot
from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import module_source
from ansible_collections.gpufleet.inference.plugins.modules import flashinfer_aot
from ansible_collections.gpufleet.inference.tests.unit.plugins.modules.module_harness import run_case

PY = '/home/deploy/ml-env/bin/python'


def run(monkeypatch, calls=(), **params):
    return run_case(flashinfer_aot.main, {'input': params, 'run_command_calls': list(calls)}, monkeypatch)


@pytest.mark.parametrize('params, message', [
    ({'action': 'build', 'modules': ['fused_moe_91'], 'arch_list': ['9.0a'], 'out': '/o', 'workspace': '/w'},
     "modules: expected flashinfer JIT module names from "),
    ({'action': 'build', 'modules': [], 'arch_list': ['9.0a'], 'out': '/o', 'workspace': '/w'},
     'modules: expected at least one module to build, found none'),
    ({'action': 'install', 'modules': ['norm'], 'arch_list': ['90'], 'src': '/s'},
     'arch_list: expected CUDA architectures as major.minor with an optional a or f'),
    ({'action': 'install', 'modules': ['norm'], 'arch_list': ['9.0a']},
     'src: expected the artifact directory to place norm from, found none'),
    ({'action': 'build', 'modules': ['norm'], 'arch_list': ['9.0a']},
     'action is build but all of the following are missing: out, workspace'),
])
def test_bad_inputs_fail_before_the_interpreter_runs(monkeypatch, params, message):
    result, seen = run(monkeypatch, python=PY, **params)
    assert result['failed'] is True and message in result['msg'], result['msg']
    assert seen == []


def test_build_in_check_mode_says_what_it_would_build_and_runs_nothing(monkeypatch):
    result, seen = run(monkeypatch, python=PY, action='build', modules=['fused_moe_90'], arch_list=['9.0a'],
                       out='/o', workspace='/w', _ansible_check_mode=True)
    assert result['changed'] is True and result['msg'] == 'check mode: would build fused_moe_90 for 9.0a'
    assert seen == []


def test_install_hands_the_program_its_parameters_and_returns_its_answer(monkeypatch):
    answer = {'changed': True, 'placed': ['norm'], 'removed': [], 'aot_dir': '/x', 'marker': {'key': 'k'}}
    result, seen = run(monkeypatch, [{'rc': 0, 'out': 'noise\n' + json.dumps(answer) + '\n'}], python=PY,
                       action='install', modules=['norm'], arch_list=['9.0a'], cuda_version='13.0', src='/s', key='k')
    args = seen[0][0]
    assert args[:3] == [PY, '-I', '-c'] and args[3] == module_source(aot)
    sent = json.loads(args[4])
    assert sent['action'] == 'install' and sent['modules'] == ['norm'] and sent['check_mode'] is False
    assert result['changed'] is True and result['placed'] == ['norm'] and 'failed' not in result


def test_a_failure_of_the_program_fails_the_module_with_its_message(monkeypatch):
    answer = {'failed': True, 'msg': 'norm: expected sha256 aa, found bb in /s/norm.so'}
    result, dummy = run(monkeypatch, [{'rc': 0, 'out': json.dumps(answer), 'err': 'building norm (1/1)\n'}],
                        python=PY, action='install', modules=['norm'], arch_list=['9.0a'], src='/s')
    assert result['failed'] is True and result['msg'] == answer['msg']


def test_no_answer_names_the_interpreter(monkeypatch):
    result, dummy = run(monkeypatch, [{'rc': 1, 'out': '', 'err': 'Traceback ...'}], python=PY, action='status')
    assert result['failed'] is True
    assert result['msg'] == 'status: expected a JSON line from %s, found none (rc 1)' % PY
