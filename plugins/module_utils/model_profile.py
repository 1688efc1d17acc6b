# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The served model's profile and the GEMM and MoE shapes of one GPU's shard,
so that the verification runs the kernel checks at the model's own shapes.

A profile is read from the fields of the model's Hugging Face config.json
(and, for a ModelOpt checkpoint, its hf_quant_config.json) that decide the
shapes: it is either one the collection ships (PROFILES, keyed by a short
name) or the operator's own config.json. shard_shapes() splits it over the
tensor-parallel size the way sglang does, and refuses, before anything runs,
a size that sglang would refuse when it loads the weights.

The GEMMs are the ones sglang runs per shard: grouped-query attention's qkv
and o, or multi-head latent attention's (MLA: DeepSeek-V2/V3, Kimi-K2) fused
q_a/kv_a, q_b (or q), kv_b and o; the dense MLP (or an expert's, when every
layer is MoE) and the shared experts'. The MoE shape carries the family's
router (softmax or sigmoid top-k, renormalized or not, grouped top-k with a
score correction bias, a routed scaling factor, Llama 4's weight on the
input), which the reference MoE of model_checks follows. A multimodal
config.json is read through its text_config. The quantization is read from
quant_method fp8 (per tensor or in blocks), modelopt (or hf_quant_config.json:
NVFP4, FP8), mxfp4 (gpt-oss: the experts in MXFP4, the rest in BF16) and
compressed-tensors (llm-compressor's NVFP4 and FP8 W8A8, mapped to the NVFP4
and FP8 handling); any other is refused naming the field and its value. A
config.json field that decides the GEMMs and that no profile models
(UNMODELLED) is refused naming it: such a model is never given another
family's shapes.

Every refusal is a ProfileError whose text starts with the variable to
change (gpufleet_model or gpufleet_tp_size) and names what is allowed.
Standard library only: the controller imports this file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

MODEL_VARIABLE = 'gpufleet_model'
TP_VARIABLE = 'gpufleet_tp_size'

QUANT_METHODS = ('none', 'fp8', 'nvfp4', 'mxfp4')
# The quant_method values of config.json read, besides ModelOpt's
# hf_quant_config.json.
CONFIG_QUANT_METHODS = ('fp8', 'modelopt', 'mxfp4', 'compressed-tensors')
ALLOWED_QUANT = 'allowed: fp8, modelopt (NVFP4, FP8), mxfp4, compressed-tensors (NVFP4, FP8)'
ALLOWED_ALGO = 'allowed: NVFP4, FP8'
# ModelOpt NVFP4: one FP8 scale per 16 FP4 weights along K unless the
# checkpoint says otherwise.
NVFP4_GROUP_SIZE = 16
# MXFP4 (gpt-oss): 4-bit e2m1 weights with one e8m0 (power of two) scale per
# 32 along K. sglang's Mxfp4Config quantizes the MoE experts only (its linear
# layers stay BF16) and its gpt-oss loader asserts that the experts'
# intermediate size is whole blocks of 32.
MXFP4_GROUP_SIZE = 32
# compressed-tensors (llm-compressor's checkpoints), as sglang 0.5.23's
# CompressedTensorsConfig tells its schemes apart (_is_fp4a4_nvfp4,
# _is_fp8_w8a8): what one config_groups entry may hold to be read here.
CT_FP8_STRATEGIES = ('tensor', 'channel', 'block')
CT_FP8_FORMATS = ('float-quantized', 'naive-quantized')
CT_NVFP4_FORMATS = ('nvfp4-pack-quantized',)
CT_READ = ('compressed-tensors read: NVFP4 W4A4 (weights and input_activations type float, num_bits 4, strategy '
           'tensor_group, group_size 16) and FP8 W8A8 (type float, num_bits 8, weights strategy tensor, channel or '
           'block)')

# What the kernel checks use when no model is given: kernel_checks.GEMM_NK
# and kernel_checks.HIDDEN (kept equal by the unit tests; not imported, so
# this file needs nothing but the standard library).
DEFAULT_GEMM_NK = 4096
DEFAULT_HIDDEN = 2048

# The fields of each model's published config.json that the profile reads,
# with the Hugging Face repo they were taken from (source).
_QWEN3_30B_A3B = {
    'source': 'Qwen/Qwen3-30B-A3B',
    'architectures': ['Qwen3MoeForCausalLM'],
    'model_type': 'qwen3_moe',
    'hidden_size': 2048,
    'intermediate_size': 6144,
    'moe_intermediate_size': 768,
    'num_experts': 128,
    'num_experts_per_tok': 8,
    'norm_topk_prob': True,
    'num_attention_heads': 32,
    'num_key_value_heads': 4,
    'head_dim': 128,
    'num_hidden_layers': 48,
    'decoder_sparse_step': 1,
    'mlp_only_layers': [],
    'vocab_size': 151936,
    'torch_dtype': 'bfloat16',
}

_GPT_OSS_120B = {
    'source': 'openai/gpt-oss-120b',
    'architectures': ['GptOssForCausalLM'],
    'model_type': 'gpt_oss',
    'hidden_size': 2880,
    'intermediate_size': 2880,
    'num_hidden_layers': 36,
    'num_attention_heads': 64,
    'num_key_value_heads': 8,
    'head_dim': 64,
    'num_local_experts': 128,
    'num_experts_per_tok': 4,
    'vocab_size': 201088,
    'quantization_config': {
        'quant_method': 'mxfp4',
        'modules_to_not_convert': ['model.layers.*.self_attn', 'model.layers.*.mlp.router', 'model.embed_tokens',
                                   'lm_head'],
    },
}

PROFILES = {
    'qwen3-30b-a3b': _QWEN3_30B_A3B,
    'qwen3-30b-a3b-fp8': dict(
        _QWEN3_30B_A3B,
        source='Qwen/Qwen3-30B-A3B-FP8',
        quantization_config={
            'activation_scheme': 'dynamic',
            'fmt': 'e4m3',
            'quant_method': 'fp8',
            'weight_block_size': [128, 128],
        },
    ),
    'qwen3-235b-a22b': {
        'source': 'Qwen/Qwen3-235B-A22B',
        'architectures': ['Qwen3MoeForCausalLM'],
        'model_type': 'qwen3_moe',
        'hidden_size': 4096,
        'intermediate_size': 12288,
        'moe_intermediate_size': 1536,
        'num_experts': 128,
        'num_experts_per_tok': 8,
        'norm_topk_prob': True,
        'num_attention_heads': 64,
        'num_key_value_heads': 4,
        'head_dim': 128,
        'num_hidden_layers': 94,
        'decoder_sparse_step': 1,
        'mlp_only_layers': [],
        'vocab_size': 151936,
        'torch_dtype': 'bfloat16',
    },
    # No head_dim field: hidden_size / num_attention_heads = 128. Its router
    # takes the softmax over the top-k logits, which is softmax then
    # renormalize over the top k: renormalize is True for model_type mixtral.
    'mixtral-8x7b': {
        'source': 'mistralai/Mixtral-8x7B-v0.1',
        'architectures': ['MixtralForCausalLM'],
        'model_type': 'mixtral',
        'hidden_size': 4096,
        'intermediate_size': 14336,
        'num_local_experts': 8,
        'num_experts_per_tok': 2,
        'num_attention_heads': 32,
        'num_key_value_heads': 8,
        'num_hidden_layers': 32,
        'vocab_size': 32000,
        'torch_dtype': 'bfloat16',
    },
    # MLA attention, one shared expert, 3 dense layers first, sigmoid router
    # with a score correction bias, top 4 of 8 groups of 32 experts, weights
    # renormalized then scaled by 2.5. The fields and values are the defaults
    # of transformers' DeepseekV3Config ("defaults yield a configuration
    # similar to DeepSeek-V3"); scoring_func, topk_method and moe_layer_freq
    # are the published config.json's (transformers' DeepSeek-V3 code
    # hard-codes the sigmoid and the bias; sglang reads topk_method);
    # quantization_config is the one DeepSeek's README_WEIGHTS documents for
    # the published FP8 weights (128x128 blocks).
    'deepseek-v3': {
        'source': 'deepseek-ai/DeepSeek-V3',
        'architectures': ['DeepseekV3ForCausalLM'],
        'model_type': 'deepseek_v3',
        'hidden_size': 7168,
        'intermediate_size': 18432,
        'moe_intermediate_size': 2048,
        'num_hidden_layers': 61,
        'num_attention_heads': 128,
        'num_key_value_heads': 128,
        'q_lora_rank': 1536,
        'kv_lora_rank': 512,
        'qk_nope_head_dim': 128,
        'qk_rope_head_dim': 64,
        'v_head_dim': 128,
        'n_routed_experts': 256,
        'n_shared_experts': 1,
        'num_experts_per_tok': 8,
        'n_group': 8,
        'topk_group': 4,
        'norm_topk_prob': True,
        'routed_scaling_factor': 2.5,
        'scoring_func': 'sigmoid',
        'topk_method': 'noaux_tc',
        'first_k_dense_replace': 3,
        'moe_layer_freq': 1,
        'vocab_size': 129280,
        'quantization_config': {
            'activation_scheme': 'dynamic',
            'fmt': 'e4m3',
            'quant_method': 'fp8',
            'weight_block_size': [128, 128],
        },
    },
    # DeepSeek-V3's architecture (sglang serves model_type kimi_k2 with its
    # DeepseekV3ForCausalLM) with 64 heads, 384 experts in one group, one
    # dense layer and a scaling factor of 2.827; the values agree across the
    # published configs other projects' code and tests carry. The published
    # weights are FP8, but their quantization_config could not be confirmed
    # here: this profile gives the BF16 shapes.
    'kimi-k2': {
        'source': 'moonshotai/Kimi-K2-Instruct',
        'architectures': ['DeepseekV3ForCausalLM'],
        'model_type': 'kimi_k2',
        'hidden_size': 7168,
        'intermediate_size': 18432,
        'moe_intermediate_size': 2048,
        'num_hidden_layers': 61,
        'num_attention_heads': 64,
        'num_key_value_heads': 64,
        'q_lora_rank': 1536,
        'kv_lora_rank': 512,
        'qk_nope_head_dim': 128,
        'qk_rope_head_dim': 64,
        'v_head_dim': 128,
        'n_routed_experts': 384,
        'n_shared_experts': 1,
        'num_experts_per_tok': 8,
        'n_group': 1,
        'topk_group': 1,
        'norm_topk_prob': True,
        'routed_scaling_factor': 2.827,
        'scoring_func': 'sigmoid',
        'topk_method': 'noaux_tc',
        'first_k_dense_replace': 1,
        'moe_layer_freq': 1,
        'vocab_size': 163840,
    },
    # The defaults of transformers' GptOssConfig (the 120B model's: 36 layers,
    # 128 experts, top 4, head_dim 64 with 64 query / 8 KV heads, expert size
    # = intermediate_size 2880). Its router takes the softmax over the top-k
    # logits: renormalize is True for model_type gpt_oss, as in sglang's
    # GptOssSparseMoeBlock. The published experts are MXFP4: quantization_config
    # is the one transformers' convert_gpt_oss_weights_to_hf.py writes for the
    # MXFP4 checkpoint (quant_method mxfp4, modules_to_not_convert: attention,
    # router, embeddings, lm_head), the same as other projects' copies of the
    # published config.json. The experts' GEMMs and the MoE have no MXFP4
    # check in this version (skipped with the reason); the attention GEMMs are
    # checked in BF16. A BF16 MoE check would run silu(gate) * up, not
    # gpt-oss's clamped SwiGLU with expert biases.
    'gpt-oss-120b': _GPT_OSS_120B,
    # gpt-oss-120b's fields with 24 layers and 32 experts (the published
    # gpt-oss-20b config.json, as other projects' code for it carries it).
    'gpt-oss-20b': dict(_GPT_OSS_120B, source='openai/gpt-oss-20b', num_hidden_layers=24, num_local_experts=32),
    # A multimodal config.json: the language model under text_config. The
    # values are the defaults of transformers' Llama4TextConfig, whose
    # checkpoint is Llama-4-Scout-17B-16E: 16 experts, top 1, every layer MoE
    # (interleave_moe_layer_step 1), one shared expert of the experts' size
    # (intermediate_size, as sglang's Llama4MoE builds it), the dense size
    # intermediate_size_mlp used by dense layers only. Its router is a sigmoid
    # of the top-1 logit applied to the expert's input (sglang's
    # apply_router_weight_on_input).
    'llama-4-scout': {
        'source': 'meta-llama/Llama-4-Scout-17B-16E-Instruct',
        'architectures': ['Llama4ForConditionalGeneration'],
        'model_type': 'llama4',
        'text_config': {
            'model_type': 'llama4_text',
            'hidden_size': 5120,
            'intermediate_size': 8192,
            'intermediate_size_mlp': 16384,
            'num_hidden_layers': 48,
            'num_attention_heads': 40,
            'num_key_value_heads': 8,
            'head_dim': 128,
            'num_local_experts': 16,
            'num_experts_per_tok': 1,
            'interleave_moe_layer_step': 1,
            'vocab_size': 202048,
        },
    },
}

# config.json spellings, first found wins.
EXPERT_FIELDS = ('num_experts', 'num_local_experts', 'n_routed_experts')
TOP_K_FIELDS = ('num_experts_per_tok', 'experts_per_token')
# Multi-head latent attention: kv_lora_rank and the head dims; q_lora_rank is
# optional (without it, q is projected from the hidden state directly).
MLA_FIELDS = ('kv_lora_rank', 'qk_nope_head_dim', 'qk_rope_head_dim', 'v_head_dim')
# The routers sglang builds from scoring_func and topk_method (DeepSeek's
# spellings); noaux_tc is the one with the score correction bias.
SCORING_FUNCS = ('softmax', 'sigmoid')
TOPK_METHODS = ('greedy', 'group_limited_greedy', 'noaux_tc')
# The families whose config.json may leave them out: transformers'
# DeepSeek-V3 code applies a sigmoid with the correction bias, its
# DeepSeek-V2 configuration defaults to softmax and greedy.
FAMILY_ROUTING = {
    'deepseek_v3': ('sigmoid', 'noaux_tc'),
    'kimi_k2': ('sigmoid', 'noaux_tc'),
    'deepseek_v2': ('softmax', 'greedy'),
}
# Families whose top-k weights are renormalized without a norm_topk_prob
# field: Mixtral's softmax over the top-k logits, gpt-oss's too.
RENORMALIZED_TYPES = ('mixtral', 'gpt_oss')
LLAMA4_TYPES = ('llama4', 'llama4_text')
# The shared experts' fields the profile models; any other field naming
# shared experts is refused (below).
SHARED_FIELDS = ('n_shared_experts', 'shared_expert_intermediate_size')
# config.json fields that decide GEMMs no profile models: a model with one
# of them set is refused naming it rather than given another family's shapes.
UNMODELLED = (
    ('index_topk', "DeepSeek-V3.2's sparse attention indexer"),
    ('index_n_heads', "DeepSeek-V3.2's sparse attention indexer"),
    ('index_head_dim', "DeepSeek-V3.2's sparse attention indexer"),
    ('linear_attn_config', 'linear attention layers'),
    ('linear_num_key_heads', 'linear attention layers'),
    ('linear_num_value_heads', 'linear attention layers'),
    ('linear_key_head_dim', 'linear attention layers'),
    ('linear_value_head_dim', 'linear attention layers'),
    ('linear_conv_kernel_dim', 'linear attention layers'),
    ('full_attention_interval', 'linear attention layers between full ones'),
)
# layer_types values whose attention GEMMs are the qkv/o (or MLA) ones.
ATTENTION_LAYER_TYPES = ('full_attention', 'sliding_attention', 'chunked_attention')


class ProfileError(ValueError):
    """A model or tensor-parallel size that cannot be served; str() is
    '<variable>: <message>'."""

    def __init__(self, variable, message):
        self.variable = variable
        self.message = message
        super(ProfileError, self).__init__('%s: %s' % (variable, message))

    def __str__(self):
        return '%s: %s' % (self.variable, self.message)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _names():
    return ', '.join(sorted(PROFILES))


def _first(config, fields):
    """(field, value) of the first of fields set in config, else (fields[0], None)."""
    for field in fields:
        if config.get(field) is not None:
            return field, config[field]
    return fields[0], None


def _count(field, value, variable, minimum=1, where='config.json'):
    if not _is_int(value) or value < minimum:
        kind = 'a positive integer' if minimum >= 1 else 'an integer >= %d' % minimum
        raise ProfileError(variable, '%s %s must be %s, found %r' % (where, field, kind, value))
    return value


def _required(config, field, variable):
    if config.get(field) is None:
        raise ProfileError(variable, 'config.json lacks %s (a positive integer)' % field)
    return _count(field, config[field], variable)


def _optional(config, field, variable, minimum=1):
    if config.get(field) is None:
        return None
    return _count(field, config[field], variable, minimum)


def _parse_json(text, what, variable):
    if isinstance(text, bytes):
        try:
            text = text.decode('utf-8')
        except UnicodeDecodeError as exc:
            raise ProfileError(variable, '%s is not UTF-8 text: %s' % (what, exc))
    if not isinstance(text, str):
        raise ProfileError(variable, '%s: expected its JSON text, found %s' % (what, type(text).__name__))
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ProfileError(variable, '%s is not valid JSON (%s)' % (what, exc))
    if not isinstance(data, dict):
        raise ProfileError(variable, '%s must hold a JSON object, found %s' % (what, type(data).__name__))
    return data


def load_config_text(text, variable, what='config.json'):
    """The dict of a config.json's text; what names the file in messages. A
    multimodal config.json may keep the language model's fields under
    text_config."""
    config = _parse_json(text, what, variable)
    fields = config.get('text_config') if isinstance(config.get('text_config'), dict) else config
    missing = [field for field in ('hidden_size', 'num_attention_heads') if fields.get(field) is None]
    if missing:
        raise ProfileError(variable, '%s lacks %s: not a model config.json' % (what, ' and '.join(missing)))
    return config


def _quant_none():
    return {'method': 'none', 'block': None, 'group_size': None}


def _unsupported(where, found, variable, allowed=ALLOWED_QUANT):
    return ProfileError(variable, '%s %r is not supported (%s)' % (where, found, allowed))


def _fp8_block(section, where, variable):
    block = section.get('weight_block_size')
    if block is None:
        return None
    if not isinstance(block, (list, tuple)) or len(block) != 2 or not all(_is_int(size) and size > 0 for size in block):
        raise ProfileError(variable, '%s.weight_block_size must be two positive integers [n, k], found %r' % (where, block))
    return list(block)


def _nvfp4_group(section, where, variable):
    group = section.get('group_size')
    if group is None:
        # config.json of a ModelOpt checkpoint: config_groups.<g>.weights.group_size
        groups = section.get('config_groups')
        if isinstance(groups, dict):
            for key in sorted(groups):
                weights = groups[key].get('weights') if isinstance(groups[key], dict) else None
                if isinstance(weights, dict) and weights.get('group_size') is not None:
                    group = weights['group_size']
                    break
    if group is None:
        return NVFP4_GROUP_SIZE
    return _count('group_size', group, variable, where=where)


def _modelopt(section, where, variable):
    algo = section.get('quant_algo')
    if algo == 'NVFP4':
        return {'method': 'nvfp4', 'block': None, 'group_size': _nvfp4_group(section, where, variable)}
    if algo == 'FP8':
        return {'method': 'fp8', 'block': None, 'group_size': None}
    raise _unsupported('%s.quant_algo' % where, algo, variable, ALLOWED_ALGO)


def _names_list(section, field, where, variable):
    """A list of module names (modules_to_not_convert, ignore), [] when absent."""
    names = section.get(field)
    if names is None:
        return []
    if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
        raise ProfileError(variable, '%s.%s must be a list of module names, found %r' % (where, field, names))
    return list(names)


def _mxfp4(section, where, variable):
    """gpt-oss's MXFP4 (transformers' Mxfp4Config): the MoE experts in MXFP4,
    the modules_to_not_convert (attention, the router, embeddings, lm_head)
    in BF16."""
    return {'method': 'mxfp4', 'block': None, 'group_size': MXFP4_GROUP_SIZE, 'format': 'mxfp4',
            'not_converted': _names_list(section, 'modules_to_not_convert', where, variable)}


def _ct_refused(field, found, variable, why=None):
    return ProfileError(variable, '%s %r is not supported (%s%s)' % (field, found, CT_READ, '; ' + why if why else ''))


def _ct_args(group, key, gwhere, variable, required=True):
    args = group.get(key)
    if args is None and not required:
        return None
    if not isinstance(args, dict):
        raise ProfileError(variable, '%s.%s must be a JSON object of quantization args, found %r' % (gwhere, key, args))
    return args


def _ct_float(args, awhere, bits, variable):
    if args.get('type') != 'float':
        raise _ct_refused(awhere + '.type', args.get('type'), variable,
                          'integer weights or activations (int4 weight-only, int8 W8A8) have no check here')
    if args.get('num_bits') != bits:
        raise _ct_refused(awhere + '.num_bits', args.get('num_bits'), variable)
    if args.get('symmetric') is False:
        raise _ct_refused(awhere + '.symmetric', False, variable)


def _ct_group(group, gwhere, quant_format, variable):
    """One config_groups entry -> (method, block, group_size, weight strategy)."""
    if not isinstance(group, dict):
        raise ProfileError(variable, '%s must be a JSON object, found %s' % (gwhere, type(group).__name__))
    targets = group.get('targets')
    if targets is not None and 'Linear' not in (targets if isinstance(targets, list) else [targets]):
        # experts-only or attention-only groups: layers of several precisions
        raise _ct_refused(gwhere + '.targets', targets, variable,
                          'only groups that target every Linear layer (targets ["Linear"]) are read')
    quant_format = group.get('format') or quant_format
    weights = _ct_args(group, 'weights', gwhere, variable)
    acts = _ct_args(group, 'input_activations', gwhere, variable, required=False)
    wwhere, awhere = gwhere + '.weights', gwhere + '.input_activations'
    if weights.get('type') != 'float':
        raise _ct_refused(wwhere + '.type', weights.get('type'), variable,
                          'integer weights (int4 weight-only, int8 W8A8) have no check here')
    bits = weights.get('num_bits')
    if bits == 4:
        _ct_float(weights, wwhere, 4, variable)
        if quant_format not in CT_NVFP4_FORMATS:
            raise _ct_refused(gwhere + '.format', quant_format, variable)
        for args, awhere_ in ((weights, wwhere), (acts, awhere)):
            if args is None:
                raise _ct_refused(awhere, None, variable, 'weight-only NVFP4 (W4A16) runs other kernels than the '
                                  'NVFP4 GEMM checks')
            _ct_float(args, awhere_, 4, variable)
            if args.get('strategy') != 'tensor_group':
                raise _ct_refused(awhere_ + '.strategy', args.get('strategy'), variable)
            if args.get('group_size') != NVFP4_GROUP_SIZE:
                raise _ct_refused(awhere_ + '.group_size', args.get('group_size'), variable)
        return 'nvfp4', None, NVFP4_GROUP_SIZE, 'tensor_group'
    if bits == 8:
        _ct_float(weights, wwhere, 8, variable)
        if quant_format not in CT_FP8_FORMATS:
            raise _ct_refused(gwhere + '.format', quant_format, variable)
        strategy = weights.get('strategy')
        if strategy not in CT_FP8_STRATEGIES:
            raise _ct_refused(wwhere + '.strategy', strategy, variable)
        if weights.get('dynamic') not in (None, False):
            raise _ct_refused(wwhere + '.dynamic', weights.get('dynamic'), variable)
        if acts is None:
            raise _ct_refused(awhere, None, variable, 'weight-only FP8 (W8A16) runs other kernels than the FP8 checks')
        _ct_float(acts, awhere, 8, variable)
        # sglang's _is_fp8_w8a8: dynamic activations of any strategy, static ones per tensor
        if acts.get('dynamic') in (None, False) and acts.get('strategy') != 'tensor':
            raise _ct_refused(awhere + '.strategy', acts.get('strategy'), variable,
                              'static FP8 activations are read per tensor only')
        block = None
        if strategy == 'block':
            block = weights.get('block_structure')
            if (not isinstance(block, list) or len(block) != 2
                    or not all(_is_int(size) and size > 0 for size in block)):
                raise ProfileError(variable, '%s.block_structure must be two positive integers [n, k], found %r'
                                   % (wwhere, block))
            block = list(block)
        return 'fp8', block, None, strategy
    raise _ct_refused(wwhere + '.num_bits', bits, variable)


def _compressed_tensors(section, where, variable):
    """llm-compressor's quantization_config: every config_groups entry NVFP4
    (mapped to the ModelOpt NVFP4 handling: group 16, FP8 e4m3 scales) or every
    one FP8 W8A8 (per-tensor or per-channel scales: the per-tensor handling;
    [n, k] blocks: the FP8 block handling); ignore lists the modules left in
    BF16. Anything else is refused naming the field and its value."""
    sparsity = section.get('sparsity_config')
    if isinstance(sparsity, dict) and sparsity.get('format') not in (None, 'dense'):
        raise ProfileError(variable, '%s.sparsity_config.format %r is not supported (sparse weights run other '
                           'kernels; read: dense)' % (where, sparsity.get('format')))
    groups = section.get('config_groups')
    if not isinstance(groups, dict) or not groups:
        raise ProfileError(variable, '%s.config_groups must be a non-empty JSON object (compressed-tensors\' '
                           'quantization schemes), found %r' % (where, groups))
    quant_format = section.get('format')
    schemes = [(key, _ct_group(groups[key], '%s.config_groups.%s' % (where, key), quant_format, variable))
               for key in sorted(groups)]
    first_key, first = schemes[0]
    for key, scheme in schemes[1:]:
        if scheme[:3] != first[:3]:
            raise ProfileError(variable, '%s.config_groups %s (%s) and %s (%s) disagree: a checkpoint whose layers '
                               'have several precisions is not read' % (where, first_key, first[0], key, scheme[0]))
    method, block, group_size, strategy = first
    return {'method': method, 'block': block, 'group_size': group_size, 'format': 'compressed-tensors',
            'weight_scales': strategy, 'not_converted': _names_list(section, 'ignore', where, variable)}


def _parse_quant(section, where, variable):
    if not isinstance(section, dict):
        raise ProfileError(variable, '%s must be a JSON object, found %s' % (where, type(section).__name__))
    if isinstance(section.get('quantization'), dict):
        # hf_quant_config.json: {"producer": {...}, "quantization": {...}}
        return _modelopt(section['quantization'], where + ' quantization', variable)
    method = section.get('quant_method')
    if method == 'fp8':
        return {'method': 'fp8', 'block': _fp8_block(section, where, variable), 'group_size': None}
    if method == 'modelopt':
        return _modelopt(section, where, variable)
    if method == 'mxfp4':
        return _mxfp4(section, where, variable)
    if method == 'compressed-tensors':
        return _compressed_tensors(section, where, variable)
    raise _unsupported('%s.quant_method' % where, method, variable)


def _quantization(config, quant_config, variable):
    """sglang's order: config.json's quantization_config (or the
    compression_config of compressed-tensors), then hf_quant_config.json."""
    found = []
    if config.get('quantization_config') is not None:
        found.append(_parse_quant(config['quantization_config'], 'config.json quantization_config', variable))
    elif config.get('compression_config') is not None:
        found.append(_parse_quant(config['compression_config'], 'config.json compression_config', variable))
    if quant_config is not None:
        found.append(_parse_quant(quant_config, 'hf_quant_config.json', variable))
    if not found:
        return _quant_none()
    keys = ('method', 'block', 'group_size')
    if len(found) == 2 and [found[0].get(key) for key in keys] != [found[1].get(key) for key in keys]:
        raise ProfileError(variable, 'config.json quantization_config (%s) and hf_quant_config.json (%s) disagree'
                           % (found[0]['method'], found[1]['method']))
    return found[0]


def _architecture(config, variable):
    architectures = config.get('architectures')
    if architectures is not None:
        if (not isinstance(architectures, list) or not architectures
                or not all(isinstance(item, str) and item for item in architectures)):
            raise ProfileError(variable, 'config.json architectures must be a non-empty list of names, found %r' % (architectures,))
        return architectures[0]
    model_type = config.get('model_type')
    if not isinstance(model_type, str) or not model_type:
        raise ProfileError(variable, 'config.json has neither architectures nor model_type')
    return model_type


def _moe_layers(config, layers, variable):
    """Whether Llama 4's moe_layers (when given) leave dense layers."""
    moe_layers = config.get('moe_layers')
    if moe_layers is None:
        return False
    if not isinstance(moe_layers, list) or not all(_is_int(layer) and 0 <= layer < layers for layer in moe_layers):
        raise ProfileError(variable, 'config.json moe_layers must be a list of layer indices below num_hidden_layers %d, '
                           'found %r' % (layers, moe_layers))
    return len(set(moe_layers)) < layers


def _dense_layers(config, experts, variable, layers=None):
    """Whether the model has dense MLP layers (besides its MoE ones)."""
    if not experts:
        return True
    interleave = _optional(config, 'interleave_moe_layer_step', variable)
    if (interleave is not None and interleave > 1) or (layers is not None and _moe_layers(config, layers, variable)):
        return True
    dense = False
    mlp_only = config.get('mlp_only_layers')
    if mlp_only is not None:
        if not isinstance(mlp_only, list) or not all(_is_int(layer) and layer >= 0 for layer in mlp_only):
            raise ProfileError(variable, 'config.json mlp_only_layers must be a list of layer indices, found %r' % (mlp_only,))
        dense = dense or bool(mlp_only)
    sparse_step = _optional(config, 'decoder_sparse_step', variable)
    dense = dense or (sparse_step is not None and sparse_step > 1)
    first_dense = _optional(config, 'first_k_dense_replace', variable, minimum=0)
    dense = dense or bool(first_dense)
    layer_freq = _optional(config, 'moe_layer_freq', variable)
    return dense or (layer_freq is not None and layer_freq > 1)


def _unmodelled(config, variable):
    """Refuse the fields that decide GEMMs no profile models, naming them."""
    for field, what in UNMODELLED:
        if config.get(field) not in (None, 0, False, [], {}):
            raise ProfileError(variable, 'config.json has %s (%s): no profile models it, so the model\'s GEMMs cannot '
                               'be shaped' % (field, what))
    for field in sorted(config):
        if 'shared_expert' in field and field not in SHARED_FIELDS and config[field] not in (None, 0, False):
            raise ProfileError(variable, 'config.json has %s: no profile models shared experts given so (modelled: %s)'
                               % (field, ', '.join(SHARED_FIELDS)))
    layer_types = config.get('layer_types')
    if isinstance(layer_types, list):
        for kind in layer_types:
            if kind not in ATTENTION_LAYER_TYPES:
                raise ProfileError(variable, 'config.json layer_types has %r: no profile models that layer\'s GEMMs '
                                   '(modelled: %s)' % (kind, ', '.join(ATTENTION_LAYER_TYPES)))


def _mla(config, variable):
    """Multi-head latent attention's ranks and head dims, or None."""
    present = [field for field in ('q_lora_rank',) + MLA_FIELDS if config.get(field) is not None]
    if not present:
        return None
    missing = [field for field in MLA_FIELDS if config.get(field) is None]
    if missing:
        raise ProfileError(variable, 'config.json has %s (multi-head latent attention) but lacks %s: its attention '
                           'GEMMs cannot be shaped' % (present[0], ' and '.join(missing)))
    mla = dict((field, _count(field, config[field], variable)) for field in MLA_FIELDS)
    mla['q_lora_rank'] = _optional(config, 'q_lora_rank', variable)
    return mla


def _shared(config, experts, moe_intermediate, llama4, variable):
    """The intermediate size of the shared experts (all of them as one MLP, as
    sglang builds them), or None."""
    count = _optional(config, 'n_shared_experts', variable, minimum=0)
    size = _optional(config, 'shared_expert_intermediate_size', variable, minimum=0)
    if count and size:
        raise ProfileError(variable, 'config.json has both n_shared_experts and shared_expert_intermediate_size: '
                           'which one sizes the shared experts is not known')
    if not experts:
        return None
    if count:
        return count * moe_intermediate
    if size:
        return size
    # Llama 4: one shared expert of the routed experts' size in every MoE layer
    return moe_intermediate if llama4 else None


def _factor(config, variable):
    factor = config.get('routed_scaling_factor')
    if factor is None:
        return None
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not factor > 0:
        raise ProfileError(variable, 'config.json routed_scaling_factor must be a positive number, found %r' % (factor,))
    return None if factor == 1 else factor


def _groups(config, experts, top_k, bias, variable):
    """(n_group, topk_group) of a grouped top-k, or None when there is no
    grouping (one group: the plain top-k)."""
    n_group = _optional(config, 'n_group', variable)
    topk_group = _optional(config, 'topk_group', variable)
    if n_group is None and topk_group is None:
        return None
    if n_group is None or topk_group is None:
        raise ProfileError(variable, 'config.json has %s but no %s: the grouped top-k cannot be modelled'
                           % (('n_group', 'topk_group') if topk_group is None else ('topk_group', 'n_group')))
    if topk_group > n_group:
        raise ProfileError(variable, 'config.json topk_group %d is more than n_group %d' % (topk_group, n_group))
    if n_group == 1:
        return None
    if experts % n_group:
        raise ProfileError(variable, 'config.json n_group %d does not divide the %d experts' % (n_group, experts))
    per_group = experts // n_group
    # the biased group score is the sum of each group's top two
    if (bias and per_group < 2) or topk_group * per_group < top_k:
        raise ProfileError(variable, 'config.json topk_group %d of n_group %d (%d experts each) cannot hold the top %d'
                           % (topk_group, n_group, per_group, top_k))
    return n_group, topk_group


def _routing(config, model_type, experts, top_k, llama4, variable):
    """The router where it is not today's softmax top-k: {'scoring',
    'n_group', 'topk_group', 'correction_bias', 'routed_scaling_factor',
    'weight_on_input'}, each only when it differs from that; or None."""
    scoring, method = FAMILY_ROUTING.get(model_type, ('softmax', 'greedy'))
    if config.get('scoring_func') is not None:
        scoring = config['scoring_func']
        if scoring not in SCORING_FUNCS:
            raise ProfileError(variable, 'config.json scoring_func %r is not modelled (modelled: %s)'
                               % (scoring, ', '.join(SCORING_FUNCS)))
    if config.get('topk_method') is not None:
        method = config['topk_method']
        if method not in TOPK_METHODS:
            raise ProfileError(variable, 'config.json topk_method %r is not modelled (modelled: %s)'
                               % (method, ', '.join(TOPK_METHODS)))
    routing = {}
    if llama4:
        # sglang's Llama4MoE: the sigmoid of the top-k logits, applied to the
        # expert's input, which sglang allows for top 1 only
        if top_k != 1:
            raise ProfileError(variable, 'config.json num_experts_per_tok %d: Llama 4\'s router weight on the '
                               'expert input is modelled for top 1 only' % top_k)
        scoring = 'sigmoid'
        routing['weight_on_input'] = True
    bias = method == 'noaux_tc'
    groups = _groups(config, experts, top_k, bias, variable)
    if scoring != 'softmax':
        routing['scoring'] = scoring
    if groups:
        routing['n_group'], routing['topk_group'] = groups
    if bias:
        routing['correction_bias'] = True
    factor = _factor(config, variable)
    if factor is not None:
        routing['routed_scaling_factor'] = factor
    return routing or None


def _language_model(config, architecture, variable, outer_type=None):
    """The profile's fields of a language model's config (config.json, or its
    text_config)."""
    model_type = config.get('model_type') or outer_type
    _unmodelled(config, variable)
    hidden = _required(config, 'hidden_size', variable)
    heads = _required(config, 'num_attention_heads', variable)
    kv_heads = _optional(config, 'num_key_value_heads', variable) or heads
    if heads % kv_heads:
        raise ProfileError(variable, 'config.json num_attention_heads %d is not a multiple of num_key_value_heads %d'
                           % (heads, kv_heads))
    mla = _mla(config, variable)
    head_dim = _optional(config, 'head_dim', variable)
    if mla:
        # q and k heads of MLA: the part without RoPE and the RoPE part
        head_dim = mla['qk_nope_head_dim'] + mla['qk_rope_head_dim']
    elif head_dim is None:
        if hidden % heads:
            raise ProfileError(variable, 'config.json has no head_dim and hidden_size %d is not a multiple of num_attention_heads %d'
                               % (hidden, heads))
        head_dim = hidden // heads
    layers = _required(config, 'num_hidden_layers', variable)
    llama4 = model_type in LLAMA4_TYPES or architecture.startswith('Llama4')

    experts_field, experts = _first(config, EXPERT_FIELDS)
    experts = 0 if experts is None else _count(experts_field, experts, variable, minimum=0)
    intermediate = _optional(config, 'intermediate_size', variable)
    routing = None
    if experts:
        top_k_field, top_k = _first(config, TOP_K_FIELDS)
        if top_k is None:
            raise ProfileError(variable, 'config.json has %s %d but no %s' % (experts_field, experts, top_k_field))
        top_k = _count(top_k_field, top_k, variable)
        if top_k > experts:
            raise ProfileError(variable, 'config.json %s %d is more than the %d experts (%s)'
                               % (top_k_field, top_k, experts, experts_field))
        moe_intermediate = _optional(config, 'moe_intermediate_size', variable)
        if moe_intermediate is None:
            # Mixtral's (and gpt-oss's, Llama 4's) intermediate_size is the expert's.
            if intermediate is None:
                raise ProfileError(variable, 'config.json has experts but neither moe_intermediate_size nor intermediate_size')
            moe_intermediate, intermediate = intermediate, None
            # Llama 4: its dense layers' MLP size
            intermediate = _optional(config, 'intermediate_size_mlp', variable)
        renormalize = config.get('norm_topk_prob')
        if renormalize is None:
            renormalize = model_type in RENORMALIZED_TYPES
        elif not isinstance(renormalize, bool):
            raise ProfileError(variable, 'config.json norm_topk_prob must be true or false, found %r' % (renormalize,))
        routing = _routing(config, model_type, experts, top_k, llama4, variable)
    else:
        top_k, moe_intermediate, renormalize = 0, None, False
    dense_layers = _dense_layers(config, experts, variable, layers)
    if dense_layers and intermediate is None:
        field = 'intermediate_size_mlp' if llama4 and experts else 'intermediate_size'
        raise ProfileError(variable, 'config.json lacks %s (a positive integer), needed by its dense MLP layers' % field)
    profile = {
        'architecture': architecture,
        'hidden': hidden,
        'intermediate': intermediate,
        'moe_intermediate': moe_intermediate,
        'experts': experts,
        'top_k': top_k,
        'renormalize': renormalize,
        'heads': heads,
        'kv_heads': kv_heads,
        'head_dim': head_dim,
        'layers': layers,
        'dense_layers': dense_layers,
    }
    # only where the model has them: today's families' profiles stay as they were
    shared = _shared(config, experts, moe_intermediate, llama4, variable)
    extras = (('mla', mla), ('shared_intermediate', shared), ('routing', routing))
    profile.update((key, value) for key, value in extras if value)
    return profile


def profile_from_config(config, quant_config=None, name=None, variable=MODEL_VARIABLE):
    """The normalized profile of a config.json dict (and of a ModelOpt
    hf_quant_config.json dict, when given). A multimodal config.json is read
    through its text_config."""
    if not isinstance(config, dict):
        raise ProfileError(variable, 'config.json must be a JSON object, found %s' % type(config).__name__)
    architecture = _architecture(config, variable)
    text = config.get('text_config')
    if text is None:
        profile = _language_model(config, architecture, variable)
        quant_source = config
    else:
        if not isinstance(text, dict):
            raise ProfileError(variable, 'config.json text_config must be a JSON object, found %s' % type(text).__name__)
        try:
            profile = _language_model(text, architecture, variable, config.get('model_type'))
        except ProfileError as exc:
            raise ProfileError(variable, exc.message.replace('config.json', 'config.json text_config', 1))
        quant_source = config if config.get('quantization_config') or config.get('compression_config') else text
    profile['name'] = name or architecture
    profile['quantization'] = _quantization(quant_source, quant_config, variable)
    if profile['quantization']['method'] == 'mxfp4':
        _mxfp4_experts(profile, variable)
    return profile


def _mxfp4_experts(profile, variable):
    """MXFP4 quantizes the MoE experts only, in whole blocks of 32 along K."""
    if not profile['experts']:
        raise ProfileError(variable, "config.json quantization_config.quant_method 'mxfp4' on a model without "
                           "experts: MXFP4 quantizes MoE experts only (sglang's Mxfp4Config), so nothing would be "
                           "MXFP4")
    for label, size in (('hidden_size', profile['hidden']), ('the experts\' intermediate size', profile['moe_intermediate'])):
        if size % MXFP4_GROUP_SIZE:
            raise ProfileError(variable, 'config.json %s %d is not whole MXFP4 blocks of %d'
                               % (label, size, MXFP4_GROUP_SIZE))


def shipped(name, variable=MODEL_VARIABLE):
    """The profile of one of PROFILES."""
    if not isinstance(name, str) or name not in PROFILES:
        raise ProfileError(variable, 'unknown profile %r (shipped: %s)' % (name, _names()))
    return profile_from_config(PROFILES[name], name=name, variable=variable)


def default_shapes():
    """The shapes the kernel checks use when no model is given."""
    return {
        'tp': 1,
        'gemms': [{'layer': 'gemm', 'n': DEFAULT_GEMM_NK, 'k': DEFAULT_GEMM_NK}],
        'moe': None,
        'hidden': DEFAULT_HIDDEN,
    }


def _mlp_sizes(profile):
    """(label, size) of each MLP intermediate size the model has."""
    sizes = []
    if profile['dense_layers']:
        sizes.append(('intermediate_size', profile['intermediate']))
    if profile['experts']:
        sizes.append(('moe_intermediate_size', profile['moe_intermediate']))
    if profile.get('shared_intermediate'):
        sizes.append(('shared experts\' intermediate size', profile['shared_intermediate']))
    return sizes


def _mla_gemms(profile, tp):
    """MLA's attention GEMMs on one GPU, as sglang's DeepseekV2AttentionMLA
    builds them: q_a and kv_a (with the RoPE part of k) fused in one
    replicated GEMM when the model has q_lora_rank, else q column-parallel and
    kv_a replicated; kv_b column-parallel (the MHA path's GEMM, its weight
    absorbed into q and o for decode); o row-parallel."""
    mla, hidden = profile['mla'], profile['hidden']
    q_heads = profile['heads'] // tp
    kv_a = mla['kv_lora_rank'] + mla['qk_rope_head_dim']
    qk = mla['qk_nope_head_dim'] + mla['qk_rope_head_dim']
    if mla['q_lora_rank']:
        gemms = [{'layer': 'qkv_a', 'n': mla['q_lora_rank'] + kv_a, 'k': hidden},
                 {'layer': 'q_b', 'n': q_heads * qk, 'k': mla['q_lora_rank']}]
    else:
        gemms = [{'layer': 'q', 'n': q_heads * qk, 'k': hidden},
                 {'layer': 'kv_a', 'n': kv_a, 'k': hidden}]
    return gemms + [
        {'layer': 'kv_b', 'n': q_heads * (mla['qk_nope_head_dim'] + mla['v_head_dim']), 'k': mla['kv_lora_rank']},
        {'layer': 'o', 'n': hidden, 'k': q_heads * mla['v_head_dim']},
    ]


def _mla_fp8_problem(profile, tp, block):
    """sglang's FP8 block checks at load for MLA's GEMMs: a column-parallel
    output and a row-parallel input split over tp > 1 must be whole blocks
    (the replicated qkv_a is not split)."""
    block_n, block_k = block
    for gemm in _mla_gemms(profile, tp):
        if tp > 1 and gemm['layer'] in ('q_b', 'q', 'kv_b') and gemm['n'] % block_n:
            return ('the %s output partition = %d is not divisible by weight quantization block_n = %d'
                    % (gemm['layer'], gemm['n'], block_n))
        if tp > 1 and gemm['layer'] == 'o' and gemm['k'] % block_k:
            return 'the o input partition = %d is not divisible by weight quantization block_k = %d' % (gemm['k'], block_k)
    return None


def _fp8_problem(profile, tp, q_heads, kv_shard):
    """sglang's checks of FP8 block-quantized weights at load (the FP8 linear
    and MoE methods' create_weights), in substance."""
    block_n, block_k = profile['quantization']['block']
    head_dim = profile['head_dim']
    if profile.get('mla'):
        reason = _mla_fp8_problem(profile, tp, (block_n, block_k))
        if reason:
            return reason
    else:
        for label, size in (('q', q_heads * head_dim), ('k/v', kv_shard * head_dim)):
            if size % block_n:
                return 'the qkv %s output partition = %d is not divisible by weight quantization block_n = %d' % (label, size, block_n)
        if tp > 1 and (q_heads * head_dim) % block_k:
            return 'the o input partition = %d is not divisible by weight quantization block_k = %d' % (q_heads * head_dim, block_k)
    for label, size in _mlp_sizes(profile):
        shard = size // tp
        if shard % block_n:
            return ("the output_size of gate's and up's weight = %d (%s %d / tp %d) is not divisible by weight quantization block_n = %d"
                    % (shard, label, size, tp, block_n))
        if tp > 1 and shard % block_k:
            return ("the input_size of down's weight = %d (%s %d / tp %d) is not divisible by weight quantization block_k = %d"
                    % (shard, label, size, tp, block_k))
    return None


def _nvfp4_problem(profile, tp, q_heads):
    group = profile['quantization']['group_size']
    if profile.get('mla'):
        ks = [('qkv_a, q and gate_up', profile['hidden'])]
        ks.extend((gemm['layer'], gemm['k']) for gemm in _mla_gemms(profile, tp) if gemm['k'] != profile['hidden'])
    else:
        ks = [('qkv and gate_up', profile['hidden']), ('o', q_heads * profile['head_dim'])]
    ks.extend(('down (%s / tp %d)' % (label, tp), size // tp) for label, size in _mlp_sizes(profile))
    for label, k in ks:
        if k % group:
            return 'the %s GEMM K = %d is not a multiple of the NVFP4 group size %d' % (label, k, group)
    return None


def _problem(profile, tp):
    """Why profile cannot be split over tp GPUs, else None."""
    heads, kv_heads = profile['heads'], profile['kv_heads']
    if heads % tp:
        return 'the %d attention heads do not split over %d GPUs' % (heads, tp)
    # MLA has no KV heads to split: its latent KV is one per token
    if not profile.get('mla') and ((kv_heads % tp) if tp <= kv_heads else (tp % kv_heads)):
        return ('the %d KV heads neither split over %d GPUs nor are replicated on them '
                '(one of the two must divide the other)' % (kv_heads, tp))
    for label, size in _mlp_sizes(profile):
        if size % tp:
            return 'the %s %d does not split over %d GPUs' % (label, size, tp)
    q_heads = heads // tp
    kv_shard = kv_heads // tp if tp <= kv_heads else 1
    quant = profile['quantization']
    if quant['method'] == 'fp8' and quant['block']:
        reason = _fp8_problem(profile, tp, q_heads, kv_shard)
        if reason:
            return 'FP8 block %s: %s' % (quant['block'], reason)
    if quant['method'] == 'nvfp4':
        return _nvfp4_problem(profile, tp, q_heads)
    return None


def fitting_tp(profile):
    """The tensor-parallel sizes profile can be split over (divisors of its heads)."""
    return [tp for tp in range(1, profile['heads'] + 1) if profile['heads'] % tp == 0 and _problem(profile, tp) is None]


def shard_shapes(profile, tp, variable=TP_VARIABLE):
    """One GPU's GEMM shapes (y = x W^T, W [n, k]) and MoE shape at tensor
    parallel size tp."""
    if not _is_int(tp) or tp < 1:
        raise ProfileError(variable, 'must be a positive integer, found %r' % (tp,))
    reason = _problem(profile, tp)
    if reason:
        allowed = fitting_tp(profile)
        raise ProfileError(variable, '%s at tp %d: %s (tp that fit: %s)'
                           % (profile['name'], tp, reason, ', '.join(str(size) for size in allowed) or 'none'))
    heads, kv_heads, head_dim, hidden = profile['heads'], profile['kv_heads'], profile['head_dim'], profile['hidden']
    q_heads = heads // tp
    kv_shard = kv_heads // tp if tp <= kv_heads else 1
    size = profile['intermediate'] if profile['dense_layers'] else profile['moe_intermediate']
    moe = None
    if profile['experts']:
        moe = {
            'experts': profile['experts'],
            'top_k': profile['top_k'],
            'hidden': hidden,
            'intermediate': profile['moe_intermediate'] // tp,
            'renormalize': profile['renormalize'],
        }
        if profile.get('routing'):
            moe['routing'] = dict(profile['routing'])
    if profile.get('mla'):
        attention = _mla_gemms(profile, tp)
    else:
        attention = [
            {'layer': 'qkv', 'n': (q_heads + 2 * kv_shard) * head_dim, 'k': hidden},
            {'layer': 'o', 'n': hidden, 'k': q_heads * head_dim},
        ]
    gemms = attention + [
        {'layer': 'gate_up', 'n': 2 * (size // tp), 'k': hidden},
        {'layer': 'down', 'n': hidden, 'k': size // tp},
    ]
    if profile['quantization']['method'] == 'mxfp4' and not profile['dense_layers']:
        # these are the experts' GEMMs, whose weights are MXFP4; the rest stays BF16
        for gemm in gemms[-2:]:
            gemm['weights'] = 'mxfp4'
    shared = profile.get('shared_intermediate')
    if shared:
        # the shared experts: one MLP split over tp like the dense one
        gemms += [{'layer': 'shared_gate_up', 'n': 2 * (shared // tp), 'k': hidden},
                  {'layer': 'shared_down', 'n': hidden, 'k': shared // tp}]
    return {
        'tp': tp,
        'gemms': gemms,
        'moe': moe,
        'hidden': hidden,
    }


def resolve(model, tp, config_text=None, quant_text=None):
    """The profile and shard shapes for gpufleet_model / gpufleet_tp_size.

    model: '' or None (the default shapes), a shipped profile's name, or the
    path of a config.json whose text the caller read (config_text; None when
    it could not be read) and, for ModelOpt, its hf_quant_config.json text."""
    if model is None or model == '':
        return {'profile': None, 'shapes': default_shapes()}
    if not isinstance(model, str):
        raise ProfileError(MODEL_VARIABLE, 'must be a shipped profile (%s) or the path of a config.json, found %r'
                           % (_names(), model))
    if model in PROFILES:
        profile = shipped(model)
    else:
        if config_text is None:
            raise ProfileError(MODEL_VARIABLE, '%s is neither a shipped profile (%s) nor a readable config.json' % (model, _names()))
        config = load_config_text(config_text, MODEL_VARIABLE, what=model)
        quant_config = None
        if quant_text is not None:
            quant_config = _parse_json(quant_text, 'hf_quant_config.json', MODEL_VARIABLE)
        profile = profile_from_config(config, quant_config, name=model)
    return {'profile': profile, 'shapes': shard_shapes(profile, tp)}
