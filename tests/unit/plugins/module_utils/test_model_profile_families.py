# -*- coding: utf-8 -*-
"""model_profile for the families beyond grouped-query attention with one
routed MoE: MLA (DeepSeek-V3, Kimi-K2, a DeepSeek-V2-Lite-like layout without
q_lora_rank), shared experts (DeepSeek's n_shared_experts, Qwen2-MoE's
shared_expert_intermediate_size, Llama 4's implicit one), dense-then-MoE
layouts (first_k_dense_replace, interleave_moe_layer_step with
intermediate_size_mlp, moe_layers), nested text_config, each family's router,
and the refusals that name the field a profile does not model. The shard
shapes are computed by hand in the comments."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import json
import os

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import model_profile as mp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FIXTURES = os.path.join(ROOT, 'tests', 'fixtures', 'model_configs')
NO_QUANT = {'method': 'none', 'block': None, 'group_size': None}
V3_ROUTING = {'scoring': 'sigmoid', 'n_group': 8, 'topk_group': 4, 'correction_bias': True, 'routed_scaling_factor': 2.5}


def fixture_text(name):
    with open(os.path.join(FIXTURES, name), encoding='utf-8') as handle:
        return handle.read()


def fixture(name):
    return mp.load_config_text(fixture_text(name), 'gpufleet_model')


def refused(expected_variable, call, *args, **kwargs):
    with pytest.raises(mp.ProfileError) as info:
        call(*args, **kwargs)
    assert info.value.variable == expected_variable
    return str(info.value)


def gemms(shapes):
    """[(layer, n, k)] in order."""
    return [(gemm['layer'], gemm['n'], gemm['k']) for gemm in shapes['gemms']]


# ---------------------------------------------------------------- the shipped profiles and their fixtures

@pytest.mark.parametrize('name', ['deepseek-v3', 'kimi-k2', 'gpt-oss-120b', 'gpt-oss-20b', 'llama-4-scout'])
def test_shipped_profiles_equal_the_fixture_parses(name):
    config = fixture('%s.config.json' % name)
    assert mp.shipped(name) == mp.profile_from_config(config, name=name)
    for field, value in mp.PROFILES[name].items():
        if field != 'source':
            assert config[field] == value, field
    assert set(config) == set(mp.PROFILES[name]) - {'source'}


def test_the_sources():
    assert mp.PROFILES['deepseek-v3']['source'] == 'deepseek-ai/DeepSeek-V3'
    assert mp.PROFILES['kimi-k2']['source'] == 'moonshotai/Kimi-K2-Instruct'
    assert mp.PROFILES['gpt-oss-120b']['source'] == 'openai/gpt-oss-120b'
    assert mp.PROFILES['gpt-oss-20b']['source'] == 'openai/gpt-oss-20b'
    assert mp.PROFILES['llama-4-scout']['source'] == 'meta-llama/Llama-4-Scout-17B-16E-Instruct'


def test_deepseek_v3_profile():
    assert mp.shipped('deepseek-v3') == {
        'name': 'deepseek-v3', 'architecture': 'DeepseekV3ForCausalLM', 'hidden': 7168, 'intermediate': 18432,
        'moe_intermediate': 2048, 'experts': 256, 'top_k': 8, 'renormalize': True, 'heads': 128, 'kv_heads': 128,
        'head_dim': 192, 'layers': 61, 'dense_layers': True,
        'mla': {'q_lora_rank': 1536, 'kv_lora_rank': 512, 'qk_nope_head_dim': 128, 'qk_rope_head_dim': 64,
                'v_head_dim': 128},
        'shared_intermediate': 2048, 'routing': V3_ROUTING,
        'quantization': {'method': 'fp8', 'block': [128, 128], 'group_size': None}}


@pytest.mark.parametrize('tp, q_b_n, kv_b_n, o_k, gate_up_n, down_k, shared_n, shared_k', [
    # q_b: 128/tp heads * (128 + 64); kv_b: 128/tp * (128 + 128); o: 128/tp * 128;
    # dense 18432 (3 first layers); shared 1 * 2048; qkv_a 1536 + 512 + 64 = 2112 on every GPU
    (1, 24576, 32768, 16384, 36864, 18432, 4096, 2048),
    (2, 12288, 16384, 8192, 18432, 9216, 2048, 1024),
    (4, 6144, 8192, 4096, 9216, 4608, 1024, 512),
    (8, 3072, 4096, 2048, 4608, 2304, 512, 256),
])
def test_deepseek_v3_shards(tp, q_b_n, kv_b_n, o_k, gate_up_n, down_k, shared_n, shared_k):
    shapes = mp.shard_shapes(mp.shipped('deepseek-v3'), tp)
    assert gemms(shapes) == [
        ('qkv_a', 2112, 7168), ('q_b', q_b_n, 1536), ('kv_b', kv_b_n, 512), ('o', 7168, o_k),
        ('gate_up', gate_up_n, 7168), ('down', 7168, down_k),
        ('shared_gate_up', shared_n, 7168), ('shared_down', 7168, shared_k)]
    assert shapes['moe'] == {'experts': 256, 'top_k': 8, 'hidden': 7168, 'intermediate': 2048 // tp,
                             'renormalize': True, 'routing': V3_ROUTING}


def test_deepseek_v3_fp8_blocks_fit_up_to_tp_16():
    profile = mp.shipped('deepseek-v3')
    assert mp.shard_shapes(profile, 16)['moe']['intermediate'] == 128
    # tp 32: the dense MLP's 18432 / 32 = 576 is 4.5 blocks of 128
    text = refused('gpufleet_tp_size', mp.shard_shapes, profile, 32)
    assert "output_size of gate's and up's weight = 576 (intermediate_size 18432 / tp 32)" in text
    assert text.endswith('(tp that fit: 1, 2, 4, 8, 16)')


@pytest.mark.parametrize('tp, q_b_n, kv_b_n, o_k', [
    # 64 heads: q_b 64/tp * 192, kv_b 64/tp * 256, o 64/tp * 128
    (1, 12288, 16384, 8192),
    (2, 6144, 8192, 4096),
    (4, 3072, 4096, 2048),
    (8, 1536, 2048, 1024),
])
def test_kimi_k2_shards(tp, q_b_n, kv_b_n, o_k):
    profile = mp.shipped('kimi-k2')
    assert profile['quantization'] == NO_QUANT and profile['experts'] == 384
    shapes = mp.shard_shapes(profile, tp)
    assert gemms(shapes)[:4] == [('qkv_a', 2112, 7168), ('q_b', q_b_n, 1536), ('kv_b', kv_b_n, 512), ('o', 7168, o_k)]
    # one dense layer first: gate_up at 18432; one shared expert of 2048
    assert gemms(shapes)[4:] == [('gate_up', 2 * 18432 // tp, 7168), ('down', 7168, 18432 // tp),
                                 ('shared_gate_up', 2 * 2048 // tp, 7168), ('shared_down', 7168, 2048 // tp)]
    # n_group 1: no grouping, the plain top 8 of the biased sigmoid scores
    assert shapes['moe'] == {'experts': 384, 'top_k': 8, 'hidden': 7168, 'intermediate': 2048 // tp, 'renormalize': True,
                             'routing': {'scoring': 'sigmoid', 'correction_bias': True, 'routed_scaling_factor': 2.827}}


@pytest.mark.parametrize('tp, qkv_n, o_k, expert', [
    # head_dim 64: (64/tp + 2 * 8/tp) * 64 (8 KV heads, one per GPU at tp 8); expert 2880 / tp
    (1, 5120, 4096, 2880),
    (2, 2560, 2048, 1440),
    (4, 1280, 1024, 720),
    (8, 640, 512, 360),
])
@pytest.mark.parametrize('name, experts', [('gpt-oss-120b', 128), ('gpt-oss-20b', 32)])
def test_gpt_oss_shards(name, experts, tp, qkv_n, o_k, expert):
    profile = mp.shipped(name)
    assert (profile['dense_layers'], profile['intermediate'], profile['renormalize']) == (False, None, True)
    assert 'routing' not in profile and 'shared_intermediate' not in profile and 'mla' not in profile
    shapes = mp.shard_shapes(profile, tp)
    assert gemms(shapes) == [('qkv', qkv_n, 2880), ('o', 2880, o_k), ('gate_up', 2 * expert, 2880), ('down', 2880, expert)]
    assert shapes['moe'] == {'experts': experts, 'top_k': 4, 'hidden': 2880, 'intermediate': expert, 'renormalize': True}


def test_gpt_oss_layers():
    assert mp.shipped('gpt-oss-120b')['layers'] == 36 and mp.shipped('gpt-oss-20b')['layers'] == 24


@pytest.mark.parametrize('tp, qkv_n, o_k', [
    # (40/tp + 2 * 8/tp) * 128: tp 8 has 5 query heads and one KV head, (5 + 2) * 128
    (1, 7168, 5120),
    (2, 3584, 2560),
    (4, 1792, 1280),
    (8, 896, 640),
])
def test_llama_4_scout_shards(tp, qkv_n, o_k):
    profile = mp.shipped('llama-4-scout')
    assert profile['architecture'] == 'Llama4ForConditionalGeneration'
    assert (profile['experts'], profile['top_k'], profile['moe_intermediate'], profile['intermediate']) == (16, 1, 8192, 16384)
    # every layer is MoE (interleave_moe_layer_step 1): gate_up/down at the expert's 8192, and the shared expert's
    assert profile['dense_layers'] is False and profile['shared_intermediate'] == 8192
    shapes = mp.shard_shapes(profile, tp)
    assert gemms(shapes) == [('qkv', qkv_n, 5120), ('o', 5120, o_k), ('gate_up', 16384 // tp, 5120), ('down', 5120, 8192 // tp),
                             ('shared_gate_up', 16384 // tp, 5120), ('shared_down', 5120, 8192 // tp)]
    assert shapes['moe'] == {'experts': 16, 'top_k': 1, 'hidden': 5120, 'intermediate': 8192 // tp, 'renormalize': False,
                             'routing': {'scoring': 'sigmoid', 'weight_on_input': True}}


def test_llama_4_scout_does_not_split_over_16():
    assert 'the 40 attention heads do not split over 16 GPUs' in refused(
        'gpufleet_tp_size', mp.shard_shapes, mp.shipped('llama-4-scout'), 16)


# ---------------------------------------------------------------- layouts

def test_interleaved_moe_layers_use_intermediate_size_mlp():
    # Maverick-like: every other layer MoE; the dense layers' MLP is intermediate_size_mlp
    config = fixture('llama-4-scout.config.json')
    config['text_config'].update(interleave_moe_layer_step=2, num_local_experts=128)
    profile = mp.profile_from_config(config)
    assert profile['dense_layers'] is True
    shapes = mp.shard_shapes(profile, 8)
    # dense 16384 / 8 = 2048, expert and shared 8192 / 8 = 1024
    assert gemms(shapes)[2:] == [('gate_up', 4096, 5120), ('down', 5120, 2048),
                                 ('shared_gate_up', 2048, 5120), ('shared_down', 5120, 1024)]
    assert shapes['moe']['intermediate'] == 1024 and shapes['moe']['experts'] == 128


def test_moe_layers_that_leave_dense_layers():
    config = fixture('llama-4-scout.config.json')
    config['text_config']['moe_layers'] = list(range(1, 48, 2))
    assert mp.profile_from_config(config)['dense_layers'] is True
    config['text_config']['moe_layers'] = list(range(48))
    assert mp.profile_from_config(config)['dense_layers'] is False


def test_interleaved_layers_without_intermediate_size_mlp_are_refused():
    config = fixture('llama-4-scout.config.json')
    config['text_config'].update(interleave_moe_layer_step=2)
    del config['text_config']['intermediate_size_mlp']
    text = refused('gpufleet_model', mp.profile_from_config, config)
    assert text == ('gpufleet_model: config.json text_config lacks intermediate_size_mlp (a positive integer), '
                    'needed by its dense MLP layers')


def test_mla_without_q_lora_rank():
    # DeepSeek-V2-Lite-like: q from the hidden state, kv_a (512 + 64 RoPE) apart; softmax, no groups, no scaling
    config = {'architectures': ['DeepseekV2ForCausalLM'], 'model_type': 'deepseek_v2', 'hidden_size': 2048,
              'intermediate_size': 10944, 'moe_intermediate_size': 1408, 'num_hidden_layers': 27,
              'num_attention_heads': 16, 'num_key_value_heads': 16, 'q_lora_rank': None, 'kv_lora_rank': 512,
              'qk_nope_head_dim': 128, 'qk_rope_head_dim': 64, 'v_head_dim': 128, 'n_routed_experts': 64,
              'n_shared_experts': 2, 'num_experts_per_tok': 6, 'n_group': 1, 'topk_group': 1,
              'routed_scaling_factor': 1.0, 'topk_method': 'greedy', 'first_k_dense_replace': 1,
              'norm_topk_prob': False}
    profile = mp.profile_from_config(config)
    assert profile['mla']['q_lora_rank'] is None and 'routing' not in profile
    shapes = mp.shard_shapes(profile, 2)
    # q: 8 heads * 192; kv_b: 8 * 256; o: 8 * 128; dense 10944 / 2; shared 2 * 1408 / 2
    assert gemms(shapes) == [('q', 1536, 2048), ('kv_a', 576, 2048), ('kv_b', 2048, 512), ('o', 2048, 1024),
                             ('gate_up', 10944, 2048), ('down', 2048, 5472),
                             ('shared_gate_up', 1408 * 2, 2048), ('shared_down', 2048, 1408)]
    assert shapes['moe'] == {'experts': 64, 'top_k': 6, 'hidden': 2048, 'intermediate': 704, 'renormalize': False}


def test_deepseek_v2_group_limited_greedy_is_a_softmax_grouped_top_k():
    config = fixture('deepseek-v3.config.json')
    config.update(model_type='deepseek_v2', scoring_func='softmax', topk_method='group_limited_greedy',
                  norm_topk_prob=False, routed_scaling_factor=16.0)
    assert mp.profile_from_config(config)['routing'] == {'n_group': 8, 'topk_group': 4, 'routed_scaling_factor': 16.0}


def test_the_family_router_when_the_config_leaves_it_out():
    config = fixture('deepseek-v3.config.json')
    del config['scoring_func'], config['topk_method']
    assert mp.profile_from_config(config)['routing'] == V3_ROUTING


def test_qwen2_moe_style_shared_expert():
    config = {'architectures': ['Qwen2MoeForCausalLM'], 'model_type': 'qwen2_moe', 'hidden_size': 2048,
              'intermediate_size': 5632, 'moe_intermediate_size': 1408, 'shared_expert_intermediate_size': 5632,
              'num_experts': 60, 'num_experts_per_tok': 4, 'norm_topk_prob': False, 'num_attention_heads': 16,
              'num_key_value_heads': 16, 'num_hidden_layers': 24, 'decoder_sparse_step': 1, 'mlp_only_layers': []}
    profile = mp.profile_from_config(config)
    assert profile['shared_intermediate'] == 5632 and 'routing' not in profile
    shapes = mp.shard_shapes(profile, 4)
    # qkv (4 + 2 * 4) * 128; experts 1408 / 4 = 352; shared 5632 / 4 = 1408
    assert gemms(shapes) == [('qkv', 1536, 2048), ('o', 2048, 512), ('gate_up', 704, 2048), ('down', 2048, 352),
                             ('shared_gate_up', 2816, 2048), ('shared_down', 2048, 1408)]
    # the shared size splits like the others
    config['shared_expert_intermediate_size'] = 5630
    assert "the shared experts' intermediate size 5630 does not split over 4 GPUs" in refused(
        'gpufleet_tp_size', mp.shard_shapes, mp.profile_from_config(config), 4)


def test_a_text_config_is_read_and_named_in_refusals():
    text = json.dumps({'architectures': ['Qwen3VLMoeForConditionalGeneration'], 'model_type': 'qwen3_vl_moe',
                       'text_config': json.loads(fixture_text('qwen3-30b-a3b.config.json'))})
    resolved = mp.resolve('/m/config.json', 2, config_text=text)
    assert resolved['profile']['architecture'] == 'Qwen3VLMoeForConditionalGeneration'
    assert resolved['shapes'] == mp.shard_shapes(mp.shipped('qwen3-30b-a3b'), 2)
    config = json.loads(text)
    config['text_config']['hidden_size'] = 0
    assert refused('gpufleet_model', mp.profile_from_config, config) == (
        'gpufleet_model: config.json text_config hidden_size must be a positive integer, found 0')
    assert 'text_config must be a JSON object, found list' in refused(
        'gpufleet_model', mp.profile_from_config, dict(config, text_config=[]))


def test_a_text_config_quantization_is_read_from_either_level():
    config = fixture('llama-4-scout.config.json')
    fp8 = {'quant_method': 'fp8', 'weight_block_size': [128, 128]}
    assert mp.profile_from_config(dict(config, quantization_config=fp8))['quantization']['block'] == [128, 128]
    config['text_config']['quantization_config'] = fp8
    assert mp.profile_from_config(config)['quantization']['method'] == 'fp8'


# ---------------------------------------------------------------- MLA in FP8 blocks and NVFP4 groups

def small_mla(**changes):
    config = {'model_type': 'deepseek_v3', 'hidden_size': 2048, 'intermediate_size': 4096, 'moe_intermediate_size': 512,
              'num_hidden_layers': 4, 'num_attention_heads': 16, 'q_lora_rank': 512, 'kv_lora_rank': 256,
              'qk_nope_head_dim': 64, 'qk_rope_head_dim': 32, 'v_head_dim': 64, 'n_routed_experts': 16,
              'num_experts_per_tok': 2, 'first_k_dense_replace': 1,
              'quantization_config': {'quant_method': 'fp8', 'weight_block_size': [128, 128]}}
    config.update(changes)
    return config


def test_mla_fp8_blocks_check_q_b_at_tp_8():
    profile = mp.profile_from_config(small_mla())
    # q_b at tp 4: 4 heads * 96 = 384 = 3 blocks; at tp 8: 2 * 96 = 192
    assert gemms(mp.shard_shapes(profile, 4))[1] == ('q_b', 384, 512)
    text = refused('gpufleet_tp_size', mp.shard_shapes, profile, 8)
    assert 'the q_b output partition = 192 is not divisible by weight quantization block_n = 128' in text
    assert text.endswith('(tp that fit: 1, 2, 4)')


def test_mla_nvfp4_groups_check_each_k():
    config = fixture('deepseek-v3.config.json')
    config['quantization_config'] = {'quant_method': 'modelopt', 'quant_algo': 'NVFP4', 'group_size': 1024}
    text = refused('gpufleet_tp_size', mp.shard_shapes, mp.profile_from_config(config), 1)
    assert 'the q_b GEMM K = 1536 is not a multiple of the NVFP4 group size 1024' in text
    config['quantization_config']['group_size'] = 16
    assert mp.shard_shapes(mp.profile_from_config(config), 8)['moe']['intermediate'] == 256


# ---------------------------------------------------------------- refused by name

@pytest.mark.parametrize('changes, words', [
    ({'index_topk': 2048}, "config.json has index_topk (DeepSeek-V3.2's sparse attention indexer): no profile models it"),
    ({'linear_num_value_heads': 32}, 'config.json has linear_num_value_heads (linear attention layers)'),
    ({'full_attention_interval': 4}, 'config.json has full_attention_interval'),
    ({'moe_num_shared_experts': 2}, 'config.json has moe_num_shared_experts: no profile models shared experts given so'),
    ({'layer_types': ['linear_attention', 'full_attention']},
     "config.json layer_types has 'linear_attention': no profile models that layer's GEMMs"),
    ({'qk_rope_head_dim': None}, 'config.json has q_lora_rank (multi-head latent attention) but lacks qk_rope_head_dim'),
    ({'scoring_func': 'sqrtsoftplus'}, "config.json scoring_func 'sqrtsoftplus' is not modelled (modelled: softmax, sigmoid)"),
    ({'topk_method': 'aux_free'}, "config.json topk_method 'aux_free' is not modelled"),
    ({'topk_group': None}, 'config.json has n_group but no topk_group'),
    ({'n_group': 6}, 'config.json n_group 6 does not divide the 256 experts'),
    ({'topk_group': 9}, 'config.json topk_group 9 is more than n_group 8'),
    ({'n_group': 128, 'topk_group': 2}, 'config.json topk_group 2 of n_group 128 (2 experts each) cannot hold the top 8'),
    ({'n_group': 256, 'topk_group': 8}, 'config.json topk_group 8 of n_group 256 (1 experts each) cannot hold the top 8'),
    ({'routed_scaling_factor': '2.5'}, "config.json routed_scaling_factor must be a positive number, found '2.5'"),
    ({'shared_expert_intermediate_size': 2048}, 'config.json has both n_shared_experts and shared_expert_intermediate_size'),
])
def test_what_cannot_be_shaped_is_refused_naming_the_field(changes, words):
    config = fixture('deepseek-v3.config.json')
    config.update(changes)
    text = refused('gpufleet_model', mp.profile_from_config, config)
    assert words in text, text


def test_mla_with_kv_lora_rank_alone_names_what_it_lacks():
    config = fixture('qwen3-30b-a3b.config.json')
    config['kv_lora_rank'] = 512
    assert refused('gpufleet_model', mp.profile_from_config, config) == (
        'gpufleet_model: config.json has kv_lora_rank (multi-head latent attention) but lacks qk_nope_head_dim and '
        'qk_rope_head_dim and v_head_dim: its attention GEMMs cannot be shaped')


def test_llama4_above_top_1_is_refused_naming_the_field():
    config = fixture('llama-4-scout.config.json')
    config['text_config']['num_experts_per_tok'] = 2
    assert refused('gpufleet_model', mp.profile_from_config, config) == (
        "gpufleet_model: config.json text_config num_experts_per_tok 2: Llama 4's router weight on the expert input "
        'is modelled for top 1 only')


def test_unmodelled_fields_left_empty_are_read():
    config = fixture('qwen3-30b-a3b.config.json')
    config.update(index_topk=None, linear_attn_config={}, moe_num_shared_experts=0,
                  layer_types=['full_attention', 'sliding_attention'])
    assert mp.profile_from_config(config, name='qwen3-30b-a3b') == mp.shipped('qwen3-30b-a3b')


def test_the_new_profiles_are_not_changed_by_parsing():
    before = copy.deepcopy(mp.PROFILES)
    for name in ('deepseek-v3', 'kimi-k2', 'llama-4-scout'):
        shapes = mp.shard_shapes(mp.shipped(name), 2)
        shapes['moe']['routing']['scoring'] = 'x'
    assert mp.PROFILES == before and mp.shipped('deepseek-v3')['routing'] == V3_ROUTING
