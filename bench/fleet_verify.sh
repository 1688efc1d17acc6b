#!/usr/bin/env bash
# Benchmark, side by side in one run (A/B paired):
#  1. verify.yml on 8 sandbox hosts (A) against what an operator would run
#     instead (B): a bounded parallel loop of
#     `ssh host ~/ml-env/bin/python -c "import torch, flashinfer, sgl_kernel; ..."`
#     over the same hosts (8 at a time). Goal A/B <= 1.5.
#  2. a no-op deploy.yml re-run (A) against verify.yml (B) on the same 4 hosts.
#     Goal A/B <= 1.5.
# The fleet is deployed once first (not timed), so every timed deploy is a no-op.
#
# Usage: bench/fleet_verify.sh [RUNS]   (brings the sandbox up with 8 hosts)
# The timer is given as $BENCH (a command taking: -n RUNS --warmup W --timeout S
# --vs 'B' -- A...); without it each side is timed once with /usr/bin/time.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
export ANSIBLE_CONFIG="$PWD/ansible.cfg"
RUNS=${1:-3}
INV=inventories/sandbox
WORK=.cache/fleet-bench
mkdir -p "$WORK"

python scripts/sandbox.py up --hosts 8 >/dev/null
# Untimed: bring every host to the stack (a no-op when it is already there).
ansible-playbook -i "$INV" playbooks/deploy.yml -e gpufleet_report_dir="$PWD/$WORK/reports" >"$WORK/setup.log" 2>&1 \
    || { echo "setup deploy failed, see $WORK/setup.log"; tail -30 "$WORK/setup.log"; exit 1; }

# The ssh loop's host list, from the inventory itself (host, port, user, key).
ansible-inventory -i "$INV" --list | python3 -c '
import json, sys
inv = json.load(sys.stdin)
hv = inv["_meta"]["hostvars"]
for h in sorted(hv):
    v = hv[h]
    print(v.get("ansible_port", 22), v.get("ansible_user", "deploy"), v["ansible_host"], v["ansible_ssh_private_key_file"],
          v["ansible_ssh_common_args"].split("UserKnownHostsFile=")[1].split()[0])
' >"$WORK/hosts.txt"

cat >"$WORK/ssh_loop.sh" <<'SH'
#!/bin/bash
# What an operator would run: every host at once (bounded at 8), one ssh each.
set -euo pipefail
cd "$(dirname "$0")"
xargs -P 8 -L 1 sh -c 'ssh -o BatchMode=yes -o UserKnownHostsFile="$4" -i "$3" -p "$0" "$1@$2" \
  "~/ml-env/bin/python -c \"import torch, flashinfer, sgl_kernel; print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.cuda.device_count())\""' \
  < hosts.txt
SH
chmod +x "$WORK/ssh_loop.sh"

VERIFY8=(ansible-playbook -i "$INV" playbooks/verify.yml -e "gpufleet_report_dir=$PWD/$WORK/reports-verify")
VERIFY4=(ansible-playbook -i "$INV" playbooks/verify.yml --limit "sbx1,sbx2,sbx3,sbx4" -e "gpufleet_report_dir=$PWD/$WORK/reports-verify4")
DEPLOY4=(ansible-playbook -i "$INV" playbooks/deploy.yml --limit "sbx1,sbx2,sbx3,sbx4" -e "gpufleet_report_dir=$PWD/$WORK/reports-deploy4")

if [ -n "${BENCH:-}" ]; then
    echo "== 1. verify.yml on 8 hosts (A) vs a bounded parallel ssh loop (B)"
    $BENCH -n "$RUNS" --warmup 1 --timeout 1800 --vs "$PWD/$WORK/ssh_loop.sh" -- "${VERIFY8[@]}"
    echo "== 2. no-op deploy.yml on 4 hosts (A) vs verify.yml on the same 4 hosts (B)"
    $BENCH -n "$RUNS" --warmup 1 --timeout 3000 --vs "${VERIFY4[*]}" -- "${DEPLOY4[@]}"
else
    t() { /usr/bin/time -f "%e" "$@" >/dev/null 2>"$WORK/time.txt" || true; tail -1 "$WORK/time.txt"; }
    a=$(t "${VERIFY8[@]}"); b=$(t "$WORK/ssh_loop.sh")
    echo "verify.yml 8 hosts: ${a}s  ssh loop: ${b}s  ratio: $(python3 -c "print(round($a/$b, 2))")"
    a=$(t "${DEPLOY4[@]}"); b=$(t "${VERIFY4[@]}")
    echo "no-op deploy.yml 4 hosts: ${a}s  verify.yml: ${b}s  ratio: $(python3 -c "print(round($a/$b, 2))")"
fi
