"""Shared set-up of the sgl_kernel integration tests: the fixture as a local git
repository, the wheels the hosts install from, and state collection."""
import glob
import json
import os
import shutil
import subprocess
import sys

from conftest import ROOT
from conftest import run_playbook as _run_playbook

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "sgl_kernel_fixture")
ROLE_TESTS = os.path.join(ROOT, "roles", "sgl_kernel", "tests")
DEPLOY = os.path.join(ROLE_TESTS, "deploy.yml")
PREPARE = os.path.join(ROLE_TESTS, "prepare_venv.yml")
COLLECT = os.path.join(ROLE_TESTS, "collect.yml")
CACHE = os.path.join(ROOT, ".cache", "sgl-kernel-tests")
BUILD_REQS = ["scikit-build-core==0.11.6", "cmake==3.31.10", "ninja==1.13.0", "wheel==0.45.1"]
# The published sgl-kernel wheel (536 MB) and its unpacked shared objects: the
# role downloads it into this one folder once for the whole suite
# (sgl_kernel_wheel_cache_dir); runs side by side do not clash in it.
WHEEL_CACHE = os.path.join(ROOT, ".cache", "sgl-kernel-published")
# The published wheel these tests judge: sgl-kernel 0.3.21, the last under the
# old distribution name (the role's default became sglang-kernel 0.4.10): a
# CUDA 12 build for torch 2.9.1, which the tests' CPU and CUDA torches refuse.
OLD_WHEEL = {"sgl_kernel_wheel_package": "sgl-kernel", "sgl_kernel_wheel_version": "0.3.21",
             "sgl_kernel_wheel_sha256": "57dfb3a2a3cd759f499c32e2bad5f6489b7c58f7f9a84ee00c53ec92d303aaab"}
TORCH_CPU = "torch==2.13.0"


def run_playbook(playbook, inventory, **kw):
    """conftest's run_playbook with results printed as JSON: messages stay on one
    line with their quotes as they are, so the tests can look for them."""
    kw["env"] = dict(kw.get("env") or {}, ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    return _run_playbook(playbook, inventory, **kw)


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, "-c", "user.email=tests@gpufleet.invalid",
                           "-c", "user.name=gpufleet tests"] + list(args),
                          check=True, capture_output=True, text=True).stdout.strip()


def fixture_repo(parent):
    """The fixture committed in a fresh git repository under sgl-kernel/; returns (path, commit)."""
    repo = os.path.join(str(parent), "sglang-fixture")
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(FIXTURE, os.path.join(repo, "sgl-kernel"))
    subprocess.run(["git", "init", "-q", repo], check=True)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "fixture")
    return repo, git(repo, "rev-parse", "HEAD")


def host_wheels():
    """torch 2.13.0 CPU and its dependencies plus the build requirements, found through
    pip's own configuration, in one folder that the prepare playbook pushes."""
    dest = os.path.join(CACHE, "wheels")
    os.makedirs(dest, exist_ok=True)
    have = os.listdir(dest)
    if not any(n.startswith("torch-2.13.0") for n in have):
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", dest, TORCH_CPU],
                       check=True)
    if not any(n.startswith("scikit_build_core") for n in have):
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", dest]
                       + BUILD_REQS, check=True)
    return dest


def collect(inventory, out_dir, limit=None):
    os.makedirs(out_dir, exist_ok=True)
    for f in glob.glob(os.path.join(out_dir, "*.json")):
        os.remove(f)
    r = run_playbook(COLLECT, inventory, extra_vars={"out_dir": out_dir}, limit=limit)
    assert r.rc == 0, r.out[-4000:]
    return {os.path.basename(f)[:-5]: json.load(open(f)) for f in glob.glob(os.path.join(out_dir, "*.json"))}


def build_lines(state):
    """host -> list of build counter lines."""
    return {h: [ln for ln in s["builds"].splitlines() if ln.strip()] for h, s in state.items()}
