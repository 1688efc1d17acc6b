"""Shared fixtures for tests that run against real hosts: the sandbox fleet
(systemd containers reached over SSH) and a playbook runner that returns the
per-host recap."""
import collections
import json
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SANDBOX_INVENTORY = os.path.join(ROOT, "inventories", "sandbox")
RECAP = re.compile(
    r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+"
    r"unreachable=(?P<unreachable>\d+)\s+failed=(?P<failed>\d+)\s+"
    r"skipped=(?P<skipped>\d+)\s+rescued=(?P<rescued>\d+)\s+ignored=(?P<ignored>\d+)",
    re.M)

Result = collections.namedtuple("Result", "rc out stats")


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


def sandbox_cmd(*args):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "sandbox.py")] + list(args),
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
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


@pytest.fixture(name="sandbox_ctl", scope="session")
def sandbox_ctl_fixture():
    """sandbox_ctl('stop', 'sbx2') / ('start', 'sbx2') for fault tests."""
    return sandbox_cmd
