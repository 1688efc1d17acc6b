#!/usr/bin/env bash
# GPU evidence for the kernel checks (torch_verify kernels=true), run on the
# H200 test machine from the repository root, no network:
#   - the real flashinfer-python 0.7.2.post1 (PyPI wheel, unpacked from
#     .device/flashinfer-0.7.2.post1.tar.zst by .device/unpack.sh with the
#     zstandard wheel; apache-tvm-ffi and the pure import-time dependencies
#     from .device/whl), its kernels JIT-compiled by nvcc 13.0;
#   - the project's fixture extension (tests/fixtures/sgl_kernel_fixture)
#     built three times with nvcc 13.0 against the machine's torch: for 9.0a
#     (right), for 9.0a with SGL_KERNEL_FIXTURE_WRONG_LARGE_M=ON (rmsnorm wrong
#     for rows >= 128), and without 9.0a (8.0 only, or 12.0a only when the
#     8.0 build fails: either way no code an H200 can run);
#   - bench/kernel_checks_overhead.py: the kernel checks on a warm JIT cache
#     against today's smoke test alone, and the cold-cache cost;
#   - the probe with each build, judged as torch_verify judges it
#     (h200-kernel-checks.py), plus the two real ABI mismatches of
#     torchvision 0.24.1 and torchaudio 2.9.1 (wheels in .device/old) beside
#     the machine's torch 2.11.0+cu130.
# The fixture is built here with pip directly (the role's build is the
# sgl-kernel evidence); the two source edits the role's patch rules make for
# this torch and CUDA 13 are made the same way with sed (C++20 and CCCL path).
# Everything goes to $OUT.
set -uo pipefail
OUT=${OUT:?set OUT}
exec > >(tee "$OUT/h200-kernel-checks.log") 2>&1
ROOT=$PWD
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0}
export PYTHONUNBUFFERED=1

echo "== machine"
date -u
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
"$CUDA_HOME/bin/nvcc" --version | tail -1
python3 -c 'import torch, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'

echo "== flashinfer 0.7.2.post1 from its PyPI wheel"
bash .device/unpack.sh || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$CUDA_HOME/bin:$PATH
python3 -c 'import flashinfer; print("flashinfer", flashinfer.__version__)'

echo "== fixture builds (in parallel)"
build() {  # build NAME ARCH [cmake defines...]
  local name=$1 arch=$2; shift 2
  local src=/tmp/fx-src-$name dest=/tmp/fx-$name
  rm -rf "$src" "$dest"; cp -r tests/fixtures/sgl_kernel_fixture "$src"
  sed -i 's/set(CMAKE_CXX_STANDARD 17)/set(CMAKE_CXX_STANDARD 20)/' "$src/CMakeLists.txt"
  local defs=()
  for d in "$@"; do defs+=("-Ccmake.define.$d"); done
  local s; s=$(date +%s)
  ( export TORCH_CUDA_ARCH_LIST="$arch" CMAKE_BUILD_PARALLEL_LEVEL=5 CPLUS_INCLUDE_PATH="$CUDA_HOME/include/cccl"
    python3 -m pip wheel -q --no-build-isolation --no-deps -w "$dest/dist" "$src" "${defs[@]}" \
      && python3 -m pip install -q --no-deps --target "$dest/site" "$dest"/dist/*.whl ) > "/tmp/build-$name.log" 2>&1
  echo "build $name (arch $arch $*): rc=$? in $(( $(date +%s) - s )) s"
}
# (wait with the builds' pids: a bare `wait` would also wait for the tee above)
build right "9.0a" & p1=$!
build wrongm "9.0a" SGL_KERNEL_FIXTURE_WRONG_LARGE_M=ON & p2=$!
build noarch "8.0" & p3=$!
build blackwell "12.0a" & p4=$!
wait $p1 $p2 $p3 $p4
for name in right wrongm noarch blackwell; do
  ls /tmp/fx-$name/site/sgl_kernel/*.so 2>/dev/null || { echo "build $name failed:"; grep -iE "error|fatal" /tmp/build-$name.log | head -20; }
  for so in "/tmp/fx-$name/site/sgl_kernel"/*.so; do echo "$so:"; cuobjdump --list-elf "$so" 2>&1 | sort -u | head -6; done
done
# Without 9.0a: the 8.0-only build, or the Blackwell-only one when that did not build.
NOARCH=noarch; [ -e /tmp/fx-noarch/site/sgl_kernel/__init__.py ] || NOARCH=blackwell

REQUIRED=(torch.fp8_scaled_mm sgl_kernel.rmsnorm sgl_kernel.fused_add_rmsnorm sgl_kernel.silu_and_mul
          flashinfer.rmsnorm flashinfer.silu_and_mul flashinfer.top_k_sampling)

echo "== first verification of the right build: cold JIT cache (what a deploy's warm-up pays once)"
export FLASHINFER_WORKSPACE_BASE=/tmp/flashinfer-workspace
rm -rf "$FLASHINFER_WORKSPACE_BASE"; mkdir -p "$FLASHINFER_WORKSPACE_BASE"
PYTHONPATH=/tmp/fx-right/site:/tmp/site timeout 400 python3 evidence/h200-kernel-checks.py cold "$OUT/cold.json" "${REQUIRED[@]}"
echo "rc=$?"

echo "== bench: kernel checks (warm JIT cache) vs smoke only"
PYTHONPATH=/tmp/fx-right/site:/tmp/site timeout 200 python3 bench/kernel_checks_overhead.py --python python3 \
  --imports flashinfer,sgl_kernel --runs 3 --warm --workspace "$FLASHINFER_WORKSPACE_BASE" --json "$OUT/bench.json"
echo "bench rc=$?"

echo "== verification with each build (warm cache: nothing compiles)"
for name in right wrongm $NOARCH; do
  PYTHONPATH=/tmp/fx-$name/site:/tmp/site timeout 100 python3 evidence/h200-kernel-checks.py "$name" "$OUT/$name.json" "${REQUIRED[@]}"
  echo "rc=$?"
done

echo "== the two real ABI mismatches beside torch $(python3 -c 'import torch; print(torch.__version__)')"
python3 -m pip install -q --no-deps --target /tmp/old .device/old/*.whl
PYTHONPATH=/tmp/old:/tmp/fx-right/site:/tmp/site timeout 120 python3 evidence/h200-kernel-checks.py old-vision-audio \
  "$OUT/old-vision-audio.json" "${REQUIRED[@]}"
echo "== done $(date -u)"
# the logs name the checkout and $OUT, not this machine's paths
sed -i "s#$ROOT#<repo>#g; s#$OUT#\$OUT#g" "$OUT"/*.log "$OUT"/*.json
