#!/usr/bin/env bash
# Evidence for issue 4 on the H200 test machine (Ubuntu 24.04, driver
# 580.159.04, CUDA 13.0 from NVIDIA's apt packages, no network, root).
# Runs roles/cuda_toolkit with -c local in `existing` and `auto` mode, first
# under --check, then for real (twice, to show the re-run changes nothing),
# and records the output plus a checksum listing of /etc/ld.so.conf.d,
# /etc/profile.d and the /usr/local/cuda link before and after.
#
# Needs: the repository checkout as the working directory; ansible-core and
# its missing dependencies as wheels in ./.whl (no network there);
# $OUT (output folder). Run:  bash evidence/h200-cuda-toolkit.sh
set -uo pipefail
: "${OUT:?set OUT to the output folder}"
cd "$(dirname "$0")/.." || exit 2
mkdir -p "$OUT"
exec > >(tee "$OUT/h200-cuda-toolkit.log") 2>&1

PY=$(command -v python3)
# pip may be missing from the interpreter (uv venvs have none): a wheel is a
# zip, so unpacking it is the fallback.
if ! "$PY" -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl; then
  for w in .whl/*.whl; do "$PY" -m zipfile -e "$w" /tmp/site; done
fi
export PYTHONPATH=/tmp/site
"$PY" -c 'import ansible, jinja2, yaml, cryptography, packaging, resolvelib; print("ansible-core", ansible.__version__ if hasattr(ansible, "__version__") else "")' \
  || echo "MISSING a dependency of ansible-core above: add its wheel to .whl"
export ANSIBLE_CONFIG=$PWD/ansible.cfg ANSIBLE_LOCAL_TEMP=/tmp/ansible-local
export ANSIBLE_STDOUT_CALLBACK=ansible.builtin.default ANSIBLE_CALLBACK_RESULT_FORMAT=yaml
PLAY=/tmp/cuda-toolkit-h200.yml
cat >"$PLAY" <<'YAML'
- name: CUDA toolkit on the H200 (adopt the apt-installed 13.0)
  hosts: localhost
  connection: local
  gather_facts: true
  roles:
    - role: gpufleet.inference.cuda_toolkit
  post_tasks:
    - name: Show the facts for the next roles
      ansible.builtin.debug:
        msg:
          cuda_toolkit_home: "{{ cuda_toolkit_home }}"
          cuda_toolkit_nvcc_version: "{{ cuda_toolkit_nvcc_version }}"
          cuda_toolkit_libcudart_path: "{{ cuda_toolkit_libcudart_path }}"
          gpufleet_gpu_driver: "{{ ansible_facts['gpufleet_gpu']['driver_version'] | default('') }}"
YAML

snapshot() {  # checksum listing of everything the role could touch
  {
    for d in /etc/ld.so.conf.d /etc/profile.d; do
      find "$d" -maxdepth 1 \( -type f -o -type l \) -print0 | sort -z | xargs -0 -r sha256sum
    done
    for l in /usr/local/cuda /etc/alternatives/cuda; do
      printf 'link %s -> %s (resolves %s)\n' "$l" "$(readlink "$l")" "$(readlink -f "$l")"
    done
  } >"$OUT/$1"
}

echo "== host"; uname -a; . /etc/os-release; echo "$PRETTY_NAME"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
/usr/local/cuda-13.0/bin/nvcc --version | tail -n 2
ls -l /etc/ld.so.conf.d/; grep -H . /etc/ld.so.conf.d/*cuda* 2>/dev/null
"$PY" -m ansible.cli.playbook --version | sed -n 1p

snapshot before.sha256
run() {  # name, then ansible-playbook arguments
  local name=$1; shift
  echo "== $name"
  "$PY" -m ansible.cli.playbook -i localhost, -e ansible_python_interpreter="$PY" "$PLAY" "$@" \
    | tee "$OUT/$name.out"
  echo "rc=${PIPESTATUS[0]}" | tee -a "$OUT/$name.out"
}
run 1-existing-check --check --diff -e cuda_toolkit_method=existing
run 2-auto-check --check --diff -e cuda_toolkit_method=auto
snapshot after-check.sha256
run 3-auto-real --diff -e cuda_toolkit_method=auto
snapshot after-real.sha256
run 4-auto-real-again -e cuda_toolkit_method=auto
snapshot after-real-again.sha256

echo "== diff before -> after --check (must be empty)"
diff "$OUT/before.sha256" "$OUT/after-check.sha256" && echo "no difference"
echo "== diff before -> after the real run (only what --check said it would add)"
diff "$OUT/before.sha256" "$OUT/after-real.sha256"
echo "== diff after the real run -> after the second real run (must be empty)"
diff "$OUT/after-real.sha256" "$OUT/after-real-again.sha256" && echo "no difference"
grep -h -E '^localhost +:' "$OUT"/[1-4]-*.out
ldconfig -p | grep -E 'libcudart\.so\.[0-9]+ '
