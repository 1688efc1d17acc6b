#!/usr/bin/env bash
# Operator signals on the GPU test machine (Ubuntu 24.04, H200, driver 580,
# CUDA 13.0, python3 with torch 2.11.0+cu130; no network), from the
# repository root:
#
#   OUT=/some/folder bash evidence/h200-signals.sh
#
# Needs ansible-core and its dependencies as wheels in ./.whl (installed to
# /tmp/site); the stable path /tmp/h200-ml-env links to the venv of the
# machine's python3, as in h200-fleet-verify.sh. Writes to $OUT:
#   identity.csv          nvidia-smi's index, UUID, PCI bus id, serial, name
#   kernel-log.txt        what the kernel log answers: journalctl, dmesg (NVRM lines)
#   1-gpu-facts.json      gpu_facts with xid: true (the Xid answer as this machine gives it)
#   run-1.log ...         verify.yml with no_xid_since_last_run (ignoring 13), smoke on,
#                         textfile metrics on; between runs 1 and 2 two lines in the
#                         driver's Xid format are written to /dev/kmsg (a 13 and a 94 for
#                         the GPU's PCI address, marked as injected): run 2 must fail
#                         naming the 94 only, run 3 (nothing new) must pass
#   reports/              the fleet report of the three runs (json, md, html, prom, history)
#   h200.prom             the host's textfile metrics after run 2 and run 3 (h200-3.prom)
#   summary.txt           exit status of each step
#   signals.tar.gz        the logs of the runs and the reports (at most 8 files come back)
# The metrics files are then checked on the controller with promtool
# (promtool-check-metrics.txt: `promtool check metrics < FILE`, Debian's
# prometheus 2.42.0+ds-5+deb12u1, as tests/integration/test_alert_rules.py unpacks it).
set -uo pipefail
: "${OUT:?set OUT to the folder for the results}"
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >"$OUT/pip.log" 2>&1
echo "pip install ansible-core wheels: rc $?" | tee "$OUT/summary.txt"
export PYTHONPATH=/tmp/site ANSIBLE_CONFIG="$PWD/ansible.cfg" ANSIBLE_NOCOLOR=1 LC_ALL=C.UTF-8

nvidia-smi --query-gpu=index,uuid,pci.bus_id,serial,name --format=csv >"$OUT/identity.csv" 2>&1
{
  echo "id: $(id)"; echo "kernel: $(uname -r)"
  echo "journalctl: $(command -v journalctl || echo 'not installed')"
  echo "dmesg: $(command -v dmesg || echo 'not installed')"
  echo "kernel.dmesg_restrict: $(cat /proc/sys/kernel/dmesg_restrict)"
  echo "boot_id: $(cat /proc/sys/kernel/random/boot_id)"
  echo "NVRM lines in dmesg: $(dmesg 2>&1 | grep -c 'NVRM')"
  echo "Xid lines in dmesg: $(dmesg 2>&1 | grep -c 'NVRM: Xid')"
  dmesg 2>&1 | grep 'NVRM' | tail -n 5
} >"$OUT/kernel-log.txt" 2>&1
cat "$OUT/identity.csv" "$OUT/kernel-log.txt"

prefix=$(python3 -c 'import sys; print(sys.prefix if sys.prefix != sys.base_prefix else "")')
if [ -n "$prefix" ] && [ -x "$prefix/bin/python" ]; then
  ln -sfn "$prefix" /tmp/h200-ml-env
else
  mkdir -p /tmp/h200-venv/bin
  ln -sfn "$(command -v python3)" /tmp/h200-venv/bin/python
  ln -sfn /tmp/h200-venv /tmp/h200-ml-env
fi
printf 'h200 ansible_connection=local ansible_python_interpreter=%s\n' "$(command -v python3)" >/tmp/h200-inventory.ini

python3 -m ansible adhoc -i /tmp/h200-inventory.ini h200 -m gpufleet.inference.gpu_facts -a '{"xid": true}' -o \
  >"$OUT/1-gpu-facts.log" 2>&1
echo "1. gpu_facts xid: true: rc $?" | tee -a "$OUT/summary.txt"
grep '^h200 | ' "$OUT/1-gpu-facts.log" | sed 's/^h200 | [A-Z]* => //' >"$OUT/1-gpu-facts.json"

mkdir -p /tmp/h200-textfile
expect='{"device_count": 1, "device_name": "H200", "min_smoke_tflops": 100, "no_xid_since_last_run": true, "ignore_xids": [13]}'
play() {  # play N
  python3 -m ansible playbook -i /tmp/h200-inventory.ini playbooks/verify.yml \
    -e "{\"gpufleet_venv_link\": \"/tmp/h200-ml-env\", \"gpufleet_report_dir\": \"$OUT/reports\", \"gpufleet_verify_smoke\": true,
         \"gpufleet_verify_kernels\": false, \"gpufleet_gpu_required\": true, \"gpufleet_textfile_dir\": \"/tmp/h200-textfile\",
         \"gpufleet_expect\": $expect}" >"$OUT/run-$1.log" 2>&1
}
play 1; rc=$?
echo "2. verify.yml run 1 (the boot so far, 13 ignored): rc $rc (0 on a fresh boot; non-zero where this boot logged another Xid)" | tee -a "$OUT/summary.txt"
pci=$(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader | head -n 1 | python3 -c 'import sys
d, b, rest = sys.stdin.read().strip().split(":"); print("%04x:%s:%s" % (int(d, 16), b.lower(), rest.split(".")[0].lower()))')
echo "NVRM: Xid (PCI:$pci): 13, pid=1, name=gpufleet-evidence, injected by evidence/h200-signals.sh" >/dev/kmsg
echo "NVRM: Xid (PCI:$pci): 94, pid=1, name=gpufleet-evidence, injected by evidence/h200-signals.sh" >/dev/kmsg
echo "   injected into /dev/kmsg for PCI $pci: Xid 13 and Xid 94" | tee -a "$OUT/summary.txt"
play 2; rc=$?
echo "3. verify.yml run 2 (after the injected lines): rc $rc (expected non-zero, naming Xid 94 only)" | tee -a "$OUT/summary.txt"
cp /tmp/h200-textfile/*.prom "$OUT/h200.prom" 2>/dev/null
python3 - "$OUT/reports/fleet-report.json" <<'PY' 2>&1 | tee -a "$OUT/summary.txt"
import json, sys
row = json.load(open(sys.argv[1]))["hosts"][0]
print("   run 2 row:", row["status"], "|", row.get("message"))
print("   xid:", json.dumps({k: row["xid"].get(k) for k in ("source", "since", "new_count", "ignored", "count_boot")}))
print("   GPU marks:", [g.get("marks") for g in row["gpus"]])
PY
play 3; rc=$?
echo "4. verify.yml run 3 (nothing new since run 2): rc $rc (expected 0)" | tee -a "$OUT/summary.txt"
cp /tmp/h200-textfile/*.prom "$OUT/h200-3.prom" 2>/dev/null
grep -h 'xid' "$OUT/h200.prom" "$OUT/h200-3.prom" | grep -v '^#'
sed -i "s#$PWD#<repo>#g; s#$OUT#\$OUT#g" "$OUT"/*.log "$OUT"/*.json "$OUT"/summary.txt 2>/dev/null
# at most 8 files come back from the machine: the logs and the reports in one tar
tar -C "$OUT" -czf "$OUT/signals.tar.gz" reports run-1.log run-2.log run-3.log 1-gpu-facts.log pip.log
rm -rf "$OUT/reports" "$OUT"/run-*.log "$OUT/1-gpu-facts.log" "$OUT/pip.log"
