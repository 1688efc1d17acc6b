# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Model checks: the GEMMs and the MoE layer of the model a node will serve, at
that model's per-GPU shard shapes, through each serving backend, against fp32
of the very inputs (and quantized weights) the op saw.

Like kernel_checks, the probe runs this file's source inside the interpreter
under test (nothing at module level imports torch); the controller imports it
for the catalogue. The shapes come from module_utils/model_profile's
shard_shapes, handed over as plain data.

Every check of the catalogue that applies to the model's precision appears in
the result as ok, failed (with what) or skipped (with why). A check of an
autotuned backend runs its sweep twice, with flashinfer's autotuner off and on
(the way serving runs it), and a failure names the mode.

A flashinfer module that is not built is never compiled here unless the caller
allows it: the fused MoE module takes longer to compile than a verification
may take (more than 28 minutes on 16 cores for SM90), so with jit='cache_only'
the check runs with FLASHINFER_DISABLE_JIT=1 and a module missing from the
prebuilt cache is a skip that names it.

sglang's triton MoE runner is checked through sglang's own fused_experts, the
entry its triton runner calls ('none' -> 'triton' in moe_runner/triton.py),
under a runtime context published for it the way a scheduler publishes its
own; sglang is imported only where a triton check applies, and a venv without
sglang skips them with that reason.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys
import time

# Decode and prefill sizes, with odd ones and both sides of the 128-row tiles
# and of flashinfer's autotuner buckets (powers of two), and the M of a
# reported tactic/bucket mismatch (2001).
SWEEP_M = (1, 7, 127, 128, 129, 1024, 2001)
# The MoE sweep: fewer sizes, each routes M * top_k token-expert pairs.
MOE_SWEEP_M = (1, 7, 128, 129, 1024)
# (name, set, min compute capability, precisions it applies to, tolerance, autotuned)
CHECKS = (
    # with an MXFP4 model: the GEMMs left in BF16 (attention, modules_to_not_convert)
    ('model.gemm.bf16', 'torch', (8, 0), ('none', 'mxfp4'), 0.01, False),
    ('model.gemm.fp8', 'torch', (8, 9), ('fp8',), 0.03, False),
    ('model.mm_fp4.cudnn', 'flashinfer', (10, 0), ('nvfp4',), 0.1, True),
    ('model.mm_fp4.cutlass', 'flashinfer', (10, 0), ('nvfp4',), 0.1, True),
    ('model.mm_fp4.trtllm', 'flashinfer', (10, 0), ('nvfp4',), 0.1, True),
    ('moe.flashinfer_cutlass.bf16', 'flashinfer', (9, 0), ('none',), 0.02, True),
    ('moe.flashinfer_cutlass.fp8', 'flashinfer', (9, 0), ('fp8',), 0.06, True),
    ('moe.flashinfer_cutlass.nvfp4', 'flashinfer', (10, 0), ('nvfp4',), 0.15, True),
    ('moe.flashinfer_trtllm.nvfp4', 'flashinfer', (10, 0), ('nvfp4',), 0.15, True),
    ('moe.triton.bf16', 'sglang', (8, 0), ('none',), 0.02, False),
    ('moe.triton.fp8', 'sglang', (8, 9), ('fp8',), 0.06, False),
    ('model.gemm.mxfp4', 'torch', (8, 0), ('mxfp4',), 0.1, False),
    ('moe.flashinfer_mxfp4.mxfp4', 'flashinfer', (9, 0), ('mxfp4',), 0.15, True),
    ('moe.triton_kernel.mxfp4', 'sglang', (8, 0), ('mxfp4',), 0.15, False),
)
# Checks of a precision no backend of this collection runs yet: each is in the
# result as skipped with this reason, on every device (never a pass, and
# nothing is run or imported for it). MXFP4 runs on SM90 as weight-only W4A16
# and on SM100/SM120 natively; none of it is checked here yet.
NOT_YET = {
    'model.gemm.mxfp4': 'no MXFP4 check on this collection yet: the experts\' GEMMs %s (MXFP4: 4-bit e2m1 weights, '
                        'an e8m0 scale per 32) are not checked; the BF16 GEMMs are, by model.gemm.bf16',
    'moe.flashinfer_mxfp4.mxfp4': 'no MXFP4 check on this collection yet: the MXFP4 fused MoE (flashinfer_mxfp4, '
                                  'which sglang picks for gpt-oss on SM100 and SM120) is not checked',
    'moe.triton_kernel.mxfp4': 'no MXFP4 check on this collection yet: the MXFP4 MoE of the triton_kernel runner '
                               'is not checked',
}
# Expert weights beyond this many bytes: the check keeps fewer experts (never
# fewer than top_k) and says so in the result.
MOE_MAX_WEIGHT_BYTES = 4 << 30
FP8_MAX = 448.0
# The scale of the random score correction bias a sigmoid router with one
# gets (DeepSeek-V3's noaux_tc): its scores are in (0, 1).
ROUTER_BIAS_SCALE = 0.1
SEED = 20261204
NO_MOE = 'the model has no MoE layer'
# The module of sglang's triton MoE runner (sglang 0.5.23): fused_experts and
# the kernels' Python side; it imports sgl_kernel's moe_align_block_size and
# moe_sum_reduce.
SGLANG_TRITON_MOE = 'sglang.srt.layers.moe.moe_runner.triton_utils.fused_moe'


def check_names():
    return [entry[0] for entry in CHECKS]


def default_tolerances():
    return dict((entry[0], entry[4]) for entry in CHECKS)


def applicable(precision):
    """The check names that apply to a model of this precision (none, fp8, nvfp4, mxfp4)."""
    return [entry[0] for entry in CHECKS if precision in entry[3]]


def _mxfp4_weights(gemm):
    return gemm.get('weights') == 'mxfp4'


def targets_of(name, shapes, precision='none'):
    """[(label, shape)] one check sweeps: the layers' GEMMs (with an MXFP4
    model, model.gemm.bf16 takes the BF16 ones and model.gemm.mxfp4 the
    experts' MXFP4 ones), or the MoE layer."""
    if name.startswith('moe.'):
        return [('moe', shapes['moe'])] if shapes.get('moe') else []
    gemms = shapes['gemms']
    if precision == 'mxfp4':
        wanted = name == 'model.gemm.mxfp4'
        gemms = [gemm for gemm in gemms if _mxfp4_weights(gemm) == wanted]
    return [(gemm['layer'], gemm) for gemm in gemms]


def not_yet(name, shapes, precision='none'):
    """Why a check of the model's precision cannot run on any device here
    (NOT_YET, NO_MOE, or no GEMM of that precision), else None."""
    if name.startswith('moe.') and not shapes.get('moe'):
        return NO_MOE
    if name == 'model.gemm.mxfp4':
        labels = [target[0] for target in targets_of(name, shapes, precision)]
        if not labels:
            return 'the model has no MXFP4 GEMM outside its MoE layers'
        return NOT_YET[name] % ', '.join(labels)
    return NOT_YET.get(name)


def plan(shapes, precision):
    """What the model checks do for a model of this precision, before any
    device is looked at: [{'check', 'layers', 'skip'}], skip being the reason
    a check is skipped on every device (None: it runs where the device and
    the packages allow)."""
    return [{'check': name, 'layers': [target[0] for target in targets_of(name, shapes, precision)],
             'skip': not_yet(name, shapes, precision)}
            for name in applicable(precision)]


def _helper(name):
    """A module_utils helper: the probe's prelude module, or the ordinary import."""
    module = sys.modules.get('gpufleet_' + name)
    if module is None:
        import importlib

        module = importlib.import_module('ansible_collections.gpufleet.inference.plugins.module_utils.' + name)
    return module


def _kc():
    return _helper('kernel_checks')


# --- the reference MoE -------------------------------------------------------

def route(torch, logits, top_k, renormalize, routing=None, bias=None):
    """Router: softmax over the experts, the top_k of it; renormalized over the
    chosen ones when the model does (Qwen3-MoE norm_topk_prob, Mixtral).
    routing (model_profile's, None for that softmax top-k) may say
    scoring 'sigmoid' (a sigmoid per expert), n_group/topk_group (the top-k
    only among the topk_group groups of the highest score: the sum of each
    group's top two with the correction bias, its maximum without, as
    sglang's biased_grouped_topk and grouped_topk take it),
    correction_bias (bias [E] added to the scores that choose the experts,
    never to the weights) and routed_scaling_factor (the weights scaled after
    the renormalization). Returns (weights fp32 [T, k], expert ids int32 [T, k])."""
    routing = routing or {}
    logits = logits.float()
    if routing.get('scoring') == 'sigmoid':
        scores = torch.sigmoid(logits)
    else:
        scores = torch.softmax(logits, dim=-1)
    choice = scores if bias is None else scores + bias.float().unsqueeze(0)
    groups = routing.get('n_group')
    if groups:
        tokens, experts = choice.shape
        grouped = choice.reshape(tokens, groups, experts // groups)
        if bias is not None:
            group_scores = grouped.topk(2, dim=-1)[0].sum(dim=-1)
        else:
            group_scores = grouped.max(dim=-1)[0]
        kept = torch.topk(group_scores, routing['topk_group'], dim=-1)[1]
        mask = torch.zeros_like(group_scores).scatter_(1, kept, 1.0)
        mask = mask.unsqueeze(-1).expand(tokens, groups, experts // groups).reshape(tokens, experts)
        choice = choice.masked_fill(mask == 0, float('-inf'))
    ids = torch.topk(choice, top_k, dim=-1)[1]
    weights = scores.gather(1, ids)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    if routing.get('routed_scaling_factor'):
        weights = weights * routing['routed_scaling_factor']
    return weights, ids.to(torch.int32)


def route_inputs(torch, x, logits, moe, bias=None):
    """(x, weights, ids) the experts get: route()'s, and for a router whose
    weight multiplies the expert's input (Llama 4, top 1: sglang's
    apply_router_weight_on_input) x scaled by it and weights of one."""
    routing = moe.get('routing') or {}
    weights, ids = route(torch, logits, moe['top_k'], moe['renormalize'], routing, bias)
    if routing.get('weight_on_input'):
        x = (x.float() * weights).to(x.dtype)
        weights = torch.ones_like(weights)
    return x, weights, ids


def reference_moe(torch, x, weights, ids, gate, up, down):
    """fp32 MoE of the given (already quantized, then dequantized) tensors:
    out[t] = sum_j weights[t, j] * down[e] @ (silu(gate[e] @ x[t]) * up[e] @ x[t]),
    e = ids[t, j]; gate, up [E, I, H], down [E, H, I]."""
    x = x.float()
    out = torch.zeros(x.shape[0], down.shape[1], dtype=torch.float32, device=x.device)
    ids = ids.long()
    for expert in torch.unique(ids).tolist():
        rows, slots = torch.nonzero(ids == expert, as_tuple=True)
        hidden = x[rows]
        act = torch.nn.functional.silu(hidden @ gate[expert].float().t()) * (hidden @ up[expert].float().t())
        out.index_add_(0, rows, (act @ down[expert].float().t()) * weights[rows, slots].unsqueeze(1).float())
    return out


# --- the runners: (ctx, shape, m) -> (out, ref) --------------------------------

def _randn(ctx, *shape):
    torch = ctx['torch']
    return torch.randn(*shape, generator=ctx['generator'], device=ctx['device'])


def _gemm_bf16(ctx, shape, m):
    torch = ctx['torch']
    a = _randn(ctx, m, shape['k']).to(torch.bfloat16)
    b = (_randn(ctx, shape['n'], shape['k']) / shape['k'] ** 0.5).to(torch.bfloat16)
    return torch.matmul(a, b.t()), a.float() @ b.float().t()


def _gemm_fp8(ctx, shape, m):
    _block_fp8_skip(ctx, 'the GEMMs')
    torch = ctx['torch']
    kc = _kc()
    a, sa = kc._fp8_quant(torch, _randn(ctx, m, shape['k']))
    b, sb = kc._fp8_quant(torch, _randn(ctx, shape['n'], shape['k']))
    out = torch._scaled_mm(a, b.t(), scale_a=sa.reshape(()), scale_b=sb.reshape(()), out_dtype=torch.bfloat16)
    out = out[0] if isinstance(out, tuple) else out
    return out, (a.float() * sa) @ (b.float() * sb).t()


def _mm_fp4(backend):
    def run(ctx, shape, m):
        torch = ctx['torch']
        kc = _kc()
        flashinfer = ctx['modules']['flashinfer']
        quant = getattr(flashinfer, 'fp4_quantize', None)
        mm_fp4 = kc.resolve_op(flashinfer, 'gemm.mm_fp4')
        if quant is None or mm_fp4 is None:
            raise kc.Skip('flashinfer.fp4_quantize or flashinfer.gemm.mm_fp4 is not in this version')
        x_a = _randn(ctx, m, shape['k']).to(torch.bfloat16)
        x_b = _randn(ctx, shape['n'], shape['k']).to(torch.bfloat16)
        gs_a = (kc.FP8_MAX * kc.FP4_MAX / x_a.abs().max().float()).reshape(1)
        gs_b = (kc.FP8_MAX * kc.FP4_MAX / x_b.abs().max().float()).reshape(1)
        a, sf_a = quant(x_a, gs_a)
        b, sf_b = quant(x_b, gs_b)
        ref = kc._fp4_quant(torch, x_a)[3] @ kc._fp4_quant(torch, x_b)[3].t()
        alpha = (1.0 / (gs_a * gs_b)).reshape(())
        out = kc.call(mm_fp4, (a, b.t(), sf_a, sf_b.t()),
                      {'alpha': alpha, 'out_dtype': torch.bfloat16, 'backend': backend})
        return out, ref
    return run


def _moe_weights(ctx, moe, experts):
    """bf16 expert weights scaled so activations stay O(1): gate, up [E, I, H], down [E, H, I]."""
    torch = ctx['torch']
    hidden, inter = moe['hidden'], moe['intermediate']
    gate = (_randn(ctx, experts, inter, hidden) / hidden ** 0.5).to(torch.bfloat16)
    up = (_randn(ctx, experts, inter, hidden) / hidden ** 0.5).to(torch.bfloat16)
    down = (_randn(ctx, experts, hidden, inter) / inter ** 0.5).to(torch.bfloat16)
    return gate, up, down


def _moe_inputs(ctx, moe, m):
    torch = ctx['torch']
    experts = ctx['moe_experts']
    x = _randn(ctx, m, moe['hidden']).to(torch.bfloat16)
    return route_inputs(torch, x, _randn(ctx, m, experts), moe, ctx.get('moe_bias'))


def _output(ctx, moe, m):
    """The output buffer handed to the op, NaN until the op writes it (an op that
    leaves rows unwritten fails as NaN, never as stale memory). The fused
    finalize stays at flashinfer's default, as serving calls it."""
    torch = ctx['torch']
    return {'output': torch.full((m, moe['hidden']), float('nan'), dtype=torch.bfloat16, device=ctx['device'])}


def _cutlass_moe(ctx, args, optional):
    """flashinfer's cutlass_fused_moe; its return value, else the output buffer it filled."""
    kc = _kc()
    op = kc.resolve_op(ctx['modules']['flashinfer'], 'fused_moe.cutlass_fused_moe')
    if op is None:
        raise kc.Skip('flashinfer.fused_moe.cutlass_fused_moe is not in this version')
    result = kc.call(op, args, optional)
    if isinstance(result, (tuple, list)):
        result = result[0]
    return result if hasattr(result, 'shape') else optional['output']


def _bf16_experts(ctx, moe, m, key, gate_first, run):
    """One backend's BF16 MoE: its first weight (the gate and up halves in the backend's order, kept in ctx[key]),
    run(x, weights, ids, w13, down) -> out, and the reference."""
    torch = ctx['torch']
    gate, up, down = ctx['moe_weights']
    x, weights, ids = _moe_inputs(ctx, moe, m)
    if key not in ctx:
        ctx[key] = torch.cat([gate, up] if gate_first else [up, gate], dim=1).contiguous()
    return run(x, weights, ids, ctx[key], down), reference_moe(torch, x, weights, ids, gate, up, down)


def _moe_bf16(ctx, moe, m):
    # flashinfer's fc1 holds the up half first, then the gate half (SwiGLU: silu(gate) * up).
    return _bf16_experts(ctx, moe, m, 'fc1', False, lambda x, weights, ids, fc1, down: _cutlass_moe(
        ctx, (x, ids, weights, fc1, down, ctx['torch'].bfloat16, []), _output(ctx, moe, m)))


def _fp8_per_expert(torch, weight):
    """[E, ...] bf16 -> (e4m3 [E, ...], fp32 scales [E]) with weight ~= q * scale[e]."""
    scale = (weight.float().abs().flatten(1).amax(1) / FP8_MAX).clamp(min=1e-12)
    shape = (-1,) + (1,) * (weight.dim() - 1)
    quant = (weight.float() / scale.view(shape)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return quant, scale


def _block_fp8_skip(ctx, what):
    block = ctx.get('fp8_block')
    if block:
        raise _kc().Skip('the model\'s FP8 is block-scaled (weight_block_size %s): serving runs %s through the '
                         'block-scale kernels, which this version does not check; the per-tensor check would '
                         'qualify a kernel serving never runs' % (list(block), what))


def _moe_fp8(ctx, moe, m):
    """Per-tensor FP8: activations and per-expert weights in e4m3; the reference
    runs on the dequantized values the kernel saw."""
    _block_fp8_skip(ctx, 'the fused MoE')
    torch = ctx['torch']
    if 'fp8' not in ctx:
        gate, up, down = ctx['moe_weights']
        w1, w1s = _fp8_per_expert(torch, torch.cat([up, gate], dim=1))
        w2, w2s = _fp8_per_expert(torch, down)
        inter = moe['intermediate']
        deq1 = w1.float() * w1s.view(-1, 1, 1)
        ctx['fp8'] = (w1, w1s, w2, w2s, deq1[:, inter:], deq1[:, :inter], w2.float() * w2s.view(-1, 1, 1))
    w1, w1s, w2, w2s, gate_d, up_d, down_d = ctx['fp8']
    x, weights, ids = _moe_inputs(ctx, moe, m)
    kc = _kc()
    xq, a1 = kc._fp8_quant(torch, x.float())
    x_deq = xq.float() * a1
    ref = reference_moe(torch, x_deq, weights, ids, gate_d, up_d, down_d)
    a2 = _fc2_scale(ctx, x_deq, ids, gate_d, up_d)
    # per expert [E] for the weights, 0-dim for the activations (the binding checks the ranks)
    scales = [(w1s * a1).float(), (1.0 / a2).reshape(()).float(), (w2s * a2).float(), a1.reshape(()).float()]
    out = _cutlass_moe(ctx, (xq, ids, weights, w1, w2, torch.bfloat16, scales), _output(ctx, moe, m))
    return out, ref


def _fc2_scale(ctx, x_deq, ids, gate_d, up_d):
    """The static per-tensor scale of fc2's input, calibrated from the reference activation."""
    torch = ctx['torch']
    act_max = 0.0
    for expert in torch.unique(ids).tolist():
        rows, slots = torch.nonzero(ids.long() == expert, as_tuple=True)
        h = x_deq[rows]
        act = torch.nn.functional.silu(h @ gate_d[expert].t()) * (h @ up_d[expert].t())
        act_max = max(act_max, act.abs().max().item())
    return torch.tensor(max(act_max, 1e-6) / FP8_MAX, dtype=torch.float32, device=ctx['device'])


def sglang_runner(cuda_version=None):
    """sglang's triton MoE runner as the checks call it: a namespace with
    fused_experts, MoeRunnerConfig, StandardTopKOutput and context() (the
    runtime context a scheduler would publish, with --moe-runner-backend
    triton); None when sglang is not installed; the text of why it did not
    import otherwise (probe_imports' diagnosis where it has one)."""
    import importlib
    import types

    try:
        from importlib.util import find_spec
    except ImportError:  # Python 2 has no sglang
        return None
    if find_spec('sglang') is None:
        return None
    try:
        fused = importlib.import_module(SGLANG_TRITON_MOE)
        runner = importlib.import_module('sglang.srt.layers.moe.moe_runner')
        topk = importlib.import_module('sglang.srt.layers.moe.topk')
        server_args = importlib.import_module('sglang.srt.server_args')
        runtime = importlib.import_module('sglang.srt.runtime_context')
    except Exception as exc:  # pylint: disable=broad-except
        described = _helper('probe_imports').describe_exception(exc, cuda_version)
        return described['diagnosis'] or described['error']
    published = []

    def context():
        # fused_experts reads the exec and parallel config a server publishes; this
        # one is made once and entered per call, the process's own left as it was
        if not published:
            args = server_args.ServerArgs(model_path='dummy', moe_runner_backend='triton')
            published.append(runtime.create_context(args, role='scheduler'))
        return runtime.use_context(published[0])
    return types.SimpleNamespace(fused_experts=fused.fused_experts, MoeRunnerConfig=runner.MoeRunnerConfig,
                                 StandardTopKOutput=topk.StandardTopKOutput, context=context)


def _sglang_moe(ctx, moe, x, weights, ids, w13, w2, quant):
    """sglang's fused_experts on x routed by (weights, ids), with serving's
    config for all experts local (tensor parallel): its output. In place on a
    copy of x, as the runner's default config does."""
    torch = ctx['torch']
    sglang = ctx['modules']['sglang']
    experts = w13.shape[0]
    config = sglang.MoeRunnerConfig(num_experts=experts, num_local_experts=experts, hidden_size=moe['hidden'],
                                    intermediate_size_per_partition=moe['intermediate'], top_k=moe['top_k'],
                                    params_dtype=torch.bfloat16)
    # the runner reads the weights and ids; the router's logits are not its input
    routed = sglang.StandardTopKOutput(weights, ids, None)
    with sglang.context():
        return sglang.fused_experts(x.clone(), w13, w2, routed, config, **quant)


def _moe_triton_bf16(ctx, moe, m):
    # sglang's w13 holds the gate half first, then the up half
    return _bf16_experts(ctx, moe, m, 'w13', True, lambda x, weights, ids, w13, down: _sglang_moe(
        ctx, moe, x, weights, ids, w13, down.contiguous(), {}))


def _fp8_per_block(torch, weight, block):
    """[E, N, K] bf16 -> (e4m3 [E, N, K], fp32 scales [E, N/bn, K/bk], dequantized fp32) per [bn, bk] block."""
    experts, n, k = weight.shape
    bn, bk = block
    blocks = weight.float().reshape(experts, n // bn, bn, k // bk, bk)
    scale = (blocks.abs().amax(dim=(2, 4)) / FP8_MAX).clamp(min=1e-12)
    quant = (blocks / scale[:, :, None, :, None]).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    dequant = quant.float() * scale[:, :, None, :, None]
    return quant.reshape(experts, n, k), scale, dequant.reshape(experts, n, k)


def _fp8_groups(torch, x, group):
    """x dequantized as sglang's per-token-group FP8 quantization leaves it (the block path's activations)."""
    rows, k = x.shape
    groups = x.float().reshape(rows, k // group, group)
    scale = groups.abs().amax(-1, keepdim=True).clamp(min=1e-10) / FP8_MAX
    quant = (groups / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return (quant.float() * scale).reshape(rows, k)


def _block_fits(moe, block):
    """Why these experts are not whole weight blocks, or None. sglang refuses an
    intermediate size per GPU that is no multiple of block_n (and, with tensor
    parallelism, of block_k) when it creates the weights; the check's own
    quantizer needs whole blocks in every dimension."""
    sizes = (moe['intermediate'], moe['hidden'])
    if any(size % edge for size in sizes for edge in block):
        return ('the experts (intermediate %d, hidden %d per GPU) are not whole FP8 weight blocks %s: sglang '
                'refuses a partial block' % (sizes + (list(block),)))
    return None


def _moe_triton_fp8(ctx, moe, m):
    """FP8 through the triton runner: per-tensor (per-expert weight scales, static
    activation scales) or, for a block-scaled model, the model's weight blocks
    with the activations quantized per token group inside the runner."""
    torch = ctx['torch']
    kc = _kc()
    block = ctx.get('fp8_block')
    if block and _block_fits(moe, block):
        raise kc.Skip(_block_fits(moe, block))
    if 'triton_fp8' not in ctx:
        gate, up, down = ctx['moe_weights']
        w13 = torch.cat([gate, up], dim=1)
        if block:
            w1, w1s, deq1 = _fp8_per_block(torch, w13, block)
            w2, w2s, deq2 = _fp8_per_block(torch, down, block)
        else:
            w1, w1s = _fp8_per_expert(torch, w13)
            w2, w2s = _fp8_per_expert(torch, down)
            deq1, deq2 = w1.float() * w1s.view(-1, 1, 1), w2.float() * w2s.view(-1, 1, 1)
        inter = moe['intermediate']
        ctx['triton_fp8'] = (w1.contiguous(), w1s, w2.contiguous(), w2s, deq1[:, :inter], deq1[:, inter:], deq2)
    w1, w1s, w2, w2s, gate_d, up_d, down_d = ctx['triton_fp8']
    x, weights, ids = _moe_inputs(ctx, moe, m)
    quant = {'use_fp8_w8a8': True, 'w1_scale': w1s, 'w2_scale': w2s}
    if block:
        x_deq = _fp8_groups(torch, x, block[1])
        quant['block_shape'] = list(block)
    else:
        xq, a1 = kc._fp8_quant(torch, x.float())
        x_deq = xq.float() * a1
        quant.update(a1_scale=a1.reshape(1).float(), a2_scale=_fc2_scale(ctx, x_deq, ids, gate_d, up_d).reshape(1))
    ref = reference_moe(torch, x_deq, weights, ids, gate_d, up_d, down_d)
    return _sglang_moe(ctx, moe, x, weights, ids, w1, w2, quant), ref


def _no_check(backend_text):
    def run(ctx, moe, m):
        raise _kc().Skip('%s: no check in this version of the collection (it needs a GPU this '
                         'collection was not proven on); not counted as qualified' % backend_text)
    return run


def _no_check_yet(reason):
    def run(ctx, shape, m):
        raise _kc().Skip(reason.replace(' %s', ''))
    return run


RUNNERS = {
    'model.gemm.bf16': _gemm_bf16,
    'model.gemm.fp8': _gemm_fp8,
    'model.mm_fp4.cudnn': _mm_fp4('cudnn'),
    'model.mm_fp4.cutlass': _mm_fp4('cutlass'),
    'model.mm_fp4.trtllm': _mm_fp4('trtllm'),
    'moe.flashinfer_cutlass.bf16': _moe_bf16,
    'moe.flashinfer_cutlass.fp8': _moe_fp8,
    'moe.flashinfer_cutlass.nvfp4': _no_check('NVFP4 fused MoE (flashinfer cutlass)'),
    'moe.flashinfer_trtllm.nvfp4': _no_check('NVFP4 fused MoE (flashinfer trtllm)'),
    'moe.triton.bf16': _moe_triton_bf16,
    'moe.triton.fp8': _moe_triton_fp8,
}
# run_checks skips these before any runner is looked up; a direct call says the same
RUNNERS.update((name, _no_check_yet(reason)) for name, reason in NOT_YET.items())


def moe_experts(moe, budget=MOE_MAX_WEIGHT_BYTES):
    """How many experts the check keeps: all of them when their bf16 weights
    (3 * hidden * intermediate * 2 bytes each) fit the budget, else as many
    as fit, never fewer than top_k."""
    per_expert = 3 * moe['hidden'] * moe['intermediate'] * 2
    kept = max(moe['top_k'], min(moe['experts'], budget // max(per_expert, 1)))
    routing = moe.get('routing') or {}
    groups = routing.get('n_group')
    if groups and kept < moe['experts']:
        # whole groups, each of at least two experts (the biased group score
        # is a top two), enough of them for the top_k
        per_group = max(kept // groups, 2, -(-moe['top_k'] // routing['topk_group']))
        kept = min(moe['experts'], per_group * groups)
    return kept


class _Autotune(object):
    """flashinfer's autotuner on for the block (tune_mode=True), or nothing."""

    def __init__(self, ctx, on):
        self.ctx, self.on, self.inner = ctx, on, None

    def __enter__(self):
        if self.on:
            autotune = getattr(self.ctx['modules']['flashinfer'], 'autotune', None)
            if autotune is None:
                raise _kc().Skip('flashinfer.autotune is not in this version')
            self.inner = autotune(True)
            self.inner.__enter__()
        return self

    def __exit__(self, *exc):
        if self.inner is not None:
            return self.inner.__exit__(*exc)
        return False


class _NoJit(object):
    """FLASHINFER_DISABLE_JIT=1 for the block when compiling is not allowed."""

    def __init__(self, cache_only):
        self.cache_only, self.saved = cache_only, None

    def __enter__(self):
        if self.cache_only:
            self.saved = os.environ.get('FLASHINFER_DISABLE_JIT')
            os.environ['FLASHINFER_DISABLE_JIT'] = '1'
        return self

    def __exit__(self, *exc):
        if self.cache_only:
            if self.saved is None:
                os.environ.pop('FLASHINFER_DISABLE_JIT', None)
            else:
                os.environ['FLASHINFER_DISABLE_JIT'] = self.saved
        return False


def _not_built(exc):
    """The skip reason when exc says a flashinfer module is not in the prebuilt cache."""
    if type(exc).__name__ != 'MissingJITCacheError' and 'FLASHINFER_DISABLE_JIT' not in str(exc):
        return None
    spec = getattr(exc, 'spec', None)
    name = getattr(spec, 'name', None) or 'a flashinfer module'
    return ('flashinfer module %s is not built for this stack (it is never compiled during verification: '
            'install it prebuilt: flashinfer_aot_modules: [%s] or the flashinfer-jit-cache package; or allow '
            'compiling with gpufleet_model_jit: allow)' % (name, name))


def _sweep(torch, name, ctx, targets, sweep, modes, tolerance, cache_only, entry, failures):
    """Every (mode, layer, M) of one check; failures appended, the worst error returned.
    Raises Skip when the check cannot run here at all."""
    kc = _kc()
    runner = RUNNERS[name]
    worst = 0.0
    for mode in modes:
        for label, shape in targets:
            for m in sweep:
                where = '%s, %sM=%d' % (label, 'autotune on, ' if mode == 'on' else '', m)
                try:
                    with _NoJit(cache_only):
                        with _Autotune(ctx, mode == 'on'):
                            out, ref = runner(ctx, shape, m)
                    kc._sync(torch, ctx['index'])
                    nonfinite, error, zero = kc.compare(torch, out, ref)
                except kc.Skip:
                    raise
                except Exception as exc:  # pylint: disable=broad-except
                    reason = _not_built(exc)
                    if reason:
                        raise kc.Skip(reason)
                    text = kc._error_text(exc)
                    failures.append((where, 'error', kc.diagnose_error(text, name, ctx['capability']), None))
                    if kc.NO_KERNEL_IMAGE in text:
                        return worst  # the same for every size
                    continue
                if nonfinite:
                    entry['nonfinite'] += nonfinite
                    failures.append((where, 'nonfinite', '%d NaN/Inf of %d' % (nonfinite, out.numel()), None))
                elif zero:
                    failures.append((where, zero, zero, None))
                else:
                    worst = max(worst, error)
                    if error > tolerance:
                        failures.append((where, 'error_tol', 'relative error %.3g > tolerance %g' % (error, tolerance),
                                         error))
    return worst


def run_one(torch, name, ctx, shapes, tolerance, autotuned, cache_only, precision='none'):
    """One check on one device -> its result entry (never raises for what the op or
    the device did: an error is a failure, a check that cannot run a skip)."""
    kc = _kc()
    sweep = MOE_SWEEP_M if name.startswith('moe.') else SWEEP_M
    entry = kc.new_entry(name, ctx['index'], ctx['device_name'], tolerance, sizes=sweep)
    entry['autotune'] = ['off', 'on'] if autotuned else ['off']
    targets = targets_of(name, shapes, precision)
    entry['shapes'] = [dict(shape, layer=label) if label != 'moe' else dict(shape) for label, shape in targets]
    failures = []
    worst = 0.0
    started = time.time()
    try:
        if name.startswith('moe.') and shapes.get('moe'):
            ctx['moe_experts'] = moe_experts(shapes['moe'])
            entry['experts_checked'] = ctx['moe_experts']
            if ctx['moe_experts'] < shapes['moe']['experts']:
                kept = (ctx['moe_experts'], shapes['moe']['experts'], MOE_MAX_WEIGHT_BYTES >> 30)
                entry['note'] = ('%d of the model\'s %d experts (their bf16 weights within %d GiB); the shapes '
                                 'per expert are the model\'s' % kept)
            ctx['moe_weights'] = _moe_weights(ctx, shapes['moe'], ctx['moe_experts'])
            if (shapes['moe'].get('routing') or {}).get('correction_bias'):
                # a router's score correction bias of the order of its scores
                ctx['moe_bias'] = _randn(ctx, ctx['moe_experts']) * ROUTER_BIAS_SCALE
        worst = _sweep(torch, name, ctx, targets, sweep, entry['autotune'], tolerance, cache_only, entry, failures)
    except kc.Skip as exc:
        if not failures:
            entry.update(status='skipped', reason=str(exc))
            return entry
        # what already failed stays failed: the skip only ends the sweep
        failures.append(('the rest of the sweep', 'skip', 'not run (%s)' % exc, None))
    except Exception as exc:  # pylint: disable=broad-except
        # the setup itself broke (out of memory, a sticky CUDA error): a failure of this check
        failures.append(('setup', 'error', kc._error_text(exc), None))
    finally:
        for key in ('moe_weights', 'moe_bias', 'fc1', 'fp8', 'w13', 'triton_fp8'):
            ctx.pop(key, None)
    entry['seconds'] = round(time.time() - started, 3)
    entry['relative_error'] = None if entry['nonfinite'] else round(worst, 6)
    if failures:
        entry['status'] = 'failed'
        entry['failed_sizes'] = [failure[0] for failure in failures]
        entry['reason'] = _group(failures)
    return entry


def _group(failures):
    """[(where, kind, detail, error)] -> one reason, grouped by kind, the worst detail named."""
    groups = []
    for where, kind, detail, error in failures:
        for group in groups:
            if group['kind'] == kind:
                group['where'].append(where)
                if error is not None and error > group['error']:
                    group.update(detail=detail, error=error)
                break
        else:
            groups.append({'kind': kind, 'where': [where], 'detail': detail, 'error': error or 0.0})
    return ' / '.join('%s at %s' % (group['detail'], '; '.join(group['where'][:8])
                                    + (' (and %d more)' % (len(group['where']) - 8) if len(group['where']) > 8 else ''))
                      for group in groups)


def run_checks(torch, modules, devices, shapes, precision, tolerances=None, jit='cache_only', only=None, fp8_block=None):
    """The checks that apply to precision, on every device -> list of result entries.

    modules: set name -> imported module or the import error text; devices:
    [(index or 'cpu', name, (major, minor) or None)]; shapes: model_profile's
    shard shapes; jit: 'cache_only' (a flashinfer module missing from the
    prebuilt cache is a skip) or 'allow'; only: check names to run (None: all
    that apply); fp8_block: the model's FP8 weight block ([n, k]) when its FP8
    is block-scaled. A set missing from modules is resolved here (sglang, by
    sglang_runner) the first time one of its checks applies to a MoE model."""
    import contextlib

    kc = _kc()
    tolerances = tolerances or {}
    results = []
    modules = dict(modules)
    # the fp32 references in full fp32 (TF32 would blur them)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for name, set_name, min_cc, precisions, tolerance, autotuned in CHECKS:
        if precision not in precisions or (only is not None and name not in only):
            continue
        skip = not_yet(name, shapes, precision)
        if skip:
            results.extend(kc.new_entry(name, device[0], device[1], float(tolerances.get(name, tolerance)), 'skipped',
                                        skip) for device in devices)
            continue
        if set_name == 'sglang' and set_name not in modules and shapes.get('moe'):
            modules[set_name] = sglang_runner(getattr(torch.version, 'cuda', None))
            # an import may have changed them
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        tolerance = float(tolerances.get(name, tolerance))
        module = modules.get(set_name)
        for index, device_name, capability in devices:
            if module is None:
                reason = '%s is not installed' % set_name
            elif isinstance(module, str):
                reason = '%s did not import: %s' % (set_name, module)
            elif index == 'cpu':
                reason = 'no CUDA device'
            elif capability and tuple(capability) < tuple(min_cc):
                reason = 'compute capability %d.%d < %d.%d' % (tuple(capability) + tuple(min_cc))
            else:
                reason = None
            if reason:
                results.append(kc.new_entry(name, index, device_name, tolerance, 'skipped', reason))
                continue
            try:
                generator = torch.Generator(device=torch.device('cuda', index))
                generator.manual_seed(SEED)
            except Exception as exc:  # pylint: disable=broad-except
                results.append(kc.new_entry(name, index, device_name, tolerance, 'failed',
                                            'the device did not take work: %s' % kc._error_text(exc)))
                continue
            ctx = {'torch': torch, 'generator': generator, 'device': torch.device('cuda', index), 'index': index,
                   'device_name': device_name, 'capability': capability, 'modules': modules, 'fp8_block': fp8_block}
            with torch.cuda.device(index) if index != 'cpu' else contextlib.nullcontext():
                results.append(run_one(torch, name, ctx, shapes, tolerance, autotuned, jit != 'allow', precision))
            try:
                torch.cuda.empty_cache()
            except Exception:  # pylint: disable=broad-except
                pass
    return results
