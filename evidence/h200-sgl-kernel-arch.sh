#!/usr/bin/env bash
# GPU evidence for the sgl-kernel arch rules and the arch audit, run on the H200
# test machine from the repository root, no network:
#   - the fixture (tests/fixtures/sgl_kernel_fixture, which carries upstream's
#     trap: torch's arch flags cleared, a hard-coded -gencode list) built by the
#     role, -c local, for the arch list gpu_facts derives (9.0a on an H200), with
#     the rules: the audit passes, cuobjdump shows sm_90a only, the kernels run
#     and match fp32 (torch_verify's kernel checks);
#   - the same without the gencode rule: the audit refuses the wheel before
#     install, naming the shared object and 9.0a; the installed build stays;
#   - bench/sgl_kernel_arch_build.py: the rules' single target against the
#     hard-coded list with upstream's default options, build time side by side.
# Needs in ./.whl: ansible-core 2.19.14 and what the machine lacks of its
# dependencies (resolvelib, cryptography, cffi, pycparser). The machine's own
# cmake, ninja and scikit-build-core build it (sgl_kernel_build_requirements: []).
set -uo pipefail
OUT=${OUT:?set OUT}
exec > >(tee "$OUT/h200-sgl-kernel-arch.log") 2>&1
ROOT=$PWD
PY=$(command -v python3)
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
export ANSIBLE_CONFIG=$ROOT/ansible.cfg ANSIBLE_NOCOLOR=1 ANSIBLE_LOCAL_TEMP=/tmp/ansible-local
export GPUFLEET_CACHE_DIR=/tmp/gpufleet-cache
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}

echo "== machine"
date -u
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
"$CUDA_HOME/bin/nvcc" --version | tail -1
VENV=$("$PY" -c 'import sys; print(sys.prefix)')
"$PY" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__)'

echo "== fixture as a local git repository"
SRC=/tmp/sgl-kernel-fixture-repo
rm -rf "$SRC" && mkdir -p "$SRC"
cp -r tests/fixtures/sgl_kernel_fixture "$SRC/sgl-kernel"
git -C "$SRC" init -q && git -C "$SRC" add -A
git -C "$SRC" -c user.email=evidence@gpufleet.invalid -c user.name=evidence commit -q -m fixture
COMMIT=$(git -C "$SRC" rev-parse HEAD)
cat > /tmp/vars.json <<JSON
{"sgl_kernel_repo": "$SRC", "sgl_kernel_ref": "$COMMIT", "sgl_kernel_venv": "$VENV",
 "sgl_kernel_python": "$PY", "sgl_kernel_cuda_home": "$CUDA_HOME",
 "sgl_kernel_system_packages": [], "sgl_kernel_build_requirements": [], "sgl_kernel_poll_interval": 5,
 "sgl_kernel_work_dir": "/tmp/gpufleet-sgl-kernel-work"}
JSON
# the role's rules without gencode-exactly-the-arch-list
python3 - <<'PYEOF'
import json, yaml
rules = yaml.safe_load(open("roles/sgl_kernel/defaults/main.yml"))["sgl_kernel_patch_rules"]
extra = json.load(open("/tmp/vars.json"))
extra["sgl_kernel_patch_rules"] = [r for r in rules if r["name"] != "gencode-exactly-the-arch-list"]
json.dump(extra, open("/tmp/vars-no-rule.json", "w"))
PYEOF
INV=/tmp/inventory.yml
printf 'all:\n  hosts:\n    h200:\n      ansible_connection: local\n      ansible_python_interpreter: %s\n' "$PY" > "$INV"

echo "== 1. with the rules: build for the GPU's arch list, audit, install, ABI check"
start=$(date +%s)
timeout 200 ansible-playbook -i "$INV" roles/sgl_kernel/tests/deploy_gpu.yml -e @/tmp/vars.json > "$OUT/deploy-rules.log" 2>&1
echo "deploy rc=$? in $(( $(date +%s) - start )) s"
grep -E "sgl-kernel build|arch audit|ABI key|^h200 " "$OUT/deploy-rules.log" | cut -c1-300 | head -20
for d in "$GPUFLEET_CACHE_DIR"/artifacts/sgl_kernel/*/; do
  case "$d" in *_sources*) ;; *) [ -f "$d/build.json" ] && cp "$d/build.json" "$OUT/build-rules.json" ;; esac
done
python3 -c 'import json; r = json.load(open("'"$OUT"'/build-rules.json")); print(json.dumps(r["arch_audit"], indent=1)); print("patches:", r["patches_applied"])'
cp "$VENV/gpufleet-sgl_kernel.json" "$OUT/marker-rules.json" && cat "$OUT/marker-rules.json"
for so in "$VENV"/lib/python3.12/site-packages/sgl_kernel/*.so; do echo "$so"; "$CUDA_HOME/bin/cuobjdump" --list-elf "$so" | sort -u; done
EVIDENCE_IMPORTS=sgl_kernel timeout 60 python3 evidence/h200-kernel-checks.py rules "$OUT/kernels-rules.json" \
  sgl_kernel.rmsnorm sgl_kernel.fused_add_rmsnorm sgl_kernel.silu_and_mul | grep -E "^==|sgl_kernel|verification|^  -"

echo "== 2. without the gencode rule: the audit refuses the wheel before install"
start=$(date +%s)
timeout 200 ansible-playbook -i "$INV" roles/sgl_kernel/tests/deploy_gpu.yml -e @/tmp/vars-no-rule.json > "$OUT/deploy-no-rule.log" 2>&1
echo "deploy rc=$? in $(( $(date +%s) - start )) s (expected non-zero)"
grep -E "refused|sgl-kernel build|^h200 " "$OUT/deploy-no-rule.log" | cut -c1-600 | head -10
cmp "$VENV/gpufleet-sgl_kernel.json" "$OUT/marker-rules.json" && echo "marker unchanged: the installed build is the audited one"
ls "$GPUFLEET_CACHE_DIR"/artifacts/sgl_kernel/

echo "== 3. bench: build time, rules' single target vs the hard-coded list"
A=$(for t in "$GPUFLEET_CACHE_DIR"/artifacts/sgl_kernel/_sources/tree-*/sgl-kernel; do grep -q gpufleet: "$t/CMakeLists.txt" && grep -q GPUFLEET_GENCODE "$t/CMakeLists.txt" && echo "$t"; done | head -1)
B=$(for t in "$GPUFLEET_CACHE_DIR"/artifacts/sgl_kernel/_sources/tree-*/sgl-kernel; do grep -q GPUFLEET_GENCODE "$t/CMakeLists.txt" || echo "$t"; done | head -1)
echo "A=$A B=$B"
timeout 200 python3 bench/sgl_kernel_arch_build.py --python python3 --cuda-home "$CUDA_HOME" --pairs 1 --jobs 16 \
  --src-a "$A" --define-a "GPUFLEET_GENCODE_FLAGS=-gencode=arch=compute_90a,code=sm_90a" --define-a ENABLE_BELOW_SM90=OFF \
  --src-b "$B" --define-b ENABLE_BELOW_SM90=ON --json "$OUT/bench-arch-build.json"
echo "bench rc=$?"
echo "== done $(date -u)"
# the logs name the checkout and $OUT, not this machine's paths
sed -i "s#$ROOT#<repo>#g; s#$OUT#\$OUT#g" "$OUT"/*.log "$OUT"/*.json
