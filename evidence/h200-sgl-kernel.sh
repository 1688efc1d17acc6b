#!/usr/bin/env bash
# GPU evidence for the sgl_kernel role (issue 6), run on the H200 test machine
# from the repository root, no network:
#   - builds the project's fixture (tests/fixtures/sgl_kernel_fixture) with the
#     role, -c local, for the arch list gpu_facts derives (9.0a on an H200),
#     against the machine's torch (2.11.0+cu130) and CUDA 13.0;
#   - imports it, runs its CUDA kernel and its sm_90a-only (FA3-like) kernel on
#     the GPU, checks the result against torch;
#   - lists the cubins of the built .so (cuobjdump) and re-runs the role (no change).
# Needs in ./.whl: ansible-core and its missing dependencies, plus the build
# requirements of the fixture for cp312: scikit-build-core==0.11.6,
# cmake==3.31.10, ninja==1.13.0, wheel==0.45.1, packaging, pathspec.
# The machine needs g++ and the Python headers of the torch interpreter.
# Everything goes to $OUT.
set -uo pipefail
OUT=${OUT:?set OUT}
exec > >(tee "$OUT/h200-sgl-kernel.log") 2>&1
ROOT=$PWD
PY=$(command -v python3)
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl 2>/dev/null || true
export PYTHONPATH=/tmp/site
export PATH=/tmp/site/bin:$PATH
export ANSIBLE_CONFIG=$ROOT/ansible.cfg ANSIBLE_NOCOLOR=1 ANSIBLE_LOCAL_TEMP=/tmp/ansible-local
export GPUFLEET_CACHE_DIR=/tmp/gpufleet-cache
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}

echo "== machine"
date -u
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
"$CUDA_HOME/bin/nvcc" --version | tail -2
VENV=$("$PY" -c 'import sys; print(sys.prefix)')
"$PY" -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
command -v g++ && g++ --version | head -1 || echo "NO g++: the build will fail"
"$PY" -c 'import sysconfig, os; h = sysconfig.get_paths()["include"]; print("Python.h", os.path.exists(h + "/Python.h"), h)'

echo "== fixture as a local git repository"
SRC=/tmp/sgl-kernel-fixture-repo
rm -rf "$SRC" && mkdir -p "$SRC"
cp -r tests/fixtures/sgl_kernel_fixture "$SRC/sgl-kernel"
git -C "$SRC" init -q && git -C "$SRC" add -A
git -C "$SRC" -c user.email=evidence@gpufleet.invalid -c user.name=evidence commit -q -m fixture
COMMIT=$(git -C "$SRC" rev-parse HEAD)

cat > /tmp/sgl-kernel-vars.json <<JSON
{"sgl_kernel_repo": "$SRC", "sgl_kernel_ref": "$COMMIT", "sgl_kernel_venv": "$VENV",
 "sgl_kernel_python": "$PY", "sgl_kernel_cuda_home": "$CUDA_HOME",
 "sgl_kernel_system_packages": [], "sgl_kernel_poll_interval": 5,
 "sgl_kernel_work_dir": "/tmp/gpufleet-sgl-kernel-work",
 "sgl_kernel_pip_args": ["--no-index", "--find-links", "$ROOT/.whl"]}
JSON
INV=/tmp/sgl-kernel-inventory.yml
printf 'all:\n  hosts:\n    h200:\n      ansible_connection: local\n      ansible_python_interpreter: %s\n' "$PY" > "$INV"

echo "== deploy (build for the GPU's arch list, install, ABI check)"
start=$(date +%s)
ansible-playbook -i "$INV" roles/sgl_kernel/tests/deploy_gpu.yml -e @/tmp/sgl-kernel-vars.json -v > "$OUT/deploy-1.log" 2>&1
echo "deploy rc=$? in $(( $(date +%s) - start )) s"
grep -E "ABI key|imports under|^h200 |sgl_kernel_build_jobs" "$OUT/deploy-1.log" | head -20
tail -25 "$OUT/deploy-1.log"

echo "== artifacts"
KEYDIR=""
for d in "$GPUFLEET_CACHE_DIR"/artifacts/sgl_kernel/*/; do
    case "$d" in *_sources*) ;; *) [ -d "$d" ] && { KEYDIR=$d; break; } ;; esac
done
ls -la "$KEYDIR"
cp "$KEYDIR"/build.json "$OUT/build.json" 2>/dev/null
cp "$KEYDIR"/build.log "$OUT/build.log" 2>/dev/null
cat /tmp/gpufleet-sgl-kernel-work/builds.log
cp "$VENV/gpufleet-sgl_kernel.json" "$OUT/marker.json" 2>/dev/null && cat "$OUT/marker.json"

echo "== kernels on the GPU, checked against torch"
"$PY" - <<'PYEOF' | tee "$OUT/gpu-run.json"
import glob, json, os, subprocess, torch, sgl_kernel
res = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
       "capability": list(torch.cuda.get_device_capability(0)),
       "has_cuda": sgl_kernel.HAS_CUDA, "has_fa3": sgl_kernel.HAS_FA3}
torch.manual_seed(0)
x = torch.randn(1 << 24, device="cuda"); y = torch.randn(1 << 24, device="cuda")
out = sgl_kernel.scale_add(x, y, 0.75)
ref = x + 0.75 * y
torch.cuda.synchronize()
res["scale_add_max_abs_err"] = (out - ref).abs().max().item()
res["scale_add_allclose"] = bool(torch.allclose(out, ref, rtol=0, atol=1e-6))
res["scale_add_finite"] = bool(torch.isfinite(out).all().item())
res["scale_add_on_cuda"] = out.is_cuda
res["cccl_version"] = torch.ops.sgl_kernel.cccl_version()
if sgl_kernel.HAS_FA3:
    res["sm90a_kernel_flag"] = torch.ops.sgl_kernel_flash.flash_probe()
pkg = os.path.dirname(sgl_kernel.__file__)
cuobjdump = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda-13.0"), "bin", "cuobjdump")
res["cubins"] = {}
for so in sorted(glob.glob(pkg + "/*.so")):
    p = subprocess.run([cuobjdump, "--list-elf", so], capture_output=True, text=True)
    res["cubins"][os.path.basename(so)] = sorted(set(l.split(".")[-2] for l in p.stdout.split() if l.endswith(".cubin")))
res["pass"] = (res["scale_add_allclose"] and res["scale_add_finite"] and res.get("sm90a_kernel_flag", 90) == 90
               and all(v == ["sm_90a"] for v in res["cubins"].values()))
print(json.dumps(res, indent=1))
PYEOF

echo "== re-run: nothing changes, no second build"
ansible-playbook -i "$INV" roles/sgl_kernel/tests/deploy_gpu.yml -e @/tmp/sgl-kernel-vars.json > "$OUT/deploy-2.log" 2>&1
echo "re-run rc=$?"
grep -E "^h200 " "$OUT/deploy-2.log"
wc -l < /tmp/gpufleet-sgl-kernel-work/builds.log

echo "== optional: a wheel built elsewhere against another torch (${SGL_KERNEL_FOREIGN_WHEEL:-none})"
if [ -n "${SGL_KERNEL_FOREIGN_WHEEL:-}" ] && [ -f "${SGL_KERNEL_FOREIGN_WHEEL}" ]; then
    rm -rf /tmp/abi-venv && "$PY" -m venv --system-site-packages /tmp/abi-venv
    /tmp/abi-venv/bin/python -m pip install -q --no-index --no-deps --force-reinstall "$SGL_KERNEL_FOREIGN_WHEEL"
    /tmp/abi-venv/bin/python -c 'import sgl_kernel' 2>&1 | tail -1 | tee "$OUT/foreign-wheel-import.txt"
fi
echo "== done"
