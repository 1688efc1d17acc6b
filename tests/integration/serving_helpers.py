"""Helpers for tests of the drain/return hooks against real parts on the
sandbox fleet (tests/fixtures/serving): a Slurm cluster of Debian's packages
(slurm.yml: slurmctld on the group's first host, a slurmd per host, node names
= inventory names) and, on one host, a stand-in for an inference server (the
systemd unit gpufleet-test-serving.service) seen by a stand-in nvidia-smi.

Every function takes the sandbox inventory (what the `sandbox` fixture
returns) and asserts that what it ran succeeded, with that command's output in
the message. The Slurm ports come from GPUFLEET_SLURM_PORT_BASE (slurmctld
there, the slurmds just above it; default 46817, see slurm.yml).

    inventory = sandbox(3)
    install_slurm(inventory)                  # ~30 s on fresh hosts, ~4 s after
    install_fake_gpu(inventory, "sbx2")
    serving(inventory, "sbx2", "started")     # the stand-in GPU is now busy
    ...                                       # the drain hook under test
    assert slurm_node(inventory, "sbx2")["state"] == "IDLE+DRAIN"
    remove_fake_gpu(inventory, "sbx2")        # also stops the unit
"""
import base64
import json
import os
import re
import shlex
import subprocess
import time

from conftest import ROOT, base_env, run_playbook, venv_bin

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "serving")
SLURM_PLAYBOOK = os.path.join(FIXTURES, "slurm.yml")
FAKE_NVIDIA_SMI = os.path.join(FIXTURES, "fake-nvidia-smi")
SERVING_UNIT_FILE = os.path.join(FIXTURES, "gpufleet-test-serving.service")
SERVING_UNIT = "gpufleet-test-serving.service"
NVIDIA_SMI = "/usr/local/bin/nvidia-smi"
# Ansible's pattern for the group's first host, where slurmctld runs.
SLURM_CONTROLLER = "sandbox[0]"


def host_module(inventory, host, module, args, become=True, timeout=300):
    """One ad-hoc module run on HOST (a name or a pattern of one host) with
    ARGS (a dict, given to ansible as JSON: no key=value parsing of a script);
    its result dict (rc, stdout, stderr, msg, changed, failed...) and 'host'."""
    argv = [venv_bin("ansible"), "-i", str(inventory), host, "-m", module, "-a", json.dumps(args)]
    if become:
        argv.append("--become")
    env = base_env({"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"})
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    try:
        hosts = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]
    except (ValueError, KeyError, IndexError):
        hosts = {}
    if len(hosts) != 1:
        raise AssertionError("ansible %s -m %s -a %r: rc %d, not one host's result\n%s\n%s"
                             % (host, module, args, proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:]))
    name, result = next(iter(hosts.items()))
    result["host"] = name
    return result


def ok_module(inventory, host, module, args, become=True):
    result = host_module(inventory, host, module, args, become)
    assert not result.get("failed") and not result.get("unreachable"), (
        "%s on %s failed: %s" % (module, result["host"], json.dumps(result, indent=1)[-4000:]))
    return result


def host_shell(inventory, host, script, become=True):
    """A shell script on HOST that must exit 0; its stdout."""
    result = host_module(inventory, host, "ansible.builtin.shell", {"cmd": script}, become)
    assert result.get("rc") == 0 and not result.get("failed"), (
        "on %s: %s\nrc %s\nstdout: %s\nstderr: %s\n%s"
        % (result["host"], script, result.get("rc"), result.get("stdout"), result.get("stderr"), result.get("msg", "")))
    return result["stdout"]


def install_slurm(inventory, extra_vars=None, timeout=1200):
    """slurm.yml on the sandbox group (every node idle at its end); its wall seconds."""
    extra = dict(extra_vars or {})
    if os.environ.get("GPUFLEET_SLURM_PORT_BASE"):
        extra.setdefault("gpufleet_slurm_port_base", int(os.environ["GPUFLEET_SLURM_PORT_BASE"]))
    start = time.monotonic()
    result = run_playbook(SLURM_PLAYBOOK, inventory, extra_vars=extra or None, timeout=timeout)
    seconds = time.monotonic() - start
    assert result.rc == 0, "slurm.yml failed (rc %d, %.0f s):\n%s" % (result.rc, seconds, result.out[-8000:])
    return seconds


def parse_scontrol_node(text):
    """`scontrol show node` text -> {'state': 'IDLE+DRAIN', 'reason': 'why' or None}.
    The reason is without the '[user@time]' that slurmctld appends."""
    state = re.search(r"^\s*State=(\S+)", text, re.M)
    reason = re.search(r"^\s*Reason=(.*?)(?:\s+\[[^\]]*@[^\]]*\])?\s*$", text, re.M)
    assert state, "no State= in scontrol's answer:\n%s" % text
    return {"state": state.group(1), "reason": reason.group(1) if reason else None}


def slurm_node(inventory, host):
    """HOST's node as slurmctld has it (scontrol on the first host):
    {'state': 'IDLE' / 'IDLE+DRAIN' / 'ALLOCATED+DRAIN' / 'IDLE+NOT_RESPONDING'...,
     'reason': 'gpufleet: ...' or None, 'output': scontrol's whole answer}."""
    out = host_shell(inventory, SLURM_CONTROLLER, "scontrol show node %s" % shlex.quote(host), become=False)
    return dict(parse_scontrol_node(out), output=out)


def _file_script(path, source, mode, shebang=None):
    """Shell that writes SOURCE's bytes (carried in base64) to PATH with MODE,
    its first line replaced by SHEBANG if given."""
    with open(source, "rb") as handle:
        data = handle.read()
    if shebang:
        data = shebang.encode() + b"\n" + data.split(b"\n", 1)[1]
    data = base64.b64encode(data).decode()
    return "echo %s | base64 -d > %s.part && chmod %s %s.part && mv %s.part %s\n" % (
        data, path, mode, path, path, path)


def install_fake_gpu(inventory, host):
    """The stand-in nvidia-smi at /usr/local/bin/nvidia-smi and the serving unit
    (not started) on HOST, in one run."""
    unit_path = "/etc/systemd/system/" + SERVING_UNIT
    # The repository's copy starts with #!/usr/bin/env python (what sanity
    # accepts); the hosts have python3 only.
    host_shell(inventory, host, "set -e\n" + _file_script(NVIDIA_SMI, FAKE_NVIDIA_SMI, "0755", "#!/usr/bin/python3")
               + _file_script(unit_path, SERVING_UNIT_FILE, "0644") + "systemctl daemon-reload\n"
               + "%s --query-compute-apps=pid --format=csv,noheader,nounits" % NVIDIA_SMI)


def remove_fake_gpu(inventory, host):
    """The serving unit stopped and removed, and the stand-in nvidia-smi removed, on HOST."""
    host_shell(inventory, host,
               "systemctl stop {unit} 2>/dev/null; rm -f /etc/systemd/system/{unit} {smi}; "
               "systemctl daemon-reload; systemctl reset-failed {unit} 2>/dev/null; "
               "test ! -e {smi}".format(unit=SERVING_UNIT, smi=NVIDIA_SMI))


def serving(inventory, host, state):
    """The serving unit on HOST 'started' or 'stopped'."""
    assert state in ("started", "stopped"), state
    ok_module(inventory, host, "ansible.builtin.systemd_service", {"name": SERVING_UNIT, "state": state})


def serving_pid(inventory, host):
    """The serving unit's MainPID on HOST, 0 when it is not running."""
    out = host_shell(inventory, host, "systemctl show -p MainPID --value %s" % SERVING_UNIT)
    return int(out.strip() or 0)
