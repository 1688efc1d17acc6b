"""Shared fixtures for tests that run against real hosts: the sandbox fleet
(systemd containers reached over SSH) and a playbook runner that returns the
per-host recap."""
import collections
import contextlib
import fcntl
import glob
import hashlib
import json
import os
import re
import subprocess
import shutil
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SANDBOX_INVENTORY = os.path.join(ROOT, "inventories", "sandbox")
RECAP = re.compile(
    r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+"
    r"unreachable=(?P<unreachable>\d+)\s+failed=(?P<failed>\d+)\s+"
    r"skipped=(?P<skipped>\d+)\s+rescued=(?P<rescued>\d+)\s+ignored=(?P<ignored>\d+)",
    re.M)

Result = collections.namedtuple("Result", "rc out stats")
# test modules that run before the others (pytest_collection_modifyitems)
RUN_FIRST = ("test_sglang_stage.py",)


def pytest_configure(config):
    config.addinivalue_line("markers", "sandbox: runs on the sandbox fleet (scripts/run-tests.sh gives these a lane of their own)")


def pytest_collection_modifyitems(items):
    """Every test that uses the sandbox fleet, directly or through a fixture,
    is marked `sandbox`: `-m sandbox` / `-m "not sandbox"` split the suite
    into the part that needs the fleet and the part that does not."""
    for item in items:
        if {"sandbox", "sandbox_ctl"} & set(item.fixturenames):
            item.add_marker(pytest.mark.sandbox)
    # The whole sglang stack (a 4.1 GiB wheelhouse here, a 9.6 GiB venv on
    # sbx1, removed when its module ends) runs first, while the disk holds
    # least: run last, after the other tests' caches, hosts and logs, it once
    # filled a CI machine's disk.
    items.sort(key=lambda item: os.path.basename(str(item.fspath)) not in RUN_FIRST)


def pytest_runtest_logreport(report):
    """Each phase of each test (setup, call, teardown) with its time, appended
    as it ends to $GPUFLEET_TEST_TIMES (scripts/run-tests.sh names one per
    stage): a stage its timeout cuts short writes no JUnit XML, and this file
    still says where its time went."""
    path = os.environ.get("GPUFLEET_TEST_TIMES")
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write("%.1f %s %s %s\n" % (report.duration, report.when, report.outcome, report.nodeid))


@contextlib.contextmanager
def cache_lock(name):
    """An exclusive lock on .cache/NAME.lock while a shared cache is filled:
    the two lanes of scripts/run-tests.sh may reach the same one at once."""
    os.makedirs(os.path.join(ROOT, ".cache"), exist_ok=True)
    with open(os.path.join(ROOT, ".cache", name + ".lock"), "w", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def venv_bin(name):
    return os.path.join(os.path.dirname(sys.executable), name)


def base_env(extra=None):
    env = dict(os.environ)
    env.update({
        "ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"),
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "PATH": os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""),
    })
    env.update(extra or {})
    return env


def parse_recap(out):
    return {m.group("host"): {k: int(v) for k, v in m.groupdict().items() if k != "host"}
            for m in RECAP.finditer(out)}


def run_playbook(playbook, inventory, extra_vars=None, check=False, tags=None,
                 skip_tags=None, limit=None, env=None, timeout=1800, args=()):
    """Run ansible-playbook from the checkout; return Result(rc, out, stats)."""
    argv = [venv_bin("ansible-playbook"), "-i", str(inventory), str(playbook)]
    if extra_vars:
        argv += ["-e", json.dumps(extra_vars)]
    if check:
        argv.append("--check")
    if tags:
        argv += ["--tags", tags]
    if skip_tags:
        argv += ["--skip-tags", skip_tags]
    if limit:
        argv += ["--limit", limit]
    argv += list(args)
    proc = subprocess.run(argv, cwd=ROOT, env=base_env(env), capture_output=True,
                          text=True, timeout=timeout, check=False)
    out = proc.stdout + proc.stderr
    return Result(proc.returncode, out, parse_recap(out))


def sandbox_cmd(*args, env=None):
    """scripts/sandbox.py ARGS (env: variables added to this process's); its stdout."""
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "sandbox.py")] + list(args),
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
                          env=dict(os.environ, **(env or {})))
    if proc.returncode != 0:
        raise RuntimeError("sandbox.py %s failed: %s%s" % (" ".join(args), proc.stdout, proc.stderr))
    return proc.stdout


@pytest.fixture(name="run_playbook", scope="session")
def run_playbook_fixture():
    return run_playbook


@pytest.fixture(name="sandbox", scope="session")
def sandbox_fixture():
    """sandbox(n) brings the fleet up with n hosts (reusing running ones) and
    returns the inventory path. The fleet is removed at the end of the session
    unless GPUFLEET_KEEP_SANDBOX=1."""
    def up(n=3):
        sandbox_cmd("up", "--hosts", str(n))
        return SANDBOX_INVENTORY
    yield up
    if os.environ.get("GPUFLEET_KEEP_SANDBOX") != "1":
        sandbox_cmd("down")


# The torch the controller-side tests run: the 2.13.0 CPU wheel that pip
# finds through its own configuration, in a venv kept under .cache/.
TORCH = "torch==2.13.0"
TORCH_CACHE = os.path.join(ROOT, ".cache", "torch-verify-real")


def _must_run(argv, **kwargs):
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    assert proc.returncode == 0, "%s\n%s%s" % (argv, proc.stdout, proc.stderr)
    return proc.stdout


@pytest.fixture(name="torch_cpu_wheels", scope="session")
def torch_cpu_wheels_fixture():
    """torch and its dependencies as wheels (pip's configuration says where from)."""
    dest = os.path.join(TORCH_CACHE, "wheels")
    with cache_lock("torch-verify-real"):
        if not glob.glob(os.path.join(dest, "torch-2.13.0*.whl")):
            os.makedirs(dest, exist_ok=True)
            _must_run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", dest, TORCH],
                      timeout=1200)
    return dest


@pytest.fixture(name="torch_cpu_venv", scope="session")
def torch_cpu_venv_fixture(torch_cpu_wheels):
    """A venv on the controller with that torch, installed from those wheels."""
    venv = os.path.join(TORCH_CACHE, "venv")
    python = os.path.join(venv, "bin", "python")
    with cache_lock("torch-verify-real"):
        ready = os.path.exists(python) and subprocess.run(
            [python, "-c", "import torch"], capture_output=True, check=False).returncode == 0
        if not ready:
            _must_run([sys.executable, "-m", "venv", "--clear", venv])
            _must_run([python, "-m", "pip", "install", "-q", "--no-index", "--find-links", torch_cpu_wheels, TORCH],
                      timeout=1200)
    return venv


@pytest.fixture(name="sandbox_ctl", scope="session")
def sandbox_ctl_fixture():
    """sandbox_ctl('stop', 'sbx2') / ('start', 'sbx2') for fault tests."""
    return sandbox_cmd


# cuobjdump is not part of the controller's CUDA toolkit here; NVIDIA publishes
# it on PyPI. Pinned by version and sha256.
CUOBJDUMP_VERSION = "13.2.78"
CUOBJDUMP_WHEEL = "nvidia_cuda_cuobjdump-%s-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl" % CUOBJDUMP_VERSION
CUOBJDUMP_SHA256 = "394087411405b846bf43aa52ca2ff603bbe18b3b8a1257cda0903e23c17bdbf3"
CUOBJDUMP_MEMBER = "nvidia/cu13/bin/cuobjdump"


def cuobjdump_home():
    """A CUDA-home-like directory (.cache/arch-audit/cuobjdump-VERSION) whose
    bin/cuobjdump comes from NVIDIA's pinned wheel, downloaded once."""
    cache = os.path.join(ROOT, ".cache", "arch-audit")
    wheel = os.path.join(cache, "wheels", CUOBJDUMP_WHEEL)
    if not os.path.exists(wheel):
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                               "-d", os.path.dirname(wheel), "nvidia-cuda-cuobjdump==%s" % CUOBJDUMP_VERSION],
                              capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    digest = hashlib.sha256()
    with open(wheel, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    assert digest.hexdigest() == CUOBJDUMP_SHA256, "%s: sha256 %s, expected %s (delete it to download again)" % (
        wheel, digest.hexdigest(), CUOBJDUMP_SHA256)
    home = os.path.join(cache, "cuobjdump-%s" % CUOBJDUMP_VERSION)
    binary = os.path.join(home, "bin", "cuobjdump")
    if not os.access(binary, os.X_OK):
        os.makedirs(os.path.dirname(binary), exist_ok=True)
        with zipfile.ZipFile(wheel) as archive, archive.open(CUOBJDUMP_MEMBER) as src, open(binary + ".part", "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.chmod(binary + ".part", 0o755)
        os.rename(binary + ".part", binary)
    return home
