#!/usr/bin/env bash
# `make test`: every test the project has, in one run, ending with one line
# "N passed, N failed". Stages run even when an earlier one failed, so one run
# shows everything that is broken; the exit status is non-zero on any failure.
# Counting: pytest counts its test cases; lint, sanity and each molecule
# scenario count as one test each. Each stage prints its time; the ten
# slowest test cases are listed at the end.
#
#   scripts/run-tests.sh           everything (`make test`)
#   scripts/run-tests.sh --quick   lint, changelog, sanity, unit and the
#                                  cuda_toolkit scenario (`make test-quick`)
set -uo pipefail
quick=false
[ "${1:-}" = "--quick" ] && quick=true
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
logs="$root/.cache/test-logs"
rm -rf "$logs"; mkdir -p "$logs"
passed=0; failed=0; failures=()
# scripts/sandbox.py appends every failure of its own here; the first is
# printed at the end, where a truncated CI log still shows it.
export GPUFLEET_SANDBOX_FAILURE_LOG="$logs/sandbox-failures.log"
t0=$(date +%s)

stage() {  # stage NAME TIMEOUT_S CMD...
  local name=$1 limit=$2; shift 2
  local log="$logs/$name.log" s rc
  s=$(date +%s)
  printf '==> %-32s ' "$name"
  timeout --kill-after=30 "$limit" "$@" >"$log" 2>&1; rc=$?
  [ $rc -eq 124 ] && echo "(timed out after ${limit}s)" >>"$log"
  printf '%s (%ss)\n' "$([ $rc -eq 0 ] && echo ok || echo "FAILED rc=$rc")" "$(( $(date +%s) - s ))"
  [ $rc -ne 0 ] && { tail -n 40 "$log" | sed 's/^/    /'; }
  return $rc
}

count_one() { if "$@"; then passed=$((passed+1)); else failed=$((failed+1)); failures+=("$2"); fi; }

count_pytest() {  # count_pytest NAME TIMEOUT PATH...
  local name=$1 limit=$2; shift 2
  local xml="$logs/$name.xml"
  stage "$name" "$limit" pytest -q -p no:cacheprovider --junitxml="$xml" "$@"
  local rc=$?
  if [ -s "$xml" ]; then
    read -r t f e s < <(python3 -c '
import sys, xml.etree.ElementTree as E
r = E.parse(sys.argv[1]).getroot()
suites = [r] if r.tag == "testsuite" else list(r)
g = lambda k: sum(int(x.get(k, 0)) for x in suites)
print(g("tests"), g("failures"), g("errors"), g("skipped"))' "$xml")
    passed=$((passed + t - f - e - s)); failed=$((failed + f + e))
    [ $((f + e)) -gt 0 ] && failures+=("$name ($((f + e)) case(s))")
    [ "$s" -gt 0 ] && echo "    ($s skipped)"
  fi
  if [ $rc -ne 0 ] && [ $rc -ne 1 ]; then failed=$((failed+1)); failures+=("$name (pytest rc=$rc)"); fi
}

count_one stage lint 900 ansible-lint
count_one stage changelog-lint 120 antsibull-changelog lint
count_one stage sanity 1200 scripts/sanity.sh
count_pytest unit 600 tests/unit
scenarios=(molecule/*/molecule.yml)
$quick && scenarios=(molecule/cuda_toolkit/molecule.yml)
for scenario in "${scenarios[@]}"; do
  [ -e "$scenario" ] || continue
  s=$(basename "$(dirname "$scenario")")
  count_one stage "molecule-$s" 1500 molecule test -s "$s"
done
$quick || count_pytest integration 4200 tests/integration

echo
echo "slowest test cases:"
python3 - "$logs" <<'PY'
import glob, sys, xml.etree.ElementTree as E
cases = []
for path in glob.glob(sys.argv[1] + "/*.xml"):
    for case in E.parse(path).getroot().iter("testcase"):
        cases.append((float(case.get("time", 0)), case.get("classname", "") + "::" + case.get("name", "")))
for seconds, name in sorted(cases, reverse=True)[:10]:
    print("    %7.1fs  %s" % (seconds, name))
PY

echo
if [ -s "$GPUFLEET_SANDBOX_FAILURE_LOG" ]; then
  echo "sandbox failures: $(grep -c '^sandbox.py ' "$GPUFLEET_SANDBOX_FAILURE_LOG"); the first:"
  head -c 2500 "$GPUFLEET_SANDBOX_FAILURE_LOG" | head -n 30 | sed 's/^/    /'
fi
[ ${#failures[@]} -gt 0 ] && printf 'failed: %s\n' "${failures[@]}"
echo "logs: .cache/test-logs/  total time: $(( $(date +%s) - t0 ))s"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
