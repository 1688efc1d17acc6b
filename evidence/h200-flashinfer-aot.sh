#!/usr/bin/env bash
# GPU evidence for flashinfer's JIT modules built once and placed on a host
# (the flashinfer role's flashinfer_aot_modules), on the H200 test machine from
# the repository root, no network, in one call (about 6 min):
#   - two copies of the real flashinfer-python 0.7.2.post1 (.device, made by
#     h200-device-prep.sh): the builder's and the host's;
#   - the builder compiles norm, silu_and_mul and sampling with the program the
#     flashinfer_aot module sends (plugins/module_utils/flashinfer_aot.py), with
#     no GPU visible (CUDA_VISIBLE_DEVICES empty), for 9.0a;
#   - the host refuses an artifact with one byte changed (nothing placed), then
#     installs the good one (checked by sha256), then again (no change);
#   - flashinfer's kernel checks on the host with FLASHINFER_DISABLE_JIT=1 and
#     an empty JIT workspace: they load the placed modules, nothing compiles;
#   - a module taken away: the check that needs it fails with flashinfer's
#     "JIT compilation is disabled" instead of compiling, and status says the
#     placed modules are no longer intact.
# Everything goes to $OUT.
set -uo pipefail
OUT=${OUT:?set OUT}
exec > >(tee "$OUT/h200-flashinfer-aot.log") 2>&1
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0} PYTHONUNBUFFERED=1
now() { date +%s.%N; }
secs() { python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$2"; }
echo "== machine"; date -u; nproc
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
"$CUDA_HOME/bin/nvcc" --version | tail -2
bash .device/unpack.sh || exit 1
mv /tmp/site /tmp/site-builder
bash .device/unpack.sh || exit 1
mkdir -p .collections/ansible_collections/gpufleet && ln -sfn "$PWD" .collections/ansible_collections/gpufleet/inference
AOT=$(cat plugins/module_utils/flashinfer_aot.py)
MODULES='["norm", "silu_and_mul", "sampling"]'
COMMON='"modules": '$MODULES', "arch_list": ["9.0a"], "cuda_version": "13.0"'
aot() {  # aot SITE JSON: the program the module runs, in SITE's interpreter
  PYTHONPATH=$1 PATH=$1/bin:$CUDA_HOME/bin:$PATH python3 -c "$AOT" "$2"
}

echo "== builder: cold build, no GPU visible"
t0=$(now)
CUDA_VISIBLE_DEVICES='' aot /tmp/site-builder '{"action": "build", '"$COMMON"', "out": "/tmp/artifact", "workspace": "/tmp/ws-builder"}' \
  | tee "$OUT/build.json"
t1=$(now); echo "builder: $(secs "$t0" "$t1") s"
ls -l /tmp/artifact; du -sh /tmp/artifact

echo "== host: an artifact with one byte changed is refused, nothing placed"
cp -r /tmp/artifact /tmp/artifact-bad
printf '\x00' | dd of=/tmp/artifact-bad/norm.so bs=1 seek=4096 conv=notrunc status=none
aot /tmp/site '{"action": "install", '"$COMMON"', "src": "/tmp/artifact-bad", "key": "evidence"}'
ls /tmp/site/flashinfer/data/aot 2>&1 || true

echo "== host: install, then again"
t0=$(now)
aot /tmp/site '{"action": "install", '"$COMMON"', "src": "/tmp/artifact", "key": "evidence"}' | tee "$OUT/install.json"
t1=$(now); echo "install: $(secs "$t0" "$t1") s"
aot /tmp/site '{"action": "install", '"$COMMON"', "src": "/tmp/artifact", "key": "evidence"}'
aot /tmp/site '{"action": "status"}'

echo "== host: flashinfer's kernel checks, FLASHINFER_DISABLE_JIT=1, empty JIT workspace"
rm -rf /tmp/ws-host
t0=$(now)
FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/ws-host EVIDENCE_IMPORTS=flashinfer PYTHONPATH=/tmp/site \
  python3 evidence/h200-kernel-checks.py aot-host "$OUT/aot-host.json" \
  flashinfer.rmsnorm flashinfer.silu_and_mul flashinfer.top_k_sampling
t1=$(now); echo "checks with the placed modules: $(secs "$t0" "$t1") s"
echo "objects or modules compiled in the host's JIT workspace: $(find /tmp/ws-host \( -name '*.so' -o -name '*.o' \) 2>/dev/null | wc -l)"

echo "== host: sampling taken away"
rm -rf /tmp/site/flashinfer/data/aot/sampling /tmp/ws-host
FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/ws-host EVIDENCE_IMPORTS=flashinfer PYTHONPATH=/tmp/site \
  python3 evidence/h200-kernel-checks.py aot-missing "$OUT/aot-missing.json" \
  flashinfer.rmsnorm flashinfer.silu_and_mul flashinfer.top_k_sampling
echo "objects or modules compiled in the host's JIT workspace: $(find /tmp/ws-host \( -name '*.so' -o -name '*.o' \) 2>/dev/null | wc -l)"
aot /tmp/site '{"action": "status"}'
echo "== done $(date -u)"
sed -i "s#$PWD#<repo>#g; s#$OUT#\$OUT#g" "$OUT"/*.log "$OUT"/*.json
