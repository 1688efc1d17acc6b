#!/usr/bin/env bash
# GPU evidence for the model checks (torch_verify model=...), on the H200 test
# machine from the repository root, no network, in one call (about 5 min):
#   - the real flashinfer-python 0.7.2.post1 (.device, h200-device-prep.sh);
#   - the probe torch_verify sends, with the model checks of shipped profiles
#     at several TP sizes: the layers' GEMMs at the shard shapes (bf16 via
#     cuBLAS, per-tensor FP8 via torch._scaled_mm), M 1..2001; the MoE checks
#     with gpufleet_model_jit cache_only, so a fused MoE module that is not in
#     the prebuilt cache is reported as not built instead of compiled;
#   - a GEMM made wrong on purpose from M=129 (torch.matmul patched in the
#     probe's interpreter), which the model checks must fail, naming the
#     layer and the sizes;
#   - bench/model_checks_overhead.py: with the model against without it, warm.
# Everything goes to $OUT.
set -uo pipefail
OUT=${OUT:?set OUT}
exec > >(tee "$OUT/h200-model-verify.log") 2>&1
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0} PYTHONUNBUFFERED=1
echo "== machine"; date -u
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
bash .device/unpack.sh || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$CUDA_HOME/bin:$PATH
export FLASHINFER_WORKSPACE_BASE=/tmp/fi-verify
mkdir -p .collections/ansible_collections/gpufleet && ln -sfn "$PWD" .collections/ansible_collections/gpufleet/inference
probe() {  # probe NAME MODEL TP [wrong]
  python3 - "$@" <<'PY'
import json, sys, time
sys.path.insert(0, '.collections')
from ansible_collections.gpufleet.inference.plugins.module_utils import model_profile, model_verify
from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import parse_probe_output, probe_argv
import subprocess
name, model, tp = sys.argv[1], sys.argv[2], int(sys.argv[3])
wrong = len(sys.argv) > 4
resolved = model_profile.resolve(model, tp)
params = {'imports': ['flashinfer'], 'kernels': False, 'timeout': 900, 'packages': False, 'markers': [],
          'model_shapes': resolved['shapes'], 'model_precision': resolved['profile']['quantization']['method'],
          'model_jit': 'cache_only'}
argv = probe_argv(sys.executable, params, isolated=False)
if wrong:  # torch.matmul wrong for M >= 129, patched before the probe runs
    argv[2] = ('import torch\n_mm = torch.matmul\n'
               'def _wrong(a, b, *k, **kw):\n    out = _mm(a, b, *k, **kw)\n'
               '    return out * 1.5 if a.dim() == 2 and a.shape[0] >= 129 else out\n'
               'torch.matmul = _wrong\n') + argv[2]
started = time.time()
proc = subprocess.run(argv, capture_output=True, text=True)
facts = parse_probe_output(proc.returncode, proc.stdout, 900)
judged = dict(resolved, name=model, precision=params['model_precision'], tp=tp,
              families=[f for f, need in model_verify.NEEDED if need(resolved['profile'])])
mismatches = model_verify.judge(judged, facts, {'mode': 'auto'}, True)
print('%s: %s tp %d in %.1f s' % (name, model, tp, time.time() - started))
for e in facts['model_checks']:
    print('  %-30s %-8s err %-10s %6ss  %s' % (e['check'], e['status'], e.get('relative_error'), e.get('seconds'),
                                              e.get('reason') or ''))
print('  backends: %s flags %s' % (facts['backends']['status'], facts['backends'].get('args')))
for m in mismatches:
    print('  mismatch: %s' % m)
json.dump({'facts': {k: facts[k] for k in ('model_checks', 'model_checks_error', 'backends', 'devices')},
           'mismatches': mismatches}, open('%s/%s.json' % (__import__('os').environ['OUT'], name), 'w'), indent=1)
PY
}
echo "== model checks"
probe qwen3-tp1 qwen3-30b-a3b 1
probe qwen3-tp2 qwen3-30b-a3b 2
probe qwen3-fp8-tp2 qwen3-30b-a3b-fp8 2
probe mixtral-tp8 mixtral-8x7b 8
echo "== a GEMM made wrong on purpose from M=129"
probe wrong-gemm qwen3-30b-a3b 1 wrong
echo "== bench: with the model vs without, warm"
timeout 400 python3 bench/model_checks_overhead.py --python python3 --model qwen3-30b-a3b --runs 3 --json "$OUT/bench.json"
echo "== done $(date -u)"
sed -i "s#$PWD#<repo>#g; s#$OUT#\$OUT#g" "$OUT"/*.log "$OUT"/*.json
