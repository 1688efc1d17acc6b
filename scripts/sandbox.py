"""The sandbox fleet: N systemd containers of the test image, reachable over
real SSH on 127.0.0.1 ports, with a key generated per sandbox. Where a
forwarded port does not answer but the container's own address does, that
address is used (said on stderr); where neither does, the error shows sshd's
state in the host, the port mapping and the firewall rules for the port.

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
ADDRESSES = os.path.join(STATE, "addresses.json")
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


def banner(addr, port):
    """True when an SSH server answers on addr:port."""
    try:
        with socket.create_connection((addr, port), timeout=1) as s:
            s.settimeout(2)
            return s.recv(4).startswith(b"SSH")
    except OSError:
        return False


def container_ip(name):
    proc = run(["podman", "inspect", "--format", "{{.NetworkSettings.IPAddress}}", name], check=False)
    return proc.stdout.strip() if proc.returncode == 0 else ""


def diagnose(name, port):
    """What a failed wait saw: sshd inside the host, its sockets, the port mapping."""
    lines = []
    for label, argv in (
            ("sshd in the host", ["podman", "exec", name, "sh", "-c",
                                  "systemctl is-active ssh.service; ss -ltn 2>/dev/null | grep -w 22 || true"]),
            ("podman port", ["podman", "port", name]),
            ("host firewall rules for the port", ["sh", "-c", "iptables -t nat -S 2>&1 | grep -w %d || true" % port])):
        proc = run(argv, check=False)
        lines.append("%s: %s" % (label, (proc.stdout + proc.stderr).strip().replace("\n", "; ") or "(nothing)"))
    return "\n".join(lines)


def wait_ssh(name, port, pubkey, timeout=float(os.environ.get("GPUFLEET_SANDBOX_SSH_TIMEOUT", "90"))):
    """(address, port) at which the host's sshd answers.

    The forwarded loopback port is the address of record. Where it does not
    answer but the container's own address does (the port forwarding of this
    machine's firewall is broken, the host itself is fine), the container
    address is used instead and that is said on stderr. An sshd that is not
    running after 10 s is started once; a host that answers on neither after
    a third of the timeout is restarted once (its port forwarding with it)."""
    start = time.monotonic()
    deadline = start + timeout
    ip = ""
    restarted = False
    while time.monotonic() < deadline:
        if not restarted and time.monotonic() - start > timeout / 3:
            restarted = True
            print("sandbox: %s: no sshd answers after %ds; restarting the host\n%s"
                  % (name, timeout / 3, diagnose(name, port)), file=sys.stderr)
            run(["podman", "restart", "-t", "2", name])
            prepare(name, pubkey)
            ip = ""
        if banner("127.0.0.1", port):
            return "127.0.0.1", port
        if time.monotonic() - start > 10:
            if not ip:
                # Once: an sshd that stopped (or never started) is started again.
                run(["podman", "exec", name, "sh", "-c",
                     "systemctl is-active --quiet ssh.service || systemctl restart ssh.service"], check=False)
                ip = container_ip(name) or "none"
                time.sleep(0.5)
                continue
            if ip != "none" and banner(ip, 22):
                print("sandbox: %s: 127.0.0.1:%d does not answer, %s:22 does; the inventory uses %s:22"
                      % (name, port, ip, ip), file=sys.stderr)
                return ip, 22
        time.sleep(0.2)
    raise SandboxError("sshd of %s answers neither on 127.0.0.1:%d nor on its own address %s:22 within %ds\n%s"
                       % (name, port, ip or "none", timeout, diagnose(name, port)))


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
        hosts[host_name(i)] = wait_ssh(name, port, pubkey)
    publish(hosts, key)
    print("sandbox up: %d host(s): %s; inventory %s"
          % (n, ", ".join("%s=%s:%d" % (h, a, p) for h, (a, p) in hosts.items()),
             os.path.relpath(INVENTORY, ROOT)))


def publish(hosts, key):
    """known_hosts, the inventory and the address record for hosts
    {name: (address, port)}; then every host is checked over real SSH."""
    known = []
    for h, (addr, port) in hosts.items():
        kt, kv = host_key(PREFIX + h[3:])
        # OpenSSH names a host on the default port without brackets.
        known.append("%s %s %s" % (addr if port == 22 else "[%s]:%d" % (addr, port), kt, kv))
    with open(os.path.join(STATE, "known_hosts"), "w") as f:
        f.write("\n".join(known) + "\n")
    with open(ADDRESSES, "w") as f:
        json.dump(hosts, f)
    write_inventory(hosts, key)
    for h, (addr, port) in hosts.items():
        proc = run(ssh_argv(addr, port, key) + ["true"], check=False)
        if proc.returncode != 0:
            raise SandboxError("ssh to %s (%s:%d) failed: %s" % (h, addr, port, proc.stderr.strip()))


def start(host):
    """Start a stopped host again; where it came back at another address
    (the container-address fallback), the inventory follows it."""
    name = PREFIX + host[3:]
    run(["podman", "start", name])
    key, pubkey = ensure_key()
    prepare(name, pubkey)
    try:
        with open(ADDRESSES) as f:
            hosts = {h: tuple(v) for h, v in json.load(f).items()}
    except (OSError, ValueError):
        return
    if host in hosts:
        now = wait_ssh(name, PORT_BASE + int(host[3:]) - 1, pubkey)
        if now != hosts[host]:
            hosts[host] = now
            publish(hosts, key)


def ssh_argv(addr, port, key):
    return ["ssh", "-i", key, "-p", str(port), "-o", "BatchMode=yes",
            "-o", "UserKnownHostsFile=" + os.path.join(STATE, "known_hosts"),
            "-o", "StrictHostKeyChecking=yes", "-o", "ConnectTimeout=5",
            USER + "@" + addr]


def write_inventory(hosts, key):
    lines = [
        "# Written by scripts/sandbox.py (make sandbox-up); do not edit.",
        "all:",
        "  children:",
        "    sandbox:",
        "      hosts:",
    ]
    for h, (addr, port) in hosts.items():
        lines.append("        %s:" % h)
        lines.append("          ansible_host: %s" % addr)
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
    for f in ("id_ed25519", "id_ed25519.pub", "known_hosts", "addresses.json"):
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
            if a.action == "start":
                start(a.host)
            else:
                run(["podman", "stop", "-t", "1", PREFIX + a.host[3:]])
        else:
            for name, c in sorted(containers().items()):
                print("%s %s" % (name, c.get("State")))
    except SandboxError as e:
        print("sandbox: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
