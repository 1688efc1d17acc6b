#!/usr/bin/env bash
# GPU health evidence on the H200 test machine (Ubuntu 24.04, driver 580,
# CUDA 13.0, python3 with torch 2.11.0+cu130; no network). Run from the
# repository root:
#
#   OUT=/some/folder bash evidence/h200-health.sh
#
# Needs ansible-core and its dependencies as wheels in ./.whl (installed to
# /tmp/site). The stable path /tmp/h200-ml-env links to the venv of the
# machine's python3, as in h200-fleet-verify.sh. Writes to $OUT:
#   nvidia-smi-health.csv, nvidia-smi-remap.csv   the raw answers gpu_facts parses
#   1-gpu-facts.log/.json   gpu_facts with the H200's health expectations: rc 0
#   2-verify.log, reports-2/, textfile/   verify.yml, H200 + health expectations,
#                           smoke on, gpufleet_textfile_dir set: rc 0
#   3-wrong.log, reports-3/ verify.yml expecting x32 PCIe links: rc != 0, the diff
#   summary.txt             exit status of each step
set -uo pipefail
: "${OUT:?set OUT to the folder for the results}"
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$OUT"
status=0
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >"$OUT/pip.log" 2>&1
echo "pip install ansible-core wheels: rc $?" | tee "$OUT/summary.txt"
export PYTHONPATH=/tmp/site ANSIBLE_CONFIG="$PWD/ansible.cfg" ANSIBLE_NOCOLOR=1 LC_ALL=C.UTF-8

fields=$(python3 -c 'import sys; sys.path.insert(0, ".collections")
from ansible_collections.gpufleet.inference.plugins.module_utils import gpu
print(",".join(gpu.query_fields()))')
nvidia-smi --query-gpu="$fields" --format=csv,noheader,nounits >"$OUT/nvidia-smi-health.csv" 2>&1
echo "nvidia-smi health query: rc $?" | tee -a "$OUT/summary.txt"
nvidia-smi --query-gpu=index,remapped_rows.pending,remapped_rows.failure --format=csv,noheader,nounits \
  >"$OUT/nvidia-smi-remap.csv" 2>&1
echo "nvidia-smi remap query: rc $?" | tee -a "$OUT/summary.txt"
cat "$OUT/nvidia-smi-health.csv" "$OUT/nvidia-smi-remap.csv"

prefix=$(python3 -c 'import sys; print(sys.prefix if sys.prefix != sys.base_prefix else "")')
if [ -n "$prefix" ] && [ -x "$prefix/bin/python" ]; then
  ln -sfn "$prefix" /tmp/h200-ml-env
else
  mkdir -p /tmp/h200-venv/bin
  ln -sfn "$(command -v python3)" /tmp/h200-venv/bin/python
  ln -sfn /tmp/h200-venv /tmp/h200-ml-env
fi
printf 'h200 ansible_connection=local ansible_python_interpreter=%s\n' "$(command -v python3)" >/tmp/h200-inventory.ini
health='"min_pcie_gen": 5, "min_pcie_width": 16, "no_pending_remaps": true, "persistence_mode": true,
        "no_clock_slowdown": true, "max_ecc_uncorrected": 0'

python3 -m ansible adhoc -i /tmp/h200-inventory.ini h200 -m gpufleet.inference.gpu_facts \
  -a "{\"required\": true, \"expect\": {$health}}" -o >"$OUT/1-gpu-facts.log" 2>&1
rc=$?; [ $rc -eq 0 ] || status=1
echo "1. gpu_facts, H200 health expectations: rc $rc (expected 0)" | tee -a "$OUT/summary.txt"
sed 's/^h200 | [A-Z]* => //' "$OUT/1-gpu-facts.log" >"$OUT/1-gpu-facts.json"
head -c 3000 "$OUT/1-gpu-facts.log"; echo

expect="{\"device_count\": 1, \"device_name\": \"H200\", \"compute_capability\": \"9.0\", \"min_smoke_tflops\": 100, $health}"
mkdir -p /tmp/h200-textfile
play() {  # play LABEL EXTRA_JSON
  python3 -m ansible playbook -i /tmp/h200-inventory.ini playbooks/verify.yml \
    -e "{\"gpufleet_venv_link\": \"/tmp/h200-ml-env\", \"gpufleet_report_dir\": \"$OUT/reports-$1\", \"gpufleet_verify_smoke\": true,
         \"gpufleet_verify_kernels\": false, \"gpufleet_gpu_required\": true, $2}" >"$OUT/$1.log" 2>&1
}
play 2 "\"gpufleet_expect\": $expect, \"gpufleet_textfile_dir\": \"/tmp/h200-textfile\""
rc=$?; [ $rc -eq 0 ] || status=1
echo "2. verify.yml, H200 + health expectations, smoke on, textfile: rc $rc (expected 0)" | tee -a "$OUT/summary.txt"
tail -n 8 "$OUT/2.log"
mkdir -p "$OUT/textfile" && cp /tmp/h200-textfile/gpufleet.prom "$OUT/textfile/" && head -n 40 "$OUT/textfile/gpufleet.prom"

wrong="{\"device_count\": 1, \"device_name\": \"H200\", \"min_pcie_width\": 32, \"persistence_mode\": true}"
play 3 "\"gpufleet_expect\": $wrong"
rc=$?; [ $rc -ne 0 ] || status=1
echo "3. verify.yml expecting x32 links: rc $rc (expected non-zero)" | tee -a "$OUT/summary.txt"
python3 - "$OUT/reports-3/fleet-report.json" <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
import json, sys
row = json.load(open(sys.argv[1]))["hosts"][0]
print("   report row:", row["host"], row["status"], row.get("expectation_failures"))
PY
# The checkout and $OUT by name, not by this machine's paths (this line was
# added after the committed run; the same substitution was applied to its files).
sed -i "s#$PWD#<repo>#g; s#$OUT#\$OUT#g" "$OUT"/*.log "$OUT"/*.json "$OUT/summary.txt" "$OUT"/reports-*/fleet-report.*
exit $status
