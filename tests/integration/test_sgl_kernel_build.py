"""sgl_kernel on the controller itself (connection local):

- the CUDA compile for real: the fixture built by the role for 9.0a with nvcc 13
  against torch 2.14.1 (CUDA build, installed from the package index with uv),
  no GPU needed; one CUDA-torch venv under .cache/, made once and reused;
- the ABI break for real: the fixture built against torch 2.14.1, then the venv's
  torch swapped for 2.13.0: the role's ABI check fails with the undefined symbol,
  naming both torch versions;
- the arch trap for real: the fixture's CMakeLists clears torch's arch flags and
  hard-codes its -gencode list, as upstream's does; with the role's rules the
  9.0a build carries sm_90a only (cuobjdump, NVIDIA's pinned wheel), without the
  gencode rule the arch audit refuses the wheel, naming the shared object and
  9.0a, and nothing is installed or cached;
- a patch rule that no longer matches fails with its name and the ref;
- a build that fails shows the tail of its log.

Only the 9.0a build compiles the whole fixture; the ABI break, the audit's
refusal and the failed build compile its scale_add op alone (CMake option
SGL_KERNEL_FIXTURE_SCALE_ADD_ONLY: same CMakeLists and flags, fewer units).
"""
import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

import yaml

from conftest import ROOT, cuobjdump_home, venv_bin
from sgl_kernel_helpers import BUILD_REQS, DEPLOY, fixture_repo, git, run_playbook

CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda-13.0")
CUDA_VENV = os.path.join(ROOT, ".cache", "torch-cuda-venv")
CPU_VENV = os.path.join(ROOT, ".cache", "torch-cpu-venv")
PYVER = "python%d.%d" % sys.version_info[:2]


def site(venv):
    return os.path.join(venv, "lib", PYVER, "site-packages")


def ensure_venv(venv, torch_spec, installer="pip"):
    """One venv per torch under .cache/, made once and reused. installer "pip"
    finds torch through pip's own configuration (the 2.13.0 CPU wheel); "uv"
    takes it from the package index: the CUDA build with its nvidia-* wheels
    (~5.5 GB installed), which uv installs in well under a minute where pip
    took several."""
    stamp = os.path.join(venv, ".gpufleet-test-ready")
    if not os.path.exists(stamp):
        subprocess.run([sys.executable, "-m", "venv", "--clear", venv], check=True)
        python = os.path.join(venv, "bin", "python")
        pip = [python, "-m", "pip", "install", "-q", torch_spec] + BUILD_REQS
        if installer != "uv" or subprocess.run([venv_bin("uv"), "pip", "install", "-q", "--python", python, torch_spec]
                                               + BUILD_REQS, check=False).returncode != 0:
            subprocess.run(pip, check=True)  # (uv's own error is on stderr above)
        open(stamp, "w").close()
    return venv


def cuda_venv():
    return ensure_venv(CUDA_VENV, "torch==2.14.1", installer="uv")


def local_inventory(tmp_path):
    inv = tmp_path / "inventory.yml"
    inv.write_text(json.dumps({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    return str(inv)


def nvrtc_args(venv):
    """A toolkit assembled without libnvrtc (as this controller's) gets torch's own."""
    if os.path.exists(os.path.join(CUDA_HOME, "lib64", "libnvrtc.so")):
        return []
    lib = os.path.join(site(venv), "nvidia", "cu13", "lib", "libnvrtc.so.13")
    return ["-DCUDA_nvrtc_LIBRARY=" + lib] if os.path.exists(lib) else []


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    return fixture_repo(tmp_path_factory.mktemp("src"))


def base_vars(tmp_path, repo, venv, **kw):
    path, commit = repo
    extra = {
        "sgl_kernel_source": "git",
        "sgl_kernel_subdir": "sgl-kernel",
        "sgl_kernel_repo": path,
        "sgl_kernel_ref": commit,
        "sgl_kernel_venv": venv,
        "sgl_kernel_artifact_dir": str(tmp_path / "artifacts"),
        "sgl_kernel_work_dir": str(tmp_path / "work"),
        "sgl_kernel_system_packages": [],
        "sgl_kernel_poll_interval": 3,
    }
    extra.update(kw)
    return extra


def builds(tmp_path):
    counter = tmp_path / "work" / "builds.log"
    return counter.read_text().splitlines() if counter.exists() else []


@pytest.mark.skipif(not os.path.exists(os.path.join(CUDA_HOME, "bin", "nvcc")), reason="no CUDA toolkit at CUDA_HOME")
def test_cuda_build_for_9_0a_once_then_nothing(tmp_path, repo):
    venv = cuda_venv()
    inv = local_inventory(tmp_path)
    extra = cuda_vars(tmp_path, repo, venv)
    r = run_playbook(DEPLOY, inv, extra_vars=extra, timeout=1800)
    assert r.rc == 0, r.out[-6000:]
    assert len(builds(tmp_path)) == 1
    key = builds(tmp_path)[0].split()[0]
    record = json.load(open(tmp_path / "artifacts" / key / "build.json"))
    assert record["key_data"]["arch_list"] == ["9.0a"] and record["key_data"]["cuda_version"] == "13.0"
    assert record["key_data"]["torch_version"] == "2.14.1"
    # FA3 stays on with 9.0a (its fallback rule is disabled), the others applied
    assert "fa3-off-without-sm90a" not in record["patches_applied"]
    assert "cmake-policy-cmp0169-guard" in record["patches_applied"]
    log = (tmp_path / "artifacts" / key / "build.log").read_text()
    # only the requested architecture is compiled, with nvcc, with the sizing given
    assert "arch=compute_90a,code=sm_90a" in log
    for other in ("code=sm_80", "code=sm_86", "code=sm_89", "code=sm_100", "code=sm_120", "code=sm_75"):
        assert other not in log, other
    assert "nvcc" in log and "scale_add.cu" in log and "flash_sm90a.cu" in log
    assert "MAX_JOBS=" in log and "-DSGL_KERNEL_COMPILE_THREADS=1" in log
    # what the wheel really carries, from cuobjdump: sm_90a only, in both libraries
    audit = record["arch_audit"]
    assert audit["requested"] == ["9.0a"] and audit["missing"] == [] and audit["unwanted"] == [], audit
    assert audit["compiled"] == ["sm_90a"]
    assert sorted(f["file"].split("/")[-1].split(".")[0] for f in audit["files"] if f["device_code"]) == [
        "common_ops", "flash_ops"]
    assert "gencode-exactly-the-arch-list" in record["patches_applied"]
    marker = json.load(open(os.path.join(venv, "gpufleet-sgl_kernel.json")))
    assert marker["compiled_targets"] == ["sm_90a"] and marker["unwanted_targets"] == []
    # import (CUDA build, no GPU needed to import), CUDA op registered, FA3 part present, CPU op right
    probe = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                            "import json, torch, sgl_kernel; x = torch.randn(999); y = torch.randn(999);"
                            "print(json.dumps([sgl_kernel.HAS_CUDA, sgl_kernel.HAS_FA3, sgl_kernel.__file__,"
                            " bool(torch.allclose(sgl_kernel.scale_add(x, y, 3.0), x + 3.0 * y))]))"],
                           capture_output=True, text=True, check=True)
    has_cuda, has_fa3, path, ok = json.loads(probe.stdout)
    assert has_cuda and has_fa3 and ok and path.startswith(venv)
    undefined = subprocess.run(["nm", "-D", "--undefined-only", os.path.join(os.path.dirname(path), "common_ops.abi3.so")],
                               capture_output=True, text=True, check=True).stdout
    assert "c10_cuda_check_implementation" in undefined  # C10_CUDA_CHECK is really compiled in
    # same key again: nothing changes, no second build
    r = run_playbook(DEPLOY, inv, extra_vars=extra)
    assert r.rc == 0 and r.stats["localhost"]["changed"] == 0, r.out[-6000:]
    assert len(builds(tmp_path)) == 1


def cuda_vars(tmp_path, repo, venv, **kw):
    return base_vars(tmp_path, repo, venv, sgl_kernel_cuda=True, sgl_kernel_arch_list=["9.0a"],
                     sgl_kernel_cuda_home=CUDA_HOME, sgl_kernel_cmake_args=nvrtc_args(venv),
                     sgl_kernel_cuobjdump=os.path.join(cuobjdump_home(), "bin", "cuobjdump"), **kw)


@pytest.mark.skipif(not os.path.exists(os.path.join(CUDA_HOME, "bin", "nvcc")), reason="no CUDA toolkit at CUDA_HOME")
def test_build_without_the_gencode_rule_is_refused_by_the_audit(tmp_path, repo):
    """The trap without its rule: the fixture compiles its hard-coded sm_90 /
    sm_110 list, the audit finds no sm_90a in common_ops and refuses the wheel
    before it is cached or installed. The fixture's scale_add op alone is built
    (SGL_KERNEL_FIXTURE_SCALE_ADD_ONLY: the same CMakeLists and flags, one CUDA
    unit instead of three and no flash_ops), the trap being in the flags."""
    venv = cuda_venv()
    with open(os.path.join(ROOT, "roles", "sgl_kernel", "defaults", "main.yml")) as handle:
        rules = [r for r in yaml.safe_load(handle)["sgl_kernel_patch_rules"] if r["name"] != "gencode-exactly-the-arch-list"]
    marker = os.path.join(venv, "gpufleet-sgl_kernel.json")
    before = open(marker).read() if os.path.exists(marker) else None
    extra = cuda_vars(tmp_path, repo, venv, sgl_kernel_patch_rules=rules)
    extra["sgl_kernel_cmake_args"] = extra["sgl_kernel_cmake_args"] + ["-DSGL_KERNEL_FIXTURE_SCALE_ADD_ONLY=ON"]
    r = run_playbook(DEPLOY, local_inventory(tmp_path), extra_vars=extra, timeout=1800)
    assert r.rc != 0, r.out[-4000:]
    log = "".join(open(f).read() for f in glob.glob(str(tmp_path / "work" / "logs" / "build-*.log")))
    assert "scale_add.cu" in log and "norm.cu" not in log and "flash_sm90a.cu" not in log, log[-3000:]
    assert "refused on localhost: arch audit: sgl_kernel/common_ops" in r.out, r.out[-4000:]
    assert "has no code for 9.0a (SASS sm_90a or PTX compute_90a); it has SASS sm_90, sm_110" in r.out, r.out[-4000:]
    assert "Nothing was installed on any host" in r.out
    assert len(builds(tmp_path)) == 1  # it was built, then refused
    # nothing cached, nothing installed: the venv's marker is what it was
    assert not any(os.path.exists(os.path.join(d, "build.json")) for d in glob.glob(str(tmp_path / "artifacts" / "*")))
    assert (open(marker).read() if os.path.exists(marker) else None) == before


def test_abi_break_names_both_torch_versions(tmp_path, repo):
    """Built against torch 2.14.1, then torch replaced by 2.13.0 under it. The
    scale_add op alone (SGL_KERNEL_FIXTURE_SCALE_ADD_ONLY): its CPU unit is the
    one that calls the symbol torch 2.13.0 lacks."""
    cuda_torch = cuda_venv()
    cpu_venv = ensure_venv(CPU_VENV, "torch==2.13.0")
    venv = str(tmp_path / "abi-venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    pth = os.path.join(site(venv), "gpufleet-test-torch.pth")
    with open(pth, "w") as f:  # torch 2.14.1 (and the build requirements) seen from this venv
        f.write(site(cuda_torch) + "\n")
    inv = local_inventory(tmp_path)
    extra = base_vars(tmp_path, repo, venv, sgl_kernel_cuda=False,
                      # a CUDA torch's CMake config looks for the toolkit even for a CPU-only build
                      sgl_kernel_cmake_args=nvrtc_args(cuda_torch) + ["-DCUDA_TOOLKIT_ROOT_DIR=" + CUDA_HOME,
                                                                      "-DSGL_KERNEL_FIXTURE_SCALE_ADD_ONLY=ON"],
                      sgl_kernel_build_env={"CUDA_HOME": CUDA_HOME, "CUDACXX": CUDA_HOME + "/bin/nvcc"})
    r = run_playbook(DEPLOY, inv, extra_vars=extra, timeout=1800)
    assert r.rc == 0, r.out[-6000:]
    assert json.load(open(os.path.join(venv, "gpufleet-sgl_kernel.json")))["torch_version"] == "2.14.1"
    with open(pth, "w") as f:  # now the venv has torch 2.13.0
        f.write(site(cpu_venv) + "\n")
    r = run_playbook(DEPLOY, inv, extra_vars=extra, tags="sgl_kernel_abi_check")
    assert r.rc != 0 and r.stats["localhost"]["failed"] == 1, r.out[-6000:]
    assert "undefined symbol" in r.out
    assert "built against torch 2.14.1 " in r.out and "the venv has torch 2.13.0+cpu" in r.out, r.out[-6000:]
    assert "report_narrowing_overflow" in r.out  # the symbol, demangled or not


def test_patch_rule_that_no_longer_matches_fails_with_its_name(tmp_path, repo):
    venv = ensure_venv(CPU_VENV, "torch==2.13.0")
    path = repo[0]
    moved = str(tmp_path / "moved")
    shutil.copytree(path, moved)
    cml = os.path.join(moved, "sgl-kernel", "CMakeLists.txt")
    text = open(cml).read().replace("cmake_policy(SET CMP0169 OLD)", "cmake_policy(SET CMP0170 NEW)")
    open(cml, "w").write(text)
    git(moved, "commit", "-q", "-am", "upstream moved on")
    commit = git(moved, "rev-parse", "HEAD")
    extra = base_vars(tmp_path, (moved, commit), venv, sgl_kernel_cuda=False)
    r = run_playbook(DEPLOY, local_inventory(tmp_path), extra_vars=extra)
    assert r.rc != 0, r.out[-4000:]
    assert "patch rule 'cmake-policy-cmp0169-guard' no longer matches source ref " + commit in r.out
    assert builds(tmp_path) == []  # nothing was built from the unpatched tree


def test_failed_build_shows_the_log_tail(tmp_path, repo):
    venv = ensure_venv(CPU_VENV, "torch==2.13.0")
    broken = {"name": "test-break-the-build", "file": "csrc/scale_add_cpu.cc", "reason": "test",
              "pattern": '#include "sgl_kernel_ops.h"', "insert_before": "#error gpufleet-test-broken-build"}
    extra = base_vars(tmp_path, repo, venv, sgl_kernel_cuda=False, sgl_kernel_patch_rules_extra=[broken],
                      sgl_kernel_cmake_args=["-DSGL_KERNEL_FIXTURE_SCALE_ADD_ONLY=ON"])
    r = run_playbook(DEPLOY, local_inventory(tmp_path), extra_vars=extra, timeout=1200)
    assert r.rc != 0, r.out[-4000:]
    assert "sgl_kernel build of ABI key" in r.out and "Full log on the host" in r.out
    assert "gpufleet-test-broken-build" in r.out  # the compiler's error, from the log tail
    assert len(builds(tmp_path)) == 1
