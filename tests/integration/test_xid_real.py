"""The Xid reader against this machine's real kernel log tools (journalctl
where installed, dmesg): the flags are accepted, the answer names its source
and boot, and a user the kernel denies the log (kernel.dmesg_restrict) gets
an error that says so instead of an empty list. Read-only; fast."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTIONS = os.path.dirname(os.path.dirname(os.path.dirname(ROOT)))

# A stand-in for AnsibleModule's two methods the reader uses, running the real
# commands; prints the reader's answer as JSON.
READER = r"""
import json, os, shutil, subprocess, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.gpufleet.inference.plugins.module_utils import xid

class Module(object):
    def get_bin_path(self, name, *args, **kwargs):
        return shutil.which(name, path=os.environ.get('PATH', '') + ':/usr/bin:/bin:/usr/sbin:/sbin')
    def run_command(self, argv, errors=None):
        proc = subprocess.run(argv, capture_output=True, text=True, errors=errors or 'strict')
        return proc.returncode, proc.stdout, proc.stderr

print(json.dumps(xid.read(Module(), [{'index': 0, 'uuid': 'GPU-x', 'pci_bus_id': '00000000:19:00.0'}], timeout=30)))
"""


def _collections_root():
    """The ansible_collections parent this checkout is importable from."""
    for base in (os.path.join(ROOT, ".collections"), os.path.join(ROOT, ".ansible", "collections"), COLLECTIONS):
        if os.path.isdir(os.path.join(base, "ansible_collections", "gpufleet", "inference")):
            return base
    pytest.skip("the collection is not laid out under an ansible_collections folder")
    return None


def _read(prefix=()):
    proc = subprocess.run(list(prefix) + [sys.executable, "-c", READER, _collections_root()], capture_output=True, text=True, check=False,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _boot_id():
    with open("/proc/sys/kernel/random/boot_id") as fh:
        return fh.read().strip()


def test_root_reads_this_machines_kernel_log():
    if os.geteuid() != 0:
        pytest.skip("reads the kernel log as root: this run is not root")
    answer = _read()
    assert answer["error"] is None, answer
    assert answer["source"] in ("journald", "dmesg")
    assert answer["boot_id"] == _boot_id()
    assert answer["cursor"]["boot_id"] == answer["boot_id"] and answer["cursor"]["monotonic_us"] > 0
    assert isinstance(answer["events"], list) and answer["count"] == len(answer["events"])
    assert all(e["code"] > 0 and e["boot_id"] == answer["boot_id"] for e in answer["events"])


def test_a_user_denied_the_kernel_log_gets_the_reason():
    with open("/proc/sys/kernel/dmesg_restrict") as fh:
        restricted = fh.read().strip() == "1"
    if os.geteuid() != 0 or not restricted or not os.path.exists("/usr/bin/setpriv"):
        pytest.skip("needs root, setpriv and kernel.dmesg_restrict=1 to run the reader as a user the kernel denies")
    answer = _read(["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
    assert answer["events"] == [] and answer["cursor"] is None
    assert answer["error"] and "not readable by this user" in answer["error"], answer
    assert "gpufleet_xid: become" in answer["error"]
