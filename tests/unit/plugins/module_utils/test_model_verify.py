# -*- coding: utf-8 -*-
"""torch_verify's model part without torch: resolving the model from the
module's options (errors naming the variable, before any GPU work), the check
catalogue per precision, and the judgement after the probe: failures, the
backend qualification, the flags and the skip when no GPU was worked."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import model_checks as mc
from ansible_collections.gpufleet.inference.plugins.module_utils import model_verify as mv

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures', 'model_configs')
H200 = 'NVIDIA H200'


def params(**overrides):
    base = dict(model='', model_config=None, model_quant_config=None, tp_size=1, backend_preference={},
                backend_required={}, backend_families=None, sglang_version='0.5.23', model_jit='cache_only',
                mode='auto')
    base.update(overrides)
    return base


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return json.load(handle)


def test_no_model_means_no_model_checks():
    assert mv.resolve(params()) == (None, [])


def test_a_shipped_profile_resolves_to_its_shard_shapes_and_families():
    model, errors = mv.resolve(params(model='qwen3-30b-a3b', tp_size=2))
    assert errors == []
    assert model['name'] == 'qwen3-30b-a3b' and model['precision'] == 'none' and model['tp'] == 2
    assert model['families'] == ['moe_runner']
    gemms = dict((g['layer'], (g['n'], g['k'])) for g in model['shapes']['gemms'])
    assert gemms['qkv'] == ((16 + 2 * 2) * 128, 2048)
    assert model['shapes']['moe']['intermediate'] == 384


def test_a_config_path_on_the_host_is_read_with_its_quant_config(tmp_path):
    config = fixture('qwen3-30b-a3b.config.json')
    (tmp_path / 'config.json').write_text(json.dumps(config))
    (tmp_path / 'hf_quant_config.json').write_text(json.dumps(fixture('qwen3-30b-a3b-nvfp4.hf_quant_config.json')))
    model, errors = mv.resolve(params(model=str(tmp_path)))  # the directory names its config.json
    assert errors == []
    assert model['precision'] == 'nvfp4'
    assert model['families'] == ['moe_runner', 'fp4_gemm']


def test_a_config_from_the_controller_takes_the_place_of_the_path():
    model, errors = mv.resolve(params(model_config=fixture('mixtral-8x7b.config.json'), tp_size=8))
    assert errors == []
    assert model['shapes']['moe']['experts'] == 8 and model['shapes']['moe']['intermediate'] == 14336 // 8


@pytest.mark.parametrize('overrides, words', [
    (dict(model='/nowhere/config.json'), ['gpufleet_model', '/nowhere/config.json', 'qwen3-30b-a3b']),
    (dict(model='qwen3-30b-a3b', tp_size=3), ['gpufleet_tp_size', '3']),
    (dict(model='qwen3-30b-a3b-fp8', tp_size=4), ['gpufleet_tp_size', '192', '128']),
    (dict(model_config=dict(model_type='llama', hidden_size=2048, num_attention_heads=32, num_hidden_layers=2,
                            intermediate_size=8192, quantization_config={'quant_method': 'awq'})),
     ['gpufleet_model', 'awq', 'mxfp4, compressed-tensors']),
    (dict(backend_preference={'moe_runner': ['flashinfer_cutlas']}), ['gpufleet_backend_preference', 'flashinfer_cutlas']),
    (dict(backend_required={'fp4_gemm': 'cudnn'}), ['gpufleet_backend_required', 'cudnn', 'flashinfer_cudnn']),
    (dict(backend_families=['moe']), ['gpufleet_backend_families', "'moe'", 'moe_runner']),
    (dict(model_jit='sometimes'), ['gpufleet_model_jit', 'cache_only, allow']),
])
def test_bad_inputs_are_refused_naming_the_variable(overrides, words):
    model, errors = mv.resolve(params(**overrides))
    assert errors, overrides
    text = '; '.join(errors)
    for word in words:
        assert word in text, (word, text)


def test_a_malformed_config_on_the_host_is_refused(tmp_path):
    (tmp_path / 'config.json').write_text('{"hidden_size": 20')
    model, errors = mv.resolve(params(model=str(tmp_path / 'config.json')))
    assert model is None and len(errors) == 1 and errors[0].startswith('gpufleet_model: ')


def test_the_catalogue_per_precision():
    assert mc.applicable('none') == ['model.gemm.bf16', 'moe.flashinfer_cutlass.bf16', 'moe.triton.bf16']
    assert mc.applicable('fp8') == ['model.gemm.fp8', 'moe.flashinfer_cutlass.fp8', 'moe.triton.fp8']
    assert mc.applicable('nvfp4') == ['model.mm_fp4.cudnn', 'model.mm_fp4.cutlass', 'model.mm_fp4.trtllm',
                                      'moe.flashinfer_cutlass.nvfp4', 'moe.flashinfer_trtllm.nvfp4']
    # the sweep reaches both sides of the 128-row tiles and the reported M=2001
    assert {127, 128, 129, 2001} <= set(mc.SWEEP_M)


def test_fewer_experts_only_when_their_weights_do_not_fit():
    qwen = {'experts': 128, 'top_k': 8, 'hidden': 2048, 'intermediate': 768}
    assert mc.moe_experts(qwen) == 128  # 1.2 GB of bf16 weights
    big = {'experts': 128, 'top_k': 8, 'hidden': 4096, 'intermediate': 1536}
    kept = mc.moe_experts(big)
    assert 8 <= kept < 128 and kept * 3 * 4096 * 1536 * 2 <= mc.MOE_MAX_WEIGHT_BYTES
    assert mc.moe_experts(big, budget=1) == 8  # never fewer than top_k


def entry(check, status, device=0, name=H200, reason=None):
    return {'check': check, 'device': device, 'device_name': name, 'status': status, 'reason': reason}


def test_judge_selects_the_flags_and_renders_the_env_file():
    model, dummy = mv.resolve(params(model='qwen3-30b-a3b'))
    facts = {'model_checks': [entry('model.gemm.bf16', 'ok'), entry('moe.flashinfer_cutlass.bf16', 'ok')]}
    assert mv.judge(model, facts, params(), True) == []
    backends = facts['backends']
    assert backends['status'] == 'selected' and backends['flags'] == {'moe_runner': 'flashinfer_cutlass'}
    assert backends['args'] == '--moe-runner-backend flashinfer_cutlass'
    assert 'SGLANG_ARGS="--moe-runner-backend flashinfer_cutlass"' in backends['env']
    assert facts['model']['name'] == 'qwen3-30b-a3b'


def test_judge_fails_a_wrong_backend_and_a_wrong_gemm_naming_them():
    model, dummy = mv.resolve(params(model='qwen3-30b-a3b'))
    facts = {'model_checks': [entry('model.gemm.bf16', 'failed', reason='3 NaN/Inf of 4096 at qkv, M=2001'),
                              entry('moe.flashinfer_cutlass.bf16', 'failed', reason='relative error 0.9 > tolerance 0.02')]}
    mismatches = mv.judge(model, facts, params(), True)
    assert any('model.gemm.bf16' in m and 'M=2001' in m for m in mismatches), mismatches
    assert any(m.startswith('backends: no moe_runner backend qualified on NVIDIA H200') and 'flashinfer_cutlass' in m
               for m in mismatches), mismatches
    assert facts['backends']['status'] == 'failed' and facts['backends']['env'] is None
    assert facts['backends']['qualification'][H200]['moe_runner']['flashinfer_cutlass']['status'] == 'failed'


def test_a_required_backend_that_was_skipped_fails_with_expected_found():
    model, dummy = mv.resolve(params(model='qwen3-30b-a3b'))
    facts = {'model_checks': [entry('moe.flashinfer_cutlass.bf16', 'skipped',
                                    reason='flashinfer module fused_moe_90 is not built for this stack')]}
    mismatches = mv.judge(model, facts, params(backend_required={'moe_runner': 'flashinfer_cutlass'}), True)
    assert mismatches == ['backends: gpufleet_backend_required.moe_runner: expected flashinfer_cutlass, found skipped '
                          '(flashinfer module fused_moe_90 is not built for this stack) on NVIDIA H200']


def test_no_gpu_worked_is_a_skip_with_its_reason_not_a_failure():
    model, dummy = mv.resolve(params(model='qwen3-30b-a3b'))
    facts = {'model_checks': []}
    assert mv.judge(model, facts, params(mode='in_service'), False) == []
    assert facts['backends']['status'] == 'skipped' and 'in_service' in facts['backends']['reason']
    facts = {'model_checks': [entry('moe.flashinfer_cutlass.bf16', 'skipped', device='cpu', reason='no CUDA device')]}
    assert mv.judge(model, facts, params(), True) == []
    assert facts['backends'] == dict(facts['backends'], status='skipped', reason='no CUDA device', env=None)


def test_compiling_during_verification_needs_the_time_it_takes():
    dummy, errors = mv.resolve(params(model='qwen3-30b-a3b', model_jit='allow', timeout=900))
    assert len(errors) == 1 and errors[0].startswith('gpufleet_model_jit: allow compiles') and '3600' in errors[0]
    assert mv.resolve(params(model='qwen3-30b-a3b', model_jit='allow', timeout=3600))[1] == []


def test_no_families_means_gemm_checks_without_flags():
    model, errors = mv.resolve(params(model='mixtral-8x7b', backend_families=[]))
    assert errors == [] and model['families'] == []
    facts = {'model_checks': [entry('model.gemm.bf16', 'ok'),
                              entry('moe.flashinfer_cutlass.bf16', 'skipped', reason='compute capability 8.0 < 9.0')]}
    assert mv.judge(model, facts, params(), True) == []
    assert facts['backends']['status'] == 'selected' and facts['backends']['flags'] == {}
    # without the opt-out the same host fails: a needed family with nothing qualified
    model, dummy = mv.resolve(params(model='mixtral-8x7b'))
    assert mv.judge(model, facts, params(), True) == [
        'backends: no moe_runner backend qualified on NVIDIA H200: tried flashinfer_cutlass (skipped: compute '
        'capability 8.0 < 9.0), flashinfer_trtllm (not checked), triton (not checked)']


def test_the_verdicts_kept_in_the_serving_record_carry_no_reasons():
    model, dummy = mv.resolve(params(model='qwen3-30b-a3b'))
    facts = {'model_checks': [entry('moe.flashinfer_cutlass.bf16', 'ok')]}
    mv.judge(model, facts, params(), True)
    assert facts['backends']['verdicts'] == {'NVIDIA H200 / moe_runner / flashinfer_cutlass': 'qualified'}


def test_an_unreadable_config_names_the_file(tmp_path, monkeypatch):
    path = tmp_path / 'config.json'
    path.write_text('{}')

    def denied(name, *args, **kwargs):
        raise PermissionError(13, 'Permission denied', name)
    monkeypatch.setattr(mv, 'open', denied, raising=False)
    model, errors = mv.resolve(params(model=str(path)))
    assert model is None
    assert errors == ["gpufleet_model: cannot read %s: [Errno 13] Permission denied: '%s'" % (path, path)], errors


def _selected_facts():
    model, dummy = mv.resolve(params(model='qwen3-30b-a3b'))
    facts = {'model_checks': [entry('model.gemm.bf16', 'ok'), entry('moe.flashinfer_cutlass.bf16', 'ok')]}
    assert mv.judge(model, facts, params(), True) == []
    return facts


def test_the_serving_files_hold_the_flags_and_the_verdicts_only_when_selected():
    facts = _selected_facts()
    files = mv.serving_files(facts)
    record = json.loads(files['json'])
    assert record['model'] == 'qwen3-30b-a3b' and record['tp'] == 1 and record['precision'] == facts['model']['precision']
    assert record['flags'] == {'moe_runner': 'flashinfer_cutlass'}
    assert record['args'] == '--moe-runner-backend flashinfer_cutlass'
    assert record['verdicts'] == {'NVIDIA H200 / moe_runner / flashinfer_cutlass': 'qualified'}
    assert 'qualification' not in record and 'problems' not in record
    assert files['json'].endswith('}\n') and files['env'] == facts['backends']['env']
    failed = dict(facts, backends=dict(facts['backends'], status='failed'))
    assert mv.serving_files(failed) is None and mv.serving_files({}) is None


def test_the_serving_files_are_written_once_then_left_and_check_mode_writes_nothing(tmp_path):
    files = mv.serving_files(_selected_facts())
    venv = str(tmp_path)
    paths = [os.path.join(venv, 'gpufleet-serving.json'), os.path.join(venv, 'gpufleet-serving.env')]
    assert mv.write_serving(venv, 'gpufleet-serving', files, check_mode=True) == {
        'paths': paths, 'changed': paths, 'error': None}
    assert sorted(os.listdir(venv)) == []
    assert mv.write_serving(venv, 'gpufleet-serving', files)['changed'] == paths
    assert open(paths[1]).read() == files['env'] and oct(os.stat(paths[0]).st_mode & 0o777) == '0o644'
    assert mv.write_serving(venv, 'gpufleet-serving', files)['changed'] == []
    other = dict(files, env='SGLANG_ARGS=""\n')
    assert mv.write_serving(venv, 'gpufleet-serving', other)['changed'] == [paths[1]]
    assert sorted(os.listdir(venv)) == ['gpufleet-serving.env', 'gpufleet-serving.json']


def test_a_serving_file_that_cannot_be_written_says_which_and_why(tmp_path):
    files = mv.serving_files(_selected_facts())
    out = mv.write_serving(str(tmp_path / 'gone'), 'gpufleet-serving', files)
    assert out['changed'] == [] and out['error'].startswith(
        'serving flags: expected to write %s, found ' % (tmp_path / 'gone' / 'gpufleet-serving.json'))
