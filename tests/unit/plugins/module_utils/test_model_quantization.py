# -*- coding: utf-8 -*-
"""The quantizations model_profile reads from a config.json besides FP8 and
ModelOpt: gpt-oss's MXFP4 (quant_method mxfp4, modules_to_not_convert) and
llm-compressor's compressed-tensors NVFP4 and FP8 W8A8 (config_groups), what
each gives, the refusals of every other compressed-tensors scheme naming the
field and its value, and the model checks' plan for an MXFP4 model: the BF16
GEMMs checked, the MXFP4 GEMMs and MoE skipped with the reason."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os
import types

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import model_checks as mc
from ansible_collections.gpufleet.inference.plugins.module_utils import model_profile as mp
from ansible_collections.gpufleet.inference.plugins.module_utils import model_verify as mv

FIXTURES = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures', 'model_configs')
GPT_OSS_NOT_CONVERTED = ['model.layers.*.self_attn', 'model.layers.*.mlp.router', 'model.embed_tokens', 'lm_head']
NOT_YET = 'no MXFP4 check on this collection yet'

# llm-compressor's NVFP4 scheme (compressed-tensors' NVFP4 preset) as it writes
# it in config.json: weights and activations FP4 e2m1 with a group of 16
# (tensor_group: FP8 e4m3 scales per group under one FP32 global scale).
NVFP4_ARGS = {'num_bits': 4, 'type': 'float', 'strategy': 'tensor_group', 'group_size': 16, 'symmetric': True,
              'dynamic': False}
CT_NVFP4 = {
    'quant_method': 'compressed-tensors',
    'format': 'nvfp4-pack-quantized',
    'quantization_status': 'compressed',
    'config_groups': {'group_0': {'targets': ['Linear'], 'weights': dict(NVFP4_ARGS),
                                  'input_activations': dict(NVFP4_ARGS, dynamic='local')}},
    'ignore': ['lm_head', 're:.*mlp.gate$'],
}
# FP8 W8A8: per-channel weights with dynamic per-token activations (FP8_DYNAMIC),
# per-tensor weights with static per-tensor activations, 128x128 blocks with
# dynamic groups of 128 (FP8_BLOCK).
FP8_WEIGHTS = {'num_bits': 8, 'type': 'float', 'symmetric': True, 'dynamic': False}
CT_FP8 = {
    'channel': ({'strategy': 'channel'}, {'strategy': 'token', 'dynamic': True}),
    'tensor': ({'strategy': 'tensor'}, {'strategy': 'tensor', 'dynamic': False}),
    'block': ({'strategy': 'block', 'block_structure': [128, 128]},
              {'strategy': 'group', 'group_size': 128, 'dynamic': True}),
}


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return json.load(handle)


def qwen3_30b(quantization_config=None):
    config = fixture('qwen3-30b-a3b.config.json')
    if quantization_config is not None:
        config['quantization_config'] = quantization_config
    return config


def ct_fp8(strategy, fmt='float-quantized'):
    weights, acts = CT_FP8[strategy]
    return {'quant_method': 'compressed-tensors', 'format': fmt,
            'config_groups': {'group_0': {'targets': ['Linear'], 'weights': dict(FP8_WEIGHTS, **weights),
                                          'input_activations': dict(FP8_WEIGHTS, **acts)}},
            'ignore': ['lm_head']}


def refused(expected_variable, call, *args, **kwargs):
    with pytest.raises(mp.ProfileError) as info:
        call(*args, **kwargs)
    assert info.value.variable == expected_variable
    return str(info.value)


# ---------------------------------------------------------------- MXFP4 (gpt-oss)

MXFP4 = {'method': 'mxfp4', 'block': None, 'group_size': 32, 'format': 'mxfp4', 'not_converted': GPT_OSS_NOT_CONVERTED}


@pytest.mark.parametrize('name', ['gpt-oss-120b', 'gpt-oss-20b'])
def test_gpt_oss_reads_as_mxfp4_experts(name):
    config = fixture('%s.config.json' % name)
    assert config['quantization_config'] == {'quant_method': 'mxfp4', 'modules_to_not_convert': GPT_OSS_NOT_CONVERTED}
    assert mp.profile_from_config(config)['quantization'] == MXFP4
    assert mp.shipped(name)['quantization'] == MXFP4


@pytest.mark.parametrize('tp, expert', [(1, 2880), (2, 1440), (4, 720), (8, 360)])
def test_gpt_oss_mxfp4_marks_the_experts_gemms_only(tp, expert):
    shapes = mp.shard_shapes(mp.shipped('gpt-oss-20b'), tp)
    weights = [(gemm['layer'], gemm.get('weights')) for gemm in shapes['gemms']]
    # every layer is MoE: gate_up and down are the experts' GEMMs, in MXFP4; qkv and o stay BF16
    assert weights == [('qkv', None), ('o', None), ('gate_up', 'mxfp4'), ('down', 'mxfp4')]
    assert (shapes['gemms'][2]['n'], shapes['gemms'][3]['k']) == (2 * expert, expert)


def test_an_mxfp4_model_with_dense_layers_keeps_its_dense_mlp_bf16():
    config = qwen3_30b({'quant_method': 'mxfp4'})
    config['mlp_only_layers'] = [0]
    profile = mp.profile_from_config(config)
    assert profile['quantization'] == dict(MXFP4, not_converted=[])
    assert all('weights' not in gemm for gemm in mp.shard_shapes(profile, 1)['gemms'])


def test_mxfp4_refusals_name_the_field():
    dense = {'architectures': ['LlamaForCausalLM'], 'hidden_size': 4096, 'intermediate_size': 14336,
             'num_attention_heads': 32, 'num_hidden_layers': 2, 'quantization_config': {'quant_method': 'mxfp4'}}
    assert "quant_method 'mxfp4' on a model without experts" in refused('gpufleet_model', mp.profile_from_config, dense)
    # 2880 + 16 is no multiple of 32
    odd = copy.deepcopy(mp.PROFILES['gpt-oss-20b'])
    odd['intermediate_size'] = 2896
    text = refused('gpufleet_model', mp.profile_from_config, odd)
    assert "the experts' intermediate size 2896 is not whole MXFP4 blocks of 32" in text
    bad = qwen3_30b({'quant_method': 'mxfp4', 'modules_to_not_convert': 'lm_head'})
    text = refused('gpufleet_model', mp.profile_from_config, bad)
    assert "quantization_config.modules_to_not_convert must be a list of module names, found 'lm_head'" in text


# ---------------------------------------------------------------- compressed-tensors

def test_compressed_tensors_nvfp4_is_the_nvfp4_handling():
    profile = mp.profile_from_config(qwen3_30b(CT_NVFP4))
    assert profile['quantization'] == {'method': 'nvfp4', 'block': None, 'group_size': 16,
                                       'format': 'compressed-tensors', 'weight_scales': 'tensor_group',
                                       'not_converted': ['lm_head', 're:.*mlp.gate$']}
    # the NVFP4 group check applies: the experts' down K 768 / tp 8 = 96 is 6 groups of 16
    assert mp.shard_shapes(profile, 8)['moe']['intermediate'] == 96
    model, errors = mv.resolve(dict(model='', model_config=qwen3_30b(CT_NVFP4), tp_size=1, sglang_version='0.5.23'))
    assert errors == [] and model['precision'] == 'nvfp4' and model['families'] == ['moe_runner', 'fp4_gemm']


@pytest.mark.parametrize('strategy, block', [('tensor', None), ('channel', None), ('block', [128, 128])])
def test_compressed_tensors_fp8_is_the_fp8_handling(strategy, block):
    quant = mp.profile_from_config(qwen3_30b(ct_fp8(strategy)))['quantization']
    assert quant == {'method': 'fp8', 'block': block, 'group_size': None, 'format': 'compressed-tensors',
                     'weight_scales': strategy, 'not_converted': ['lm_head']}


def test_compressed_tensors_fp8_blocks_refuse_a_tp_that_splits_a_block():
    profile = mp.profile_from_config(qwen3_30b(ct_fp8('block')))
    assert mp.shard_shapes(profile, 2)['moe']['intermediate'] == 384
    # 768 / 4 = 192 is no multiple of block_n 128, as with Qwen3-30B-A3B-FP8
    text = refused('gpufleet_tp_size', mp.shard_shapes, profile, 4)
    assert 'FP8 block [128, 128]' in text and '192' in text


def test_compressed_tensors_under_compression_config():
    config = qwen3_30b()
    config['compression_config'] = ct_fp8('channel', fmt='naive-quantized')
    assert mp.profile_from_config(config)['quantization']['method'] == 'fp8'


def _changed(base, group_changes=None, weights=None, acts=None, drop_acts=False, **top):
    section = copy.deepcopy(base)
    section.update(top)
    group = section['config_groups']['group_0']
    group.update(group_changes or {})
    group['weights'].update(weights or {})
    if drop_acts:
        del group['input_activations']
    else:
        group['input_activations'].update(acts or {})
    return section


GROUP = 'config.json quantization_config.config_groups.group_0'


@pytest.mark.parametrize('section, field', [
    # int4 weight-only (W4A16, GPTQ-like pack-quantized)
    (_changed(ct_fp8('channel'), {'format': 'pack-quantized'},
              weights={'type': 'int', 'num_bits': 4, 'strategy': 'group', 'group_size': 128}, drop_acts=True),
     GROUP + ".weights.type 'int'"),
    # int8 W8A8
    (_changed(ct_fp8('channel', fmt='int-quantized'), weights={'type': 'int'}, acts={'type': 'int'}),
     GROUP + ".weights.type 'int'"),
    # weight-only NVFP4 (W4A16)
    (_changed(CT_NVFP4, drop_acts=True), GROUP + '.input_activations None'),
    (_changed(CT_NVFP4, weights={'group_size': 32}), GROUP + '.weights.group_size 32'),
    (_changed(CT_NVFP4, acts={'strategy': 'group'}), GROUP + ".input_activations.strategy 'group'"),
    (_changed(CT_NVFP4, format='float-quantized'), GROUP + ".format 'float-quantized'"),
    # MXFP4-like float4 with a group of 32 is not NVFP4
    (_changed(CT_NVFP4, weights={'strategy': 'group', 'group_size': 32}), GROUP + ".weights.strategy 'group'"),
    (_changed(ct_fp8('channel'), weights={'strategy': 'group'}), GROUP + ".weights.strategy 'group'"),
    # weight-only FP8 (W8A16)
    (_changed(ct_fp8('channel'), drop_acts=True), GROUP + '.input_activations None'),
    # static activations per token
    (_changed(ct_fp8('channel'), acts={'dynamic': False}), GROUP + ".input_activations.strategy 'token'"),
    (_changed(ct_fp8('tensor'), weights={'symmetric': False}), GROUP + '.weights.symmetric False'),
    (_changed(ct_fp8('tensor'), weights={'num_bits': 6}), GROUP + '.weights.num_bits 6'),
    (_changed(ct_fp8('tensor'), acts={'num_bits': 4}), GROUP + '.input_activations.num_bits 4'),
    (_changed(ct_fp8('tensor'), format='pack-quantized'), GROUP + ".format 'pack-quantized'"),
    # only some layers quantized
    (_changed(CT_NVFP4, {'targets': ['re:.*mlp.experts.*']}), GROUP + ".targets ['re:.*mlp.experts.*']"),
], ids=['int4_weight_only', 'int8_w8a8', 'nvfp4_weight_only', 'nvfp4_group_32', 'nvfp4_act_group',
        'nvfp4_float_format', 'fp4_group_32', 'fp8_group', 'fp8_weight_only', 'fp8_static_token', 'fp8_asymmetric',
        'fp6', 'fp8_w8a4', 'fp8_pack_format', 'experts_only'])
def test_other_compressed_tensors_schemes_are_refused_naming_field_and_value(section, field):
    text = refused('gpufleet_model', mp.profile_from_config, qwen3_30b(section))
    assert field + ' is not supported (compressed-tensors read: NVFP4 W4A4' in text, text


def test_compressed_tensors_config_refusals():
    config = qwen3_30b(_changed(ct_fp8('block'), weights={'block_structure': '128x128'}))
    assert (GROUP + ".weights.block_structure must be two positive integers [n, k], found '128x128'"
            in refused('gpufleet_model', mp.profile_from_config, config))
    mixed = copy.deepcopy(CT_NVFP4)
    mixed['format'] = 'mixed-precision'
    mixed['config_groups']['group_0']['format'] = 'nvfp4-pack-quantized'
    mixed['config_groups']['group_1'] = dict(ct_fp8('tensor')['config_groups']['group_0'], format='float-quantized')
    text = refused('gpufleet_model', mp.profile_from_config, qwen3_30b(mixed))
    assert 'config_groups group_0 (nvfp4) and group_1 (fp8) disagree' in text
    sparse = dict(ct_fp8('tensor'), sparsity_config={'format': 'sparse-24-bitmask'})
    assert "sparsity_config.format 'sparse-24-bitmask' is not supported" in refused(
        'gpufleet_model', mp.profile_from_config, qwen3_30b(sparse))
    ignore = dict(ct_fp8('tensor'), ignore='lm_head')
    assert 'quantization_config.ignore must be a list of module names' in refused(
        'gpufleet_model', mp.profile_from_config, qwen3_30b(ignore))


# ---------------------------------------------------------------- the model checks of an MXFP4 model

def test_the_plan_for_mxfp4_skips_the_mxfp4_checks_with_the_reason():
    shapes = mp.shard_shapes(mp.shipped('gpt-oss-20b'), 2)
    plan = dict((entry['check'], entry) for entry in mc.plan(shapes, 'mxfp4'))
    assert sorted(plan) == ['model.gemm.bf16', 'model.gemm.mxfp4', 'moe.flashinfer_mxfp4.mxfp4',
                            'moe.triton_kernel.mxfp4']
    # the BF16 attention GEMMs run; the experts' MXFP4 GEMMs and the MoE do not
    assert plan['model.gemm.bf16'] == {'check': 'model.gemm.bf16', 'layers': ['qkv', 'o'], 'skip': None}
    assert plan['model.gemm.mxfp4']['layers'] == ['gate_up', 'down']
    for name in ('model.gemm.mxfp4', 'moe.flashinfer_mxfp4.mxfp4', 'moe.triton_kernel.mxfp4'):
        assert plan[name]['skip'].startswith(NOT_YET + ':'), name
    assert 'gate_up, down' in plan['model.gemm.mxfp4']['skip']
    # no BF16 or FP8 MoE check stands in for the MXFP4 one
    assert not any(name.startswith('moe.') and not name.endswith('.mxfp4') for name in plan)


def test_the_plans_of_other_precisions_are_unchanged():
    shapes = mp.shard_shapes(mp.shipped('qwen3-30b-a3b'), 1)
    plan = mc.plan(shapes, 'none')
    assert [entry['check'] for entry in plan] == ['model.gemm.bf16', 'moe.flashinfer_cutlass.bf16', 'moe.triton.bf16']
    assert all(entry['skip'] is None for entry in plan)
    assert plan[0]['layers'] == ['qkv', 'o', 'gate_up', 'down']


def fake_torch():
    flags = types.SimpleNamespace(allow_tf32=True)
    return types.SimpleNamespace(backends=types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=flags),
                                                                cudnn=types.SimpleNamespace(allow_tf32=True)),
                                 version=types.SimpleNamespace(cuda=None))


def test_run_checks_skips_mxfp4_on_every_device_without_running_anything():
    shapes = mp.shard_shapes(mp.shipped('gpt-oss-20b'), 1)
    devices = [(0, 'NVIDIA H100 80GB HBM3', (9, 0)), (1, 'NVIDIA H100 80GB HBM3', (9, 0))]
    only = ['model.gemm.mxfp4', 'moe.flashinfer_mxfp4.mxfp4', 'moe.triton_kernel.mxfp4']
    results = mc.run_checks(fake_torch(), {'torch': None, 'flashinfer': None}, devices, shapes, 'mxfp4', only=only)
    expected = [(name, index) for name in only for index in (0, 1)]
    assert [(entry['check'], entry['device']) for entry in results] == expected
    for entry in results:
        assert entry['status'] == 'skipped' and entry['reason'].startswith(NOT_YET), entry


def test_an_mxfp4_model_asks_no_moe_runner_flag_and_says_why():
    model, errors = mv.resolve(dict(model='gpt-oss-20b', tp_size=1, sglang_version='0.5.23'))
    assert errors == [] and model['precision'] == 'mxfp4' and model['families'] == []
    assert model['unchecked']['moe_runner'].startswith(NOT_YET)
    facts = {'model_checks': [dict(mc._kc().new_entry(name, 0, 'NVIDIA H100 80GB HBM3', 0.1, 'skipped', NOT_YET))
                              for name in ('moe.flashinfer_mxfp4.mxfp4', 'moe.triton_kernel.mxfp4')]}
    assert mv.judge(model, facts, {'sglang_version': '0.5.23'}, numeric=True) == []
    assert facts['model']['unchecked'] == model['unchecked']
    # skipped MXFP4 checks qualify no backend
    assert facts['backends']['flags'] == {}
