"""sgl_kernel on 3 sandbox hosts over SSH: fetch -> patch -> build -> cache ->
install -> import for real, with the fixture in a local git repository.

The hosts get torch 2.13.0 CPU (a CUDA torch in every container is too heavy),
so the fixture builds its CPU part (sgl_kernel_cuda false); the CUDA compile is
proven on the controller by test_sgl_kernel_build.py."""
import glob
import json
import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT, base_env, venv_bin
from sgl_kernel_helpers import (CACHE, DEPLOY, OLD_WHEEL, PREPARE, WHEEL_CACHE, build_lines, collect, fixture_repo, host_wheels,
                                run_playbook)

HOSTS = ["sbx1", "sbx2", "sbx3"]
ARTIFACTS = os.path.join(CACHE, "fleet-artifacts")


# The test venv's torch from what a deploy left on every host (uv and the
# wheelhouse with the same torch and build requirements): uv links it from its
# cache in seconds, where prepare_venv.yml pushes 220 MB of wheels to each host
# and pip unpacks and compiles torch there (about 100 s of CPU for three hosts).
# On hosts no deploy reached (this module alone on a new sandbox), the script
# stops before any change and prepare_venv.yml does it.
HOST_WHEELHOUSE = "~/.cache/gpufleet/wheelhouse"
FROM_THE_DEPLOY = """set -eu
uv=/opt/gpufleet/uv/bin/uv
test -x "$uv" && ls {wheels}/torch-2.13.0+cpu-*.whl {wheels}/scikit_build_core-0.11.6-*.whl >/dev/null || exit 3
test -x ~/sgl-kernel-test-env/bin/python || python3 -m venv ~/sgl-kernel-test-env
"$uv" pip install -q --python ~/sgl-kernel-test-env/bin/python --no-index --find-links {wheels} torch==2.13.0+cpu
""".format(wheels=HOST_WHEELHOUSE)


def prepare(inventory):
    """torch 2.13.0 CPU in ~/sgl-kernel-test-env on every host; the folder on the
    hosts that has the build requirements (sgl_kernel_pip_args)."""
    proc = subprocess.run([venv_bin("ansible"), "-i", str(inventory), ",".join(HOSTS), "-m", "ansible.builtin.shell",
                           "-a", FROM_THE_DEPLOY], cwd=ROOT, env=base_env(), capture_output=True, text=True,
                          timeout=600, check=False)
    if proc.returncode == 0:
        return HOST_WHEELHOUSE
    r = run_playbook(PREPARE, inventory, limit=",".join(HOSTS), env={"SGL_KERNEL_TEST_WHEELS": host_wheels()})
    assert r.rc == 0, r.out[-4000:]
    return "~/.cache/gpufleet/sgl-kernel-test-wheels"


@pytest.fixture(scope="module")
def fleet(sandbox, tmp_path_factory):
    inventory = sandbox(3)
    build_requirements = prepare(inventory)
    # a clean slate: no artifact cache, no work folder, no marker, no installed wheel
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    r = run_playbook(os.path.join(ROOT, "roles", "sgl_kernel", "tests", "reset.yml"), inventory,
                     limit=",".join(HOSTS))
    assert r.rc == 0, r.out[-4000:]
    repo, commit = fixture_repo(tmp_path_factory.mktemp("src"))
    extra = {  # the sandbox inventory's profile builds the fixture from a folder: here from git
        "sgl_kernel_source": "git",
        "sgl_kernel_subdir": "sgl-kernel",
        "sgl_kernel_repo": repo,
        "sgl_kernel_ref": commit,
        "sgl_kernel_venv": "~/sgl-kernel-test-env",
        "sgl_kernel_cuda": False,
        "sgl_kernel_artifact_dir": ARTIFACTS,
        "sgl_kernel_pip_args": ["--no-index", "--find-links", build_requirements],
        "sgl_kernel_poll_interval": 3,
        # what these tests check is the build's orchestration (one build for
        # three hosts, a new key rebuilds once): the fixture's scale_add op
        # alone is built (collect.yml runs it); deploy.yml builds the whole
        # fixture in test_fleet.py
        "sgl_kernel_cmake_args": ["-DSGL_KERNEL_FIXTURE_SCALE_ADD_ONLY=ON"],
    }
    return {"inventory": inventory, "extra": extra, "repo": repo, "out": str(tmp_path_factory.mktemp("state"))}


def deploy(fleet, **kw):
    extra = dict(fleet["extra"], **kw.pop("extra", {}))
    return run_playbook(DEPLOY, fleet["inventory"], extra_vars=extra, limit=",".join(HOSTS), **kw)


def test_one_build_for_three_hosts_and_all_import(fleet):
    r = deploy(fleet)
    assert r.rc == 0, r.out[-6000:]
    assert all(r.stats[h]["failed"] == 0 for h in HOSTS), r.stats
    state = collect(fleet["inventory"], fleet["out"], limit=",".join(HOSTS))
    lines = build_lines(state)
    # exactly one build happened, on the first host (no builder group)
    assert lines["sbx1"] and len(lines["sbx1"]) == 1, lines
    assert lines["sbx2"] == [] and lines["sbx3"] == [], lines
    key = lines["sbx1"][0].split()[0]
    for h in HOSTS:
        assert state[h]["marker"]["abi_key"] == key, state[h]
        assert state[h]["marker"]["built_by"] == "sbx1"
        assert state[h]["marker"]["torch_version"] == "2.13.0+cpu"
        assert state[h]["run"].get("ok") is True, state[h]["run"]
    # the controller cache has the wheel, the log and the record of that key
    names = sorted(os.listdir(os.path.join(ARTIFACTS, key)))
    assert "build.json" in names and "build.log" in names and any(n.endswith(".whl") for n in names), names
    # the wait prints one readable line per poll (build_wait), never an until loop's retries
    polls = re.findall(r"^sbx1: sgl-kernel build (?:\d+/\d+ \(\d+%\)|configuring), \d+m\d\ds elapsed.*$", r.out, re.M)
    assert polls, r.out[-6000:]
    assert re.search(r"^sbx1: sgl-kernel build finished \(rc 0\), \d+m\d\ds elapsed$", r.out, re.M), r.out[-6000:]
    assert "FAILED - RETRYING" not in r.out, r.out[-6000:]


def test_rerun_changes_nothing(fleet):
    r = deploy(fleet)
    assert r.rc == 0, r.out[-6000:]
    assert {h: r.stats[h]["changed"] for h in HOSTS} == {h: 0 for h in HOSTS}, r.out[-6000:]
    lines = build_lines(collect(fleet["inventory"], fleet["out"], limit=",".join(HOSTS)))
    assert sum(len(v) for v in lines.values()) == 1, lines


def test_check_mode_after_deploy_reports_nothing_to_do(fleet):
    r = deploy(fleet, check=True)
    assert r.rc == 0, r.out[-6000:]
    assert {h: r.stats[h]["changed"] for h in HOSTS} == {h: 0 for h in HOSTS}, r.out[-6000:]


def test_patch_rule_change_rebuilds_exactly_once(fleet):
    rule = {"name": "test-extra-comment", "file": "CMakeLists.txt", "reason": "test: a new rule is a new key",
            "pattern": "project(sgl-kernel-fixture LANGUAGES CXX)",
            "insert_after": "# gpufleet test rule"}
    extra = {"sgl_kernel_patch_rules_extra": [rule]}
    # check mode shows the patch as a diff and changes no host
    r = deploy(fleet, extra={**extra}, check=True, args=("--diff",))
    assert r.rc == 0, r.out[-6000:]
    assert "+# gpufleet test rule" in r.out
    lines = build_lines(collect(fleet["inventory"], fleet["out"], limit=",".join(HOSTS)))
    assert sum(len(v) for v in lines.values()) == 1, lines
    r = deploy(fleet, extra=extra)
    assert r.rc == 0, r.out[-6000:]
    state = collect(fleet["inventory"], fleet["out"], limit=",".join(HOSTS))
    lines = build_lines(state)
    assert len(lines["sbx1"]) == 2 and lines["sbx2"] == [] and lines["sbx3"] == [], lines
    new_key = lines["sbx1"][1].split()[0]
    assert new_key != lines["sbx1"][0].split()[0]
    assert {state[h]["marker"]["abi_key"] for h in HOSTS} == {new_key}
    assert all(state[h]["run"].get("ok") is True for h in HOSTS), state


# The published sgl-kernel 0.3.21 wheel (PyPI, pinned by the role's defaults)
# against the hosts' torch 2.13.0 CPU: it links libc10_cuda.so and needs
# CUDA symbols of torch, so it never fits. auto builds the fixture from
# source instead and says why; wheel refuses before any host changes.
# The controller has no cuobjdump of its own here: the role takes NVIDIA's
# pinned nvidia-cuda-cuobjdump wheel (the CPU fleet audits no targets, but the
# role has it ready before it judges).
def published(**kw):
    return dict(dict(OLD_WHEEL, sgl_kernel_wheel_cache_dir=WHEEL_CACHE), **kw)


def test_auto_falls_back_to_the_source_build_and_says_why(fleet):
    r = deploy(fleet, extra=published(sgl_kernel_source="auto"))
    assert r.rc == 0, r.out[-6000:]
    assert "sgl_kernel_source auto: the published wheel sgl-kernel 0.3.21 does not fit" in r.out, r.out[-6000:]
    state = collect(fleet["inventory"], fleet["out"], limit=",".join(HOSTS))
    lines = build_lines(state)
    # one more source build, on the builder, for the auto key; every host runs it
    assert len(lines["sbx1"]) == 3 and lines["sbx2"] == [] and lines["sbx3"] == [], lines
    key = lines["sbx1"][-1].split()[0]
    for h in HOSTS:
        marker = state[h]["marker"]
        assert marker["abi_key"] == key and marker["source"].startswith("auto:wheel:sgl-kernel==0.3.21:sha256:57dfb3a2")
        assert marker["choice"]["source"] == "build", marker
        # the reason names the library a CPU torch lacks and the shared object whose symbols it does not export
        assert re.search(r"links? libc10_cuda\.so \(a torch library\) which torch 2\.13\.0\+cpu does not have",
                         marker["choice"]["reason"]), marker["choice"]["reason"]
        assert re.search(r"sgl_kernel/sm90/common_ops\.abi3\.so needs \d+ symbols that torch 2\.13\.0\+cpu does not export",
                         marker["choice"]["reason"]), marker["choice"]["reason"]
        assert state[h]["run"].get("ok") is True, state[h]["run"]
    record = json.load(open(os.path.join(ARTIFACTS, key, "build.json")))
    assert record["choice"] == state["sbx1"]["marker"]["choice"]
    # the wheel was read once, on the controller: its shared objects stay unpacked for the next run
    unpacked = glob.glob(os.path.join(WHEEL_CACHE, "*", "unpacked", "sgl_kernel", "sm90", "common_ops.abi3.so"))
    assert len(unpacked) == 1, unpacked


def test_wheel_that_does_not_fit_is_refused_before_any_change(fleet):
    before = collect(fleet["inventory"], fleet["out"], limit=",".join(HOSTS))
    r = deploy(fleet, extra=published(sgl_kernel_source="wheel"))
    assert r.rc != 0, r.out[-6000:]
    assert r.stats["sbx1"]["failed"] == 1, r.stats
    assert "sgl_kernel_source is wheel and the published wheel sgl-kernel 0.3.21 does not fit" in r.out, r.out[-6000:]
    assert re.search(r"sgl_kernel/sm90/common_ops\.abi3\.so needs \d+ symbols that torch 2\.13\.0\+cpu does not export", r.out)
    assert "Nothing was installed on any host" in r.out
    after = collect(fleet["inventory"], fleet["out"], limit=",".join(HOSTS))
    # the hosts run what they ran: same marker, same build, the kernel still works
    for h in HOSTS:
        assert after[h]["marker"] == before[h]["marker"], h
        assert after[h]["run"].get("ok") is True and after[h]["run"]["file"] == before[h]["run"]["file"]
    assert build_lines(after) == build_lines(before)
