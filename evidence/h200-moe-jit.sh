#!/usr/bin/env bash
# The builder's side of the flashinfer JIT cache, on the H200 test machine:
# compiles flashinfer 0.7.2.post1's modules the model checks call (the CUTLASS
# fused MoE for SM90, then the norm, activation and sampling modules) once,
# from a cold workspace, timed, and packs the built shared objects with a
# manifest of their key (flashinfer, torch, CUDA, arch) into
# $OUT/jit-cache.tar.zst: the artifact fanned out to every host.
#   start   - unpack flashinfer, start the compile in the background (setsid,
#             so it outlives this call), wait for it up to WAIT seconds
#   collect - wait again (the machine must still be warm), then pack
# Both phases pack when the compile is done. Run from the repository root.
set -uo pipefail
OUT=${OUT:?set OUT}
PHASE=${1:?start or collect}
WAIT=${WAIT:-560}
exec > >(tee -a "$OUT/h200-moe-jit-$PHASE.log") 2>&1
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}
export PATH=/tmp/site/bin:$CUDA_HOME/bin:$PATH PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
export FLASHINFER_WORKSPACE_BASE=/tmp/fi-builder
STATE=/tmp/moe-jit
echo "== $PHASE $(date -u)"
if [ "$PHASE" = start ]; then
  nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
  "$CUDA_HOME/bin/nvcc" --version | tail -1; nproc
  s=$(date +%s); bash .device/unpack.sh || exit 1; echo "unpack: $(( $(date +%s) - s )) s"
  rm -rf "$FLASHINFER_WORKSPACE_BASE" "$STATE"; mkdir -p "$FLASHINFER_WORKSPACE_BASE" "$STATE"
  setsid nohup python3 evidence/h200-moe-jit.py build "$STATE" > "$STATE/build.log" 2>&1 < /dev/null &
  echo $! > "$STATE/pid"; echo "builder started, pid $!"
fi
deadline=$(( $(date +%s) + WAIT ))
while [ ! -e "$STATE/done.json" ] && [ "$(date +%s)" -lt "$deadline" ] && kill -0 "$(cat "$STATE/pid")" 2>/dev/null; do
  sleep 15
  echo "$(date -u +%T) objects: $(find "$FLASHINFER_WORKSPACE_BASE" -name '*.o' 2>/dev/null | wc -l), nvcc running: $(pgrep -c cicc || true)"
done
tail -20 "$STATE/build.log"
if [ -e "$STATE/done.json" ]; then
  cat "$STATE/done.json"
  python3 evidence/h200-moe-jit.py pack "$STATE" "$OUT/jit-cache.tar.zst"
  cp "$STATE/done.json" "$OUT/build.json"
else
  echo "compile still running at $(date -u +%T)"
fi
sed -i "s#$PWD#<repo>#g; s#$OUT#\$OUT#g" "$OUT"/*.log "$OUT"/*.json 2>/dev/null
