#!/usr/bin/env bash
# `make test`: every test the project has, in one run, ending with one line
# "N passed, N failed". Stages run even when an earlier one failed, so one run
# shows everything that is broken; the exit status is non-zero on any failure.
# Counting: pytest counts its test cases; lint, sanity and each molecule
# scenario count as one test each. Each stage prints its time; the ten
# slowest test cases are listed at the end.
#
# Two lanes run side by side, because most of a stage's time is spent waiting
# on a test host (ssh, a module's Python starting, an install), not on the
# controller's two cores:
#   hosts   pytest tests/integration -m sandbox   (the tests on the sandbox fleet)
#   local   lint, changelog, unit, sanity, pytest tests/integration -m "not sandbox"
# (the test hosts and the wheelhouse are made beside lint, changelog and unit:
# see setup below)
# and then each lane takes the next molecule scenario from one shared queue
# (longest first), so neither lane idles while the other still has work.
# Nothing is shared between the lanes but the caches that lock themselves
# (tests/integration/conftest.py); the local lane's ansible fact cache is its own.
#
#   scripts/run-tests.sh           everything (`make test`)
#   scripts/run-tests.sh --quick   lint, changelog, sanity, unit and the
#                                  uv_venv scenario (`make test-quick`)
set -uo pipefail
quick=false
[ "${1:-}" = "--quick" ] && quick=true
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
logs="$root/.cache/test-logs"
rm -rf "$logs"; mkdir -p "$logs/claims"
results="$logs/results"   # one line per counted group: PASSED FAILED LABEL
: >"$results"
# scripts/sandbox.py appends every failure of its own here; the first is
# printed at the end, where a truncated CI log still shows it.
export GPUFLEET_SANDBOX_FAILURE_LOG="$logs/sandbox-failures.log"
t0=$(date +%s)
# The suite's disk: a test's tmp_path goes when it passes (retention "failed",
# in count_pytest below: a failed one stays for reading), and the least free space on the
# filesystem that holds the checkout, the sandbox hosts and the caches is
# sampled every 10 s and printed at the end, since a full disk fails tests
# far from their cause.
( while :; do df -Pk "$root" | awk 'NR == 2 {print $4}'; sleep 10; done >"$logs/disk-free.kib" ) &
disk_pid=$!
trap 'kill "$disk_pid" 2>/dev/null' EXIT

stage() {  # stage NAME TIMEOUT_S CMD...   (one write per stage: lanes do not interleave lines)
  local name=$1 limit=$2; shift 2
  local log="$logs/$name.log" s rc msg
  s=$(date +%s)
  timeout --kill-after=30 "$limit" "$@" >"$log" 2>&1; rc=$?
  [ $rc -eq 124 ] && echo "(timed out after ${limit}s)" >>"$log"
  msg=$(printf '==> %-32s %s (%ss)' "$name" "$([ $rc -eq 0 ] && echo ok || echo "FAILED rc=$rc")" "$(( $(date +%s) - s ))")
  [ $rc -ne 0 ] && msg+=$'\n'$(tail -n 40 "$log" | sed 's/^/    /')
  printf '%s\n' "$msg"
  return $rc
}

record() { printf '%s %s %s\n' "$1" "$2" "$3" >>"$results"; }

count_one() {  # count_one stage NAME ...
  if "$@"; then record 1 0 "$2"; else record 0 1 "$2"; fi
}

count_pytest() {  # count_pytest NAME TIMEOUT PYTEST-ARGS...
  local name=$1 limit=$2; shift 2
  local xml="$logs/$name.xml"
  GPUFLEET_TEST_TIMES="$logs/$name.times" \
    stage "$name" "$limit" pytest -q -p no:cacheprovider --basetemp="$logs/tmp-$name" \
      -o tmp_path_retention_policy=failed --junitxml="$xml" "$@"
  local rc=$? t f e s
  if [ -s "$xml" ]; then
    read -r t f e s < <(python3 -c '
import sys, xml.etree.ElementTree as E
r = E.parse(sys.argv[1]).getroot()
suites = [r] if r.tag == "testsuite" else list(r)
g = lambda k: sum(int(x.get(k, 0)) for x in suites)
print(g("tests"), g("failures"), g("errors"), g("skipped"))' "$xml")
    record $((t - f - e - s)) $((f + e)) "$name ($((f + e)) case(s))"
    [ "$s" -gt 0 ] && echo "    $name: $s skipped (see $xml)"
  fi
  # 5: nothing collected (a lane with no test of its kind) is not a failure
  if [ $rc -ne 0 ] && [ $rc -ne 1 ] && [ $rc -ne 5 ]; then record 0 1 "$name (pytest rc=$rc)"; fi
}

# The molecule scenarios, longest first as measured (any scenario not named
# here follows, by name): each lane claims the next one with mkdir.
scenarios=()
for s in flashinfer fleet cuda_toolkit_apt activate sgl_kernel verify torch_nightly cuda_toolkit uv_venv $(ls molecule); do
  [ -e "molecule/$s/molecule.yml" ] && [[ " ${scenarios[*]} " != *" $s "* ]] && scenarios+=("$s")
done
$quick && scenarios=(uv_venv)

molecule_queue() {
  local s
  for s in "${scenarios[@]}"; do
    mkdir "$logs/claims/$s" 2>/dev/null || continue
    count_one stage "molecule-$s" 1500 molecule test -s "$s"
  done
}

# The set-up the tests need beyond the controller venv (make test-hosts: apt
# packages, podman and the Debian test image; make wheelhouse: torch's wheels
# and the fixture wheels) runs beside the local lane's first stages, which
# need none of it: on a fresh machine it is minutes, mostly waiting on the
# network. The stages that need it wait for it; when it fails it counts as
# one failure, and they are not run.
setup_rc="$logs/setup.rc"
setup_targets=(test-hosts)
$quick || setup_targets+=(wheelhouse)
{ stage setup 2400 make --no-print-directory -C "$root" "${setup_targets[@]}"; rc=$?
  [ $rc -eq 0 ] || record 0 1 "setup (make ${setup_targets[*]})"
  echo $rc >"$setup_rc.part" && mv "$setup_rc.part" "$setup_rc"; } &
setup_pid=$!

setup_ok() {  # waits for the set-up; false when it failed
  while [ ! -e "$setup_rc" ]; do sleep 1; done
  [ "$(cat "$setup_rc")" = 0 ]
}

lane_hosts() {
  local down_pid=""
  setup_ok || return 0
  if ! $quick; then
    # The fleet outlives the pytest session and is removed beside this lane's first
    # molecule scenario: removing three hosts that hold a few GiB of venvs
    # takes 30-45 s, about half of it waiting on podman, which the lane no
    # longer waits out. A failed removal counts as a failure.
    GPUFLEET_KEEP_SANDBOX=1 count_pytest integration-fleet 4800 tests/integration -m sandbox
    { stage sandbox-down 600 python3 scripts/sandbox.py down || record 0 1 "sandbox-down"; } &
    down_pid=$!
  fi
  molecule_queue
  [ -z "$down_pid" ] || wait "$down_pid"
}

lane_local() {
  count_one stage lint 900 ansible-lint
  count_one stage changelog-lint 120 antsibull-changelog lint
  count_pytest unit 600 tests/unit
  setup_ok || return 0
  count_one stage sanity 1200 scripts/sanity.sh
  $quick || ANSIBLE_CACHE_PLUGIN_CONNECTION="$root/.cache/facts-local" \
    count_pytest integration-local 4800 tests/integration -m "not sandbox"
  molecule_queue
}

lane_hosts & hosts_pid=$!
lane_local & local_pid=$!
wait $hosts_pid $local_pid $setup_pid

# The end of the output is what a truncated CI log keeps: after the slowest
# test cases, the sandbox's first failure (or remade host), then the failed
# test cases with their first line.
echo
python3 - "$logs" "$GPUFLEET_SANDBOX_FAILURE_LOG" <<'PY'
import collections, glob, os, sys, xml.etree.ElementTree as E
logs, sandbox_log = sys.argv[1:3]
cases, failed = [], []
for path in sorted(glob.glob(logs + "/*.xml")):
    for case in E.parse(path).getroot().iter("testcase"):
        name = case.get("classname", "") + "::" + case.get("name", "")
        cases.append((float(case.get("time", 0)), name))
        for bad in list(case.findall("failure")) + list(case.findall("error")):
            text = (bad.get("message") or bad.text or "").strip().splitlines() or [""]
            failed.append("%s: %s" % (name, text[0][:160]))
# a stage cut short by its timeout has no XML: its per-phase times (conftest.py)
for path in glob.glob(logs + "/*.times"):
    if os.path.exists(path[:-len(".times")] + ".xml"):
        continue
    total = collections.Counter()
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            seconds, when, outcome, nodeid = line.rstrip("\n").split(" ", 3)
            total[nodeid] += float(seconds)
    cases += [(t, n + " (stage cut short)") for n, t in total.items()]
print("slowest test cases:")
for seconds, name in sorted(cases, reverse=True)[:10]:
    print("    %7.1fs  %s" % (seconds, name))
print()
if os.path.exists(sandbox_log) and os.path.getsize(sandbox_log):
    with open(sandbox_log, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    events = sum(1 for line in text.splitlines() if line.startswith("sandbox.py "))
    print("sandbox failures and remade hosts: %d; the first:" % events)
    for line in text[:2500].splitlines()[:12]:
        print("    " + line)
if failed:
    print("failed test cases: %d%s" % (len(failed), "; the first 8:" if len(failed) > 8 else ":"))
    for line in failed[:8]:
        print("    " + line)
PY
read -r passed failed < <(awk '{p += $1; f += $2} END {print p + 0, f + 0}' "$results")
awk '$2 > 0 {$1 = $2 = ""; sub(/^  /, ""); print "failed: " $0}' "$results"
kill "$disk_pid" 2>/dev/null
sleep 0.1
awk 'NR == 1 || $1 < least {least = $1} {last = $1} END {printf "disk: least free %.1f GiB during the run, %.1f GiB at the end\n", least / 1048576, last / 1048576}' "$logs/disk-free.kib"
echo "logs: .cache/test-logs/  total time: $(( $(date +%s) - t0 ))s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
