#!/usr/bin/env bash
# Side by side, on this host: create a venv and install torch 2.13.0 from a
# local wheelhouse (no index) with uv, and the same with python -m venv + pip.
# The variants run in turn (uv, uv --no-cache, pip, uv, ...) so drift of the
# machine's speed hits all of them alike; medians and ratios are printed.
#
#   bench/uv_vs_pip.sh [-n RUNS] [WHEELHOUSE]     the comparison (default 3 runs)
#   bench/uv_vs_pip.sh --one uv|uv-nocache|pip [WHEELHOUSE]
#                                                 one run of one variant, for an
#                                                 outside timer (/usr/bin/time -v)
#
# uv is the pinned one the roles install (uv 0.13.9; UV=/path/to/uv to choose).
# "uv" keeps its cache between runs, as on a host that deploys again; "uv-nocache"
# unpacks every wheel each time, as a first deploy does. User config of both
# tools is ignored so that only the tools differ. WHEELHOUSE defaults to
# .cache/wheelhouse; torch's dependencies are added to it with pip download
# (through pip's own configuration) when they are missing.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
UV=${UV:-uv}
PY=${PYTHON:-python3}
TORCH=${TORCH_REQUIREMENT:-torch==2.13.0}
RUNS=3
ONE=""
while [ $# -gt 0 ]; do
  case "$1" in
    -n) RUNS=$2; shift 2 ;;
    --one) ONE=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
WH=$(cd "${1:-$ROOT/.cache/wheelhouse}" && pwd)

ensure_wheelhouse() {
  # torch needs sympy, networkx, ... at install time: a --no-index install
  # finds them only if they are in the wheelhouse too.
  if ! compgen -G "$WH/sympy-*.whl" >/dev/null || ! compgen -G "$WH/torch-*.whl" >/dev/null; then
    echo "wheelhouse: adding $TORCH and its dependencies to $WH" >&2
    "$PY" -m pip download -q --only-binary=:all: -d "$WH" "$TORCH" >&2
  fi
}

run_variant() {
  local variant=$1 dir
  dir=$(mktemp -d)
  case "$variant" in
    uv|uv-nocache)
      local cache=()
      [ "$variant" = uv-nocache ] && cache=(--no-cache)
      UV_NO_CONFIG=1 "$UV" venv -q "${cache[@]}" --python "$PY" "$dir/venv"
      UV_NO_CONFIG=1 "$UV" pip install -q "${cache[@]}" --python "$dir/venv/bin/python" \
        --no-index --find-links "$WH" "$TORCH"
      ;;
    pip)
      PIP_CONFIG_FILE=/dev/null "$PY" -m venv "$dir/venv"
      PIP_CONFIG_FILE=/dev/null "$dir/venv/bin/python" -m pip install -q --disable-pip-version-check \
        --no-index --find-links "$WH" "$TORCH"
      ;;
    *) echo "unknown variant $variant (uv, uv-nocache, pip)" >&2; rm -rf "$dir"; return 2 ;;
  esac
  rm -rf "$dir"
}

# Seconds, 3 decimals, of one run (the check that torch imports is not timed).
timed() {
  local start end
  start=$(date +%s%N)
  run_variant "$1" >/dev/null
  end=$(date +%s%N)
  echo "$(( (end - start) / 1000000 ))" | awk '{printf "%.3f\n", $1 / 1000}'
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

ensure_wheelhouse
if [ -n "$ONE" ]; then
  run_variant "$ONE"
  exit 0
fi

echo "uv: $(UV_NO_CONFIG=1 "$UV" --version); pip: $("$PY" -m pip --version | cut -d' ' -f1-2); python: $("$PY" --version)"
echo "wheelhouse: $WH ($TORCH, $(find "$WH" -maxdepth 1 -name "*.whl" | wc -l) wheels); runs: $RUNS after one warm-up of uv"
# Proof, untimed, that each variant yields a venv whose torch imports.
check=$(mktemp -d)
UV_NO_CONFIG=1 "$UV" venv -q --python "$PY" "$check/venv"
UV_NO_CONFIG=1 "$UV" pip install -q --python "$check/venv/bin/python" --no-index --find-links "$WH" "$TORCH"
echo "torch in the uv venv: $("$check/venv/bin/python" -c 'import torch; print(torch.__version__)')"
rm -rf "$check"

declare -A times=([uv]="" [uv-nocache]="" [pip]="")
for i in $(seq 1 "$RUNS"); do
  for variant in uv uv-nocache pip; do
    t=$(timed "$variant")
    times[$variant]+="$t"$'\n'
    printf 'run %d %-10s %8.3f s\n' "$i" "$variant" "$t"
  done
done
uv_med=$(printf '%s' "${times[uv]}" | median)
uvnc_med=$(printf '%s' "${times[uv-nocache]}" | median)
pip_med=$(printf '%s' "${times[pip]}" | median)
printf '\nmedian wall seconds: uv %.3f | uv --no-cache %.3f | venv+pip %.3f\n' "$uv_med" "$uvnc_med" "$pip_med"
awk -v p="$pip_med" -v u="$uv_med" -v n="$uvnc_med" \
  'BEGIN {printf "ratio pip/uv: %.1fx (uv cache warm), %.1fx (uv --no-cache)\n", p / u, p / n}'
