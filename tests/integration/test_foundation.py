"""The ground the other tests stand on: real SSH to the sandbox fleet with
both connection plugins, a sandbox that is reused rather than duplicated, and
a collection tarball that ansible-galaxy accepts."""
import glob
import json
import os
import subprocess

from conftest import ROOT, base_env, venv_bin, sandbox_cmd


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
