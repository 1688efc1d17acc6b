# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import gpu, verify_steps
from ansible_collections.gpufleet.inference.plugins.modules import torch_verify
from ansible_collections.gpufleet.inference.tests.unit.plugins.modules.module_harness import load_cases, probe_command, run_case


@load_cases('test_torch_verify.yaml')
def test_torch_verify(case, monkeypatch):
    monkeypatch.setattr(verify_steps, 'is_executable', lambda path: case.get('python_exists', True))
    monkeypatch.setattr(gpu, 'cuda_driver_version', lambda: case.get('cuda_driver_version'))
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


# link=...: the stable path is read and the venv verified in the same module run.

def _venv(path):
    os.makedirs(os.path.join(path, 'bin'))
    python = os.path.join(path, 'bin', 'python')
    with open(python, 'w') as handle:
        handle.write('#!/bin/sh\n')
    os.chmod(python, 0o755)
    return path


def _link_case(params, calls=()):
    return {'input': params, 'run_command_calls': list(calls)}


def test_link_verifies_the_active_venv_and_returns_the_link(tmp_path, monkeypatch):
    active = _venv(str(tmp_path / 'ml-env-b'))
    os.symlink(active, str(tmp_path / 'ml-env'))
    (tmp_path / '.ml-env.history').write_text(str(tmp_path / 'ml-env-a') + '\n' + active + '\n')
    case = _link_case({'link': str(tmp_path / 'ml-env')},
                      [{'command_startswith': [active + '/bin/python', '-I', '-c'],
                        'out_fixture': 'probe-cpu-torch-2.13.0.json'}])
    result, calls = run_case(torch_verify.main, case, monkeypatch)
    assert not result.get('failed') and result['probed'] is True
    assert result['link']['active_venv'] == active and result['link']['target'] == active
    assert result['link']['history'] == [str(tmp_path / 'ml-env-a'), active]
    assert result['ansible_facts']['gpufleet_torch']['torch_version'] == '2.13.0+cpu'


def test_link_with_a_venv_that_check_mode_has_not_built(tmp_path, monkeypatch):
    case = _link_case({'link': str(tmp_path / 'ml-env'), 'venv': str(tmp_path / 'ml-env-new'),
                       '_ansible_check_mode': True})
    result, calls = run_case(torch_verify.main, case, monkeypatch)
    assert not result.get('failed') and result['probed'] is False and not calls
    assert 'would be verified after the real install' in result['msg']
    assert result['link']['target'] == str(tmp_path / 'ml-env-new')


def test_link_with_a_venv_without_interpreter_fails_naming_it(tmp_path, monkeypatch):
    (tmp_path / 'ml-env-half').mkdir()
    case = _link_case({'link': str(tmp_path / 'ml-env'), 'venv': str(tmp_path / 'ml-env-half')})
    result, calls = run_case(torch_verify.main, case, monkeypatch)
    assert result['failed'] and result['probed'] is False
    assert result['msg'] == '%s/bin/python does not exist: %s is not a usable venv.' % (
        tmp_path / 'ml-env-half', tmp_path / 'ml-env-half')


@pytest.mark.parametrize('check_mode', [False, True])
def test_link_without_active_venv_has_nothing_to_verify(tmp_path, monkeypatch, check_mode):
    case = _link_case({'link': str(tmp_path / 'ml-env'), '_ansible_check_mode': check_mode})
    result, calls = run_case(torch_verify.main, case, monkeypatch)
    assert result['failed'] and result['msg'].startswith('nothing to verify: %s is not a symlink' % (tmp_path / 'ml-env'))


def test_link_that_is_a_real_directory_is_refused(tmp_path, monkeypatch):
    _venv(str(tmp_path / 'ml-env'))
    result, calls = run_case(torch_verify.main, _link_case({'link': str(tmp_path / 'ml-env')}), monkeypatch)
    assert result['failed'] and 'exists and is not a symlink' in result['msg'] and not calls


@pytest.mark.parametrize('params, text', [
    ({'python': '/usr/bin/python3', 'link': '/home/deploy/ml-env'}, 'mutually exclusive'),
    ({}, 'one of the following is required'),
    ({'python': '/usr/bin/python3', 'venv': '/home/deploy/ml-env-x'}, 'venv: only used with link'),
])
def test_python_or_link(params, text, monkeypatch):
    result, calls = run_case(torch_verify.main, _link_case(params), monkeypatch)
    assert result['failed'] and text in result['msg']


# serving_name=...: the serving flags written inside the verified venv, only
# after a pass with the backends selected.

def _serving_case(tmp_path, monkeypatch, status='selected', probe=True, **extra):
    from ansible_collections.gpufleet.inference.plugins.module_utils import model_verify

    def judge(model, facts, params, numeric):
        facts['model'] = {'name': 'qwen3-30b-a3b', 'precision': 'bf16', 'tp': 1, 'shapes': {}, 'families': []}
        facts['backends'] = {'status': status, 'flags': {}, 'args': '', 'env': 'SGLANG_ARGS=""\n', 'verdicts': {},
                             'sglang_version': '0.5.23', 'source': 'x'}
        return [] if status == 'selected' else ['backends: no moe_runner backend qualified']

    monkeypatch.setattr(model_verify, 'judge', judge)
    active = str(tmp_path / 'ml-env-b')
    if not os.path.isdir(active):
        _venv(active)
        os.symlink(active, str(tmp_path / 'ml-env'))
    params = dict({'link': str(tmp_path / 'ml-env'), 'model': 'qwen3-30b-a3b', 'serving_name': 'gpufleet-serving'},
                  **extra)
    case = _link_case(params, [{'command_startswith': [active + '/bin/python', '-I', '-c'],
                                'out_fixture': 'probe-cpu-torch-2.13.0.json'}] if probe else [])
    result, dummy = run_case(torch_verify.main, case, monkeypatch)
    return result, active


def test_a_pass_with_the_backends_selected_writes_the_serving_files_once(tmp_path, monkeypatch):
    result, active = _serving_case(tmp_path, monkeypatch, _ansible_check_mode=True)
    assert not result.get('failed') and result['changed'] is True and os.listdir(active) == ['bin']
    result, active = _serving_case(tmp_path, monkeypatch)
    written = [os.path.join(active, 'gpufleet-serving.json'), os.path.join(active, 'gpufleet-serving.env')]
    assert not result.get('failed') and result['changed'] is True
    assert result['serving_files'] == {'paths': written, 'changed': written, 'error': None}
    assert json.load(open(written[0]))['model'] == 'qwen3-30b-a3b' and open(written[1]).read() == 'SGLANG_ARGS=""\n'
    result, active = _serving_case(tmp_path, monkeypatch)
    assert result['changed'] is False and result['serving_files']['changed'] == []


def test_a_host_that_did_not_pass_keeps_the_serving_files_of_its_last_pass(tmp_path, monkeypatch):
    _serving_case(tmp_path, monkeypatch)
    before = open(str(tmp_path / 'ml-env-b' / 'gpufleet-serving.json')).read()
    result, active = _serving_case(tmp_path, monkeypatch, status='failed')
    assert result['failed'] and result['changed'] is False and 'serving_files' not in result
    assert open(os.path.join(active, 'gpufleet-serving.json')).read() == before


@pytest.mark.parametrize('name', ['../x', 'a/b', '..'])
def test_a_serving_name_that_is_not_a_file_name_is_refused(tmp_path, monkeypatch, name):
    result, active = _serving_case(tmp_path, monkeypatch, probe=False, serving_name=name)
    assert result['failed'] and result['msg'].startswith('serving_name: expected a file name without "/"')
    assert os.listdir(active) == ['bin']


# sglang in the venv: run once more after the probe, its answer judged before the serving files are written.

def test_flags_the_installed_sglang_refuses_are_never_written(tmp_path, monkeypatch):
    from ansible_collections.gpufleet.inference.plugins.module_utils import model_verify, sglang_serving

    def judge(model, facts, params, numeric):
        facts['model'] = {'name': 'qwen3-30b-a3b', 'precision': 'none', 'tp': 1, 'shapes': {}, 'families': []}
        facts['backends'] = {'status': 'selected', 'flags': {'moe_runner': 'triton'}, 'args': '--moe-runner-backend triton',
                             'env': 'SGLANG_ARGS=""\n', 'verdicts': {}, 'qualification': {}, 'sglang_version': '0.5.23',
                             'source': 'x'}
        return []

    monkeypatch.setattr(model_verify, 'judge', judge)
    active = _venv(str(tmp_path / 'ml-env-b'))
    site = os.path.join(active, 'lib', 'python3.12', 'site-packages', 'sglang')
    os.makedirs(site)
    open(os.path.join(site, '__init__.py'), 'w').close()
    os.symlink(active, str(tmp_path / 'ml-env'))
    entries = dict((name, {'ok': True, 'version': '0.5.23', 'error': None}) for name in sglang_serving.SERVER_IMPORTS)
    answer = {'imports': entries, 'version': '0.5.23', 'auto': None,
              'flags_check': {'status': 'failed', 'reason': "argument --moe-runner-backend: invalid choice: 'triton'",
                              'argv': ['--moe-runner-backend', 'triton']}}
    python = [active + '/bin/python', '-I', '-c']
    case = _link_case({'link': str(tmp_path / 'ml-env'), 'model': 'qwen3-30b-a3b', 'serving_name': 'gpufleet-serving'},
                      [{'command_startswith': python, 'out_fixture': 'probe-cpu-torch-2.13.0.json'},
                       {'command_startswith': python, 'out': json.dumps(answer)}])
    result, calls = run_case(torch_verify.main, case, monkeypatch)
    assert result['failed'] and 'serving_files' not in result and sorted(os.listdir(active)) == ['bin', 'lib']
    assert result['mismatches'] == ["backends: expected sglang 0.5.23's argument parser to take '--moe-runner-backend "
                                    "triton', found argument --moe-runner-backend: invalid choice: 'triton'"]
    torch = result['ansible_facts']['gpufleet_torch']
    assert torch['imports']['sglang.srt.entrypoints.http_server']['ok'] and torch['sglang']['version'] == '0.5.23'
    assert torch['backends']['flags_check'].startswith('failed: ')
    # the program the second call ran is sglang_serving's, never the probe's
    assert 'gpufleet_sglang_serving' in calls[1][0][3] and 'gpufleet_sglang_serving' not in calls[0][0][3]
