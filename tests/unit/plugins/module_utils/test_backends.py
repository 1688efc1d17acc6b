# -*- coding: utf-8 -*-
"""Deriving sglang's backend flags from the kernel checks: qualification per GPU
model, selection by preference, the rendered flags and the operator's variables."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import backends as bk

H200 = 'NVIDIA H200'
RTX = 'NVIDIA RTX PRO 6000 Blackwell'


def result(check, status, device=0, name=H200, reason=None):
    return {'check': check, 'device': device, 'device_name': name, 'status': status,
            'reason': reason, 'relative_error': 0.001 if status == 'ok' else None, 'tolerance': 0.1}


def all_ok(name=H200, devices=(0,)):
    return [result(check, 'ok', device, name) for check in sorted(bk.CHECK_BACKENDS) for device in devices]


# ---------------------------------------------------------------- the table


def test_the_table_is_sglang_0_5_23_and_every_checked_backend_is_a_choice():
    assert bk.DEFAULT_SGLANG_VERSION == '0.5.23'
    table = bk.SGLANG_SERVER_ARGS['0.5.23']
    assert 'sgl-project/sglang@v0.5.23' in table['source']
    families = table['families']
    assert [families[f]['flag'] for f in bk.FAMILIES] == ['--moe-runner-backend', '--fp4-gemm-backend', '--fp8-gemm-backend']
    assert families['fp4_gemm']['choices'] == (
        'auto', 'flashinfer_cudnn', 'flashinfer_cutedsl', 'flashinfer_cutlass', 'flashinfer_trtllm', 'marlin')
    for family, backend in bk.CHECK_BACKENDS.values():
        assert backend in families[family]['choices']
    for family, order in bk.DEFAULT_PREFERENCE.items():
        assert set(order) <= set(families[family]['choices'])
    assert bk.DEFAULT_PREFERENCE['fp4_gemm'][0] == 'flashinfer_cudnn'


# ---------------------------------------------------------------- qualify


def test_ok_checks_qualify_and_unmapped_checks_are_ignored():
    results = [result('moe.flashinfer_cutlass.bf16', 'ok'), result('moe.flashinfer_cutlass.fp8', 'ok'),
               result('sgl_kernel.rmsnorm', 'failed', reason='NaN'), result('flashinfer.mm_fp4.cutlass', 'failed')]
    got = bk.qualify(results)
    assert got == {H200: {'moe_runner': {'flashinfer_cutlass': {
        'status': 'qualified', 'reason': None,
        'checks': ['moe.flashinfer_cutlass.bf16', 'moe.flashinfer_cutlass.fp8'], 'devices': [0]}}}}


def test_one_failed_device_fails_the_backend_for_the_whole_gpu_model():
    results = [result('model.mm_fp4.cutlass', 'ok', device=0),
               result('model.mm_fp4.cutlass', 'failed', device=1, reason='3 NaN of 4096 at M=128'),
               result('model.mm_fp4.cudnn', 'ok', device=0), result('model.mm_fp4.cudnn', 'ok', device=1)]
    fp4 = bk.qualify(results)[H200]['fp4_gemm']
    assert fp4['flashinfer_cutlass'] == {'status': 'failed', 'reason': 'model.mm_fp4.cutlass on GPU 1: 3 NaN of 4096 at M=128',
                                         'checks': ['model.mm_fp4.cutlass'], 'devices': [0, 1]}
    assert fp4['flashinfer_cudnn']['status'] == 'qualified'
    assert fp4['flashinfer_cudnn']['devices'] == [0, 1]


def test_several_failures_are_joined_in_order():
    results = [result('moe.flashinfer_cutlass.bf16', 'failed', device=0, reason='NaN'),
               result('moe.flashinfer_cutlass.nvfp4', 'failed', device=1, reason='zeros')]
    verdict = bk.qualify(results)[H200]['moe_runner']['flashinfer_cutlass']
    assert verdict['status'] == 'failed'
    assert verdict['reason'] == 'moe.flashinfer_cutlass.bf16 on GPU 0: NaN; moe.flashinfer_cutlass.nvfp4 on GPU 1: zeros'


def test_all_skipped_is_skipped_with_deduplicated_reasons():
    results = [result('moe.flashinfer_trtllm.nvfp4', 'skipped', device=0, reason='needs compute capability 10.0'),
               result('moe.flashinfer_trtllm.nvfp4', 'skipped', device=1, reason='needs compute capability 10.0'),
               result('model.mm_fp4.trtllm', 'skipped', device=0, reason='GPU busy'),
               result('model.mm_fp4.trtllm', 'skipped', device=1, reason='flashinfer not installed')]
    got = bk.qualify(results)[H200]
    assert got['moe_runner']['flashinfer_trtllm']['status'] == 'skipped'
    assert got['moe_runner']['flashinfer_trtllm']['reason'] == 'needs compute capability 10.0'
    assert got['fp4_gemm']['flashinfer_trtllm']['reason'] == 'GPU busy; flashinfer not installed'


def test_a_busy_gpu_skip_is_not_a_failure():
    results = [result('moe.flashinfer_cutlass.bf16', 'ok', device=0),
               result('moe.flashinfer_cutlass.bf16', 'skipped', device=1, reason='GPU 1 busy: python (pid 4242)')]
    verdict = bk.qualify(results)[H200]['moe_runner']['flashinfer_cutlass']
    assert verdict['status'] == 'qualified' and verdict['reason'] is None
    assert verdict['devices'] == [0, 1]


def test_an_unknown_status_never_qualifies():
    verdict = bk.qualify([result('model.mm_fp4.cudnn', 'ok', device=0),
                          result('model.mm_fp4.cudnn', 'timeout', device=1)])[H200]['fp4_gemm']['flashinfer_cudnn']
    assert verdict['status'] == 'failed'
    assert verdict['reason'] == "model.mm_fp4.cudnn on GPU 1: status 'timeout'"


def test_two_gpu_models_are_qualified_apart():
    results = [result('model.mm_fp4.cutlass', 'ok', name=H200),
               result('model.mm_fp4.cutlass', 'failed', device=1, name=RTX, reason='NaN')]
    got = bk.qualify(results)
    assert got[H200]['fp4_gemm']['flashinfer_cutlass']['status'] == 'qualified'
    assert got[RTX]['fp4_gemm']['flashinfer_cutlass']['status'] == 'failed'
    assert got[RTX]['fp4_gemm']['flashinfer_cutlass']['reason'] == 'model.mm_fp4.cutlass on GPU 1: NaN'


def test_no_results_qualify_nothing():
    assert bk.qualify([]) == {}
    assert bk.qualify([result('sgl_kernel.rmsnorm', 'ok')]) == {}


# ---------------------------------------------------------------- select


def test_the_first_preference_that_qualified_is_chosen():
    selection = bk.select(bk.qualify(all_ok()), ['moe_runner', 'fp4_gemm'])
    assert selection == {'flags': {'moe_runner': 'flashinfer_cutlass', 'fp4_gemm': 'flashinfer_cudnn'},
                         'per_gpu': {H200: {'moe_runner': 'flashinfer_cutlass', 'fp4_gemm': 'flashinfer_cudnn'}},
                         'problems': []}


def test_the_operator_preference_replaces_the_default_order():
    selection = bk.select(bk.qualify(all_ok()), ['fp4_gemm'], {'fp4_gemm': ['flashinfer_trtllm', 'flashinfer_cudnn']})
    assert selection['flags'] == {'fp4_gemm': 'flashinfer_trtllm'}


def test_a_backend_outside_the_preference_is_never_chosen():
    qualification = bk.qualify([result('moe.flashinfer_trtllm.nvfp4', 'ok'),
                                result('moe.flashinfer_cutlass.bf16', 'failed', reason='NaN')])
    selection = bk.select(qualification, ['moe_runner'], {'moe_runner': ['flashinfer_cutlass']})
    assert selection['flags'] == {}
    assert selection['per_gpu'] == {H200: {'moe_runner': None}}
    assert selection['problems'] == [
        'no moe_runner backend qualified on NVIDIA H200: tried flashinfer_cutlass (failed: moe.flashinfer_cutlass.bf16 on GPU 0: NaN)']


def test_made_wrong_on_purpose_the_failed_preferred_backend_is_passed_over():
    results = [result('moe.flashinfer_cutlass.bf16', 'ok'),
               result('moe.flashinfer_cutlass.nvfp4', 'failed', reason='NaN in 12 of 4096 outputs'),
               result('moe.flashinfer_trtllm.nvfp4', 'ok')]
    selection = bk.select(bk.qualify(results), ['moe_runner'])
    assert selection['flags'] == {'moe_runner': 'flashinfer_trtllm'}
    assert selection['problems'] == []


def test_made_wrong_on_purpose_with_no_alternative_is_a_problem_naming_both():
    results = [result('moe.flashinfer_cutlass.nvfp4', 'failed', reason='NaN'),
               result('moe.flashinfer_trtllm.nvfp4', 'skipped', reason='needs compute capability 10.0')]
    selection = bk.select(bk.qualify(results), ['moe_runner'])
    assert 'moe_runner' not in selection['flags']
    assert selection['problems'] == [
        'no moe_runner backend qualified on NVIDIA H200: tried flashinfer_cutlass (failed: moe.flashinfer_cutlass.nvfp4 on GPU 0: NaN),'
        ' flashinfer_trtllm (skipped: needs compute capability 10.0), triton (not checked)']


def test_a_backend_without_results_is_named_not_checked():
    selection = bk.select(bk.qualify([result('model.mm_fp4.cudnn', 'failed', reason='cuDNN 9.1 too old')]), ['fp4_gemm'])
    assert selection['problems'] == [
        'no fp4_gemm backend qualified on NVIDIA H200: tried flashinfer_cudnn (failed: model.mm_fp4.cudnn on GPU 0: cuDNN 9.1 too old),'
        ' flashinfer_cutlass (not checked), flashinfer_trtllm (not checked)']


def test_a_busy_gpu_does_not_push_the_choice_down_the_preference():
    results = [result('model.mm_fp4.cudnn', 'ok', device=0),
               result('model.mm_fp4.cudnn', 'skipped', device=1, reason='GPU 1 busy'),
               result('model.mm_fp4.cutlass', 'ok', device=0), result('model.mm_fp4.cutlass', 'ok', device=1)]
    assert bk.select(bk.qualify(results), ['fp4_gemm'])['flags'] == {'fp4_gemm': 'flashinfer_cudnn'}


def test_gpu_models_that_disagree_get_the_first_preference_qualified_on_all():
    results = [result('model.mm_fp4.cudnn', 'ok', name=H200), result('model.mm_fp4.cutlass', 'ok', name=H200),
               result('model.mm_fp4.cudnn', 'failed', device=1, name=RTX, reason='NaN'),
               result('model.mm_fp4.cutlass', 'ok', device=1, name=RTX)]
    selection = bk.select(bk.qualify(results), ['fp4_gemm'])
    assert selection['per_gpu'] == {H200: {'fp4_gemm': 'flashinfer_cudnn'}, RTX: {'fp4_gemm': 'flashinfer_cutlass'}}
    assert selection['flags'] == {'fp4_gemm': 'flashinfer_cutlass'}
    assert selection['problems'] == []


def test_gpu_models_with_no_common_backend_is_a_problem():
    results = [result('model.mm_fp4.cudnn', 'ok', name=H200), result('model.mm_fp4.cutlass', 'failed', name=H200, reason='NaN'),
               result('model.mm_fp4.cudnn', 'failed', device=1, name=RTX, reason='NaN'),
               result('model.mm_fp4.cutlass', 'ok', device=1, name=RTX)]
    selection = bk.select(bk.qualify(results), ['fp4_gemm'])
    assert selection['flags'] == {}
    assert selection['problems'] == ['no fp4_gemm backend qualified on all GPU models of the host: '
                                     'flashinfer_cudnn on NVIDIA H200, flashinfer_cutlass on NVIDIA RTX PRO 6000 Blackwell']


def test_one_gpu_model_without_a_backend_leaves_the_flag_out():
    results = all_ok(H200) + [result('model.mm_fp4.cudnn', 'failed', name=RTX, reason='NaN')]
    selection = bk.select(bk.qualify(results), ['fp4_gemm'], {'fp4_gemm': ['flashinfer_cudnn']})
    assert selection['flags'] == {}
    assert selection['per_gpu'][H200] == {'fp4_gemm': 'flashinfer_cudnn'}
    assert selection['problems'] == [
        'no fp4_gemm backend qualified on NVIDIA RTX PRO 6000 Blackwell: tried flashinfer_cudnn (failed: model.mm_fp4.cudnn on GPU 0: NaN)']


def test_a_required_backend_that_qualified_wins_over_the_preference():
    selection = bk.select(bk.qualify(all_ok()), ['moe_runner'], None, {'moe_runner': 'flashinfer_trtllm'})
    assert selection['flags'] == {'moe_runner': 'flashinfer_trtllm'}
    assert selection['problems'] == []


def test_a_required_backend_that_failed_is_an_expected_found_problem():
    results = [result('moe.flashinfer_cutlass.bf16', 'failed', device=2, reason='NaN'), result('moe.flashinfer_trtllm.nvfp4', 'ok')]
    selection = bk.select(bk.qualify(results), ['moe_runner'], None, {'moe_runner': 'flashinfer_cutlass'})
    assert selection['flags'] == {}
    assert selection['problems'] == ['gpufleet_backend_required.moe_runner: expected flashinfer_cutlass, found failed '
                                     '(moe.flashinfer_cutlass.bf16 on GPU 2: NaN) on NVIDIA H200']


def test_a_required_backend_only_skipped_or_never_checked_is_a_problem_too():
    qualification = bk.qualify([result('model.mm_fp4.cudnn', 'skipped', reason='GPU busy')])
    selection = bk.select(qualification, ['fp4_gemm', 'moe_runner'], None,
                          {'fp4_gemm': 'flashinfer_cudnn', 'moe_runner': 'flashinfer_mxfp4'})
    assert selection['problems'] == [
        'gpufleet_backend_required.moe_runner: expected flashinfer_mxfp4, found not checked '
        '(no kernel check of flashinfer_mxfp4 ran on NVIDIA H200) on NVIDIA H200',
        'gpufleet_backend_required.fp4_gemm: expected flashinfer_cudnn, found skipped (GPU busy) on NVIDIA H200']


def test_no_results_at_all_is_a_problem_per_needed_family():
    selection = bk.select({}, ['moe_runner'])
    assert selection == {'flags': {}, 'per_gpu': {},
                         'problems': ['no moe_runner backend qualified: no kernel check result names a GPU']}


def test_select_refuses_an_unknown_family():
    with pytest.raises(ValueError, match="unknown backend family 'attention'"):
        bk.select({}, ['attention'])


# ---------------------------------------------------------------- render


def test_render_args_in_family_order():
    flags = {'fp4_gemm': 'flashinfer_cudnn', 'moe_runner': 'flashinfer_cutlass'}
    assert bk.render_args(flags) == '--moe-runner-backend flashinfer_cutlass --fp4-gemm-backend flashinfer_cudnn'
    assert bk.render_args({}) == ''
    assert bk.render_args({'fp8_gemm': 'cutlass'}, '0.5.23') == '--fp8-gemm-backend cutlass'


def test_render_env_exact_text():
    flags = {'fp4_gemm': 'flashinfer_cudnn', 'moe_runner': 'flashinfer_cutlass'}
    assert bk.render_env(flags, '0.5.23') == (
        '# sglang 0.5.23 backends qualified by the gpufleet.inference kernel checks; written by the verification, do not edit\n'
        'SGLANG_ARGS="--moe-runner-backend flashinfer_cutlass --fp4-gemm-backend flashinfer_cudnn"\n'
        'SGLANG_MOE_RUNNER_BACKEND=flashinfer_cutlass\n'
        'SGLANG_FP4_GEMM_BACKEND=flashinfer_cudnn\n')


def test_render_env_extra_variables_are_quoted_and_checked():
    text = bk.render_env({'moe_runner': 'flashinfer_trtllm'}, '0.5.23', {'SGLANG_MODEL': '/srv/models/qwen3 30b'})
    assert text.splitlines()[-1] == 'SGLANG_MODEL="/srv/models/qwen3 30b"'
    for name, value in (('SGLANG_MODEL', '$(reboot)'), ('SGLANG_MODEL', 'a"b'), ('SGLANG_MODEL', 'a\nb'),
                        ('lower', 'x'), ('SGLANG_ARGS', 'x'), ('SGLANG_MOE_RUNNER_BACKEND', 'triton')):
        with pytest.raises(ValueError):
            bk.render_env({'moe_runner': 'flashinfer_trtllm'}, '0.5.23', {name: value})


@pytest.mark.parametrize('flags, message', [
    ({'moe_runner': 'flashinfer_cutlass; reboot'}, 'only a-z, 0-9, _ and - are allowed'),
    ({'moe_runner': 'Flashinfer_Cutlass'}, 'only a-z, 0-9, _ and - are allowed'),
    ({'moe_runner': 'flashinfer_cudnn'}, "is not a sglang 0.5.23 --moe-runner-backend choice"),
    ({'attention': 'fa3'}, "unknown backend family 'attention'"),
], ids=['shell', 'case', 'not_a_choice', 'family'])
def test_render_refuses_what_sglang_or_a_unit_file_would_not_take(flags, message):
    with pytest.raises(ValueError, match=message):
        bk.render_args(flags)
    with pytest.raises(ValueError, match=message):
        bk.render_env(flags, '0.5.23')


def test_render_refuses_an_unknown_sglang_version():
    with pytest.raises(ValueError, match="unknown sglang version '0.4.0'; known: 0.5.23"):
        bk.render_args({'moe_runner': 'flashinfer_cutlass'}, '0.4.0')


# ---------------------------------------------------------------- record


def test_record_is_json_and_carries_the_flags_and_problems():
    qualification = bk.qualify(all_ok() + [result('model.mm_fp4.cudnn', 'failed', device=1, reason='NaN')])
    selection = bk.select(qualification, ['moe_runner', 'fp4_gemm'])
    rec = bk.record(qualification, selection, '0.5.23', 'Qwen/Qwen3-30B-A3B-NVFP4')
    assert set(rec) == {'sglang_version', 'source', 'model', 'qualification', 'flags', 'args', 'problems'}
    assert rec['args'] == '--moe-runner-backend flashinfer_cutlass --fp4-gemm-backend flashinfer_cutlass'
    assert rec['source'] == bk.SGLANG_SERVER_ARGS['0.5.23']['source']
    assert rec['model'] == 'Qwen/Qwen3-30B-A3B-NVFP4' and rec['problems'] == []
    assert json.loads(json.dumps(rec)) == rec
    assert rec['qualification'][H200]['fp4_gemm']['flashinfer_cudnn']['status'] == 'failed'


# ---------------------------------------------------------------- validate


def test_validate_accepts_the_defaults_and_nothing():
    assert bk.validate(bk.DEFAULT_PREFERENCE, {'fp4_gemm': 'flashinfer_cudnn'}, '0.5.23') == []
    assert bk.validate(None, None, bk.DEFAULT_SGLANG_VERSION) == []
    assert bk.validate({}, {}, '0.5.23') == []


def test_validate_refuses_an_unknown_backend_name_and_lists_the_allowed():
    errors = bk.validate({'fp4_gemm': ['flashinfer_cudnn', 'cutlass']}, None, '0.5.23')
    assert errors == ["gpufleet_backend_preference.fp4_gemm: 'cutlass' is not a sglang 0.5.23 --fp4-gemm-backend choice; allowed: "
                      "auto, flashinfer_cudnn, flashinfer_cutedsl, flashinfer_cutlass, flashinfer_trtllm, marlin"]


def test_validate_refuses_an_unknown_family():
    errors = bk.validate({'attention': ['fa3']}, {'bf16_gemm': 'cutedsl'}, '0.5.23')
    assert errors == ["gpufleet_backend_preference: unknown family 'attention'; known: moe_runner, fp4_gemm, fp8_gemm",
                      "gpufleet_backend_required: unknown family 'bf16_gemm'; known: moe_runner, fp4_gemm, fp8_gemm"]


@pytest.mark.parametrize('preference, expected', [
    ('flashinfer_cutlass', 'gpufleet_backend_preference must be a dict of family -> list of backend names, got str'),
    ({'moe_runner': 'flashinfer_cutlass'}, 'gpufleet_backend_preference.moe_runner must be a list of backend names, got str'),
    ({'moe_runner': ['flashinfer_cutlass', 3]}, 'gpufleet_backend_preference.moe_runner: 3 is not a backend name (a string)'),
    ({'moe_runner': ['triton', 'triton']}, "gpufleet_backend_preference.moe_runner: 'triton' is listed twice"),
], ids=['str', 'family_str', 'non_str_name', 'twice'])
def test_validate_refuses_a_preference_of_the_wrong_shape(preference, expected):
    assert bk.validate(preference, None, '0.5.23') == [expected]


def test_validate_refuses_a_required_of_the_wrong_shape_or_name():
    assert bk.validate(None, ['flashinfer_cutlass'], '0.5.23') == [
        'gpufleet_backend_required must be a dict of family -> one backend name, got list']
    assert bk.validate(None, {'moe_runner': ['flashinfer_cutlass']}, '0.5.23') == [
        'gpufleet_backend_required.moe_runner must be one backend name, got list']
    errors = bk.validate(None, {'moe_runner': 'flashinfer_cudnn'}, '0.5.23')
    assert len(errors) == 1
    assert errors[0].startswith("gpufleet_backend_required.moe_runner: 'flashinfer_cudnn' is not a sglang 0.5.23 --moe-runner-backend choice; allowed: auto, ")
    assert 'flashinfer_cutlass' in errors[0] and 'flashinfer_trtllm' in errors[0]


def test_validate_refuses_an_unknown_sglang_version_and_still_checks_the_shape():
    assert bk.validate(None, None, '0.4.0') == ["gpufleet_sglang_version: unknown sglang version '0.4.0'; known: 0.5.23"]
    errors = bk.validate('x', None, '0.4.0')
    assert errors == ["gpufleet_sglang_version: unknown sglang version '0.4.0'; known: 0.5.23",
                      'gpufleet_backend_preference must be a dict of family -> list of backend names, got str']
