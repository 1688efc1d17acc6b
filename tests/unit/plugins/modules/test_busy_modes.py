# -*- coding: utf-8 -*-
"""Busy GPUs through gpu_facts and torch_verify (test_busy_modes.yaml), and the proof record
through torch_verify's link (the record beside a stable path in tmp_path).

The probe's own processes and the command lines of /proc are fixed here: the machine running
the tests has its own pids, which must never make a fixture's process the module's own."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import busy, gpu, proof, verify_steps
from ansible_collections.gpufleet.inference.plugins.modules import gpu_facts, torch_verify
from ansible_collections.gpufleet.inference.tests.unit.plugins.modules.module_harness import (
    fixture_text, load_cases, probe_command, run_case)

CMDLINES = {4242: 'python3 -m sglang.launch_server --model-path /models/llama'}
MODULES = {'gpu_facts': gpu_facts.main, 'torch_verify': torch_verify.main}
UUID0 = 'GPU-5c3f2a1e-8d4b-7e6f-9a0b-1c2d3e4f5a6b'
UUID1 = 'GPU-7d1e0b9a-2c3d-4e5f-8a9b-0c1d2e3f4a5b'


def probe_params(calls):
    """The JSON parameters of the probe run, or None where the probe did not run."""
    for args, dummy, dummy in calls:
        if '-c' in args:
            return json.loads(args[args.index('-c') + 2])
    return None


@pytest.fixture(autouse=True)
def fixed_host(monkeypatch):
    monkeypatch.setattr(gpu, 'own_pids', lambda pid=None, proc='/proc': set([1]))
    monkeypatch.setattr(gpu, 'command_line', lambda pid, proc='/proc', limit=120: CMDLINES.get(pid))
    monkeypatch.setattr(gpu, 'cuda_driver_version', lambda: '13.0')
    monkeypatch.setattr(verify_steps, 'is_executable', lambda path: True)


@load_cases('test_busy_modes.yaml')
def test_busy_modes(case, monkeypatch):
    result, calls = run_case(MODULES[case['module']], case, monkeypatch, command_matcher=probe_command)
    for args, kwargs, environ in calls:
        assert kwargs.get('errors') == 'replace' and environ['LC_ALL'] == 'C'
    params = probe_params(calls)
    if result.get('failed') and result.get('probed') is False:
        assert params is None, 'the probe ran before the refusal'
    for name in case.get('absent', []):
        assert name not in result, '%s: expected absent, found %r' % (name, result[name])
    for text in case.get('msg_excludes', []):
        assert text not in result.get('msg', '')
    for name, value in case.get('probe_params', {}).items():
        assert params[name] == value, 'probe %s: expected %r, found %r' % (name, value, params[name])


# --- the mask's devices back to nvidia-smi's -----------------------------------------------------------------

def probe_out(devices, smoke=(), kernels=(), torch_version='2.11.0+cu130', cuda='13.0'):
    return json.dumps({'schema': 1, 'facts': {
        'python_executable': '/opt/torch/.venv/bin/python3', 'torch_importable': True, 'torch_version': torch_version,
        'torch_cuda_version': cuda, 'driver_version': '580.159.04', 'device_count': len(devices),
        'devices': [dict(index=index, name='NVIDIA H200', compute_capability='9.0') for index in devices],
        'imports': {}, 'smoke': list(smoke), 'kernels': list(kernels)}})


def smoke_entry(device, dtype='bfloat16', relative_error=0.002, nonfinite=0):
    return dict(device=device, name='NVIDIA H200', dtype=dtype, size=8192, iterations=10, tflops=640.0,
                nonfinite=nonfinite, relative_error=relative_error)


def two_gpus_gpu0_busy(probe):
    return [dict(command_startswith=['/usr/bin/nvidia-smi'], out_fixture='nvidia-smi-2x-h200-gpu0-busy-usage.csv'),
            dict(out_fixture='nvidia-smi-compute-apps-one.csv'),
            dict(out_fixture='nvidia-smi-2x-h200-remap.csv'),
            dict(command_startswith=['/opt/torch/.venv/bin/python3', '-I', '-c'],
                 environ_update={'CUDA_VISIBLE_DEVICES': UUID1}, out=probe)]


def test_auto_runs_on_the_idle_gpu_and_reports_it_by_its_nvidia_smi_index(monkeypatch):
    # torch sees only GPU 1 (its device 0) under the mask
    case = dict(input=dict(python='/opt/torch/.venv/bin/python3', smoke=True, gpu=True,
                           expect=dict(device_count=2, min_smoke_tflops=300)),
                bin_paths={'nvidia-smi': '/usr/bin/nvidia-smi'},
                run_command_calls=two_gpus_gpu0_busy(probe_out([0], [smoke_entry(0)])) + [
                    dict(command_startswith=['/usr/bin/nvidia-smi', '--query-gpu=index,pcie.link.gen.current,'
                                             'pcie.link.width.current'], out='0, 5, 16\n1, 5, 16\n')])
    result, calls = run_case(torch_verify.main, case, monkeypatch, command_matcher=probe_command)
    assert not result.get('failed'), result.get('msg')
    facts = result['ansible_facts']['gpufleet_torch']
    assert [entry['device'] for entry in facts['smoke']] == [1]
    assert [device['index'] for device in facts['devices']] == [1]
    assert facts['gpu_use']['visible'] == [1] and facts['gpu_use']['devices'] == [1]
    assert facts['gpu_use']['skipped'] == [dict(gpu=0, reason='busy (pid 4242 %s, 86.1 GiB)' % CMDLINES[4242])]
    assert probe_params(calls)['smoke'] is True


# --- numeric_expectations ------------------------------------------------------------------------------------

GPU_FACTS = dict(present=True, gpus=[dict(index=0, name='NVIDIA H200', compute_capability='9.0', busy=True,
                                          busy_reason='busy (x)'),
                                     dict(index=1, name='NVIDIA H200', compute_capability='9.0', busy=False,
                                          busy_reason=None)])
EXPECT = dict(min_smoke_tflops=300, kernels=['sgl_kernel.rmsnorm'], min_allreduce_busbw_gbps=100, device_count=2,
              torch_version='2.11')


@pytest.mark.parametrize('mode, kept, devices', [
    ('in_service', ['device_count', 'torch_version'], [0, 1]),
    ('auto', ['device_count', 'kernels', 'min_smoke_tflops', 'torch_version'], [0, 1]),
])
def test_numeric_expectations_are_judged_only_where_the_checks_ran(mode, kept, devices):
    use = busy.plan(mode, GPU_FACTS)
    facts = dict(devices=[dict(index=1, name='NVIDIA H200')], device_count=1)
    expect, judged = verify_steps.numeric_expectations(EXPECT, use, facts, GPU_FACTS)
    assert sorted(expect) == kept
    assert [device['index'] for device in judged['devices']] == devices and judged['device_count'] == 2
    assert facts['device_count'] == 1 and EXPECT['min_smoke_tflops'] == 300  # neither changed in place


def test_numeric_expectations_without_a_mask_keep_torchs_devices():
    use = busy.plan('full', dict(GPU_FACTS, gpus=[dict(GPU_FACTS['gpus'][1])]))
    facts = dict(devices=[dict(index=0, name='NVIDIA H200')], device_count=1)
    expect, judged = verify_steps.numeric_expectations(EXPECT, use, facts, GPU_FACTS)
    assert expect == EXPECT and judged is facts


# --- the proof record through link= --------------------------------------------------------------------------

def venv_link(tmp_path):
    venv = tmp_path / 'ml-env-a'
    (venv / 'bin').mkdir(parents=True)
    (venv / 'bin' / 'python').write_text('#!/bin/sh\n')
    os.chmod(str(venv / 'bin' / 'python'), 0o755)
    os.symlink(str(venv), str(tmp_path / 'ml-env'))
    return str(tmp_path / 'ml-env'), str(venv), str(tmp_path / '.ml-env.proof.json')


def one_h200(probe, idle=True):
    return [dict(command_startswith=['/usr/bin/nvidia-smi'],
                 out_fixture='nvidia-smi-h200-usage.csv' if idle else 'nvidia-smi-h200-busy-usage.csv'),
            dict(out_fixture='nvidia-smi-compute-apps-none.csv' if idle else 'nvidia-smi-compute-apps-one.csv'),
            dict(out_fixture='nvidia-smi-h200-remap.csv'),
            dict(out=probe)]


def h200_stack(venv):
    return proof.stack_of(venv, {'torch_version': '2.11.0+cu130'}, '580.159.04')


def test_a_full_pass_writes_the_proof_beside_the_link(tmp_path, monkeypatch):
    link, venv, path = venv_link(tmp_path)
    case = dict(input=dict(link=link, proof=True, mode='full', smoke=True, expect=dict(max_kernel_proof_age_hours=1)),
                bin_paths={'nvidia-smi': '/usr/bin/nvidia-smi'},
                run_command_calls=one_h200(fixture_text('probe-h200-smoke.json').decode('utf-8')))
    before = time.time()
    result, calls = run_case(torch_verify.main, case, monkeypatch)
    assert not result.get('failed'), result.get('msg')
    facts = result['ansible_facts']['gpufleet_torch']['proof']
    assert facts['summary'] == 'kernels proven in this run' and facts['written'] is True and facts['error'] is None
    assert facts['path'] == path and facts['proven_now'] == [UUID0] and facts['never'] == []
    record, error = proof.load(path)
    assert error is None
    entry = record['stacks'][proof.stack_key(h200_stack(venv))]['devices'][UUID0]
    assert entry['index'] == 0 and entry['mode'] == 'full' and entry['checks'] == ['smoke.bfloat16', 'smoke.float16']
    assert before - 1 <= entry['time'] <= time.time() + 1


def test_check_mode_reports_the_pass_and_writes_no_proof(tmp_path, monkeypatch):
    link, venv, path = venv_link(tmp_path)
    case = dict(input=dict(link=link, proof=True, smoke=True, _ansible_check_mode=True),
                bin_paths={'nvidia-smi': '/usr/bin/nvidia-smi'},
                run_command_calls=one_h200(fixture_text('probe-h200-smoke.json').decode('utf-8')))
    result, calls = run_case(torch_verify.main, case, monkeypatch)
    facts = result['ansible_facts']['gpufleet_torch']['proof']
    assert not os.path.exists(path)
    assert facts['written'] is False and facts['proven_now'] == [UUID0] and facts['error'] is None
    assert facts['summary'] == 'kernels proven in this run' and facts['never'] == []


def test_a_failed_smoke_writes_no_proof(tmp_path, monkeypatch):
    link, venv, path = venv_link(tmp_path)
    probe = probe_out([0], [smoke_entry(0, nonfinite=67108864, relative_error=None), smoke_entry(0, 'float16')])
    case = dict(input=dict(link=link, proof=True, smoke=True), bin_paths={'nvidia-smi': '/usr/bin/nvidia-smi'},
                run_command_calls=one_h200(probe))
    result, calls = run_case(torch_verify.main, case, monkeypatch)
    assert result['failed'] and not os.path.exists(path)
    assert result['ansible_facts']['gpufleet_torch']['proof']['never'] == ['GPU 0']


@pytest.mark.parametrize('max_hours, failure', [
    (1, 'max_kernel_proof_age_hours: expected kernels proven under this stack within 1.0 h on every GPU, '
        'found GPU 0 last proven 2.0 h ago'),
    (24, None),
])
def test_a_busy_gpu_is_judged_by_the_age_of_its_last_proof(tmp_path, monkeypatch, max_hours, failure):
    link, venv, path = venv_link(tmp_path)
    proof.write(path, proof.update({'version': 1, 'stacks': {}}, h200_stack(venv),
                                   {UUID0: dict(index=0, checks=['smoke.bfloat16'])}, time.time() - 2 * 3600, 'full'))
    case = dict(input=dict(link=link, proof=True, smoke=True, gpu=True,
                           expect=dict(max_kernel_proof_age_hours=max_hours)),
                bin_paths={'nvidia-smi': '/usr/bin/nvidia-smi'},
                run_command_calls=one_h200(probe_out([]), idle=False))
    result, calls = run_case(torch_verify.main, case, monkeypatch)
    facts = result['ansible_facts']['gpufleet_torch']
    assert facts['gpu_use']['numeric'] is False and facts['proof']['written'] is False
    assert facts['proof']['summary'] == 'kernels last proven 2.0 h ago under this stack'
    if failure:
        assert result['failed'] and result['mismatches'] == [failure]
    else:
        assert not result.get('failed') and result['mismatches'] == []


def test_a_busy_gpu_never_proven_under_this_stack_fails_the_age(tmp_path, monkeypatch):
    link, venv, path = venv_link(tmp_path)
    # proven 10 minutes ago, but under another driver
    proof.write(path, proof.update({'version': 1, 'stacks': {}}, dict(h200_stack(venv), driver='570.1'),
                                   {UUID0: dict(index=0, checks=['smoke.bfloat16'])}, time.time() - 600, 'full'))
    case = dict(input=dict(link=link, proof=True, expect=dict(max_kernel_proof_age_hours=24)),
                bin_paths={'nvidia-smi': '/usr/bin/nvidia-smi'},
                run_command_calls=[dict(out_fixture='nvidia-smi-h200-busy-usage.csv'),
                                   dict(out_fixture='nvidia-smi-compute-apps-one.csv'),
                                   dict(out_fixture='nvidia-smi-h200-remap.csv'),
                                   dict(out=probe_out([]))])
    # in_service: the GPUs are read (mode is not auto) and no GPU time is spent
    case['input']['mode'] = 'in_service'
    result, calls = run_case(torch_verify.main, case, monkeypatch)
    assert result['failed']
    assert result['mismatches'] == ['max_kernel_proof_age_hours: expected kernels proven under this stack within '
                                    '24.0 h on every GPU, found no proof on GPU 0']
    assert result['ansible_facts']['gpufleet_torch']['proof']['summary'] == 'never proven under this stack on GPU 0'


def test_a_corrupt_record_is_said_and_written_anew(tmp_path, monkeypatch):
    link, venv, path = venv_link(tmp_path)
    with open(path, 'w') as handle:
        handle.write('{"stacks": ')
    case = dict(input=dict(link=link, proof=True, smoke=True), bin_paths={'nvidia-smi': '/usr/bin/nvidia-smi'},
                run_command_calls=one_h200(fixture_text('probe-h200-smoke.json').decode('utf-8')))
    result, calls = run_case(torch_verify.main, case, monkeypatch)
    facts = result['ansible_facts']['gpufleet_torch']['proof']
    assert facts['error'].startswith('proof record %s not read: ' % path) and facts['written'] is True
    record, error = proof.load(path)
    assert error is None and list(record['stacks'].values())[0]['devices'][UUID0]['checks']


def test_a_record_the_module_cannot_read_is_left_alone(tmp_path, monkeypatch):
    link, venv, path = venv_link(tmp_path)
    with open(path, 'w') as handle:
        handle.write('{"stacks": ')
    monkeypatch.setattr(proof, 'replaceable', lambda name: False)  # as a file of another owner, mode 0600
    case = dict(input=dict(link=link, proof=True, smoke=True), bin_paths={'nvidia-smi': '/usr/bin/nvidia-smi'},
                run_command_calls=one_h200(fixture_text('probe-h200-smoke.json').decode('utf-8')))
    result, calls = run_case(torch_verify.main, case, monkeypatch)
    assert result['ansible_facts']['gpufleet_torch']['proof']['written'] is False
    with open(path) as handle:
        assert handle.read() == '{"stacks": '
