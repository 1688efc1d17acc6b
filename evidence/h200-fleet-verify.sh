#!/usr/bin/env bash
# Evidence on the GPU test machine (Ubuntu 24.04, H200, driver 580, CUDA 13.0,
# python3 with torch 2.11.0+cu130; no network) for playbooks/verify.yml as a
# fleet verification runs it: one torch_verify module run per host that reads
# the stable venv path, the GPUs (nvidia-smi) and the venv's own interpreter.
# Run from the repository root:
#
#   OUT=/some/folder bash evidence/h200-fleet-verify.sh
#
# Needs ansible-core and its dependencies as wheels in ./.whl (installed to
# /tmp/site). Everything it makes is under /tmp: the stable path
# /tmp/h200-ml-env links to the venv of the machine's python3 (the
# interpreter that has torch), or, for a system python3, to /tmp/h200-venv
# whose bin/python is that interpreter. Writes to $OUT:
#   1-verify.log, reports-1/   verify.yml with the H200's expectations, smoke on: rc 0
#   2-drift.log, reports-2/    the same with device_count 2 expected: rc != 0, the diff
#   3-check.log                verify.yml --check, same expectations, smoke on: rc 0
#   4-timing.txt               verify.yml (1 host, smoke off) against a bare
#                              `python3 -c "import torch; ..."`, alternated, 5 each
#   summary.txt                exit status of each step
set -uo pipefail
: "${OUT:?set OUT to the folder for the results}"
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$OUT"
status=0
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >"$OUT/pip.log" 2>&1
echo "pip install ansible-core wheels: rc $?" | tee "$OUT/summary.txt"
export PYTHONPATH=/tmp/site ANSIBLE_CONFIG="$PWD/ansible.cfg" ANSIBLE_NOCOLOR=1 LC_ALL=C.UTF-8

# The stable path points at the venv python3 belongs to; a system python3
# gets a stand-in venv folder whose bin/python is that interpreter.
prefix=$(python3 -c 'import sys; print(sys.prefix if sys.prefix != sys.base_prefix else "")')
if [ -n "$prefix" ] && [ -x "$prefix/bin/python" ]; then
  ln -sfn "$prefix" /tmp/h200-ml-env
else
  mkdir -p /tmp/h200-venv/bin
  ln -sfn "$(command -v python3)" /tmp/h200-venv/bin/python
  ln -sfn /tmp/h200-venv /tmp/h200-ml-env
fi
echo "stable path: /tmp/h200-ml-env -> $(readlink /tmp/h200-ml-env)" | tee -a "$OUT/summary.txt"
printf 'h200 ansible_connection=local ansible_python_interpreter=%s\n' "$(command -v python3)" >/tmp/h200-inventory.ini
expect='{"device_count": 1, "device_name": "H200", "compute_capability": "9.0", "cuda_version": "13.0",
         "min_driver_version": "580.65.06", "min_smoke_tflops": 100}'
play() {  # play LABEL EXTRA_JSON [ansible-playbook options...]
  local label=$1 extra=$2; shift 2
  python3 -m ansible playbook -i /tmp/h200-inventory.ini playbooks/verify.yml "$@" \
    -e "{\"gpufleet_venv_link\": \"/tmp/h200-ml-env\", \"gpufleet_report_dir\": \"$OUT/reports-$label\", $extra}" \
    >"$OUT/$label.log" 2>&1
}

play 1 "\"gpufleet_expect\": $expect, \"gpufleet_verify_smoke\": true, \"gpufleet_gpu_required\": true"
rc=$?; [ $rc -eq 0 ] || status=1
echo "1. verify.yml, H200 expectations, smoke on: rc $rc (expected 0)" | tee -a "$OUT/summary.txt"
tail -n 12 "$OUT/1.log"; cat "$OUT/reports-1/fleet-report.md" 2>/dev/null

play 2 "\"gpufleet_expect\": {\"device_count\": 2, \"device_name\": \"H200\"}, \"gpufleet_verify_smoke\": false"
rc=$?; [ $rc -ne 0 ] || status=1
echo "2. verify.yml, device_count 2 expected: rc $rc (expected non-zero)" | tee -a "$OUT/summary.txt"
python3 - "$OUT/reports-2/fleet-report.json" <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
import json, sys
row = json.load(open(sys.argv[1]))["hosts"][0]
print("   report row:", row["host"], row["status"], row.get("expectation_failures"))
PY

play 3 "\"gpufleet_expect\": $expect, \"gpufleet_verify_smoke\": true" --check
rc=$?; [ $rc -eq 0 ] || status=1
echo "3. verify.yml --check, smoke on: rc $rc (expected 0)" | tee -a "$OUT/summary.txt"

{
  echo "verify.yml (1 host, -c local, smoke off) vs python3 -c 'import torch; ...', alternated, wall seconds"
  for i in 1 2 3 4 5; do
    a0=$(date +%s.%N); play t$i "\"gpufleet_expect\": {}, \"gpufleet_verify_smoke\": false" >/dev/null; a1=$(date +%s.%N)
    python3 -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.cuda.device_count())" >/dev/null
    b1=$(date +%s.%N)
    python3 - "$a0" "$a1" "$b1" <<'PY'
import sys
a0, a1, b1 = map(float, sys.argv[1:])
print("A %.2f  B %.2f  A/B %.2f" % (a1 - a0, b1 - a1, (a1 - a0) / (b1 - a1)))
PY
  done
} >"$OUT/4-timing.txt" 2>&1
cat "$OUT/4-timing.txt"
# The logs name no machine's own paths: the checkout and $OUT are written as such.
sed -i "s#$PWD#<repo>#g; s#$OUT#\$OUT#g" "$OUT"/[123].log "$OUT/summary.txt"
mv "$OUT/1.log" "$OUT/1-verify.log"; mv "$OUT/2.log" "$OUT/2-drift.log"; mv "$OUT/3.log" "$OUT/3-check.log"
rm -rf "$OUT"/t[0-9].log "$OUT"/reports-t[0-9] "$OUT/reports-3"
exit $status
