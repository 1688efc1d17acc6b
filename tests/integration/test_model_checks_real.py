"""The model check engine (module_utils/model_checks) on a real torch (the
2.13.0 CPU wheel): the reference MoE against a hand-computed case, the router,
and the MoE check through fake flashinfer fused MoE ops that are right, take
the gate/up halves in the wrong order, give NaN in a few rows only from
M=129, are wrong only with the autotuner on, or are missing from the prebuilt
JIT cache; and through a fake of sglang's triton runner (BF16, per-tensor and
block FP8) that is right, swapped or NaN from M=129; and the MoE check routing
as DeepSeek-V3 (grouped sigmoid with its bias, scaled) and Llama 4 (weight on
the input) do. The engine runs on CPU tensors here (a GPU runs it on the H200:
evidence)."""
import json
import os
import subprocess
import textwrap

from conftest import ROOT

ENGINE = textwrap.dedent("""\
    import contextlib, json, math, sys, types
    sys.path.insert(0, sys.argv[1])
    import torch
    from ansible_collections.gpufleet.inference.plugins.module_utils import model_checks as mc

    out = {}
    # hand-computed: one token, hidden 2, intermediate 1, two experts, top-1
    x = torch.tensor([[1.0, 2.0]])
    gate = torch.tensor([[[1.0, 0.0]], [[0.0, 1.0]]])
    up = torch.tensor([[[0.0, 1.0]], [[1.0, 0.0]]])
    down = torch.tensor([[[1.0], [2.0]], [[3.0], [0.0]]])
    weights, ids = mc.route(torch, torch.tensor([[0.0, 5.0]]), 1, True)
    out['route'] = [weights.tolist(), ids.tolist()]
    out['ref_e1'] = mc.reference_moe(torch, x, weights, ids, gate, up, down).tolist()
    weights2, ids2 = mc.route(torch, torch.tensor([[0.0, math.log(3.0)]]), 2, False)
    out['route2'] = [weights2.tolist(), ids2.tolist()]
    out['ref_both'] = mc.reference_moe(torch, x, weights2, ids2, gate, up, down).tolist()

    state = {'tuning': False}

    def fused(kind):
        def op(input, token_selected_experts, token_final_scales, fc1_expert_weights, fc2_expert_weights,
               output_dtype, quant_scales, output=None, use_fused_finalize=True):
            if kind == 'not_built':
                exc = type('MissingJITCacheError', (RuntimeError,), {})('JIT compilation is disabled')
                exc.spec = types.SimpleNamespace(name='fused_moe_90')
                raise exc
            inter = fc1_expert_weights.shape[1] // 2
            up_w, gate_w = fc1_expert_weights[:, :inter], fc1_expert_weights[:, inter:]
            if kind == 'swapped':
                up_w, gate_w = gate_w, up_w
            result = mc.reference_moe(torch, input, token_final_scales, token_selected_experts, gate_w, up_w,
                                      fc2_expert_weights)
            if kind == 'nan_from_129' and input.shape[0] >= 129:
                result[5:8] = float('nan')
            if kind == 'wrong_when_tuned' and state['tuning']:
                result = result * 1.5
            output.copy_(result.to(output_dtype))
            return output
        return op

    @contextlib.contextmanager
    def autotune(tune_mode=True):
        state['tuning'] = tune_mode
        try:
            yield
        finally:
            state['tuning'] = False

    shapes = {'tp': 1, 'hidden': 64, 'gemms': [{'layer': 'qkv', 'n': 96, 'k': 64}],
              'moe': {'experts': 16, 'top_k': 4, 'hidden': 64, 'intermediate': 32, 'renormalize': True}}
    for kind in ('right', 'swapped', 'nan_from_129', 'wrong_when_tuned', 'not_built'):
        flashinfer = types.ModuleType('flashinfer')
        flashinfer.fused_moe = types.SimpleNamespace(cutlass_fused_moe=fused(kind))
        flashinfer.autotune = autotune
        generator = torch.Generator(device='cpu')
        generator.manual_seed(mc.SEED)
        ctx = {'torch': torch, 'generator': generator, 'device': torch.device('cpu'), 'index': 'cpu',
               'device_name': 'cpu', 'capability': (9, 0), 'modules': {'flashinfer': flashinfer, 'torch': torch}}
        out[kind] = mc.run_one(torch, 'moe.flashinfer_cutlass.bf16', ctx, shapes, 0.02, True, True)
    # FP8 per tensor: the fake checks what flashinfer's binding checks (e4m3 input and
    # weights, [E] weight scales, 0-dim activation scales), then computes with them
    def fp8(kind):
        def op(input, token_selected_experts, token_final_scales, fc1_expert_weights, fc2_expert_weights,
               output_dtype, quant_scales, output=None):
            assert input.dtype == torch.float8_e4m3fn and fc1_expert_weights.dtype == torch.float8_e4m3fn
            w1a1, inv_a2, w2a2, a1 = quant_scales
            assert w1a1.shape == (fc1_expert_weights.shape[0],) and w2a2.shape == w1a1.shape, [t.shape for t in quant_scales]
            assert inv_a2.dim() == 0 and a1.dim() == 0, [t.shape for t in quant_scales]
            inter = fc1_expert_weights.shape[1] // 2
            w1 = fc1_expert_weights.float() * (w1a1 / a1).view(-1, 1, 1)
            w2 = fc2_expert_weights.float() * (w2a2 * inv_a2).view(-1, 1, 1)
            result = mc.reference_moe(torch, input.float() * a1, token_final_scales, token_selected_experts,
                                      w1[:, inter:], w1[:, :inter], w2)
            if kind == 'fp8_wrong':
                result = -result
            return result.to(output_dtype)
        return op
    for kind in ('fp8_right', 'fp8_wrong', 'fp8_block'):
        flashinfer = types.ModuleType('flashinfer')
        flashinfer.fused_moe = types.SimpleNamespace(cutlass_fused_moe=fp8(kind))
        flashinfer.autotune = autotune
        ctx = {'torch': torch, 'generator': generator, 'device': torch.device('cpu'), 'index': 'cpu',
               'device_name': 'cpu', 'capability': (9, 0), 'modules': {'flashinfer': flashinfer, 'torch': torch},
               'fp8_block': [128, 128] if kind == 'fp8_block' else None}
        out[kind] = mc.run_one(torch, 'moe.flashinfer_cutlass.fp8', ctx, shapes, 0.06, True, True)
    # numeric failures before a skip stay failures
    def wrong_then_not_built(*args, **kwargs):
        if state['tuning']:
            raise fused('not_built')(*args, **kwargs)
        return fused('swapped')(*args, **kwargs)
    flashinfer = types.ModuleType('flashinfer')
    flashinfer.fused_moe = types.SimpleNamespace(cutlass_fused_moe=wrong_then_not_built)
    flashinfer.autotune = autotune
    ctx = {'torch': torch, 'generator': generator, 'device': torch.device('cpu'), 'index': 'cpu',
           'device_name': 'cpu', 'capability': (9, 0), 'modules': {'flashinfer': flashinfer, 'torch': torch}}
    out['failed_then_skip'] = mc.run_one(torch, 'moe.flashinfer_cutlass.bf16', ctx, shapes, 0.02, True, True)
    ctx['modules'] = {'torch': torch}
    out['gemm'] = mc.run_one(torch, 'model.gemm.bf16', ctx, shapes, 0.01, False, True)
    # on a host without a GPU every model check is a skip that says why
    out['cpu'] = mc.run_checks(torch, {'torch': torch, 'flashinfer': None}, [('cpu', 'cpu', None)], shapes, 'none')

    # sglang's triton runner (fused_experts with a runner config and a top-k output, w13 gate half first) faked
    # on CPU tensors: right, gate/up swapped, NaN in a few rows from M=129; BF16, per-tensor FP8, FP8 blocks
    def triton(kind):
        def fused_experts(hidden_states, w1, w2, topk_output, moe_runner_config, use_fp8_w8a8=False, w1_scale=None,
                          w2_scale=None, a1_scale=None, a2_scale=None, block_shape=None):
            weights, ids, dummy = topk_output
            inter = w1.shape[1] // 2
            x, g1, g2 = hidden_states, w1, w2
            if use_fp8_w8a8 and block_shape:
                bn, bk = block_shape
                g1 = w1.float() * w1_scale.repeat_interleave(bn, 1).repeat_interleave(bk, 2)
                g2 = w2.float() * w2_scale.repeat_interleave(bn, 1).repeat_interleave(bk, 2)
                x = mc._fp8_groups(torch, hidden_states, bk)
            elif use_fp8_w8a8:
                assert a1_scale.shape == (1,) and w1_scale.shape == (w1.shape[0],), (a1_scale.shape, w1_scale.shape)
                g1, g2 = w1.float() * w1_scale.view(-1, 1, 1), w2.float() * w2_scale.view(-1, 1, 1)
                x = (hidden_states.float() / a1_scale).to(torch.float8_e4m3fn).float() * a1_scale
            gate, up = (g1[:, inter:], g1[:, :inter]) if kind == 'swapped' else (g1[:, :inter], g1[:, inter:])
            result = mc.reference_moe(torch, x, weights, ids, gate, up, g2)
            if kind == 'nan_from_129' and hidden_states.shape[0] >= 129:
                result[3:5] = float('nan')
            hidden_states.copy_(result.to(hidden_states.dtype))
            return hidden_states
        return types.SimpleNamespace(fused_experts=fused_experts, MoeRunnerConfig=lambda **kw: kw,
                                     StandardTopKOutput=lambda *a: a, context=contextlib.nullcontext)
    for kind in ('right', 'swapped', 'nan_from_129'):
        for check, block in (('moe.triton.bf16', None), ('moe.triton.fp8', None), ('moe.triton.fp8', [32, 32])):
            generator = torch.Generator(device='cpu')
            generator.manual_seed(mc.SEED)
            ctx = {'torch': torch, 'generator': generator, 'device': torch.device('cpu'), 'index': 'cpu',
                   'device_name': 'cpu', 'capability': (9, 0), 'modules': {'sglang': triton(kind), 'torch': torch},
                   'fp8_block': block}
            entry = mc.run_one(torch, check, ctx, shapes, mc.default_tolerances()[check], False, True)
            out['triton %s %s %s' % (kind, check, block)] = entry
    print(json.dumps(out))
    """)


def run_engine(venv, script):
    """The JSON that script printed last, run on the venv's torch."""
    proc = subprocess.run([os.path.join(venv, "bin", "python"), "-c", script, os.path.join(ROOT, ".collections")],
                          capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_reference_router_and_each_wrong_backend(torch_cpu_venv):
    out = run_engine(torch_cpu_venv, ENGINE)

    # router: softmax, top-1 renormalized -> weight 1 on expert 1
    assert out["route"] == [[[1.0]], [[1]]]
    # expert 1: gate x = 2, up x = 1, silu(2) * 1 = 1.7615942, down = [3, 0]
    silu2 = 2.0 / (1.0 + 2.718281828459045 ** -2.0)
    assert abs(out["ref_e1"][0][0] - 3 * silu2) < 1e-5 and out["ref_e1"][0][1] == 0.0
    # top-2 without renormalizing: softmax([0, ln 3]) = [0.25, 0.75]
    (w_hi, w_lo), (e_hi, e_lo) = out["route2"][0][0], out["route2"][1][0]
    assert (e_hi, e_lo) == (1, 0) and abs(w_hi - 0.75) < 1e-6 and abs(w_lo - 0.25) < 1e-6
    silu1 = 1.0 / (1.0 + 2.718281828459045 ** -1.0)
    # expert 0: gate x = 1, up x = 2 -> 2 silu(1), down [1, 2]
    expected = [0.75 * 3 * silu2 + 0.25 * 2 * silu1, 0.25 * 2 * 2 * silu1]
    assert all(abs(a - b) < 1e-5 for a, b in zip(out["ref_both"][0], expected)), out["ref_both"]

    right = out["right"]
    assert right["status"] == "ok", right
    assert right["autotune"] == ["off", "on"] and right["sizes"] == [1, 7, 128, 129, 1024]
    assert right["experts_checked"] == 16 and 0 < right["relative_error"] < 0.02  # bf16 rounding only

    swapped = out["swapped"]
    assert swapped["status"] == "failed" and swapped["reason"].startswith("relative error"), swapped
    assert "moe, M=1" in swapped["reason"]

    nan = out["nan_from_129"]
    assert nan["status"] == "failed" and nan["reason"].startswith("192 NaN/Inf of"), nan
    assert nan["failed_sizes"] == ["moe, M=129", "moe, M=1024", "moe, autotune on, M=129", "moe, autotune on, M=1024"]

    tuned = out["wrong_when_tuned"]
    assert tuned["status"] == "failed"
    assert all("autotune on" in where for where in tuned["failed_sizes"]) and len(tuned["failed_sizes"]) == 5

    built = out["not_built"]
    assert built["status"] == "skipped"
    assert built["reason"].startswith("flashinfer module fused_moe_90 is not built for this stack"), built
    # the skip names the input that builds it
    assert "flashinfer_aot_modules: [fused_moe_90]" in built["reason"], built

    assert out["fp8_right"]["status"] == "ok" and out["fp8_right"]["relative_error"] < 0.06, out["fp8_right"]
    assert out["fp8_wrong"]["status"] == "failed" and out["fp8_wrong"]["reason"].startswith("relative error 2")
    block = out["fp8_block"]
    assert block["status"] == "skipped" and "block-scaled (weight_block_size [128, 128])" in block["reason"], block

    mixed = out["failed_then_skip"]
    assert mixed["status"] == "failed", mixed
    assert "not run (flashinfer module fused_moe_90 is not built" in mixed["reason"], mixed["reason"]
    assert mixed["failed_sizes"][:5] == ["moe, M=1", "moe, M=7", "moe, M=128", "moe, M=129", "moe, M=1024"]

    gemm = out["gemm"]
    assert gemm["status"] == "ok" and gemm["shapes"] == [{"layer": "qkv", "n": 96, "k": 64}]
    assert gemm["sizes"] == [1, 7, 127, 128, 129, 1024, 2001]

    assert [(e["check"], e["status"], e["reason"]) for e in out["cpu"]] == [
        ("model.gemm.bf16", "skipped", "no CUDA device"),
        ("moe.flashinfer_cutlass.bf16", "skipped", "flashinfer is not installed"),
        ("moe.triton.bf16", "skipped", "sglang is not installed")]

    for check in ("moe.triton.bf16 None", "moe.triton.fp8 None", "moe.triton.fp8 [32, 32]"):
        right = out["triton right %s" % check]
        assert right["status"] == "ok" and right["autotune"] == ["off"], right
        assert 0 < right["relative_error"] < right["tolerance"], right
        swapped = out["triton swapped %s" % check]
        assert swapped["status"] == "failed" and swapped["reason"].startswith("relative error"), swapped
        nan = out["triton nan_from_129 %s" % check]
        assert nan["status"] == "failed" and nan["failed_sizes"] == ["moe, M=129", "moe, M=1024"], nan


ROUTED = textwrap.dedent("""\
    import json, sys, types
    sys.path.insert(0, sys.argv[1])
    import torch
    from ansible_collections.gpufleet.inference.plugins.module_utils import model_checks as mc

    seen = []

    def op(input, token_selected_experts, token_final_scales, fc1_expert_weights, fc2_expert_weights,
           output_dtype, quant_scales, output=None, use_fused_finalize=True):
        seen.append((token_selected_experts.clone(), token_final_scales.clone()))
        inter = fc1_expert_weights.shape[1] // 2
        result = mc.reference_moe(torch, input, token_final_scales, token_selected_experts,
                                  fc1_expert_weights[:, inter:], fc1_expert_weights[:, :inter], fc2_expert_weights)
        output.copy_(result.to(output_dtype))
        return output

    routers = {
        'deepseek_v3': {'scoring': 'sigmoid', 'n_group': 4, 'topk_group': 2, 'correction_bias': True,
                        'routed_scaling_factor': 2.5},
        'llama4': {'scoring': 'sigmoid', 'weight_on_input': True},
    }
    out = {}
    for family, routing in routers.items():
        top_k = 1 if routing.get('weight_on_input') else 4
        shapes = {'tp': 1, 'hidden': 64, 'gemms': [],
                  'moe': {'experts': 16, 'top_k': top_k, 'hidden': 64, 'intermediate': 32,
                          'renormalize': family == 'deepseek_v3', 'routing': routing}}
        flashinfer = types.ModuleType('flashinfer')
        flashinfer.fused_moe = types.SimpleNamespace(cutlass_fused_moe=op)
        generator = torch.Generator(device='cpu')
        generator.manual_seed(mc.SEED)
        ctx = {'torch': torch, 'generator': generator, 'device': torch.device('cpu'), 'index': 'cpu',
               'device_name': 'cpu', 'capability': (9, 0), 'modules': {'flashinfer': flashinfer, 'torch': torch}}
        del seen[:]
        entry = mc.run_one(torch, 'moe.flashinfer_cutlass.bf16', ctx, shapes, 0.02, False, True)
        ids = torch.cat([s[0] for s in seen]).long()
        weights = torch.cat([s[1] for s in seen])
        out[family] = {'entry': entry, 'left': sorted(ctx), 'groups': sorted(set((ids // 4).flatten().tolist())),
                       'groups_per_token': int((ids // 4).sort(dim=1)[0].diff(dim=1).ne(0).sum(dim=1).max()) + 1,
                       'weight_sum': [float(weights.sum(dim=1).min()), float(weights.sum(dim=1).max())],
                       'weights': sorted(set(weights.flatten().tolist()))[:3]}
    print(json.dumps(out))
    """)


def test_the_moe_check_routes_as_the_family_does(torch_cpu_venv):
    out = run_engine(torch_cpu_venv, ROUTED)
    v3 = out["deepseek_v3"]
    assert v3["entry"]["status"] == "ok" and v3["entry"]["experts_checked"] == 16, v3["entry"]
    # every token's 4 experts lie within its 2 groups (of 4), the renormalized weights sum to 2.5
    assert v3["groups_per_token"] <= 2 and len(v3["groups"]) == 4
    assert abs(v3["weight_sum"][0] - 2.5) < 1e-4 and abs(v3["weight_sum"][1] - 2.5) < 1e-4
    llama4 = out["llama4"]
    assert llama4["entry"]["status"] == "ok", llama4["entry"]
    # the weight went into the input: the op sees weights of one
    assert llama4["weights"] == [1.0]
    # the bias is not left behind for the next check
    assert "moe_bias" not in v3["left"] and "moe_weights" not in v3["left"]


# tests/unit's router cases need torch, which the unit venv lacks (there they
# are skipped): the same functions run here in the CPU torch venv, with a
# stand-in for the two names of pytest they use (a fixture decorator, and
# importorskip, here a plain import: torch must be there).
ROUTER_CASES = textwrap.dedent("""
    import inspect, json, sys, types
    sys.path.insert(0, sys.argv[1])
    sys.path.insert(0, sys.argv[2])
    sys.modules["pytest"] = types.SimpleNamespace(fixture=lambda **kw: (lambda f: f), importorskip=__import__)
    import torch
    import test_model_routing as cases
    ran = []
    for name, case in sorted(vars(cases).items()):
        if name.startswith("test_") and callable(case):
            case(*[torch for _ in inspect.signature(case).parameters])
            ran.append(name)
    print(json.dumps(ran))
""")


def test_the_unit_router_cases_run_on_torch(torch_cpu_venv):
    here = os.path.join(ROOT, "tests", "unit", "plugins", "module_utils")
    proc = subprocess.run([os.path.join(torch_cpu_venv, "bin", "python"), "-c", ROUTER_CASES,
                           os.path.join(ROOT, ".collections"), here], capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ran = json.loads(proc.stdout.strip().splitlines()[-1])
    # every case of the module, the seven that need torch among them
    assert len(ran) == 9 and "test_sigmoid_grouped_top_k_with_the_correction_bias_and_scaling" in ran, ran
