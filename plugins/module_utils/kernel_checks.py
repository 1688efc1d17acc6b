# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Kernel checks: the ops a serving stack calls, run on every device against an
fp32 torch reference computed from the same inputs.

The probe (torch_probe) runs this file's source inside the interpreter under
test, next to torch and the extensions; the controller imports it only for
the catalogue (CHECKS, check_names), so nothing at module level imports torch.

Why per device and per M: the failures seen in the field are device- and
shape-specific (an SM120 FP4 GEMM that returns zeros only for some M, NaN from
one backend). Every check of the catalogue appears in the result, as ok,
failed (with what) or skipped (with why): nothing is left out silently.

Ops are looked up by name and their signatures read at run time, because
upstream signatures move between versions; a required parameter this file
does not know is a skip that names the signature, not a guess.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import time

# (name, set, op path inside the set's module, lowest compute capability,
#  may run on CPU tensors when there is no CUDA device, default tolerance).
# Tolerances are on ||out - ref|| / ||ref||, per element of the sweep; the
# reference is fp32 of the very inputs the op saw (rounded/quantized ones).
CHECKS = (
    ('torch.fp8_scaled_mm', 'torch', '_scaled_mm', (8, 9), False, 0.02),
    ('torch.nvfp4_scaled_mm', 'torch', '_scaled_mm', (10, 0), False, 0.05),
    ('sgl_kernel.rmsnorm', 'sgl_kernel', 'rmsnorm', None, True, 0.005),
    ('sgl_kernel.fused_add_rmsnorm', 'sgl_kernel', 'fused_add_rmsnorm', None, True, 0.005),
    ('sgl_kernel.silu_and_mul', 'sgl_kernel', 'silu_and_mul', None, True, 0.005),
    ('sgl_kernel.fp8_scaled_mm', 'sgl_kernel', 'fp8_scaled_mm', (8, 9), False, 0.02),
    ('sgl_kernel.cutlass_scaled_fp4_mm', 'sgl_kernel', 'cutlass_scaled_fp4_mm', (10, 0), False, 0.1),
    ('flashinfer.rmsnorm', 'flashinfer', 'norm.rmsnorm', None, False, 0.005),
    ('flashinfer.silu_and_mul', 'flashinfer', 'activation.silu_and_mul', None, False, 0.005),
    ('flashinfer.top_k_sampling', 'flashinfer', 'sampling.top_k_sampling_from_probs', None, False, 0.0),
    ('flashinfer.mm_fp4.cudnn', 'flashinfer', 'gemm.mm_fp4', (10, 0), False, 0.1),
    ('flashinfer.mm_fp4.cutlass', 'flashinfer', 'gemm.mm_fp4', (10, 0), False, 0.1),
    ('flashinfer.mm_fp4.trtllm', 'flashinfer', 'gemm.mm_fp4', (10, 0), False, 0.1),
)
SETS = ('torch', 'sgl_kernel', 'flashinfer')
# The sweep over the number of rows (tokens): 1 (decode), a prime, and sizes
# on both sides of the 128-row tiles where M-dependent failures were reported.
SWEEP_M = (1, 7, 128, 1024)
HIDDEN = 2048
# On the CPU (a host without GPU) the checks prove the op and the engine, not
# throughput: a narrower hidden size keeps a fleet verification cheap there.
CPU_HIDDEN = 256
GEMM_SWEEP_M = (16, 128, 1024, 4096)
GEMM_NK = 4096
# An output below this fraction of the reference's norm is "near zero".
NEAR_ZERO = 1e-3
FP8_MAX = 448.0
FP4_MAX = 6.0

NO_KERNEL_IMAGE = 'no kernel image is available'


def check_names():
    return [entry[0] for entry in CHECKS]


def default_tolerances():
    return dict((entry[0], entry[5]) for entry in CHECKS)


class Skip(Exception):
    """The check cannot run here; its message is the reason."""


def _error_text(exc):
    return '%s: %s' % (type(exc).__name__, str(exc).strip().splitlines()[0] if str(exc).strip() else '')


def resolve_op(module, path):
    """module + 'norm.rmsnorm' -> the callable, importing submodules on the way; None when absent."""
    import importlib

    target = module
    parts = path.split('.')
    for index, part in enumerate(parts):
        if hasattr(target, part):
            target = getattr(target, part)
            continue
        if not hasattr(target, '__name__') or not hasattr(target, '__path__'):
            return None
        try:
            target = importlib.import_module('%s.%s' % (target.__name__, part))
        except ImportError:
            return None
    return target if callable(target) else None


def parameters(op):
    """Parameter names of op, or None when Python cannot read its signature (a builtin)."""
    import inspect

    try:
        return inspect.signature(op).parameters
    except (TypeError, ValueError):
        return None


def call(op, args, optional):
    """op(*args, **the entries of optional that its signature has); a required
    parameter beyond args that is not in optional is a Skip naming the signature."""
    params = parameters(op)
    if params is None:
        return op(*args)
    import inspect

    kwargs = {}
    positional = [p for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    for param in positional[len(args):]:
        if param.name in optional:
            kwargs[param.name] = optional[param.name]
        elif param.default is inspect.Parameter.empty:
            raise Skip('op signature not understood: required parameter %r in %s' % (param.name, inspect.signature(op)))
    for param in params.values():
        if param.kind == param.KEYWORD_ONLY and param.name in optional:
            kwargs[param.name] = optional[param.name]
        elif param.kind == param.KEYWORD_ONLY and param.default is inspect.Parameter.empty:
            raise Skip('op signature not understood: required parameter %r in %s' % (param.name, inspect.signature(op)))
    return op(*args, **kwargs)


def compare(torch, out, ref):
    """(nonfinite, relative_error or None, zero kind or None) of out against ref."""
    out = out.float()
    ref = ref.float()
    nonfinite = int(out.numel() - torch.isfinite(out).sum().item())
    ref_norm = ref.norm().item()
    if nonfinite:
        return nonfinite, None, None
    out_norm = out.norm().item()
    zero = None
    if ref_norm > 0 and out_norm == 0:
        zero = 'all zeros'
    elif ref_norm > 0 and out_norm < NEAR_ZERO * ref_norm:
        zero = 'near-zero output'
    error = (out - ref).norm().item() / ref_norm if ref_norm > 0 else out_norm
    return 0, error, zero


def _sync(torch, device):
    if device != 'cpu':
        torch.cuda.synchronize(device)


# --- the checks: each takes (ctx, op, device, m) and returns (out, ref[, flops]) ---
# ctx: torch, the generator, the dtype for activations.

def _randn(ctx, *shape, **kwargs):
    torch = ctx['torch']
    return torch.randn(*shape, generator=ctx['generator'], device=ctx['device'], **kwargs)


def _rms_ref(torch, x, weight, eps):
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()


def run_rmsnorm(ctx, op, m):
    torch = ctx['torch']
    x = _randn(ctx, m, ctx['hidden']).to(ctx['dtype'])
    weight = _randn(ctx, ctx['hidden']).to(ctx['dtype'])
    out = call(op, (x, weight), {'eps': 1e-6})
    return out, _rms_ref(torch, x, weight, 1e-6)


def run_fused_add_rmsnorm(ctx, op, m):
    torch = ctx['torch']
    x = _randn(ctx, m, ctx['hidden']).to(ctx['dtype'])
    residual = _randn(ctx, m, ctx['hidden']).to(ctx['dtype'])
    weight = _randn(ctx, ctx['hidden']).to(ctx['dtype'])
    summed = x.float() + residual.float()
    ref_norm = _rms_ref(torch, summed.to(ctx['dtype']), weight, 1e-6)
    call(op, (x, residual, weight), {'eps': 1e-6})
    # In place: residual += input, input = rmsnorm(residual). Judge both halves.
    return torch.cat([x.float(), residual.float()], 1), torch.cat([ref_norm, summed], 1)


def run_silu_and_mul(ctx, op, m):
    torch = ctx['torch']
    hidden = ctx['hidden']
    x = _randn(ctx, m, 2 * hidden).to(ctx['dtype'])
    gate, up = x.float()[:, :hidden], x.float()[:, hidden:]
    ref = torch.nn.functional.silu(gate) * up
    return call(op, (x,), {}), ref


def run_top_k_sampling(ctx, op, m):
    torch = ctx['torch']
    logits = _randn(ctx, m, 32000)
    probs = torch.softmax(logits * 4.0, dim=-1)
    out = call(op, (probs, 1), {'check_nan': True})
    if isinstance(out, tuple):
        out = out[0]
    expected = probs.argmax(dim=-1)
    wrong = int((out.long().view(-1) != expected.view(-1)).sum().item())
    # As a relative error: the fraction of rows whose token is not the argmax.
    return torch.tensor([float(wrong) / m]), torch.tensor([0.0]), 'argmax'


def _fp8_quant(torch, x):
    """Per-tensor e4m3 quantization: (fp8 tensor, fp32 scalar scale) with x ~= q * scale."""
    scale = (x.abs().max().float() / FP8_MAX).clamp(min=1e-12)
    return (x.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale


def run_torch_fp8(ctx, op, m):
    torch = ctx['torch']
    if not hasattr(torch, 'float8_e4m3fn'):
        raise Skip('this torch has no float8_e4m3fn')
    a, sa = _fp8_quant(torch, _randn(ctx, m, GEMM_NK))
    b, sb = _fp8_quant(torch, _randn(ctx, GEMM_NK, GEMM_NK))  # (N, K), row-major
    # Per-tensor scales: per-row FP8 is not supported by cuBLAS on sm_120.

    def gemm():
        result = op(a, b.t(), scale_a=sa.reshape(()), scale_b=sb.reshape(()), out_dtype=torch.bfloat16)
        return result[0] if isinstance(result, tuple) else result
    ref = (a.float() * sa) @ (b.float() * sb).t()
    return gemm(), ref, (2.0 * m * GEMM_NK * GEMM_NK, gemm)


def run_sgl_fp8(ctx, op, m):
    torch = ctx['torch']
    a, sa = _fp8_quant(torch, _randn(ctx, m, GEMM_NK))
    b, sb = _fp8_quant(torch, _randn(ctx, GEMM_NK, GEMM_NK))
    # Per-row / per-column scales, b column-major (K, N).
    scales_a = sa.reshape(1).expand(m).contiguous()
    scales_b = sb.reshape(1).expand(GEMM_NK).contiguous()

    def gemm():
        return call(op, (a, b.t(), scales_a, scales_b, torch.bfloat16), {})
    ref = (a.float() * sa) @ (b.float() * sb).t()
    return gemm(), ref, (2.0 * m * GEMM_NK * GEMM_NK, gemm)


# NVFP4: e2m1 values, two per byte, with one e4m3 scale per 16 values and a
# global fp32 scale (global_scale = 448 * 6 / amax).
_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def _fp4_quant(torch, x, block=16):
    """x (rows, K) -> (packed uint8 (rows, K/2), e4m3 block scales (rows, K/16), global scale,
    dequantized fp32 x) with torch ops only, as a reference quantizer."""
    rows, k = x.shape
    global_scale = (FP8_MAX * FP4_MAX / x.abs().max().float()).clamp(min=1e-12)
    blocks = x.float().reshape(rows, k // block, block)
    block_amax = blocks.abs().amax(-1)
    scales = (block_amax * global_scale / FP4_MAX).clamp(max=FP8_MAX).to(torch.float8_e4m3fn)
    step = scales.float() / global_scale
    scaled = blocks / step.clamp(min=1e-30).unsqueeze(-1)
    grid = torch.tensor(_E2M1, device=x.device)
    index = (scaled.abs().unsqueeze(-1) - grid).abs().argmin(-1)
    sign = (scaled < 0).to(torch.uint8)
    codes = (index.to(torch.uint8) | (sign << 3)).reshape(rows, k)
    packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
    values = grid[index] * torch.where(scaled < 0, -1.0, 1.0)
    dequant = (values * step.unsqueeze(-1)).reshape(rows, k)
    return packed, scales, global_scale, dequant


def _to_blocked(torch, scales):
    """Block scales in the 128x4 tiled layout cuBLAS/CUTLASS read for NVFP4."""
    rows, cols = scales.shape
    pad_rows = -(-rows // 128) * 128
    pad_cols = -(-cols // 4) * 4
    padded = torch.zeros(pad_rows, pad_cols, dtype=scales.dtype, device=scales.device)
    padded[:rows, :cols] = scales
    blocks = padded.view(pad_rows // 128, 128, pad_cols // 4, 4).permute(0, 2, 1, 3)
    return blocks.reshape(-1, 4, 32, 4).transpose(1, 2).reshape(-1, 32, 16).flatten()


def run_torch_nvfp4(ctx, op, m):
    torch = ctx['torch']
    if not hasattr(torch, 'float4_e2m1fn_x2'):
        raise Skip('this torch has no float4_e2m1fn_x2 (NVFP4)')
    a, a_scales, a_gs, a_deq = _fp4_quant(torch, _randn(ctx, m, GEMM_NK))
    b, b_scales, b_gs, b_deq = _fp4_quant(torch, _randn(ctx, GEMM_NK, GEMM_NK))
    a4, b4 = a.view(torch.float4_e2m1fn_x2), b.view(torch.float4_e2m1fn_x2).t()
    sa, sb = _to_blocked(torch, a_scales), _to_blocked(torch, b_scales)

    def gemm():
        result = op(a4, b4, sa, sb, out_dtype=torch.bfloat16)
        return result[0] if isinstance(result, tuple) else result
    # Block scales carry the global scales: the product is scaled back once.
    out = gemm().float() * (1.0 / (a_gs * b_gs))
    ref = a_deq @ b_deq.t()
    return out, ref, (2.0 * m * GEMM_NK * GEMM_NK, gemm)


def _fp4_operands(ctx, quant_name, m):
    """bf16 inputs quantized by the extension's own NVFP4 quantizer, and the
    fp32 reference of the same inputs dequantized by this file's quantizer
    (same format: e2m1, one e4m3 scale per 16 values, global scale)."""
    torch = ctx['torch']
    quant = ctx['module_attr'](quant_name)
    if quant is None:
        raise Skip('%s not in this version' % quant_name)
    x_a = _randn(ctx, m, GEMM_NK).to(torch.bfloat16)
    x_b = _randn(ctx, GEMM_NK, GEMM_NK).to(torch.bfloat16)
    gs_a = (FP8_MAX * FP4_MAX / x_a.abs().max().float()).reshape(1)
    gs_b = (FP8_MAX * FP4_MAX / x_b.abs().max().float()).reshape(1)
    a, sf_a = quant(x_a, gs_a)
    b, sf_b = quant(x_b, gs_b)
    ref = _fp4_quant(torch, x_a)[3] @ _fp4_quant(torch, x_b)[3].t()
    return a, sf_a, b, sf_b, 1.0 / (gs_a * gs_b), ref


def run_sgl_fp4(ctx, op, m):
    a, sf_a, b, sf_b, alpha, ref = _fp4_operands(ctx, 'scaled_fp4_quant', m)

    def gemm():
        return call(op, (a, b, sf_a, sf_b, alpha.reshape(1), ctx['torch'].bfloat16), {})
    return gemm(), ref, (2.0 * m * GEMM_NK * GEMM_NK, gemm)


def run_flashinfer_fp4(ctx, op, m, backend):
    a, sf_a, b, sf_b, alpha, ref = _fp4_operands(ctx, 'fp4_quantize', m)
    optional = {'alpha': alpha.reshape(()), 'out_dtype': ctx['torch'].bfloat16, 'backend': backend}

    def gemm():
        return call(op, (a, b.t(), sf_a, sf_b.t()), optional)
    return gemm(), ref, (2.0 * m * GEMM_NK * GEMM_NK, gemm)


RUNNERS = {
    'torch.fp8_scaled_mm': (run_torch_fp8, GEMM_SWEEP_M),
    'torch.nvfp4_scaled_mm': (run_torch_nvfp4, GEMM_SWEEP_M),
    'sgl_kernel.rmsnorm': (run_rmsnorm, SWEEP_M),
    'sgl_kernel.fused_add_rmsnorm': (run_fused_add_rmsnorm, SWEEP_M),
    'sgl_kernel.silu_and_mul': (run_silu_and_mul, SWEEP_M),
    'sgl_kernel.fp8_scaled_mm': (run_sgl_fp8, GEMM_SWEEP_M),
    'sgl_kernel.cutlass_scaled_fp4_mm': (run_sgl_fp4, GEMM_SWEEP_M),
    'flashinfer.rmsnorm': (run_rmsnorm, SWEEP_M),
    'flashinfer.silu_and_mul': (run_silu_and_mul, SWEEP_M),
    'flashinfer.top_k_sampling': (run_top_k_sampling, (1, 7, 128)),
    'flashinfer.mm_fp4.cudnn': (lambda ctx, op, m: run_flashinfer_fp4(ctx, op, m, 'cudnn'), GEMM_SWEEP_M),
    'flashinfer.mm_fp4.cutlass': (lambda ctx, op, m: run_flashinfer_fp4(ctx, op, m, 'cutlass'), GEMM_SWEEP_M),
    'flashinfer.mm_fp4.trtllm': (lambda ctx, op, m: run_flashinfer_fp4(ctx, op, m, 'trtllm'), GEMM_SWEEP_M),
}


def diagnose_error(text, extension, capability):
    """The reason of a failed call; 'no kernel image' names the missing architecture."""
    if NO_KERNEL_IMAGE in text and capability:
        major, minor = capability
        return '%s has no code for sm_%d%d (compute capability %d.%d): %s' % (extension, major, minor, major, minor, text)
    return text


def _cpu_unsupported(text):
    return ("with arguments from the 'CPU' backend" in text or 'CUDA tensors expected' in text
            or 'Expected all tensors to be on' in text or 'is not a CUDA tensor' in text)


def _files_under(path):
    count = 0
    if path and os.path.isdir(path):
        for dummy_root, dummy_dirs, files in os.walk(path):
            count += len(files)
    return count


def _summarise(failures):
    """[(m, kind, detail, error)] -> one reason: grouped by kind, the sizes listed,
    the worst error of a group named."""
    groups = []
    for m, kind, detail, error in failures:
        for group in groups:
            if group['kind'] == kind:
                group['sizes'].append(m)
                if error is not None and error > group['error']:
                    group.update(detail=detail, error=error)
                break
        else:
            groups.append({'kind': kind, 'sizes': [m], 'detail': detail, 'error': error or 0.0})
    return ' / '.join('%s at M=%s' % (group['detail'], ', '.join(str(m) for m in group['sizes'])) for group in groups)


def new_entry(name, device, device_name, tolerance, status='ok', reason=None, sizes=()):
    """One result entry, in the shape torch_verify documents (RETURN kernels)."""
    return {'check': name, 'set': name.split('.')[0], 'device': device, 'device_name': device_name,
            'status': status, 'reason': reason, 'relative_error': None, 'tolerance': tolerance, 'nonfinite': 0,
            'sizes': list(sizes), 'failed_sizes': [], 'seconds': None, 'compiled': None, 'compile_seconds': None,
            'tflops': None}


def run_one(torch, name, op, device, device_name, capability, tolerance, jit_dir, module_attr):
    runner, sweep = RUNNERS[name]
    extension = name.split('.')[0]
    dtype = torch.float16
    entry = new_entry(name, device, device_name, tolerance, sizes=sweep)
    if device != 'cpu':
        generator = torch.Generator(device=torch.device('cuda', device))
        dev = torch.device('cuda', device)
    else:
        generator = torch.Generator(device='cpu')
        dev = torch.device('cpu')
    generator.manual_seed(20260307)
    ctx = {'torch': torch, 'generator': generator, 'device': dev, 'dtype': dtype, 'module_attr': module_attr,
           'hidden': CPU_HIDDEN if device == 'cpu' else HIDDEN}
    failures = []
    worst = 0.0
    flops_total = 0.0
    gpu_seconds = 0.0
    before = _files_under(jit_dir) if jit_dir else None
    started = time.time()
    first_seconds = None
    for m in sweep:
        try:
            t0 = time.time()
            result = runner(ctx, op, m)
            _sync(torch, device)
            if first_seconds is None:
                first_seconds = time.time() - t0
            out, ref = result[0], result[1]
            extra = result[2] if len(result) > 2 else None
        except Skip as exc:
            entry.update(status='skipped', reason=str(exc))
            return entry
        except Exception as exc:  # pylint: disable=broad-except
            text = _error_text(exc)
            if device == 'cpu' and _cpu_unsupported(text):
                entry.update(status='skipped', reason='no CUDA device, and %s has no CPU kernel (%s)' % (name, text))
                return entry
            failures.append((m, 'error', diagnose_error(text, extension, capability), None))
            if NO_KERNEL_IMAGE in text:
                break  # the same for every M
            continue
        if extra == 'argmax':
            wrong = out.item()
            worst = max(worst, wrong)
            if wrong > tolerance:
                failures.append((m, 'argmax', 'top-k=1 sample differs from argmax in %.0f%% of rows' % (100 * wrong), wrong))
            continue
        if isinstance(extra, tuple) and device != 'cpu' and m == max(sweep):
            flops_total, gpu_seconds = _time_gemm(torch, extra[0], extra[1])
        nonfinite, error, zero = compare(torch, out, ref)
        if nonfinite:
            entry['nonfinite'] += nonfinite
            failures.append((m, 'nonfinite', '%d NaN/Inf of %d' % (nonfinite, out.numel()), None))
        elif zero:
            failures.append((m, zero, zero, None))
        else:
            worst = max(worst, error)
            if error > tolerance:
                failures.append((m, 'error_tol', 'relative error %.3g > tolerance %g' % (error, tolerance), error))
    entry['seconds'] = round(time.time() - started, 4)
    entry['relative_error'] = None if entry['nonfinite'] else round(worst, 6)
    if jit_dir is not None:
        compiled = _files_under(jit_dir) > before
        entry['compiled'] = compiled
        entry['compile_seconds'] = round(first_seconds, 3) if compiled and first_seconds is not None else None
    if gpu_seconds > 0:
        entry['tflops'] = round(flops_total / gpu_seconds / 1e12, 1)
    if failures:
        entry['status'] = 'failed'
        entry['failed_sizes'] = sorted(set(failure[0] for failure in failures))
        entry['reason'] = _summarise(failures)
    return entry


def _time_gemm(torch, flops, gemm, repeats=10):
    """(flops, seconds) of repeated runs of the GEMM alone on prepared inputs,
    at the sweep's largest M (small M measures launch overhead)."""
    gemm()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for dummy in range(repeats):
        gemm()
    end.record()
    end.synchronize()
    return flops * repeats, start.elapsed_time(end) / 1000.0


def skip_reason(set_name, module, op, path, device, cpu_ok, min_cc, capability):
    """Why a check cannot run on a device, or None when it can."""
    if module is None:
        return '%s is not installed' % set_name
    if isinstance(module, str):
        return '%s did not import: %s' % (set_name, module)
    if op is None:
        return '%s.%s is not in this version of %s' % (set_name, path, set_name)
    if device == 'cpu' and not cpu_ok:
        return 'no CUDA device'
    if min_cc and capability and tuple(capability) < tuple(min_cc):
        return 'compute capability %d.%d < %d.%d' % (tuple(capability) + tuple(min_cc))
    return None


def run_checks(torch, sets, modules, devices, tolerances=None, jit_dirs=None):
    """Every selected check on every device -> list of result entries.

    sets: check sets to run; modules: set name -> imported module or the import
    error text; devices: [(index or 'cpu', name, (major, minor) or None)];
    tolerances: name -> tolerance override; jit_dirs: set name -> JIT cache dir."""
    tolerances = tolerances or {}
    jit_dirs = jit_dirs or {}
    results = []
    import contextlib

    for name, set_name, path, min_cc, cpu_ok, tolerance in [entry for entry in CHECKS if entry[1] in sets]:
        tolerance = float(tolerances.get(name, tolerance))
        module = modules.get(set_name)
        op = resolve_op(module, path) if module is not None and not isinstance(module, str) else None
        for index, device_name, capability in devices:
            reason = skip_reason(set_name, module, op, path, index, cpu_ok, min_cc, capability)
            if reason:
                results.append(new_entry(name, index, device_name, tolerance, 'skipped', reason))
                continue
            with torch.cuda.device(index) if index != 'cpu' else contextlib.nullcontext():
                results.append(run_one(torch, name, op, index, device_name, capability, tolerance,
                                       jit_dirs.get(set_name), _attr_getter(module)))
            if index != 'cpu':
                torch.cuda.empty_cache()
    return results


def _attr_getter(module):
    def get(name):
        value = getattr(module, name, None)
        return value if callable(value) else None
    return get
