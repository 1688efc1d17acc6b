#!/usr/bin/env bash
# Benchmark: deploy the sgl_kernel fixture to 3 sandbox hosts against deploying
# it to 1 host, side by side in one run (A/B paired). Every run starts from a
# clean state (no controller cache, no host build, no marker), so every run
# builds once; with build-once/fan-out the 3-host run only adds two pushes and
# installs, goal A/B <= 1.3 (a build on every host would be about 3x). One
# untimed warm-up pair first: the first build on a fresh host also installs the
# compilers (apt), which is set-up, not fan-out.
#
# Usage: bench/sgl_kernel_fanout.sh [RUNS]   (needs the sandbox: make sandbox-up SANDBOX_HOSTS=3)
# The timer is given as $BENCH (a command taking: -n RUNS --warmup W --timeout S --vs 'B' -- A...);
# without it, each side is timed once with /usr/bin/time.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
RUNS=${1:-3}
INV=inventories/sandbox
WORK=.cache/sgl-kernel-bench
mkdir -p "$WORK"

# Source: the fixture in a local git repository.
rm -rf "$WORK/repo" && mkdir -p "$WORK/repo"
cp -r tests/fixtures/sgl_kernel_fixture "$WORK/repo/sgl-kernel"
git -C "$WORK/repo" init -q
git -C "$WORK/repo" add -A
git -C "$WORK/repo" -c user.email=bench@gpufleet.invalid -c user.name=bench commit -q -m fixture
COMMIT=$(git -C "$WORK/repo" rev-parse HEAD)

# Hosts: the sandbox (reused when up), a torch 2.13.0 CPU venv and the build
# requirements (once, not timed).
python scripts/sandbox.py up --hosts 3 >/dev/null
WHEELS=$PWD/.cache/sgl-kernel-tests/wheels
mkdir -p "$WHEELS"
ls "$WHEELS"/torch-2.13.0* >/dev/null 2>&1 || python -m pip download -q --only-binary=:all: -d "$WHEELS" torch==2.13.0
ls "$WHEELS"/scikit_build_core* >/dev/null 2>&1 || python -m pip download -q --only-binary=:all: -d "$WHEELS" \
    scikit-build-core==0.11.6 cmake==3.31.10 ninja==1.13.0 wheel==0.45.1
SGL_KERNEL_TEST_WHEELS="$WHEELS" ansible-playbook -i "$INV" roles/sgl_kernel/tests/prepare_venv.yml --limit sbx1,sbx2,sbx3 >/dev/null

cat > "$WORK/vars.json" <<JSON
{"sgl_kernel_source": "git", "sgl_kernel_subdir": "sgl-kernel", "sgl_kernel_repo": "$PWD/$WORK/repo", "sgl_kernel_ref": "$COMMIT",
 "sgl_kernel_venv": "~/sgl-kernel-test-env", "sgl_kernel_cuda": false,
 "sgl_kernel_artifact_dir": "$PWD/$WORK/artifacts",
 "sgl_kernel_pip_args": ["--no-index", "--find-links", "~/.cache/gpufleet/sgl-kernel-test-wheels"],
 "sgl_kernel_poll_interval": 2}
JSON

# One measured run: clean state on the hosts of LIMIT and the controller, then deploy.
cat > "$WORK/run.sh" <<'SH'
#!/bin/bash
set -euo pipefail
cd "$(dirname "$0")/../.."
LIMIT=$1
rm -rf .cache/sgl-kernel-bench/artifacts
ansible-playbook -i inventories/sandbox roles/sgl_kernel/tests/reset.yml --limit "$LIMIT" >/dev/null
ansible-playbook -i inventories/sandbox roles/sgl_kernel/tests/deploy.yml --limit "$LIMIT" \
    -e @.cache/sgl-kernel-bench/vars.json >> .cache/sgl-kernel-bench/deploy-"${LIMIT//,/_}".log
SH
chmod +x "$WORK/run.sh"

if [ -n "${BENCH:-}" ]; then
    $BENCH -n "$RUNS" --warmup 1 --timeout 3600 --vs "$WORK/run.sh sbx1" -- "$WORK/run.sh" sbx1,sbx2,sbx3
else
    /usr/bin/time -f "3 hosts: %e s" "$WORK/run.sh" sbx1,sbx2,sbx3
    /usr/bin/time -f "1 host:  %e s" "$WORK/run.sh" sbx1
fi
