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
    ('model.gemm.bf16', 'torch', (8, 0), ('none',), 0.01, False),
    ('model.gemm.fp8', 'torch', (8, 9), ('fp8',), 0.03, False),
    ('model.mm_fp4.cudnn', 'flashinfer', (10, 0), ('nvfp4',), 0.1, True),
    ('model.mm_fp4.cutlass', 'flashinfer', (10, 0), ('nvfp4',), 0.1, True),
    ('model.mm_fp4.trtllm', 'flashinfer', (10, 0), ('nvfp4',), 0.1, True),
    ('moe.flashinfer_cutlass.bf16', 'flashinfer', (9, 0), ('none',), 0.02, True),
    ('moe.flashinfer_cutlass.fp8', 'flashinfer', (9, 0), ('fp8',), 0.06, True),
    ('moe.flashinfer_cutlass.nvfp4', 'flashinfer', (10, 0), ('nvfp4',), 0.15, True),
    ('moe.flashinfer_trtllm.nvfp4', 'flashinfer', (10, 0), ('nvfp4',), 0.15, True),
)
# Expert weights beyond this many bytes: the check keeps fewer experts (never
# fewer than top_k) and says so in the result.
MOE_MAX_WEIGHT_BYTES = 4 << 30
FP8_MAX = 448.0
SEED = 20261204
NO_MOE = 'the model has no MoE layer'


def check_names():
    return [entry[0] for entry in CHECKS]


def default_tolerances():
    return dict((entry[0], entry[4]) for entry in CHECKS)


def applicable(precision):
    """The check names that apply to a model of this precision (none, fp8, nvfp4)."""
    return [entry[0] for entry in CHECKS if precision in entry[3]]


def _kc():
    """kernel_checks: the probe's prelude module, or the ordinary import."""
    module = sys.modules.get('gpufleet_kernel_checks')
    if module is None:
        import importlib

        module = importlib.import_module('ansible_collections.gpufleet.inference.plugins.module_utils.kernel_checks')
    return module


# --- the reference MoE -------------------------------------------------------

def route(torch, logits, top_k, renormalize):
    """Router: softmax over the experts, the top_k of it; renormalized over the
    chosen ones when the model does (Qwen3-MoE norm_topk_prob, Mixtral).
    Returns (weights fp32 [T, k], expert ids int32 [T, k])."""
    probs = torch.softmax(logits.float(), dim=-1)
    weights, ids = torch.topk(probs, top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids.to(torch.int32)


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
    weights, ids = route(torch, _randn(ctx, m, experts), moe['top_k'], moe['renormalize'])
    return x, weights, ids


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


def _moe_bf16(ctx, moe, m):
    torch = ctx['torch']
    gate, up, down = ctx['moe_weights']
    x, weights, ids = _moe_inputs(ctx, moe, m)
    # flashinfer's fc1 holds the up half first, then the gate half (SwiGLU: silu(gate) * up).
    if 'fc1' not in ctx:
        ctx['fc1'] = torch.cat([up, gate], dim=1).contiguous()
    out = _cutlass_moe(ctx, (x, ids, weights, ctx['fc1'], down, torch.bfloat16, []), _output(ctx, moe, m))
    return out, reference_moe(torch, x, weights, ids, gate, up, down)


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
    # The static scale of fc2's input, calibrated from the reference activation.
    act_max = 0.0
    for expert in torch.unique(ids).tolist():
        rows, slots = torch.nonzero(ids.long() == expert, as_tuple=True)
        h = x_deq[rows]
        act = torch.nn.functional.silu(h @ gate_d[expert].t()) * (h @ up_d[expert].t())
        act_max = max(act_max, act.abs().max().item())
    a2 = torch.tensor(max(act_max, 1e-6) / FP8_MAX, dtype=torch.float32, device=ctx['device'])
    # per expert [E] for the weights, 0-dim for the activations (the binding checks the ranks)
    scales = [(w1s * a1).float(), (1.0 / a2).reshape(()).float(), (w2s * a2).float(), a1.reshape(()).float()]
    out = _cutlass_moe(ctx, (xq, ids, weights, w1, w2, torch.bfloat16, scales), _output(ctx, moe, m))
    return out, ref


def _no_check(backend_text):
    def run(ctx, moe, m):
        raise _kc().Skip('%s: no check in this version of the collection (it needs a GPU this '
                         'collection was not proven on); not counted as qualified' % backend_text)
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
}


def moe_experts(moe, budget=MOE_MAX_WEIGHT_BYTES):
    """How many experts the check keeps: all of them when their bf16 weights
    (3 * hidden * intermediate * 2 bytes each) fit the budget, else as many
    as fit, never fewer than top_k."""
    per_expert = 3 * moe['hidden'] * moe['intermediate'] * 2
    return max(moe['top_k'], min(moe['experts'], budget // max(per_expert, 1)))


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


def _targets(name, shapes):
    """[(label, shape)] one check sweeps: the layers' GEMMs, or the MoE layer."""
    if name.startswith('moe.'):
        return [('moe', shapes['moe'])] if shapes.get('moe') else []
    return [(gemm['layer'], gemm) for gemm in shapes['gemms']]


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


def run_one(torch, name, ctx, shapes, tolerance, autotuned, cache_only):
    """One check on one device -> its result entry (never raises for what the op or
    the device did: an error is a failure, a check that cannot run a skip)."""
    kc = _kc()
    sweep = MOE_SWEEP_M if name.startswith('moe.') else SWEEP_M
    entry = kc.new_entry(name, ctx['index'], ctx['device_name'], tolerance, sizes=sweep)
    entry['autotune'] = ['off', 'on'] if autotuned else ['off']
    targets = _targets(name, shapes)
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
        for key in ('moe_weights', 'fc1', 'fp8'):
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
    is block-scaled."""
    import contextlib

    kc = _kc()
    tolerances = tolerances or {}
    results = []
    # the fp32 references in full fp32 (TF32 would blur them)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for name, set_name, min_cc, precisions, tolerance, autotuned in CHECKS:
        if precision not in precisions or (only is not None and name not in only):
            continue
        tolerance = float(tolerances.get(name, tolerance))
        module = modules.get(set_name)
        for index, device_name, capability in devices:
            if not shapes.get('moe') and name.startswith('moe.'):
                reason = NO_MOE
            elif module is None:
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
                results.append(run_one(torch, name, ctx, shapes, tolerance, autotuned, jit != 'allow'))
            try:
                torch.cuda.empty_cache()
            except Exception:  # pylint: disable=broad-except
                pass
    return results
