"""The sandbox fleet: N systemd containers of the test image, reachable over
real SSH on 127.0.0.1 ports, with a key generated per sandbox.

    sandbox.py up [--hosts N]      start (or reuse) N hosts, write the inventory
    sandbox.py down                remove every sandbox host and its key
    sandbox.py stop HOST / start HOST   for fault tests
    sandbox.py tmpfs HOST PATH SIZE     a small filesystem inside HOST (fault tests):
                                   mounts a tmpfs of SIZE (e.g. 1200m) owned by the
                                   deploy user at PATH, or resizes the one there;
                                   SIZE "off" unmounts it and removes PATH
    sandbox.py status

Everything the sandbox owns is labelled `gpufleet.sandbox=1` and lives under
.sandbox/ in the checkout, so `down` leaves nothing behind.
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STATE = os.path.join(ROOT, ".sandbox")
INVENTORY = os.path.join(ROOT, "inventories", "sandbox", "hosts.yml")
IMAGE = os.environ.get("GPUFLEET_TEST_IMAGE", "localhost/gpufleet-debian12:latest")
PREFIX = os.environ.get("GPUFLEET_SANDBOX_PREFIX", "gpufleet-sbx")
PORT_BASE = int(os.environ.get("GPUFLEET_SANDBOX_PORT_BASE", "22201"))
LABEL = "gpufleet.sandbox=1"
USER = "deploy"


class SandboxError(Exception):
    pass


def run(argv, check=True, input_text=None):
    proc = subprocess.run(argv, capture_output=True, text=True, input=input_text, check=False)
    if check and proc.returncode != 0:
        raise SandboxError(
            "command failed (rc=%d): %s\nstdout: %s\nstderr: %s"
            % (proc.returncode, " ".join(argv), proc.stdout.strip(), proc.stderr.strip()))
    return proc


def host_name(i):
    return "sbx%d" % i


def container(i):
    return "%s%d" % (PREFIX, i)


def containers():
    out = run(["podman", "ps", "-a", "--filter", "label=" + LABEL,
               "--format", "json"]).stdout
    result = {}
    for c in json.loads(out or "[]"):
        names = c.get("Names") or []
        # Only this sandbox's hosts: another checkout may run its own beside it.
        if names and names[0].startswith(PREFIX):
            result[names[0]] = c
    return result


def ensure_key():
    os.makedirs(STATE, mode=0o700, exist_ok=True)
    key = os.path.join(STATE, "id_ed25519")
    if not os.path.exists(key):
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpufleet-sandbox", "-f", key])
    with open(key + ".pub") as f:
        return key, f.read().strip()


def wait_port(port, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                if s.recv(4).startswith(b"SSH"):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SandboxError("sshd on 127.0.0.1:%d did not answer within %ds" % (port, timeout))


def prepare(name, pubkey):
    """Per-container host keys and the deploy user's authorized key."""
    script = (
        "set -e; ls /etc/ssh/ssh_host_ed25519_key >/dev/null 2>&1 || ssh-keygen -A >/dev/null; "
        "install -d -m 0700 -o {u} -g {u} /home/{u}/.ssh; "
        "printf '%s\\n' \"$1\" > /home/{u}/.ssh/authorized_keys; "
        "chown {u}:{u} /home/{u}/.ssh/authorized_keys; chmod 0600 /home/{u}/.ssh/authorized_keys; "
        "systemctl restart ssh.service"
    ).format(u=USER)
    # systemd may still be starting: retry briefly until systemctl answers.
    last = None
    for dummy in range(50):
        proc = run(["podman", "exec", name, "sh", "-c", script, "sh", pubkey], check=False)
        if proc.returncode == 0:
            return
        last = proc
        time.sleep(0.2)
    raise SandboxError("preparing %s failed (rc=%d)\nstdout: %s\nstderr: %s"
                       % (name, last.returncode, last.stdout.strip(), last.stderr.strip()))


def host_key(name):
    return run(["podman", "exec", name, "cat", "/etc/ssh/ssh_host_ed25519_key.pub"]).stdout.split()[:2]


def up(n):
    if n < 1:
        raise SandboxError("--hosts must be at least 1, got %d" % n)
    key, pubkey = ensure_key()
    existing = containers()
    known = []
    hosts = {}
    for i in range(1, n + 1):
        name, port = container(i), PORT_BASE + i - 1
        c = existing.get(name)
        if c is None:
            run(["podman", "run", "-d", "--name", name, "--hostname", host_name(i),
                 "--label", LABEL, "--systemd=always", "--stop-timeout", "5",
                 "-p", "127.0.0.1:%d:22" % port, IMAGE, "/sbin/init"])
            prepare(name, pubkey)
        elif c.get("State") != "running":
            run(["podman", "start", name])
            prepare(name, pubkey)
        wait_port(port)
        kt, kv = host_key(name)
        known.append("[127.0.0.1]:%d %s %s" % (port, kt, kv))
        hosts[host_name(i)] = port
    with open(os.path.join(STATE, "known_hosts"), "w") as f:
        f.write("\n".join(known) + "\n")
    write_inventory(hosts, key)
    # Verify every host over real SSH before declaring the sandbox up.
    for h, port in hosts.items():
        proc = run(ssh_argv(port, key) + ["true"], check=False)
        if proc.returncode != 0:
            raise SandboxError("ssh to %s (127.0.0.1:%d) failed: %s" % (h, port, proc.stderr.strip()))
    print("sandbox up: %d host(s): %s; inventory %s"
          % (n, ", ".join("%s=127.0.0.1:%d" % kv for kv in hosts.items()),
             os.path.relpath(INVENTORY, ROOT)))


def ssh_argv(port, key):
    return ["ssh", "-i", key, "-p", str(port), "-o", "BatchMode=yes",
            "-o", "UserKnownHostsFile=" + os.path.join(STATE, "known_hosts"),
            "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=5",
            USER + "@127.0.0.1"]


def write_inventory(hosts, key):
    lines = [
        "# Written by scripts/sandbox.py (make sandbox-up); do not edit.",
        "all:",
        "  children:",
        "    sandbox:",
        "      hosts:",
    ]
    for h, port in hosts.items():
        lines.append("        %s:" % h)
        lines.append("          ansible_host: 127.0.0.1")
        lines.append("          ansible_port: %d" % port)
        lines.append("          gpufleet_sandbox_container: %s%s" % (PREFIX, h[3:]))
    lines += [
        "      vars:",
        "        ansible_user: %s" % USER,
        "        ansible_python_interpreter: /usr/bin/python3",
        "        # OpenSSH checks each container's own host key (known_hosts below);",
        "        # paramiko reads only ~/.ssh/known_hosts, which the sandbox leaves alone.",
        "        ansible_paramiko_host_key_checking: false",
        "        ansible_ssh_private_key_file: %s" % key,
        "        ansible_ssh_common_args: >-",
        "          -o UserKnownHostsFile=%s -o StrictHostKeyChecking=yes"
        % os.path.join(STATE, "known_hosts"),
        "",
    ]
    os.makedirs(os.path.dirname(INVENTORY), exist_ok=True)
    with open(INVENTORY, "w") as f:
        f.write("\n".join(lines))


def tmpfs(host, path, size):
    """Mount, resize or (size "off") remove a tmpfs at PATH inside HOST.

    The containers run without CAP_SYS_ADMIN; only this exec is privileged.
    A size below what the tmpfs already holds is refused by the kernel."""
    if not path.startswith("/") or path.rstrip("/") in ("", "/home", "/root", "/usr", "/var", "/etc"):
        raise SandboxError("tmpfs needs an absolute path of its own, got %r" % path)
    name = PREFIX + host[3:]
    if size == "off":
        script = 'if mountpoint -q "$1"; then umount "$1"; fi; if [ -d "$1" ]; then rmdir "$1"; fi'
    else:
        script = ('mkdir -p "$1"; if mountpoint -q "$1"; then mount -o remount,size="$2" "$1"; '
                  'else mount -t tmpfs -o size="$2",mode=0755,uid="$(id -u {u})",gid="$(id -g {u})" tmpfs "$1"; fi; '
                  'df -Pk "$1" | tail -n 1').format(u=USER)
    out = run(["podman", "exec", "--privileged", name, "sh", "-c", script, "sh", path, size]).stdout.strip()
    print("sandbox tmpfs %s:%s %s%s" % (host, path, size, (": " + out) if out else ""))


def down():
    names = list(containers())
    if names:
        run(["podman", "rm", "-f", "-t", "2"] + names)
    for f in ("id_ed25519", "id_ed25519.pub", "known_hosts"):
        p = os.path.join(STATE, f)
        if os.path.exists(p):
            os.remove(p)
    if os.path.isdir(STATE) and not os.listdir(STATE):
        os.rmdir(STATE)
    if os.path.exists(INVENTORY):
        os.remove(INVENTORY)
    print("sandbox down: removed %d host(s)" % len(names))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=["up", "down", "stop", "start", "tmpfs", "status"])
    p.add_argument("host", nargs="?")
    p.add_argument("path", nargs="?", help="tmpfs: mount point inside the host")
    p.add_argument("size", nargs="?", help="tmpfs: size (e.g. 1200m, 900000k) or off")
    p.add_argument("--hosts", type=int, default=int(os.environ.get("SANDBOX_HOSTS", "3")))
    a = p.parse_args()
    try:
        if a.action == "up":
            up(a.hosts)
        elif a.action == "down":
            down()
        elif a.action == "tmpfs":
            if not (a.host and a.path and a.size):
                raise SandboxError("tmpfs needs HOST PATH SIZE, e.g. tmpfs sbx2 /srv/small 1200m")
            tmpfs(a.host, a.path, a.size)
        elif a.action in ("stop", "start"):
            if not a.host:
                raise SandboxError("%s needs a host name such as sbx1" % a.action)
            name = PREFIX + a.host[3:]
            run(["podman", a.action] + (["-t", "1"] if a.action == "stop" else []) + [name])
            if a.action == "start":
                pubkey = ensure_key()[1]
                prepare(name, pubkey)
        else:
            for name, c in sorted(containers().items()):
                print("%s %s" % (name, c.get("State")))
    except SandboxError as e:
        print("sandbox: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
