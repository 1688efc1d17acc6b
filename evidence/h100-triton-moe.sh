#!/usr/bin/env bash
# GPU evidence for sglang's triton MoE runner as a qualified moe_runner backend,
# on the H100 test machine (torch 2.11.0+cu130 and triton 3.6 in its image, no
# network), from the repository root, in one call after the staging calls:
#   - the sglang 0.5.23 stack, staged before this script runs: each 58 MiB part of
#     .cache/sglang-stack/parts (h100-triton-moe-prep.sh, from the wheels that
#     h100-triton-moe.wheels.sha256 pins) carried by one call into /tmp/stage
#     (cp .cache/sglang-stack/parts/pNN /tmp/stage/), on one warm machine: torch
#     2.14.1 (cu130), triton 3.8.0, nvidia-nccl-cu13 2.30.7, sglang 0.5.23,
#     sglang-kernel 0.4.10 without flash_ops.abi3.so (FlashAttention 3, which
#     neither the MoE runner nor the server's imports load: 1.1 GB left out),
#     flashinfer-python 0.7.2, torchvision 0.29.1, transformers 5.19.0 and the
#     pure-Python packages the server's imports need; the image's other CUDA
#     libraries serve torch 2.14.1 (the log starts with their versions);
#   - torch_verify's probe with the model checks at shipped profiles' shapes:
#     qwen3-30b-a3b (BF16), qwen3-30b-a3b-fp8 (FP8 blocks [128, 128]) and the
#     same with per-tensor FP8, tp 1: moe.triton.* through sglang's own
#     fused_experts against the fp32 reference MoE, flashinfer's fused MoE left
#     unbuilt (cache_only: a skip); then the host's side: the qualification and
#     flags, sglang's server imports, the flags through sglang's own parser, and
#     what sglang's auto runs;
#   - a fault planted in the runner (fused_experts wrapped in the probe's
#     interpreter: NaN in two rows from M=129, x1.5 at M=7): caught, triton not
#     qualified, no flag, named in the report.
# Everything goes to $OUT. Arguments: the cases to run (bf16 fp8-block fp8-tensor
# fault; default all), so that a device call of 10 minutes can take some of them;
# the log is appended to.
set -uo pipefail
OUT=${OUT:?set OUT}
CASES=${*:-bf16 fp8-block fp8-tensor fault}
TAR_SHA256=dcf9ff4f9dd07e55ff99ee2b60871d2a4dc08ae2ac4d8d5d41a9bcaddf2929a5
exec > >(tee -a "$OUT/h100-triton-moe.log") 2>&1
export PYTHONUNBUFFERED=1 FLASHINFER_WORKSPACE_BASE=/tmp/fi-verify
echo "== machine"; date -u
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.used --format=csv,noheader
python3 -m pip show nvidia-nccl-cu13 nvidia-cudnn-cu13 cuda-toolkit nvidia-cublas nvidia-cusparselt-cu13 2>/dev/null \
  | grep -E '^(Name|Version)' | paste - - | sed 's/^/image: /'
if [ ! -d /tmp/site/sglang ]; then
  echo "== stack: $(find /tmp/stage -maxdepth 1 -name 'p*' | wc -l) parts"
  [ "$(cat /tmp/stage/p* | sha256sum | cut -d' ' -f1)" = "$TAR_SHA256" ] || { echo "staged tar: sha256 differs"; exit 1; }
  mkdir -p /tmp/wh && cat /tmp/stage/p* | tar -xf - -C /tmp/wh && rm -rf /tmp/stage
  (cd /tmp/wh && sha256sum -c --quiet "$OLDPWD/evidence/h100-triton-moe.wheels.sha256") || exit 1
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site /tmp/wh/*.whl || exit 1
fi
# torch 2.14.1 finds its CUDA libraries in the image's site-packages; NCCL 2.30.7 comes first, from the stack
SP=$(python3 -c 'import site; print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH=/tmp/site/nvidia/nccl/lib:$SP/nvidia/cu13/lib:$SP/nvidia/cudnn/lib:$SP/nvidia/cusparselt/lib:$SP/nvidia/nvshmem/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=/tmp/site
python3 -c "import torch, triton, sgl_kernel, sglang, flashinfer; print('stack: torch', torch.__version__, 'triton', triton.__version__, 'sgl_kernel', sgl_kernel.__version__, 'sglang', sglang.__version__, 'flashinfer', flashinfer.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))"
mkdir -p .collections/ansible_collections/gpufleet && ln -sfn "$PWD" .collections/ansible_collections/gpufleet/inference
for case in $CASES; do
  echo "== $case"
  case $case in
    bf16) timeout 280 python3 evidence/h100-triton-moe.py qwen3-bf16 qwen3-30b-a3b 1;;
    fp8-block) timeout 280 python3 evidence/h100-triton-moe.py qwen3-fp8-block qwen3-30b-a3b-fp8 1;;
    fp8-tensor) timeout 280 python3 evidence/h100-triton-moe.py qwen3-fp8-tensor qwen3-30b-a3b-fp8 1 fp8-per-tensor;;
    fault) timeout 280 python3 evidence/h100-triton-moe.py qwen3-bf16-fault qwen3-30b-a3b 1 fault;;
  esac
done
echo "== done $(date -u)"
sed -i "s#$PWD#<repo>#g; s#$OUT#\$OUT#g" "$OUT"/*.log "$OUT"/*.json
