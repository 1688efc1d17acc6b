#!/usr/bin/env bash
# Evidence on the GPU test machine (H200, driver 580, CUDA 13.0, python3 with
# torch 2.11.0+cu130; no network) for playbooks/verify.yml's verification
# depth (gpufleet_verify_mode) on a GPU another program is using, and for the
# proof record beside the stable path. One run, in this order:
#
#   0. full on the idle GPU (smoke and kernel checks on): rc 0, the kernels
#      proven in this run; its wall time is "today's full verification"
#   1. a second program (setsid python3 with torch, not a child of Ansible)
#      holds most of the GPU's memory and runs bf16 matrix products for a
#      fixed number of iterations, checking every result against the first
#   2. in_service while it runs: rc 0, no GPU time, the skip names its pid,
#      the proof "last proven ... ago under this stack"
#   3. auto: rc 0, GPU 0 skipped as busy (the same pid)
#   4. full: refused before any CUDA work, status busy, the pid named; the
#      compute processes nvidia-smi lists during 2-4 are the program's alone
#   5. the program ends: every iteration done, no mismatch, nothing non-finite
#   6. full again on the idle GPU: rc 0, the proof record's time newer than 0's
#   7. in_service against full on the idle GPU, alternated, 3 each
#   8. in_service with gpufleet_expect.max_kernel_proof_age_hours 0.0001 (the
#      proof is seconds old): rc != 0 naming the age; with 24: rc 0
#
# Run from the repository root:
#
#   OUT=/some/folder bash evidence/h200-busy.sh
#
# Needs ansible-core and its dependencies as wheels in ./.whl (installed to
# /tmp/site). Everything it makes is under /tmp: the stable path
# /tmp/h200-ml-env links to the venv of the machine's python3 (the
# interpreter that has torch), or, for a system python3, to /tmp/h200-venv
# whose bin/python is that interpreter; its proof record is
# /tmp/.h200-ml-env.proof.json. H200_BUSY_HOG may name a stand-in for the
# second program (a dry run without a GPU); it takes the same arguments.
# Writes to $OUT:
#   summary.txt                 one line per step: rc, expected, the key facts
#   N-*.log, reports-N/         each step's ansible-playbook output and its
#                               fleet report (JSON and Markdown)
#   hog.log, hog-result.json    the second program's output and result line
#   compute-apps.txt            nvidia-smi's compute processes every 0.2 s
#                               during steps 2-4
#   nvidia-smi-idle.txt, nvidia-smi-busy.txt, proof-record.json
#   7-timing.txt                step 7's wall times
set -uo pipefail
: "${OUT:?set OUT to the folder for the results}"
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$OUT"
status=0
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl >"$OUT/pip.log" 2>&1
say "pip install ansible-core wheels: rc $?"
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
say "stable path: /tmp/h200-ml-env -> $(readlink /tmp/h200-ml-env)"
RECORD=/tmp/.h200-ml-env.proof.json
rm -f "$RECORD"
printf 'h200 ansible_connection=local ansible_python_interpreter=%s\n' "$(command -v python3)" >/tmp/h200-inventory.ini
EXPECT='"device_count": 1, "device_name": "H200", "compute_capability": "9.0"'

# --- helpers ------------------------------------------------------------------
# play LABEL MODE [EXTRA_EXPECT]: verify.yml in MODE with the H200's
# expectations; its output in $OUT/LABEL.log, its report in $OUT/reports-LABEL;
# returns its exit status and leaves its wall seconds in $secs.
secs=0
play() {
  local label=$1 mode=$2 extra=${3:-} t0 t1 rc
  t0=$(date +%s.%N)
  python3 -m ansible playbook -i /tmp/h200-inventory.ini playbooks/verify.yml \
    -e "{\"gpufleet_venv_link\": \"/tmp/h200-ml-env\", \"gpufleet_report_dir\": \"$OUT/reports-$label\",
         \"gpufleet_verify_mode\": \"$mode\", \"gpufleet_gpu_required\": true,
         \"gpufleet_expect\": {$EXPECT$extra}}" >"$OUT/$label.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  return $rc
}

# The report's facts and whether they are what the step expects:
# check.py KIND REPORT_DIR [PID] prints one line and exits 1 when not.
cat >/tmp/h200-busy-check.py <<'PY'
import json, re, sys

kind, folder = sys.argv[1], sys.argv[2]
pid = int(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[3] else None
try:
    row = json.load(open(folder + '/fleet-report.json'))['hosts'][0]
except Exception as exc:  # no report: say so, never a pass
    print('   no report in %s: %s' % (folder, exc))
    sys.exit(1)
status, message = row.get('status'), row.get('message') or ''
proof = row.get('proof') or {}
summary = proof.get('summary') or ''
use = row.get('gpu_use') or {}
skipped = use.get('skipped') or []
gpu0 = (row.get('gpus') or [{}])[0]
pids = [p.get('pid') for p in gpu0.get('processes') or []]
reason0 = [s.get('reason') or '' for s in skipped if s.get('gpu') == 0]
problems = []


def want(condition, what):
    if not condition:
        problems.append(what)


LAST = r'^kernels last proven .+ ago under this stack$'
if kind == 'proven':  # full on the idle GPU
    want(status == 'ok', 'status ok')
    want(summary == 'kernels proven in this run', 'proof "kernels proven in this run"')
    want(not skipped, 'nothing skipped')
    want(not gpu0.get('busy') and not pids, 'GPU 0 idle')
elif kind in ('in_service', 'auto'):  # while the program runs
    want(status == 'ok', 'status ok')
    want(use.get('mode') == kind, 'mode %s' % kind)
    want(reason0 and reason0[0].startswith('busy (pid %s ' % pid), 'GPU 0 skipped: busy (pid %s ...)' % pid)
    want(pids == [pid], 'GPU 0 processes: [%s]' % pid)
    want(re.match(LAST, summary), 'proof "kernels last proven ... ago under this stack"')
elif kind == 'refused':  # full while the program runs
    want(status == 'busy', 'status busy')
    want('refused before any CUDA work' in message, 'message: refused before any CUDA work')
    want('pid %s ' % pid in message, 'message names pid %s' % pid)
    want(pids == [pid], 'GPU 0 processes: [%s]' % pid)
elif kind == 'in_service_idle':  # in_service on the idle GPU
    want(status == 'ok', 'status ok')
    want(reason0 == ['in_service run: no GPU time'], 'GPU 0 skipped: in_service run: no GPU time')
    want(re.match(LAST, summary), 'proof "kernels last proven ... ago under this stack"')
elif kind == 'stale':  # max_kernel_proof_age_hours below the proof's age
    want(status == 'failed', 'status failed')
    want('max_kernel_proof_age_hours' in message and 'last proven' in message,
         'message: max_kernel_proof_age_hours ... last proven ... ago')
else:
    sys.exit('unknown kind %r' % kind)
print('   status %s; proof: %s; skipped: %s; GPU 0 busy: %s; pids %s%s' % (
    status, summary or '-', '; '.join('GPU %s %s' % (s.get('gpu'), s.get('reason')) for s in skipped) or '-',
    gpu0.get('busy') or '-', pids, '; message: %s' % message.strip() if message else ''))
for what in problems:
    print('   UNEXPECTED: wanted %s' % what)
sys.exit(1 if problems else 0)
PY
check() { python3 /tmp/h200-busy-check.py "$@" 2>&1 | tee -a "$SUMMARY"; return "${PIPESTATUS[0]}"; }

# proof_time: the newest proof time in the record (epoch seconds), or "none"
proof_time() {
  python3 - "$RECORD" <<'PY'
import json, sys
try:
    record = json.load(open(sys.argv[1]))
except Exception:
    print('none')
    sys.exit()
times = [item.get('time') for entry in (record.get('stacks') or {}).values()
         for item in (entry.get('devices') or {}).values() if isinstance(item.get('time'), (int, float))]
print('%.3f' % max(times) if times else 'none')
PY
}
utc() { if [ "$1" = none ]; then echo none; else date -u -d "@${1%.*}" +%Y-%m-%dT%H:%M:%SZ; fi; }
apps() { nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits 2>&1; }
# unexpected FOUND WANTED: ' UNEXPECTED' when they differ
unexpected() { [ "$1" = "$2" ] || echo ' UNEXPECTED'; }
# step N TEXT RC EXPECTED(0|nonzero): one summary line; a wrong rc fails the run
step() {
  local ok=yes
  if [ "$4" = 0 ]; then [ "$3" -eq 0 ] || ok=no; else [ "$3" -ne 0 ] || ok=no; fi
  [ $ok = yes ] || status=1
  say "$1. $2: rc $3 (expected $4)$([ $ok = yes ] || echo ' UNEXPECTED')"
}

# --- 0. full on the idle GPU --------------------------------------------------
{ nvidia-smi; echo; apps; } >"$OUT/nvidia-smi-idle.txt" 2>&1
idle_apps=$(apps | grep -c '[0-9]')
say "before: compute processes on the GPU: $idle_apps (expected 0)"
[ "$idle_apps" -eq 0 ] || status=1
play 0-full-idle full; rc=$?; full_secs=$secs
step 0 "full, idle GPU (smoke and kernel checks): $full_secs s (today's full verification)" $rc 0
check proven "$OUT/reports-0-full-idle" || status=1
t0=$(proof_time)
say "   proof record time, GPU 0: $t0 ($(utc "$t0"))"

# --- 1. the second program ----------------------------------------------------
HOG=${H200_BUSY_HOG:-/tmp/h200-busy-hog.py}
HOG_RESULT=/tmp/h200-busy-hog.json HOG_READY=/tmp/h200-busy-hog.ready
HOLD_GIB=110 HOG_SECONDS=90
rm -f "$HOG_RESULT" "$HOG_READY"
if [ -z "${H200_BUSY_HOG:-}" ]; then
cat >"$HOG" <<'PY'
"""Another program on the GPU: holds HOLD_GIB GiB and runs bf16 matrix products
for a fixed number of iterations (set from the first 50 so that the loop takes
about SECONDS s), checking each result against the first one, element by
element and by its fp32 sum. Writes the ready file (its pid) once it holds the
memory, and at the end one JSON line to RESULT, an exception included."""
import json, os, sys, time, traceback

result_path, ready_path, hold_gib, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
result = dict(pid=os.getpid(), hold_gib=hold_gib, target_seconds=seconds, size=8192, iterations_planned=None,
              iterations=0, mismatches=None, sum_mismatches=None, nonfinite=None, exception=None)
started = time.time()
try:
    import torch

    device = torch.device('cuda', 0)
    torch.cuda.set_device(device)
    hold = torch.empty(int(hold_gib * 2 ** 30), dtype=torch.uint8, device=device)
    hold.fill_(0x5A)
    generator = torch.Generator(device=device)
    generator.manual_seed(1234)
    n = result['size']
    a = torch.randn(n, n, device=device, generator=generator).to(torch.bfloat16)
    b = torch.randn(n, n, device=device, generator=generator).to(torch.bfloat16)
    c = torch.empty_like(a)
    reference = torch.empty_like(a)
    torch.matmul(a, b, out=c)  # warm-up: cuBLAS's choice and workspace, then the same call as the loop's
    torch.matmul(a, b, out=reference)
    reference_sum = reference.sum(dtype=torch.float32)
    counts = torch.zeros(3, dtype=torch.int64, device=device)  # mismatches, sum mismatches, non-finite
    torch.cuda.synchronize()
    result['first_sum'] = float(reference_sum)
    result['first_nonfinite'] = int((~torch.isfinite(reference)).sum())
    result['memory_allocated_gib'] = round(torch.cuda.memory_allocated(device) / 2 ** 30, 2)
    with open(ready_path + '.tmp', 'w') as out:
        out.write('%d\n' % os.getpid())
    os.rename(ready_path + '.tmp', ready_path)

    def iteration():
        torch.matmul(a, b, out=c)
        counts[0] += (c != reference).any()
        counts[1] += c.sum(dtype=torch.float32) != reference_sum
        counts[2] += (~torch.isfinite(c)).any()

    calibration = 50
    begun = time.time()
    for _ in range(calibration):
        iteration()
    torch.cuda.synchronize()
    per_iteration = (time.time() - begun) / calibration
    planned = calibration + max(100, int(seconds / per_iteration))
    result['iterations_planned'] = planned
    result['iterations'] = calibration
    for i in range(calibration, planned):
        iteration()
        result['iterations'] = i + 1
        if i % 1000 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    result['mismatches'], result['sum_mismatches'], result['nonfinite'] = (int(x) for x in counts.tolist())
    result['loop_seconds'] = round(time.time() - begun, 2)
    result['ms_per_iteration'] = round(result['loop_seconds'] * 1000.0 / result['iterations'], 3)
    result['tflops'] = round(2.0 * n ** 3 * result['iterations'] / result['loop_seconds'] / 1e12, 1)
    result['hold_intact_first_gib'] = bool((hold[:2 ** 30] == 0x5A).all())
except BaseException as exc:  # an OOM or anything else: in the result line, never lost
    result['exception'] = '%s: %s' % (type(exc).__name__, exc)
    result['traceback'] = traceback.format_exc()[-1500:]
result['seconds'] = round(time.time() - started, 2)
with open(result_path + '.tmp', 'w') as out:
    out.write(json.dumps(result, sort_keys=True) + '\n')
os.rename(result_path + '.tmp', result_path)
PY
fi
setsid python3 "$HOG" "$HOG_RESULT" "$HOG_READY" "$HOLD_GIB" "$HOG_SECONDS" >"$OUT/hog.log" 2>&1 </dev/null &
launched=$!
hogpid="" listed=no
for _ in $(seq 1 360); do
  [ -s "$HOG_READY" ] && hogpid=$(tr -dc 0-9 <"$HOG_READY")
  if [ -n "$hogpid" ] && apps | cut -d, -f1 | tr -d ' ' | grep -qx "$hogpid"; then listed=yes; break; fi
  [ -s "$HOG_RESULT" ] && break  # it ended before it was listed
  sleep 0.5
done
[ $listed = yes ] || status=1
say "1. second program: pid ${hogpid:-none}, listed by nvidia-smi: $listed (expected yes); holds $HOLD_GIB GiB, bf16 products for ~$HOG_SECONDS s$(unexpected "$listed" yes)"
{ nvidia-smi; echo; apps; } >"$OUT/nvidia-smi-busy.txt" 2>&1
say "   nvidia-smi compute processes: $(apps | tr '\n' ';')"

# nvidia-smi's compute processes every 0.2 s during steps 2-4
monitor() { while :; do echo "$(date +%T.%N | cut -c1-12) $(apps | tr '\n' ';')"; sleep 0.2; done; }
monitor >>"$OUT/compute-apps.txt" 2>&1 &
monitor_pid=$!

# --- 2. in_service while it runs -----------------------------------------------
echo "# step 2 in_service $(date +%T.%N | cut -c1-12)" >>"$OUT/compute-apps.txt"
play 2-in_service-busy in_service; rc=$?; in_service_busy_secs=$secs
step 2 "in_service, GPU busy (pid $hogpid): $secs s" $rc 0
check in_service "$OUT/reports-2-in_service-busy" "$hogpid" || status=1

# --- 3. auto while it runs -----------------------------------------------------
echo "# step 3 auto $(date +%T.%N | cut -c1-12)" >>"$OUT/compute-apps.txt"
play 3-auto-busy auto; rc=$?
step 3 "auto, GPU busy (pid $hogpid): $secs s" $rc 0
check auto "$OUT/reports-3-auto-busy" "$hogpid" || status=1

# --- 4. full while it runs -----------------------------------------------------
echo "# step 4 full $(date +%T.%N | cut -c1-12)" >>"$OUT/compute-apps.txt"
play 4-full-busy full; rc=$?
echo "# step 4 ended $(date +%T.%N | cut -c1-12)" >>"$OUT/compute-apps.txt"
step 4 "full, GPU busy (pid $hogpid): $secs s" $rc nonzero
check refused "$OUT/reports-4-full-busy" "$hogpid" || status=1
kill "$monitor_pid" 2>/dev/null; wait "$monitor_pid" 2>/dev/null
still=$(apps | cut -d, -f1 | tr -d ' ' | grep -cx "${hogpid:-x}")
seen=$(grep -v '^#' "$OUT/compute-apps.txt" | cut -d' ' -f2- | tr ';' '\n' | cut -d, -f1 | tr -dc '0-9\n' | sort -u | grep . | tr '\n' ' ')
lines=$(grep -vc '^#' "$OUT/compute-apps.txt")
[ "$seen" = "$hogpid " ] && [ "$still" -eq 1 ] || status=1
say "   compute processes nvidia-smi listed during steps 2-4 ($lines reads): ${seen:-none}(expected only $hogpid)$(unexpected "$seen" "$hogpid ")"
say "   still running after step 4: $still (expected 1)$(unexpected "$still" 1)"
t4=$(proof_time)
[ "$t4" = "$t0" ] || status=1
say "   proof record time after steps 2-4: $t4 (expected unchanged: $t0)$(unexpected "$t4" "$t0")"

# --- 5. the second program ends -----------------------------------------------
for _ in $(seq 1 600); do [ -s "$HOG_RESULT" ] && break; sleep 0.5; done  # 300 s at most
wait "$launched" 2>/dev/null
cp "$HOG_RESULT" "$OUT/hog-result.json" 2>/dev/null
python3 - "$HOG_RESULT" <<'PY' 2>&1 | tee -a "$SUMMARY"
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as exc:
    print('5. second program: no result line (%s) UNEXPECTED' % exc)
    sys.exit(1)
ok = (r.get('exception') is None and r.get('iterations_planned') and r.get('iterations') == r.get('iterations_planned')
      and r.get('mismatches') == 0 and r.get('sum_mismatches') == 0 and r.get('nonfinite') == 0)
print('5. second program pid %s: %s/%s iterations in %s s (%s ms each, %s TFLOP/s), mismatches %s, sum mismatches %s, '
      'non-finite %s, exception %s (expected all iterations, 0, 0, 0, none)%s'
      % (r.get('pid'), r.get('iterations'), r.get('iterations_planned'), r.get('loop_seconds'), r.get('ms_per_iteration'),
         r.get('tflops'), r.get('mismatches'), r.get('sum_mismatches'), r.get('nonfinite'), r.get('exception'),
         '' if ok else ' UNEXPECTED'))
sys.exit(0 if ok else 1)
PY
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

# --- 6. full again on the idle GPU ---------------------------------------------
play 6-full-idle full; rc=$?
step 6 "full, idle GPU again: $secs s" $rc 0
check proven "$OUT/reports-6-full-idle" || status=1
t6=$(proof_time)
newer=$(awk -v a="$t0" -v b="$t6" 'BEGIN { print (a != "none" && b != "none" && b + 0 > a + 0) ? "yes" : "no" }')
[ "$newer" = yes ] || status=1
say "   proof record time, GPU 0: step 0 $t0 ($(utc "$t0")), step 6 $t6 ($(utc "$t6")); newer: $newer (expected yes)$(unexpected "$newer" yes)"
cp "$RECORD" "$OUT/proof-record.json" 2>/dev/null

# --- 7. in_service against full on the idle GPU, alternated --------------------
{
  echo "verify.yml (1 host, -c local) on the idle GPU: in_service vs full (smoke and kernel checks), alternated, wall seconds"
  sum_in=0 sum_full=0 timing_ok=yes
  for i in 1 2 3; do
    play "t-in-$i" in_service; rc_in=$?; a=$secs
    python3 /tmp/h200-busy-check.py in_service_idle "$OUT/reports-t-in-$i" >/dev/null || rc_in="$rc_in (report not as expected)"
    play "t-full-$i" full; rc_full=$?; b=$secs
    python3 /tmp/h200-busy-check.py proven "$OUT/reports-t-full-$i" >/dev/null || rc_full="$rc_full (report not as expected)"
    [ "$rc_in" = 0 ] && [ "$rc_full" = 0 ] || timing_ok=no
    sum_in=$(awk -v s="$sum_in" -v x="$a" 'BEGIN { print s + x }')
    sum_full=$(awk -v s="$sum_full" -v x="$b" 'BEGIN { print s + x }')
    echo "in_service $a s (rc $rc_in)  full $b s (rc $rc_full)  full/in_service $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f", b / a }')"
  done
  echo "mean: in_service $(awk -v s="$sum_in" 'BEGIN { printf "%.2f", s / 3 }') s, full $(awk -v s="$sum_full" 'BEGIN { printf "%.2f", s / 3 }') s, full/in_service $(awk -v a="$sum_in" -v b="$sum_full" 'BEGIN { printf "%.2f", b / a }'); all rc 0 and reports as expected: $timing_ok"
} >"$OUT/7-timing.txt" 2>&1
cat "$OUT/7-timing.txt"
grep -q 'as expected: yes$' "$OUT/7-timing.txt" || status=1
say "7. timing, idle GPU, 3 each alternated: $(tail -n 1 "$OUT/7-timing.txt")$(grep -q 'as expected: yes$' "$OUT/7-timing.txt" || echo ' UNEXPECTED')"

# --- 8. max_kernel_proof_age_hours ----------------------------------------------
sleep 5
play 8-age-0.0001 in_service ', "max_kernel_proof_age_hours": 0.0001'; rc=$?
step 8 "in_service, max_kernel_proof_age_hours 0.0001, proof some seconds old: $secs s" $rc nonzero
check stale "$OUT/reports-8-age-0.0001" || status=1
play 8-age-24 in_service ', "max_kernel_proof_age_hours": 24'; rc=$?
step 8 "in_service, max_kernel_proof_age_hours 24: $secs s" $rc 0
check in_service_idle "$OUT/reports-8-age-24" || status=1

say "times: full on the idle GPU (step 0) $full_secs s; in_service on the busy GPU (step 2) $in_service_busy_secs s"
say "exit status: $status (0: every step as expected)"

# The logs name no machine's own paths: the checkout and $OUT are written as such.
# each step's report as JSON and Markdown only (no HTML, metrics or history copies)
rm -rf "$OUT"/t-*.log "$OUT"/reports-t-* "$OUT"/reports-*/fleet-report.html "$OUT"/reports-*/fleet-report.prom \
  "$OUT"/reports-*/history "$OUT"/reports-*/textfile
find "$OUT" -type f \( -name '*.log' -o -name '*.txt' -o -name '*.md' -o -name '*.json' \) \
  -exec sed -i "s#$PWD#<repo>#g; s#$OUT#\$OUT#g" {} +
exit $status
