#!/usr/bin/env bash
# GPU evidence for the flashinfer role's prebuilt modules through Ansible
# (roles/flashinfer/tasks/aot.yml), on the H200 test machine from the
# repository root, no network, in one call (about 6 min). The machine is
# controller, builder and host at once: its python3 stands for the venv,
# with the real flashinfer-python 0.7.2.post1 (.device, h200-device-prep.sh)
# copied into its site-packages, and ansible-core 2.19.14 from wheels
# (.device/ans). Steps:
#   - check mode: says what would be built and placed, changes nothing;
#   - the run: the key is computed (nvcc's release read at CUDA_HOME), the
#     builder compiles norm, silu_and_mul and sampling (async, polled),
#     fetches them to the controller cache, places them;
#   - again: no change;
#   - flashinfer's kernel checks with FLASHINFER_DISABLE_JIT=1 and an empty
#     JIT workspace load the placed modules, nothing compiles.
# Everything goes to $OUT.
set -uo pipefail
OUT=${OUT:?set OUT}
exec > >(tee "$OUT/h200-flashinfer-aot-role.log") 2>&1
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda-13.0} PYTHONUNBUFFERED=1 LC_ALL=C.UTF-8
echo "== machine"; date -u; nproc
nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
bash .device/unpack.sh || exit 1
PY=$(python3 -c 'import sys; print(sys.executable)')
SITE=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
for pkg in /tmp/site/*; do  # flashinfer and its dependencies, where the interpreter lacks them
  name=$(basename "$pkg"); [ -e "$SITE/$name" ] || cp -r "$pkg" "$SITE/"
done
python3 -m pip install -q --no-index --no-deps --target /tmp/ans .device/ans/*.whl || exit 1
mkdir -p .collections/ansible_collections/gpufleet && ln -sfn "$PWD" .collections/ansible_collections/gpufleet/inference
export PYTHONPATH=/tmp/ans ANSIBLE_COLLECTIONS_PATH=$PWD/.collections ANSIBLE_LOCALHOST_WARNING=false \
  ANSIBLE_INVENTORY_UNPARSED_WARNING=false ANSIBLE_NOCOLOR=1
cat > /tmp/aot-play.yml <<'YML'
- name: The flashinfer role's prebuilt modules on this machine (controller, builder and host)
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Build or take, then place
      ansible.builtin.include_role:
        name: gpufleet.inference.flashinfer
        tasks_from: aot.yml
YML
VARS=$(python3 - "$PY" "$CUDA_HOME" <<'PY'
import json, sys
print(json.dumps({'uv_venv_python': sys.argv[1], 'uv_venv_dir': '/tmp/host-venv', 'uv_venv_become': False,
                  'uv_venv_user': 'root', 'ansible_python_interpreter': sys.argv[1],
                  'flashinfer_aot_modules': ['norm', 'silu_and_mul', 'sampling'], 'flashinfer_aot_arch_list': ['9.0a'],
                  'flashinfer_jit_environment': {'CUDA_HOME': sys.argv[2]},
                  'flashinfer_aot_artifact_dir': '/tmp/controller-cache'}))
PY
)
play() { python3 /tmp/ans/bin/ansible-playbook -i localhost, /tmp/aot-play.yml -e "$VARS" "$@"; }
now() { date +%s; }
echo "== check mode"; play --check; echo "rc=$?"
echo "== the run"; t0=$(now); play; echo "rc=$? in $(( $(now) - t0 )) s"
echo "== the controller cache"; find /tmp/controller-cache -type f -printf '%P %s\n' | sort
cat /tmp/controller-cache/*/build.json
echo "== again"; t0=$(now); play; echo "rc=$? in $(( $(now) - t0 )) s"
echo "== flashinfer's kernel checks, FLASHINFER_DISABLE_JIT=1, empty JIT workspace"
rm -rf /tmp/ws-host
PYTHONPATH='' FLASHINFER_DISABLE_JIT=1 FLASHINFER_WORKSPACE_BASE=/tmp/ws-host EVIDENCE_IMPORTS=flashinfer \
  python3 evidence/h200-kernel-checks.py aot-role "$OUT/aot-role.json" \
  flashinfer.rmsnorm flashinfer.silu_and_mul flashinfer.top_k_sampling
echo "objects or modules compiled in the host's JIT workspace: $(find /tmp/ws-host \( -name '*.so' -o -name '*.o' \) 2>/dev/null | wc -l)"
echo "== done $(date -u)"
sed -i "s#$PWD#<repo>#g; s#$OUT#\$OUT#g" "$OUT"/*.log "$OUT"/*.json
