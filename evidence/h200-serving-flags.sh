#!/usr/bin/env bash
# GPU evidence for the serving flags that the verification writes inside the
# verified venv (torch_verify serving_name, through playbooks/verify.yml with
# a model), and for the Xid read as root inside the verification's own task
# (gpufleet_xid: become), on the GPU test machine (H200, or an H100 lent in
# its place) from the repository root, no network, in one call (about 1 min). The machine is controller and host
# at once (connection local); the stable path /tmp/h200-ml-env links to the
# venv of the machine's python3 (torch 2.11.0+cu130), or to a stand-in venv
# whose bin/python is a system python3. The model is qwen3-30b-a3b at tp 1 with
# gpufleet_backend_families [] (its GEMMs are checked at the shard shapes on
# the GPU; no family needs a flag, so no flashinfer module is needed), and
# ansible-core 2.19.14 comes from wheels (.device/ans, h200-device-prep.sh).
# Steps, each a verify.yml run:
#   1. first run: the files are written, the task says changed;
#   2. again: nothing changes (the files' checksums and mtimes are the same);
#   3. the .env file edited by hand, then --check: says changed, writes nothing;
#   4. a real run: the file is written back;
#   5. a run that fails (device_count 2 expected): the files of the last
#      pass are kept.
# Everything goes to $OUT.
set -uo pipefail
OUT=${OUT:?set OUT}
exec > >(tee "$OUT/h200-serving-flags.log") 2>&1
export PYTHONUNBUFFERED=1 LC_ALL=C.UTF-8
echo "== machine"; date -u; nproc; id -un
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
echo "sudo: $(command -v sudo || echo none)"
python3 -m pip install -q --no-index --no-deps --target /tmp/ans .device/ans/*.whl || exit 1
mkdir -p .collections/ansible_collections/gpufleet && ln -sfn "$PWD" .collections/ansible_collections/gpufleet/inference
export PYTHONPATH=/tmp/ans ANSIBLE_CONFIG="$PWD/ansible.cfg" ANSIBLE_COLLECTIONS_PATH=$PWD/.collections \
  ANSIBLE_NOCOLOR=1 ANSIBLE_LOCALHOST_WARNING=false
# the stable path links to the venv python3 belongs to (the interpreter with
# torch); a system python3 gets a stand-in venv whose bin/python is it
rm -rf /tmp/h200-venv /tmp/h200-ml-env
VENV=$(python3 -c 'import sys; print(sys.prefix if sys.prefix != sys.base_prefix else "")')
if [ -z "$VENV" ] || [ ! -x "$VENV/bin/python" ]; then
  VENV=/tmp/h200-venv; mkdir -p "$VENV/bin" && ln -sfn "$(command -v python3)" "$VENV/bin/python"
fi
ln -sfn "$VENV" /tmp/h200-ml-env
echo "stable path: /tmp/h200-ml-env -> $VENV"
printf 'h200 ansible_connection=local ansible_python_interpreter=%s\n' "$(command -v python3)" >/tmp/h200-inventory.ini
FILES=("$VENV/gpufleet-serving.json" "$VENV/gpufleet-serving.env")
rm -f "${FILES[@]}"
state() { for f in "${FILES[@]}"; do [ -e "$f" ] && echo "$(sha256sum "$f" | cut -c1-16) $(stat -c %Y "$f") $f" || echo "absent $f"; done; }
play() {  # play LABEL EXPECT_JSON [ansible-playbook options...]
  local label=$1 expect=$2; shift 2
  python3 -m ansible playbook -i /tmp/h200-inventory.ini playbooks/verify.yml "$@" -e "{
    \"gpufleet_venv_link\": \"/tmp/h200-ml-env\", \"gpufleet_report_dir\": \"$OUT/reports-$label\",
    \"gpufleet_model\": \"qwen3-30b-a3b\", \"gpufleet_backend_families\": [], \"gpufleet_xid\": \"become\",
    \"gpufleet_verify_smoke\": false, \"gpufleet_verify_kernels\": false, \"gpufleet_gpu_required\": true,
    \"gpufleet_expect\": $expect}" >"$OUT/$label.log" 2>&1
  local rc=$?
  echo "rc=$rc; the verification task: $(grep -A1 'Check the inputs, read the stable path' "$OUT/$label.log" | tail -1)"
  grep -E '^h200 +:' "$OUT/$label.log"
  state
  return 0
}
# the card this machine has (H200, or the H100 it may lend instead)
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | awk '{print $2}')
GOOD="{\"device_count\": 1, \"device_name\": \"$CARD\"}"
echo "== 1. first run"; play 1 "$GOOD"
for f in "${FILES[@]}"; do echo "--- $f"; cat "$f"; done
python3 - "$OUT/reports-1/fleet-report.json" <<'PY'
import json, sys
row = json.load(open(sys.argv[1]))["hosts"][0]
print("report: status %s; xid: %s" % (row["status"], json.dumps(row.get("xid"))[:400]))
print("model in the report: %s" % json.dumps(row.get("model"))[:1500])
PY
echo "== 2. again"; play 2 "$GOOD"
echo "== 3. the .env edited by hand, then --check"
echo "# edited by hand" >>"$VENV/gpufleet-serving.env"; state
play 3 "$GOOD" --check
tail -1 "$VENV/gpufleet-serving.env"
echo "== 4. a real run writes it back"; play 4 "$GOOD"
echo "== 5. a run that fails keeps the files of the last pass"; play 5 '{"device_count": 2}'
grep -m1 -o 'device_count: expected 2, found 1' "$OUT/5.log"
echo "== done $(date -u)"
sed -i "s#$PWD#<repo>#g; s#$OUT#\$OUT#g" "$OUT"/*.log
# the files of the last pass, as the serving unit reads them
cp "${FILES[@]}" "$OUT/"
rm -rf "$OUT"/reports-[2-5]
