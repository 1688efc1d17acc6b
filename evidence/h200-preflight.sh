#!/usr/bin/env bash
# Deploy's preflight on the H200 test machine (Ubuntu 24.04, driver 580,
# CUDA 13.0, python3 with torch 2.11.0+cu130; no network): the hardware the
# inventory expects is judged from nvidia-smi before anything changes. Run
# from the repository root:
#
#   OUT=/some/folder bash evidence/h200-preflight.sh
#
# Needs ansible-core and its dependencies as wheels in ./.whl (installed to
# /tmp/site). Writes to $OUT:
#   1-gpu-facts.log   gpu_facts with this machine's hardware (1x H200, cc 9.0,
#                     driver >= 580.65.06) expected: rc 0
#   2-gpu-facts.log   gpu_facts expecting the reference fleet's node (8x RTX PRO
#                     6000 Blackwell, cc 12.0, driver >= 590.48.01): rc != 0, the four lines
#   3-deploy.log, fleet-report.json/.md   deploy.yml with that expectation: refused in the
#                     preflight, before the CUDA toolkit, the venv, the torch
#                     download and the sgl-kernel build; the time it took
#   before.txt, after.txt   the places deploy would change, read before and after
#   summary.txt       exit status and verdict of each step
set -uo pipefail
: "${OUT:?set OUT to the folder for the results}"
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$OUT"
status=0
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >/tmp/h200-preflight-pip.log 2>&1
echo "pip install ansible-core wheels: rc $?" | tee "$OUT/summary.txt"
export PYTHONPATH=/tmp/site ANSIBLE_CONFIG="$PWD/ansible.cfg" ANSIBLE_NOCOLOR=1 LC_ALL=C.UTF-8
printf 'h200 ansible_connection=local ansible_python_interpreter=%s\n' "$(command -v python3)" >/tmp/h200-inventory.ini
nvidia-smi --query-gpu=index,name,compute_cap,driver_version --format=csv,noheader | tee -a "$OUT/summary.txt"

right='{"device_count": 1, "device_name": "H200", "compute_capability": "9.0", "min_driver_version": "580.65.06"}'
wrong='{"device_count": 8, "device_name": "RTX PRO 6000 Blackwell", "compute_capability": "12.0", "min_driver_version": "590.48.01"}'
python3 -m ansible adhoc -i /tmp/h200-inventory.ini h200 -m gpufleet.inference.gpu_facts \
  -a "{\"required\": true, \"expect\": $right}" -o >"$OUT/1-gpu-facts.log" 2>&1
rc=$?; [ $rc -eq 0 ] || status=1
echo "1. gpu_facts, this machine's hardware expected: rc $rc (expected 0)" | tee -a "$OUT/summary.txt"
python3 -m ansible adhoc -i /tmp/h200-inventory.ini h200 -m gpufleet.inference.gpu_facts \
  -a "{\"required\": true, \"expect\": $wrong}" >"$OUT/2-gpu-facts.log" 2>&1
rc=$?; [ $rc -ne 0 ] || status=1
echo "2. gpu_facts, the reference node expected: rc $rc (expected non-zero)" | tee -a "$OUT/summary.txt"
grep -A6 '^mismatches' "$OUT/2-gpu-facts.log" | tee -a "$OUT/summary.txt"

# What deploy.yml would change: the venvs beside the stable path, the loader
# configuration, the CUDA prefix, the packages of the machine's python3.
snapshot() {
  ls -lA --time-style=full-iso /tmp/h200-preflight 2>&1
  ls -la --time-style=full-iso /etc/ld.so.conf.d; sha256sum /etc/ld.so.conf.d/*
  # (after the committed run: ls -la /usr/local | grep -i cuda there, the same entries)
  ls -ld --time-style=full-iso /usr/local/cuda* 2>&1
  python3 -m pip freeze --all 2>/dev/null | sha256sum
  dpkg-query -W | sha256sum
}
rm -rf /tmp/h200-preflight /tmp/h200-preflight-reports; mkdir -p /tmp/h200-preflight
snapshot >"$OUT/before.txt"
start=$(date +%s.%N)
python3 -m ansible playbook -i /tmp/h200-inventory.ini playbooks/deploy.yml \
  -e "{\"gpufleet_venv_link\": \"/tmp/h200-preflight/ml-env\", \"gpufleet_report_dir\": \"/tmp/h200-preflight-reports\",
       \"gpufleet_gpu_required\": true, \"gpufleet_cuda_toolkit_enabled\": true, \"gpufleet_expect\": $wrong}" \
  >"$OUT/3-deploy.log" 2>&1
rc=$?
took=$(python3 -c "import sys; print('%.1f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$start" "$(date +%s.%N)")
snapshot >"$OUT/after.txt"
[ $rc -ne 0 ] || status=1
echo "3. deploy.yml expecting the reference node: rc $rc (expected non-zero), refused after ${took} s" | tee -a "$OUT/summary.txt"
if cmp -s "$OUT/before.txt" "$OUT/after.txt"; then
  echo "   nothing changed (venvs, ld.so.conf.d, /usr/local/cuda*, pip freeze, dpkg)" | tee -a "$OUT/summary.txt"
else
  status=1; echo "   CHANGED:" | tee -a "$OUT/summary.txt"; diff "$OUT/before.txt" "$OUT/after.txt" | tee -a "$OUT/summary.txt"
fi
cp /tmp/h200-preflight-reports/fleet-report.json /tmp/h200-preflight-reports/fleet-report.md "$OUT/"
python3 - "$OUT/fleet-report.json" <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
import json, sys
row = json.load(open(sys.argv[1]))["hosts"][0]
print("   report row:", row["host"], row["status"], "stage", row["stage"])
for f in row.get("expectation_failures") or []:
    print("     %(name)s: expected %(expected)s, found %(found)s" % f)
ok = row["status"] == "failed" and row["stage"] == "preflight" and len(row.get("expectation_failures") or []) == 4
print("   verdict:", "refused in the preflight, the four named" if ok else "NOT as expected")
sys.exit(0 if ok else 1)
PY
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
grep -E '^TASK \[' "$OUT/3-deploy.log" | tail -n 4 | tee -a "$OUT/summary.txt"
sed -i "s#$PWD#<repo>#g; s#$OUT#\$OUT#g" "$OUT"/*.log "$OUT/summary.txt" "$OUT"/fleet-report.*
exit $status
