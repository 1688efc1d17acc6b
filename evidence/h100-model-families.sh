#!/usr/bin/env bash
# GPU evidence for the model families gpufleet_model reads since the MLA,
# shared-expert and routing profiles (deepseek-v3, kimi-k2, gpt-oss-20b,
# llama-4-scout), on the H100/H200 test machine, from the repository root,
# in one call, with the machine's own torch (2.11.0+cu130) and nothing staged:
#   - the probe torch_verify sends, with the model checks at each profile's
#     shard shapes (the MLA projections, shared experts, dense MLP, o): the
#     layers' GEMMs (bf16 via cuBLAS; FP8 128x128 blocks where the profile is
#     block FP8), M 1..2001, against the fp32 reference; gpt-oss-20b is MXFP4:
#     its attention GEMMs run in bf16, its experts' GEMMs and MoE are skipped
#     ("no MXFP4 check on this collection yet");
#   - the MoE checks are not run here: they need flashinfer's fused MoE
#     (compiled, cache_only: not built here) or sglang's triton runner (the
#     sglang stack is not staged): each is reported as skipped with that reason;
#   - a GEMM made wrong on purpose from M=129 (torch.matmul patched in the
#     probe's interpreter), which the model checks must fail, naming the layer.
# Everything goes to $OUT.
set -uo pipefail
OUT=${OUT:?set OUT}
exec > >(tee "$OUT/h100-model-families.log") 2>&1
export PYTHONUNBUFFERED=1
echo "== machine"; date -u
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.used --format=csv,noheader
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
mkdir -p .collections/ansible_collections/gpufleet && ln -sfn "$PWD" .collections/ansible_collections/gpufleet/inference
probe() {  # probe NAME MODEL TP [wrong]
  timeout 240 python3 - "$@" <<'PY'
import json, os, subprocess, sys, time
sys.path.insert(0, '.collections')
from ansible_collections.gpufleet.inference.plugins.module_utils import model_profile, model_verify
from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import parse_probe_output
from ansible_collections.gpufleet.inference.plugins.module_utils.probe_program import probe_argv
name, model, tp = sys.argv[1], sys.argv[2], int(sys.argv[3])
wrong = len(sys.argv) > 4
resolved = model_profile.resolve(model, tp)
quant = resolved['profile']['quantization']
params = {'imports': [], 'kernels': False, 'timeout': 900, 'packages': False, 'markers': [],
          'model_shapes': resolved['shapes'], 'model_precision': quant['method'], 'model_jit': 'cache_only',
          'model_fp8_block': quant.get('block')}
argv = probe_argv(sys.executable, params, isolated=False)
if wrong:  # torch.matmul wrong for M >= 129, patched before the probe runs
    argv[-2] = ('import torch\n_mm = torch.matmul\n'
                'def _wrong(a, b, *k, **kw):\n    out = _mm(a, b, *k, **kw)\n'
                '    return out * 1.5 if a.dim() == 2 and a.shape[0] >= 129 else out\n'
                'torch.matmul = _wrong\n') + argv[-2]
started = time.time()
proc = subprocess.run(argv, capture_output=True, text=True)
try:
    facts = parse_probe_output(proc.returncode, proc.stdout, 900)
except Exception:
    print(proc.stderr[-4000:])
    raise
judged = dict(resolved, name=model, precision=quant['method'], tp=tp,
              families=[f for f, need in model_verify.NEEDED if need(resolved['profile'])])
mismatches = model_verify.judge(judged, facts, {'mode': 'auto'}, True)
print('%s: %s tp %d (%s) in %.1f s' % (name, model, tp, quant['method'], time.time() - started))
print('  shapes: %s' % ', '.join('%s %dx%d' % (g['layer'], g['n'], g['k']) for g in resolved['shapes']['gemms']))
print('  moe: %s' % json.dumps(resolved['shapes'].get('moe'), sort_keys=True))
for e in facts['model_checks']:
    print('  %-30s %-8s err %-10s %6ss  %s' % (e['check'], e['status'], e.get('relative_error'), e.get('seconds'),
                                              (e.get('reason') or '')[:240]))
for m in mismatches:
    print('  mismatch: %s' % m)
with open(os.path.join(os.environ['OUT'], name + '.json'), 'w') as handle:
    json.dump({'facts': {k: facts.get(k) for k in ('model_checks', 'model_checks_error', 'backends', 'devices')},
               'mismatches': mismatches}, handle, indent=1, sort_keys=True)
PY
}
probe kimi-k2-tp8 kimi-k2 8
probe deepseek-v3-tp8 deepseek-v3 8
probe gpt-oss-20b-tp1 gpt-oss-20b 1
probe llama-4-scout-tp4 llama-4-scout 4
probe kimi-k2-tp8-wrong kimi-k2 8 wrong
echo "== done $(date -u)"
sed -i "s#$PWD#<repo>#g; s#$OUT#\$OUT#g" "$OUT"/*.log "$OUT"/*.json
