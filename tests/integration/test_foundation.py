"""The ground the other tests stand on: real SSH to the sandbox fleet with
both connection plugins, a sandbox that is reused rather than duplicated, and
a collection tarball that ansible-galaxy accepts."""
import glob
import json
import os
import signal
import subprocess
import time

from conftest import ROOT, SANDBOX_INVENTORY, base_env, venv_bin, sandbox_cmd

PREFIX = os.environ.get("GPUFLEET_SANDBOX_PREFIX", "gpufleet-sbx")


def ansible(*args, env=None):
    proc = subprocess.run([venv_bin("ansible")] + list(args), cwd=ROOT, env=base_env(env),
                          capture_output=True, text=True, timeout=300, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def podman_names():
    out = subprocess.run(["podman", "ps", "-a", "--filter", "label=gpufleet.sandbox=1",
                          "--format", "json"], capture_output=True, text=True, check=True).stdout
    return sorted(c["Names"][0] for c in json.loads(out or "[]"))


def test_ping_over_openssh_and_paramiko(sandbox):
    inv = sandbox(3)
    for connection in ("ssh", "paramiko"):
        rc, out = ansible("-i", inv, "all", "-m", "ansible.builtin.ping",
                          "-e", "ansible_connection=" + connection)
        assert rc == 0, out
        assert out.count("pong") == 3, out


def test_facts_come_from_the_container_over_ssh(sandbox):
    inv = sandbox(3)
    rc, out = ansible("-i", inv, "all", "-m", "ansible.builtin.command", "-a", "hostname",
                      env={"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json"})
    assert rc == 0, out
    hosts = json.JSONDecoder().raw_decode(out[out.index("{"):])[0]["plays"][0]["tasks"][0]["hosts"]
    assert {h: r["stdout"] for h, r in hosts.items()} == {"sbx1": "sbx1", "sbx2": "sbx2", "sbx3": "sbx3"}


def test_sandbox_up_twice_reuses_hosts(sandbox):
    sandbox(3)
    before = podman_names()
    sandbox_cmd("up", "--hosts", "3")
    assert podman_names() == before
    assert len([n for n in before if n.startswith("gpufleet-sbx")]) >= 3


def test_sandbox_up_remakes_a_host_whose_init_is_gone(sandbox, tmp_path):
    """podman records a host as running while its init and conmon are gone
    (every exec refused: "cannot exec in a stopped container"): `up` says so,
    with podman's record, and makes the host anew. On a fourth host, so that
    the three the other tests use keep their state."""
    sandbox(3)
    name, log = PREFIX + "4", tmp_path / "sandbox-failures.log"
    env = {"GPUFLEET_SANDBOX_FAILURE_LOG": str(log)}
    # A fourth host left by an earlier sandbox (a benchmark's 64) would be
    # remade by the first `up` below and said in the log: start from none.
    subprocess.run(["podman", "rm", "-f", "-t", "2", name], capture_output=True, timeout=120, check=False)
    try:
        sandbox_cmd("up", "--hosts", "4", env=env)
        pids = inspect(name, "{{.State.ConmonPid}} {{.State.Pid}}").split()
        for pid in pids:  # conmon first: nothing is left to tell podman that the init ended
            os.kill(int(pid), signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and exec_rc(name) == 0:
            time.sleep(0.2)
        assert exec_rc(name) != 0 and inspect(name, "{{.State.Status}}") == "running"
        assert not log.exists()

        out = sandbox_cmd("up", "--hosts", "4", env=env)
        assert "sbx4=127.0.0.1:" in out, out
        said = log.read_text()
        assert said.startswith("sandbox.py up: %s is recorded as running but its init is gone; making it anew\n"
                               % name), said
        assert "its record: running pid=%s conmon=%s" % (pids[1], pids[0]) in said, said
        assert "the controller: memory MiB: total" in said, said
        new = inspect(name, "{{.State.Pid}}")
        assert new not in pids and exec_rc(name) == 0
        rc, out = ansible("-i", SANDBOX_INVENTORY, "sbx4", "-m", "ansible.builtin.command", "-a", "hostname")
        assert rc == 0 and "sbx4" in out, out
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "2", name], capture_output=True, timeout=120, check=False)
        sandbox(3)


def inspect(name, fmt):
    return subprocess.run(["podman", "inspect", "--format", fmt, name], capture_output=True, text=True,
                          timeout=60, check=True).stdout.strip()


def exec_rc(name):
    return subprocess.run(["podman", "exec", name, "true"], capture_output=True, timeout=60,
                          check=False).returncode


def test_collection_builds_and_installs(tmp_path):
    env = base_env()
    build = subprocess.run([venv_bin("ansible-galaxy"), "collection", "build", "--force",
                            "--output-path", str(tmp_path), ROOT], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=300, check=False)
    assert build.returncode == 0, build.stdout + build.stderr
    tarballs = glob.glob(str(tmp_path / "gpufleet-inference-*.tar.gz"))
    assert len(tarballs) == 1
    size_mb = os.path.getsize(tarballs[0]) / 1e6
    assert size_mb < 5, "tarball carries build_ignore'd content: %.1f MB" % size_mb
    dest = tmp_path / "installed"
    inst = subprocess.run([venv_bin("ansible-galaxy"), "collection", "install", "--force", "-p", str(dest),
                           tarballs[0]], cwd=str(tmp_path), env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert inst.returncode == 0, inst.stdout + inst.stderr
    manifest = dest / "ansible_collections" / "gpufleet" / "inference" / "MANIFEST.json"
    info = json.loads(manifest.read_text())["collection_info"]
    assert (info["namespace"], info["name"]) == ("gpufleet", "inference")
