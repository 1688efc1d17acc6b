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

Every refusal is a ProfileError whose text starts with the variable to
change (gpufleet_model or gpufleet_tp_size) and names what is allowed.
Standard library only: the controller imports this file.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

MODEL_VARIABLE = 'gpufleet_model'
TP_VARIABLE = 'gpufleet_tp_size'

QUANT_METHODS = ('none', 'fp8', 'nvfp4')
ALLOWED_QUANT = 'allowed: %s' % ', '.join(QUANT_METHODS)
# ModelOpt NVFP4: one FP8 scale per 16 FP4 weights along K unless the
# checkpoint says otherwise.
NVFP4_GROUP_SIZE = 16

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
}

# config.json spellings, first found wins.
EXPERT_FIELDS = ('num_experts', 'num_local_experts', 'n_routed_experts')
TOP_K_FIELDS = ('num_experts_per_tok', 'experts_per_token')


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
    """The dict of a config.json's text; what names the file in messages."""
    config = _parse_json(text, what, variable)
    missing = [field for field in ('hidden_size', 'num_attention_heads') if config.get(field) is None]
    if missing:
        raise ProfileError(variable, '%s lacks %s: not a model config.json' % (what, ' and '.join(missing)))
    return config


def _quant_none():
    return {'method': 'none', 'block': None, 'group_size': None}


def _unsupported(where, found, variable):
    return ProfileError(variable, '%s %r is not supported (%s)' % (where, found, ALLOWED_QUANT))


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
    raise _unsupported('%s.quant_algo' % where, algo, variable)


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
    if len(found) == 2 and found[0] != found[1]:
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


def _dense_layers(config, experts, variable):
    """Whether the model has dense MLP layers (besides its MoE ones)."""
    if not experts:
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


def profile_from_config(config, quant_config=None, name=None, variable=MODEL_VARIABLE):
    """The normalized profile of a config.json dict (and of a ModelOpt
    hf_quant_config.json dict, when given)."""
    if not isinstance(config, dict):
        raise ProfileError(variable, 'config.json must be a JSON object, found %s' % type(config).__name__)
    architecture = _architecture(config, variable)
    model_type = config.get('model_type')
    hidden = _required(config, 'hidden_size', variable)
    heads = _required(config, 'num_attention_heads', variable)
    kv_heads = _optional(config, 'num_key_value_heads', variable) or heads
    if heads % kv_heads:
        raise ProfileError(variable, 'config.json num_attention_heads %d is not a multiple of num_key_value_heads %d'
                           % (heads, kv_heads))
    head_dim = _optional(config, 'head_dim', variable)
    if head_dim is None:
        if hidden % heads:
            raise ProfileError(variable, 'config.json has no head_dim and hidden_size %d is not a multiple of num_attention_heads %d'
                               % (hidden, heads))
        head_dim = hidden // heads
    layers = _required(config, 'num_hidden_layers', variable)

    experts_field, experts = _first(config, EXPERT_FIELDS)
    experts = 0 if experts is None else _count(experts_field, experts, variable, minimum=0)
    intermediate = _optional(config, 'intermediate_size', variable)
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
            # Mixtral's (and gpt-oss's) intermediate_size is the expert's.
            if intermediate is None:
                raise ProfileError(variable, 'config.json has experts but neither moe_intermediate_size nor intermediate_size')
            moe_intermediate, intermediate = intermediate, None
        renormalize = config.get('norm_topk_prob')
        if renormalize is None:
            renormalize = model_type == 'mixtral'
        elif not isinstance(renormalize, bool):
            raise ProfileError(variable, 'config.json norm_topk_prob must be true or false, found %r' % (renormalize,))
    else:
        top_k, moe_intermediate, renormalize = 0, None, False
    dense_layers = _dense_layers(config, experts, variable)
    if dense_layers and intermediate is None:
        raise ProfileError(variable, 'config.json lacks intermediate_size (a positive integer), needed by its dense MLP layers')

    return {
        'name': name or architecture,
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
        'quantization': _quantization(config, quant_config, variable),
    }


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
    return sizes


def _fp8_problem(profile, tp, q_heads, kv_shard):
    """sglang's checks of FP8 block-quantized weights at load (the FP8 linear
    and MoE methods' create_weights), in substance."""
    block_n, block_k = profile['quantization']['block']
    head_dim = profile['head_dim']
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
    if (kv_heads % tp) if tp <= kv_heads else (tp % kv_heads):
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
    return {
        'tp': tp,
        'gemms': [
            {'layer': 'qkv', 'n': (q_heads + 2 * kv_shard) * head_dim, 'k': hidden},
            {'layer': 'o', 'n': hidden, 'k': q_heads * head_dim},
            {'layer': 'gate_up', 'n': 2 * (size // tp), 'k': hidden},
            {'layer': 'down', 'n': hidden, 'k': size // tp},
        ],
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
