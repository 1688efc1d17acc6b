#!/usr/bin/env bash
# Evidence on the GPU test machine (Ubuntu 24.04, H200, driver 580, CUDA 13.0,
# python3 with torch 2.11.0+cu130; no network). Run from the repository root:
#
#   OUT=/some/folder bash evidence/h200-verify.sh
#
# Needs: ansible-core and the dependencies that python3 lacks as wheels in ./.whl
# (installed to /tmp/site, nothing else on the machine changes), and nvidia-smi.
# Writes to $OUT:
#   h200-verify.json      facts registered by gpu_facts and torch_verify (smoke on),
#                         nvidia-smi's own answer, and every check (name, cc 9.0,
#                         driver, memory, CUDA version, finite smoke, bf16 TFLOP/s)
#   h200-verify.log       the playbook's output
#   h200-overhead.json    torch_verify wall time / bare `python -c "import torch; ..."`
#   h200-overhead.txt     the same, as printed
#   nvidia-smi-query.csv  raw nvidia-smi CSV (what gpu_facts parses), for unit fixtures
#   summary.txt           exit status of each step
set -uo pipefail
: "${OUT:?set OUT to the folder for the results}"
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$OUT"
python=$(command -v python3)
status=0

python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >"$OUT/pip.log" 2>&1
echo "pip install ansible-core wheels: rc $?" | tee "$OUT/summary.txt"
export PYTHONPATH=/tmp/site ANSIBLE_CONFIG="$PWD/ansible.cfg" ANSIBLE_NOCOLOR=1 LC_ALL=C.UTF-8

nvidia-smi --query-gpu=index,name,uuid,compute_cap,memory.total,pci.bus_id,driver_version \
  --format=csv,noheader,nounits >"$OUT/nvidia-smi-query.csv" 2>&1
echo "nvidia-smi query: rc $?" | tee -a "$OUT/summary.txt"

python3 -m ansible playbook -c local -i localhost, evidence/h200-verify.yml \
  -e "ansible_python_interpreter=$python" -e "evidence_python=$python" -e "evidence_out=$OUT" \
  >"$OUT/h200-verify.log" 2>&1
rc=$?; [ $rc -eq 0 ] || status=1
echo "h200-verify.yml (gpu_facts + torch_verify smoke + nvidia-smi checks): rc $rc" | tee -a "$OUT/summary.txt"
tail -n 25 "$OUT/h200-verify.log"

python3 bench/torch_verify_overhead.py --python "$python" --runs 9 --json "$OUT/h200-overhead.json" \
  >"$OUT/h200-overhead.txt" 2>&1
rc=$?; [ $rc -eq 0 ] || status=1
echo "bench/torch_verify_overhead.py: rc $rc" | tee -a "$OUT/summary.txt"
cat "$OUT/h200-overhead.txt"
exit $status
