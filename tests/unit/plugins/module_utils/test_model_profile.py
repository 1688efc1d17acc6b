# -*- coding: utf-8 -*-
"""The served model's profile and per-GPU shard shapes (model_profile), read
from the config.json fixtures in tests/fixtures/model_configs."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import kernel_checks
from ansible_collections.gpufleet.inference.plugins.module_utils import model_profile as mp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FIXTURES = os.path.join(ROOT, 'tests', 'fixtures', 'model_configs')

NO_QUANT = {'method': 'none', 'block': None, 'group_size': None}


def fixture_text(name):
    with open(os.path.join(FIXTURES, name), encoding='utf-8') as handle:
        return handle.read()


def fixture(name):
    return mp.load_config_text(fixture_text(name), 'gpufleet_model')


def qwen3_30b():
    return fixture('qwen3-30b-a3b.config.json')


def nvfp4_quant():
    return json.loads(fixture_text('qwen3-30b-a3b-nvfp4.hf_quant_config.json'))


def refused(expected_variable, call, *args, **kwargs):
    """The text of call(*args, **kwargs)'s ProfileError, checked to name expected_variable."""
    with pytest.raises(mp.ProfileError) as info:
        call(*args, **kwargs)
    err = info.value
    assert err.variable == expected_variable
    assert str(err) == '%s: %s' % (expected_variable, err.message)
    assert isinstance(err, ValueError)
    return str(err)


QWEN3_30B_PROFILE = {
    'name': 'qwen3-30b-a3b',
    'architecture': 'Qwen3MoeForCausalLM',
    'hidden': 2048,
    'intermediate': 6144,
    'moe_intermediate': 768,
    'experts': 128,
    'top_k': 8,
    'renormalize': True,
    'heads': 32,
    'kv_heads': 4,
    'head_dim': 128,
    'layers': 48,
    'dense_layers': False,
    'quantization': NO_QUANT,
}

MIXTRAL_PROFILE = {
    'name': 'mixtral-8x7b',
    'architecture': 'MixtralForCausalLM',
    'hidden': 4096,
    'intermediate': None,
    'moe_intermediate': 14336,
    'experts': 8,
    'top_k': 2,
    'renormalize': True,
    'heads': 32,
    'kv_heads': 8,
    'head_dim': 128,
    'layers': 32,
    'dense_layers': False,
    'quantization': NO_QUANT,
}


# ---------------------------------------------------------------- parsing the fixtures

def test_qwen3_30b_fixture_parses_to_its_profile():
    config = qwen3_30b()
    assert config['hidden_size'] == 2048 and config['max_position_embeddings'] == 40960
    assert config['bos_token_id'] == 151643 and config['eos_token_id'] == 151645
    assert config['rms_norm_eps'] == 1e-06 and config['rope_theta'] == 1000000.0
    assert mp.profile_from_config(config, name='qwen3-30b-a3b') == QWEN3_30B_PROFILE


def test_qwen3_30b_fp8_fixture_parses_with_its_128_by_128_blocks():
    profile = mp.profile_from_config(fixture('qwen3-30b-a3b-fp8.config.json'), name='qwen3-30b-a3b-fp8')
    expected = dict(QWEN3_30B_PROFILE, name='qwen3-30b-a3b-fp8',
                    quantization={'method': 'fp8', 'block': [128, 128], 'group_size': None})
    assert profile == expected


def test_mixtral_fixture_parses_with_derived_head_dim_and_renormalized_top_k():
    config = fixture('mixtral-8x7b.config.json')
    assert 'head_dim' not in config and 'norm_topk_prob' not in config
    assert config['rms_norm_eps'] == 1e-05 and config['bos_token_id'] == 1 and config['eos_token_id'] == 2
    assert mp.profile_from_config(config, name='mixtral-8x7b') == MIXTRAL_PROFILE


def test_nvfp4_hf_quant_config_with_the_qwen3_config():
    profile = mp.profile_from_config(qwen3_30b(), quant_config=nvfp4_quant(), name='q')
    assert profile == dict(QWEN3_30B_PROFILE, name='q', quantization={'method': 'nvfp4', 'block': None, 'group_size': 16})


def test_the_name_defaults_to_the_architecture():
    assert mp.profile_from_config(qwen3_30b())['name'] == 'Qwen3MoeForCausalLM'


def test_the_fp8_and_the_plain_fixture_differ_only_in_quantization_config():
    plain = qwen3_30b()
    fp8 = fixture('qwen3-30b-a3b-fp8.config.json')
    assert fp8.pop('quantization_config') == {
        'activation_scheme': 'dynamic', 'fmt': 'e4m3', 'quant_method': 'fp8', 'weight_block_size': [128, 128]}
    assert fp8 == plain


# ---------------------------------------------------------------- shipped profiles

def test_the_shipped_names():
    assert sorted(mp.PROFILES) == ['deepseek-v3', 'gpt-oss-120b', 'gpt-oss-20b', 'kimi-k2', 'llama-4-scout',
                                   'mixtral-8x7b', 'qwen3-235b-a22b', 'qwen3-30b-a3b', 'qwen3-30b-a3b-fp8']
    assert mp.PROFILES['qwen3-30b-a3b']['source'] == 'Qwen/Qwen3-30B-A3B'
    assert mp.PROFILES['qwen3-30b-a3b-fp8']['source'] == 'Qwen/Qwen3-30B-A3B-FP8'
    assert mp.PROFILES['qwen3-235b-a22b']['source'] == 'Qwen/Qwen3-235B-A22B'
    assert mp.PROFILES['mixtral-8x7b']['source'] == 'mistralai/Mixtral-8x7B-v0.1'


@pytest.mark.parametrize('name, fixture_name', [
    ('qwen3-30b-a3b', 'qwen3-30b-a3b.config.json'),
    ('qwen3-30b-a3b-fp8', 'qwen3-30b-a3b-fp8.config.json'),
    ('mixtral-8x7b', 'mixtral-8x7b.config.json'),
])
def test_shipped_profiles_equal_the_fixture_parses(name, fixture_name):
    config = fixture(fixture_name)
    assert mp.shipped(name) == mp.profile_from_config(config, name=name)
    # and the shipped fields are the fixture's published values, field by field
    for field, value in mp.PROFILES[name].items():
        if field != 'source':
            assert config[field] == value, field


def test_qwen3_235b_profile():
    assert mp.shipped('qwen3-235b-a22b') == {
        'name': 'qwen3-235b-a22b', 'architecture': 'Qwen3MoeForCausalLM', 'hidden': 4096, 'intermediate': 12288,
        'moe_intermediate': 1536, 'experts': 128, 'top_k': 8, 'renormalize': True, 'heads': 64, 'kv_heads': 4,
        'head_dim': 128, 'layers': 94, 'dense_layers': False, 'quantization': NO_QUANT}


def test_shipped_returns_a_fresh_profile_each_time():
    first = mp.shipped('qwen3-30b-a3b-fp8')
    first['quantization']['block'].append(1)
    assert mp.shipped('qwen3-30b-a3b-fp8')['quantization']['block'] == [128, 128]
    assert mp.PROFILES['qwen3-30b-a3b-fp8']['quantization_config']['weight_block_size'] == [128, 128]


def test_an_unknown_shipped_name_lists_the_names_sorted():
    text = refused('gpufleet_model', mp.shipped, 'llama-70b')
    assert "'llama-70b'" in text
    assert 'mixtral-8x7b, qwen3-235b-a22b, qwen3-30b-a3b, qwen3-30b-a3b-fp8' in text


# ---------------------------------------------------------------- shard shapes

def gemms(shapes):
    return dict((gemm['layer'], (gemm['n'], gemm['k'])) for gemm in shapes['gemms'])


@pytest.mark.parametrize('tp, qkv_n, o_k, gate_up_n, down_k', [
    (1, 5120, 4096, 1536, 768),   # (32 + 2*4) * 128
    (2, 2560, 2048, 768, 384),    # (16 + 2*2) * 128
    (4, 1280, 1024, 384, 192),    # (8 + 2*1) * 128
    (8, 768, 512, 192, 96),       # (4 + 2*1) * 128: 4 KV heads replicated over 8
])
def test_qwen3_30b_shards(tp, qkv_n, o_k, gate_up_n, down_k):
    shapes = mp.shard_shapes(mp.shipped('qwen3-30b-a3b'), tp)
    assert shapes['tp'] == tp and shapes['hidden'] == 2048
    assert [gemm['layer'] for gemm in shapes['gemms']] == ['qkv', 'o', 'gate_up', 'down']
    assert gemms(shapes) == {'qkv': (qkv_n, 2048), 'o': (2048, o_k), 'gate_up': (gate_up_n, 2048), 'down': (2048, down_k)}
    assert shapes['moe'] == {'experts': 128, 'top_k': 8, 'hidden': 2048, 'intermediate': down_k, 'renormalize': True}


@pytest.mark.parametrize('tp, qkv_n, o_k, gate_up_n, down_k', [
    (1, 6144, 4096, 28672, 14336),  # (32 + 2*8) * 128
    (2, 3072, 2048, 14336, 7168),
    (4, 1536, 1024, 7168, 3584),
    (8, 768, 512, 3584, 1792),      # (4 + 2*1) * 128: one KV head per GPU
])
def test_mixtral_shards(tp, qkv_n, o_k, gate_up_n, down_k):
    shapes = mp.shard_shapes(mp.shipped('mixtral-8x7b'), tp)
    assert shapes['hidden'] == 4096
    assert gemms(shapes) == {'qkv': (qkv_n, 4096), 'o': (4096, o_k), 'gate_up': (gate_up_n, 4096), 'down': (4096, down_k)}
    assert shapes['moe'] == {'experts': 8, 'top_k': 2, 'hidden': 4096, 'intermediate': down_k, 'renormalize': True}


def test_qwen3_235b_at_tp_8():
    shapes = mp.shard_shapes(mp.shipped('qwen3-235b-a22b'), 8)
    assert gemms(shapes) == {'qkv': (1280, 4096), 'o': (4096, 1024), 'gate_up': (384, 4096), 'down': (4096, 192)}
    assert shapes['moe']['intermediate'] == 192


def dense_config(**changes):
    config = {'architectures': ['LlamaForCausalLM'], 'model_type': 'llama', 'hidden_size': 4096,
              'intermediate_size': 14336, 'num_attention_heads': 32, 'num_key_value_heads': 8,
              'num_hidden_layers': 32}
    config.update(changes)
    return config


def test_a_dense_model_has_no_moe_and_uses_its_mlp_size():
    profile = mp.profile_from_config(dense_config())
    assert (profile['experts'], profile['top_k'], profile['moe_intermediate']) == (0, 0, None)
    assert profile['dense_layers'] is True and profile['renormalize'] is False and profile['intermediate'] == 14336
    shapes = mp.shard_shapes(profile, 4)
    assert shapes['moe'] is None
    assert gemms(shapes)['gate_up'] == (7168, 4096) and gemms(shapes)['down'] == (4096, 3584)


def test_dense_layers_besides_moe_use_the_dense_size_in_the_gemms():
    config = qwen3_30b()
    config['mlp_only_layers'] = [0, 47]
    profile = mp.profile_from_config(config)
    assert profile['dense_layers'] is True
    shapes = mp.shard_shapes(profile, 2)
    assert gemms(shapes)['gate_up'] == (6144, 2048) and gemms(shapes)['down'] == (2048, 3072)
    assert shapes['moe']['intermediate'] == 384


@pytest.mark.parametrize('changes, dense', [
    ({'decoder_sparse_step': 2}, True),
    ({'decoder_sparse_step': 1, 'mlp_only_layers': []}, False),
    ({'first_k_dense_replace': 3}, True),
    ({'first_k_dense_replace': 0}, False),
    ({'moe_layer_freq': 2}, True),
])
def test_dense_layers_flags(changes, dense):
    config = qwen3_30b()
    config.update(changes)
    assert mp.profile_from_config(config)['dense_layers'] is dense


def test_deepseek_style_expert_spelling_and_no_norm_topk_prob_means_no_renormalize():
    config = {'model_type': 'deepseek_v3', 'hidden_size': 2048, 'intermediate_size': 6144, 'moe_intermediate_size': 768,
              'n_routed_experts': 64, 'num_experts_per_tok': 6, 'num_attention_heads': 16, 'num_hidden_layers': 4,
              'first_k_dense_replace': 1}
    profile = mp.profile_from_config(config)
    assert (profile['architecture'], profile['experts'], profile['top_k']) == ('deepseek_v3', 64, 6)
    assert profile['renormalize'] is False and profile['kv_heads'] == 16 and profile['head_dim'] == 128
    assert profile['dense_layers'] is True


# ---------------------------------------------------------------- FP8 blocks and NVFP4 groups

def test_fp8_qwen3_30b_is_refused_at_tp_4_as_sglang_would():
    text = refused('gpufleet_tp_size', mp.shard_shapes, mp.shipped('qwen3-30b-a3b-fp8'), 4)
    assert "output_size of gate's and up's weight = 192" in text
    assert 'not divisible by weight quantization block_n = 128' in text
    assert 'moe_intermediate_size 768 / tp 4' in text
    assert 'tp that fit: 1, 2' in text


def test_fp8_qwen3_30b_is_refused_at_tp_8():
    assert "weight = 96 " in refused('gpufleet_tp_size', mp.shard_shapes, mp.shipped('qwen3-30b-a3b-fp8'), 8)


@pytest.mark.parametrize('tp, gate_up_n, down_k', [(1, 1536, 768), (2, 768, 384)])
def test_fp8_qwen3_30b_is_accepted_at_tp_1_and_2(tp, gate_up_n, down_k):
    shapes = mp.shard_shapes(mp.shipped('qwen3-30b-a3b-fp8'), tp)
    assert gemms(shapes)['gate_up'] == (gate_up_n, 2048) and gemms(shapes)['down'] == (2048, down_k)
    assert shapes['moe']['intermediate'] == down_k


def test_the_plain_qwen3_30b_has_no_block_limit_at_tp_4():
    assert mp.shard_shapes(mp.shipped('qwen3-30b-a3b'), 4)['moe']['intermediate'] == 192


def test_fp8_down_block_k_is_checked_on_its_own():
    config = qwen3_30b()
    config['quantization_config'] = {'quant_method': 'fp8', 'weight_block_size': [64, 128]}
    profile = mp.profile_from_config(config)
    text = refused('gpufleet_tp_size', mp.shard_shapes, profile, 4)
    assert "input_size of down's weight = 192" in text and 'block_k = 128' in text
    assert mp.shard_shapes(profile, 2)['moe']['intermediate'] == 384


def test_fp8_without_blocks_has_no_block_limit():
    config = qwen3_30b()
    config['quantization_config'] = {'quant_method': 'fp8', 'activation_scheme': 'static'}
    profile = mp.profile_from_config(config)
    assert profile['quantization'] == {'method': 'fp8', 'block': None, 'group_size': None}
    assert mp.shard_shapes(profile, 8)['moe']['intermediate'] == 96


@pytest.mark.parametrize('tp', [1, 2, 4, 8, 16])
def test_nvfp4_qwen3_30b_fits_its_16_groups(tp):
    profile = mp.profile_from_config(qwen3_30b(), quant_config=nvfp4_quant())
    assert mp.shard_shapes(profile, tp)['moe']['intermediate'] == 768 // tp


def test_nvfp4_qwen3_30b_at_tp_32_leaves_a_k_of_24():
    profile = mp.profile_from_config(qwen3_30b(), quant_config=nvfp4_quant())
    text = refused('gpufleet_tp_size', mp.shard_shapes, profile, 32)
    assert 'K = 24 is not a multiple of the NVFP4 group size 16' in text
    assert 'tp that fit: 1, 2, 4, 8, 16' in text


def test_nvfp4_group_from_an_inline_modelopt_config():
    config = qwen3_30b()
    config['quantization_config'] = {'quant_method': 'modelopt', 'quant_algo': 'NVFP4', 'group_size': 64}
    profile = mp.profile_from_config(config)
    assert profile['quantization'] == {'method': 'nvfp4', 'block': None, 'group_size': 64}
    assert 'K = 96 is not a multiple of the NVFP4 group size 64' in refused('gpufleet_tp_size', mp.shard_shapes, profile, 8)
    assert mp.shard_shapes(profile, 4)['moe']['intermediate'] == 192


def test_nvfp4_group_from_config_groups_and_the_default():
    config = qwen3_30b()
    config['quantization_config'] = {'quant_method': 'modelopt', 'quant_algo': 'NVFP4',
                                     'config_groups': {'group_0': {'weights': {'group_size': 32, 'num_bits': 4}}}}
    assert mp.profile_from_config(config)['quantization']['group_size'] == 32
    config['quantization_config'] = {'quant_method': 'modelopt', 'quant_algo': 'NVFP4'}
    assert mp.profile_from_config(config)['quantization']['group_size'] == 16
    quant = nvfp4_quant()
    del quant['quantization']['group_size']
    assert mp.profile_from_config(qwen3_30b(), quant_config=quant)['quantization']['group_size'] == 16


def test_modelopt_fp8_is_fp8_without_blocks():
    quant = nvfp4_quant()
    quant['quantization']['quant_algo'] = 'FP8'
    assert mp.profile_from_config(qwen3_30b(), quant_config=quant)['quantization'] == {
        'method': 'fp8', 'block': None, 'group_size': None}


def test_nvfp4_group_must_divide_the_o_projection_k():
    config = dense_config(hidden_size=3072, num_attention_heads=24, num_key_value_heads=8, head_dim=128,
                          intermediate_size=8192)
    config['quantization_config'] = {'quant_method': 'modelopt', 'quant_algo': 'NVFP4', 'group_size': 512}
    profile = mp.profile_from_config(config)
    # hidden 3072 and 8192/2 are multiples of 512, o's K 12*128 = 1536 too; at tp 4 o's K is 768
    assert mp.shard_shapes(profile, 2)['gemms'][1] == {'layer': 'o', 'n': 3072, 'k': 1536}
    assert 'the o GEMM K = 768' in refused('gpufleet_tp_size', mp.shard_shapes, profile, 4)


# ---------------------------------------------------------------- refused quantizations

@pytest.mark.parametrize('quantization_config, found', [
    ({'quant_method': 'awq', 'bits': 4, 'group_size': 128}, "quant_method 'awq'"),
    ({'quant_method': 'gptq', 'bits': 4}, "quant_method 'gptq'"),
    ({'quant_method': 'bitsandbytes', 'load_in_4bit': True}, "quant_method 'bitsandbytes'"),
    ({'quant_method': 'modelopt', 'quant_algo': 'W4A8_AWQ'}, "quant_algo 'W4A8_AWQ'"),
    ({'quant_method': 'modelopt', 'quant_algo': 'NVFP4_AWQ'}, "quant_algo 'NVFP4_AWQ'"),
    ({'bits': 4}, 'quant_method None'),
], ids=['awq', 'gptq', 'bitsandbytes', 'modelopt_w4a8_awq', 'modelopt_nvfp4_awq', 'no_method'])
def test_unknown_quantization_in_config_json_is_refused(quantization_config, found):
    config = qwen3_30b()
    config['quantization_config'] = quantization_config
    text = refused('gpufleet_model', mp.profile_from_config, config)
    allowed = 'allowed: NVFP4, FP8' if 'quant_algo' in found else mp.ALLOWED_QUANT
    assert found in text and allowed in text
    assert text.startswith('gpufleet_model: config.json quantization_config')


def test_compression_config_without_config_groups_is_refused():
    config = qwen3_30b()
    config['compression_config'] = {'quant_method': 'compressed-tensors'}
    text = refused('gpufleet_model', mp.profile_from_config, config)
    assert 'config.json compression_config.config_groups must be a non-empty JSON object' in text


def test_an_unknown_modelopt_algo_in_hf_quant_config_is_refused():
    quant = nvfp4_quant()
    quant['quantization']['quant_algo'] = 'W4A8_AWQ'
    text = refused('gpufleet_model', mp.profile_from_config, qwen3_30b(), quant_config=quant)
    assert "hf_quant_config.json quantization.quant_algo 'W4A8_AWQ'" in text and 'allowed: NVFP4, FP8' in text


def test_conflicting_quantization_sources_are_refused():
    text = refused('gpufleet_model', mp.profile_from_config, fixture('qwen3-30b-a3b-fp8.config.json'),
                   quant_config=nvfp4_quant())
    assert 'fp8' in text and 'nvfp4' in text and 'disagree' in text


@pytest.mark.parametrize('block', [[128], [128, 0], ['128', 128], 128, [True, 128]])
def test_a_bad_weight_block_size_is_refused(block):
    config = qwen3_30b()
    config['quantization_config'] = {'quant_method': 'fp8', 'weight_block_size': block}
    assert 'weight_block_size' in refused('gpufleet_model', mp.profile_from_config, config)


# ---------------------------------------------------------------- refused configs

def test_the_truncated_config_json_is_refused():
    text = refused('gpufleet_model', mp.load_config_text, fixture_text('broken.config.json'), 'gpufleet_model')
    assert 'config.json is not valid JSON' in text


@pytest.mark.parametrize('text, words', [
    ('[1, 2]', 'must hold a JSON object, found list'),
    ('"x"', 'must hold a JSON object, found str'),
    ('{"num_attention_heads": 32}', 'lacks hidden_size'),
    ('{"hidden_size": 2048}', 'lacks num_attention_heads'),
    ('{}', 'lacks hidden_size and num_attention_heads'),
    ('', 'not valid JSON'),
    (None, 'expected its JSON text, found NoneType'),
])
def test_a_config_text_that_is_no_model_config_is_refused(text, words):
    assert words in refused('my_var', mp.load_config_text, text, 'my_var')


def test_config_bytes_are_read():
    config = mp.load_config_text(fixture_text('mixtral-8x7b.config.json').encode('utf-8'), 'gpufleet_model')
    assert config['num_local_experts'] == 8


@pytest.mark.parametrize('field, value, words', [
    ('hidden_size', 0, 'hidden_size must be a positive integer, found 0'),
    ('hidden_size', '2048', "hidden_size must be a positive integer, found '2048'"),
    ('hidden_size', True, 'hidden_size must be a positive integer, found True'),
    ('num_attention_heads', 2.0, 'num_attention_heads must be a positive integer, found 2.0'),
    ('num_hidden_layers', None, 'lacks num_hidden_layers'),
    ('num_key_value_heads', 5, 'num_attention_heads 32 is not a multiple of num_key_value_heads 5'),
    ('num_key_value_heads', -4, 'num_key_value_heads must be a positive integer, found -4'),
    ('head_dim', 0, 'head_dim must be a positive integer'),
    ('num_experts', -1, 'num_experts must be an integer >= 0, found -1'),
    ('num_experts_per_tok', 129, 'num_experts_per_tok 129 is more than the 128 experts (num_experts)'),
    ('num_experts_per_tok', None, 'has num_experts 128 but no num_experts_per_tok'),
    ('num_experts_per_tok', 0, 'num_experts_per_tok must be a positive integer, found 0'),
    ('moe_intermediate_size', '768', 'moe_intermediate_size must be a positive integer'),
    ('norm_topk_prob', 'yes', "norm_topk_prob must be true or false, found 'yes'"),
    ('mlp_only_layers', [0, 'x'], 'mlp_only_layers must be a list of layer indices'),
    ('decoder_sparse_step', 0, 'decoder_sparse_step must be a positive integer, found 0'),
    ('architectures', [], 'architectures must be a non-empty list of names'),
    ('architectures', 'Qwen3MoeForCausalLM', 'architectures must be a non-empty list of names'),
])
def test_a_bad_config_field_is_refused_by_name(field, value, words):
    config = qwen3_30b()
    if value is None:
        del config[field]
    else:
        config[field] = value
    text = refused('gpufleet_model', mp.profile_from_config, config)
    assert field in text and words in text


def test_top_k_above_mixtral_experts_is_refused():
    config = fixture('mixtral-8x7b.config.json')
    config['num_experts_per_tok'] = 9
    assert 'num_experts_per_tok 9 is more than the 8 experts (num_local_experts)' in refused(
        'gpufleet_model', mp.profile_from_config, config)


def test_a_config_without_architecture_nor_model_type_is_refused():
    config = qwen3_30b()
    del config['architectures']
    assert mp.profile_from_config(config)['architecture'] == 'qwen3_moe'
    del config['model_type']
    assert 'neither architectures nor model_type' in refused('gpufleet_model', mp.profile_from_config, config)


def test_head_dim_cannot_be_derived_from_an_uneven_hidden_size():
    config = dense_config(hidden_size=4000, num_attention_heads=48, num_key_value_heads=8)
    assert 'no head_dim and hidden_size 4000' in refused('gpufleet_model', mp.profile_from_config, config)


def test_a_dense_model_without_intermediate_size_is_refused():
    config = dense_config()
    del config['intermediate_size']
    assert 'lacks intermediate_size' in refused('gpufleet_model', mp.profile_from_config, config)


def test_the_caller_can_name_another_variable():
    text = refused('x_model', mp.profile_from_config, dense_config(hidden_size=0), variable='x_model')
    assert text == 'x_model: config.json hidden_size must be a positive integer, found 0'
    assert refused('x_tp', mp.shard_shapes, mp.shipped('qwen3-30b-a3b'), 0, variable='x_tp').startswith('x_tp: ')


# ---------------------------------------------------------------- refused tensor-parallel sizes

@pytest.mark.parametrize('tp, words', [
    (0, 'must be a positive integer, found 0'),
    (-2, 'must be a positive integer, found -2'),
    (True, 'must be a positive integer, found True'),
    ('2', "must be a positive integer, found '2'"),
    (2.0, 'must be a positive integer, found 2.0'),
    (None, 'must be a positive integer, found None'),
    (3, 'the 32 attention heads do not split over 3 GPUs'),
    (64, 'the 32 attention heads do not split over 64 GPUs'),
])
def test_a_bad_tp_is_refused(tp, words):
    text = refused('gpufleet_tp_size', mp.shard_shapes, mp.shipped('qwen3-30b-a3b'), tp)
    assert words in text


def test_a_refused_tp_names_the_sizes_that_fit():
    text = refused('gpufleet_tp_size', mp.shard_shapes, mp.shipped('mixtral-8x7b'), 3)
    assert text.startswith('gpufleet_tp_size: mixtral-8x7b at tp 3:')
    assert text.endswith('(tp that fit: 1, 2, 4, 8, 16, 32)')


@pytest.mark.parametrize('tp', [4, 8])
def test_kv_heads_that_neither_split_nor_replicate_are_refused(tp):
    profile = mp.profile_from_config(dense_config(hidden_size=3072, num_attention_heads=24, num_key_value_heads=6,
                                                  intermediate_size=12288))
    text = refused('gpufleet_tp_size', mp.shard_shapes, profile, tp)
    assert 'the 6 KV heads neither split over %d GPUs nor are replicated' % tp in text
    assert 'tp that fit: 1, 2, 3, 6, 12, 24' in text


def test_kv_heads_replicate_when_tp_is_a_multiple():
    profile = mp.profile_from_config(dense_config(hidden_size=3072, num_attention_heads=24, num_key_value_heads=6,
                                                  intermediate_size=12288))
    assert mp.shard_shapes(profile, 12)['gemms'][0] == {'layer': 'qkv', 'n': (2 + 2) * 128, 'k': 3072}
    assert mp.shard_shapes(profile, 3)['gemms'][0] == {'layer': 'qkv', 'n': (8 + 2 * 2) * 128, 'k': 3072}


def test_an_expert_size_that_does_not_split_is_refused():
    config = qwen3_30b()
    config['moe_intermediate_size'] = 100
    profile = mp.profile_from_config(config)
    assert 'the moe_intermediate_size 100 does not split over 8 GPUs' in refused(
        'gpufleet_tp_size', mp.shard_shapes, profile, 8)
    assert mp.shard_shapes(profile, 4)['moe']['intermediate'] == 25


def test_a_dense_size_that_does_not_split_is_refused_only_when_the_model_has_dense_layers():
    config = qwen3_30b()
    config['intermediate_size'] = 6100
    assert mp.shard_shapes(mp.profile_from_config(config), 8)['moe']['intermediate'] == 96
    config['mlp_only_layers'] = [3]
    text = refused('gpufleet_tp_size', mp.shard_shapes, mp.profile_from_config(config), 8)
    assert 'the intermediate_size 6100 does not split over 8 GPUs' in text


# ---------------------------------------------------------------- defaults and resolve

def test_default_shapes_are_what_the_kernel_checks_use_today():
    assert mp.default_shapes() == {'tp': 1, 'gemms': [{'layer': 'gemm', 'n': 4096, 'k': 4096}], 'moe': None, 'hidden': 2048}
    assert mp.default_shapes()['gemms'][0]['n'] == kernel_checks.GEMM_NK
    assert mp.default_shapes()['hidden'] == kernel_checks.HIDDEN


def test_default_shapes_are_fresh_each_time():
    shapes = mp.default_shapes()
    shapes['gemms'].append({})
    assert len(mp.default_shapes()['gemms']) == 1


@pytest.mark.parametrize('model', ['', None])
def test_resolve_without_a_model_gives_the_default_shapes(model):
    assert mp.resolve(model, 4) == {'profile': None, 'shapes': mp.default_shapes()}


def test_resolve_a_shipped_name():
    resolved = mp.resolve('qwen3-30b-a3b', 8)
    assert resolved['profile'] == QWEN3_30B_PROFILE
    assert resolved['shapes'] == mp.shard_shapes(QWEN3_30B_PROFILE, 8)
    assert gemms(resolved['shapes'])['qkv'] == (768, 2048)


def test_resolve_a_config_path_with_its_text_and_its_hf_quant_config():
    path = '/srv/models/qwen3-nvfp4/config.json'
    resolved = mp.resolve(path, 2, config_text=fixture_text('qwen3-30b-a3b.config.json'),
                          quant_text=fixture_text('qwen3-30b-a3b-nvfp4.hf_quant_config.json'))
    assert resolved['profile'] == dict(QWEN3_30B_PROFILE, name=path,
                                       quantization={'method': 'nvfp4', 'block': None, 'group_size': 16})
    assert resolved['shapes']['moe']['intermediate'] == 384


def test_resolve_refuses_an_unreadable_config_path():
    text = refused('gpufleet_model', mp.resolve, '/srv/models/none/config.json', 1)
    assert text == ('gpufleet_model: /srv/models/none/config.json is neither a shipped profile '
                    '(deepseek-v3, gpt-oss-120b, gpt-oss-20b, kimi-k2, llama-4-scout, mixtral-8x7b, qwen3-235b-a22b, '
                    'qwen3-30b-a3b, qwen3-30b-a3b-fp8) nor a readable config.json')


def test_resolve_refuses_a_malformed_config_naming_its_path():
    text = refused('gpufleet_model', mp.resolve, '/m/config.json', 1, config_text=fixture_text('broken.config.json'))
    assert text.startswith('gpufleet_model: /m/config.json is not valid JSON')


def test_resolve_refuses_a_malformed_hf_quant_config():
    text = refused('gpufleet_model', mp.resolve, '/m/config.json', 1, config_text=fixture_text('qwen3-30b-a3b.config.json'),
                   quant_text='{"producer": ')
    assert 'hf_quant_config.json is not valid JSON' in text


def test_resolve_checks_tp_against_the_model():
    text = refused('gpufleet_tp_size', mp.resolve, 'qwen3-30b-a3b-fp8', 4)
    assert "weight = 192" in text and 'block_n = 128' in text


def test_resolve_refuses_a_model_that_is_not_a_string():
    assert 'must be a shipped profile' in refused('gpufleet_model', mp.resolve, ['qwen3-30b-a3b'], 1)


def test_the_profiles_are_not_changed_by_parsing():
    before = copy.deepcopy(mp.PROFILES)
    for name in mp.PROFILES:
        mp.shard_shapes(mp.shipped(name), 2)
    assert mp.PROFILES == before
