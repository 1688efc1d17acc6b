"""The sandbox fleet: N systemd containers of the test image, reachable over
real SSH with a key generated per sandbox. The containers share the
controller's network (no bridge, no port forwarding, no firewall rules):
host sbxN's sshd listens on 127.0.0.1 at port GPUFLEET_SANDBOX_PORT_BASE+N-1
(22201 for sbx1). A host whose sshd does not answer fails with the
container's state and podman's record of it, sshd's state and log inside it,
who listens on its port and the controller's free memory and disk. A host
that podman records as running but whose init is gone, or a reused host that
does not start or whose sshd does not answer even after a restart, is made
anew once (its state is lost), and that is said. With GPUFLEET_SANDBOX_FAILURE_LOG set, each such
error and remade host is also appended there (`make test` prints them at the
end of its output).

    sandbox.py up [--hosts N]      start (or reuse) N hosts, write the inventory
    sandbox.py down                remove every sandbox host and its key
    sandbox.py stop HOST / start HOST   for fault tests
    sandbox.py tmpfs HOST PATH SIZE     a small filesystem inside HOST (fault tests):
                                   mounts a tmpfs of SIZE (e.g. 1200m) owned by the
                                   deploy user at PATH, or resizes the one there;
                                   SIZE "off" unmounts it and removes PATH
    sandbox.py clone --hosts N     hosts sbx2..sbxN made anew as copies of sbx1 as it
                                   is now (podman commit; for benchmarks at 64 hosts:
                                   the copies share sbx1's files on disk, a deployed
                                   stack costs the disk once, not N times)
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
# Containers share the controller's network (no bridge, no port forwarding):
# each host's sshd listens on 127.0.0.1 at a port of its own.
REVISION_KEY, REVISION = "gpufleet.sandbox.revision", "2"
REVISION_LABEL = "%s=%s" % (REVISION_KEY, REVISION)
# What `clone` copies sbx1 into (removed by `down`).
CLONE_IMAGE = "localhost/%s-clone:latest" % PREFIX
SSHD_CONF = "/etc/ssh/sshd_config.d/gpufleet-sandbox.conf"
STARTABLE = ("created", "configured", "exited", "stopped")
# What podman knows of a container's init: a dead one's exit code, whether the
# kernel's OOM killer ended it, runc's error.
STATE_FORMAT = ("{{.State.Status}} pid={{.State.Pid}} conmon={{.State.ConmonPid}} "
                "exit={{.State.ExitCode}} oom_killed={{.State.OOMKilled}} "
                "started={{.State.StartedAt}} error={{.State.Error}}")
# Memory, disk and the kernel's last OOM kills on the controller, whose
# processes the containers' are.
CONTROLLER_STATE = ("free -m | awk 'NR==2 {print \"memory MiB: total \" $2 \", available \" $7}'; "
                    "df -Pm / | awk 'NR==2 {print \"disk /: \" $4 \" MiB free\"}'; "
                    "dmesg 2>/dev/null | grep -iE 'killed process|out of memory' | tail -n 3")


class SandboxError(Exception):
    pass


def run(argv, check=True, input_text=None, timeout=180):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, input=input_text, check=False, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SandboxError("command did not end within %ds: %s" % (timeout, " ".join(argv)))
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


def port_of(name):
    return PORT_BASE + int(name[len(PREFIX):]) - 1


def diagnose(name, port):
    """What a failed wait saw: the container, sshd inside it, who listens on the port."""
    lines = []
    for label, argv in (
            ("container", ["podman", "ps", "-a", "--filter", "name=^%s$" % name,
                           "--format", "{{.Status}}"]),
            ("its record", ["podman", "inspect", "--format", STATE_FORMAT, name]),
            ("sshd in the host", ["podman", "exec", name, "sh", "-c",
                                  "systemctl is-active ssh.service; cat %s 2>&1; "
                                  "journalctl -u ssh.service -n 5 --no-pager 2>&1 | tail -n 5" % SSHD_CONF]),
            ("listening on the port", ["sh", "-c", "ss -ltnp 2>&1 | grep -w ':%d' || true" % port]),
            ("the controller", ["sh", "-c", CONTROLLER_STATE])):
        proc = run(argv, check=False, timeout=30)
        lines.append("%s: %s" % (label, (proc.stdout + proc.stderr).strip().replace("\n", "; ") or "(nothing)"))
    return "\n".join(lines)


def wait_ssh(name, port, timeout=float(os.environ.get("GPUFLEET_SANDBOX_SSH_TIMEOUT", "60"))):
    """Wait until the host's sshd answers on 127.0.0.1:port. An sshd that does
    not answer after 10 s is restarted once (said on stderr)."""
    start = time.monotonic()
    restarted = False
    while time.monotonic() - start < timeout:
        if banner("127.0.0.1", port):
            return "127.0.0.1", port
        if not restarted and time.monotonic() - start > 10:
            restarted = True
            print("sandbox: %s: no sshd on 127.0.0.1:%d after 10s; restarting ssh.service\n%s"
                  % (name, port, diagnose(name, port)), file=sys.stderr)
            run(["podman", "exec", name, "sh", "-c",
                 "systemctl reset-failed ssh.service; systemctl restart ssh.service"], check=False, timeout=60)
        time.sleep(0.2)
    raise SandboxError("sshd of %s does not answer on 127.0.0.1:%d within %ds\n%s"
                       % (name, port, timeout, diagnose(name, port)))


def prepare(name, pubkey):
    """Per-container host keys, the sshd port on loopback and the deploy
    user's authorized key; then sshd is (re)started."""
    script = (
        "set -e; ls /etc/ssh/ssh_host_ed25519_key >/dev/null 2>&1 || ssh-keygen -A >/dev/null; "
        "printf 'Port %d\\nListenAddress 127.0.0.1\\n' > {conf}; "
        "install -d -m 0700 -o {u} -g {u} /home/{u}/.ssh; "
        "printf '%s\\n' \"$1\" > /home/{u}/.ssh/authorized_keys; "
        "chown {u}:{u} /home/{u}/.ssh/authorized_keys; chmod 0600 /home/{u}/.ssh/authorized_keys; "
        "systemctl restart ssh.service"
    ).format(u=USER, conf=SSHD_CONF).replace("%d", str(port_of(name)), 1)
    # systemd may still be starting: retry briefly until systemctl answers.
    last = None
    for dummy in range(50):
        proc = run(["podman", "exec", name, "sh", "-c", script, "sh", pubkey], check=False, timeout=60)
        if proc.returncode == 0:
            return
        last = proc
        time.sleep(0.2)
    raise SandboxError("preparing %s failed (rc=%d)\nstdout: %s\nstderr: %s"
                       % (name, last.returncode, last.stdout.strip(), last.stderr.strip()))


def host_key(name):
    return run(["podman", "exec", name, "cat", "/etc/ssh/ssh_host_ed25519_key.pub"]).stdout.split()[:2]


def create(name, i, image=IMAGE):
    run(["podman", "run", "-d", "--name", name, "--hostname", host_name(i),
         "--label", LABEL, "--label", REVISION_LABEL, "--network", "host",
         # sudo resolves the host's own name; the shared network has no entry for it.
         "--add-host", "%s:127.0.1.1" % host_name(i),
         "--systemd=always", "--stop-timeout", "5", image, "/sbin/init"])


# inotify instances systemd and its services take in one sandbox host (64
# running hosts held 384); the machine's fs.inotify.max_user_instances
# (often 128) bounds how many hosts can start: past it a host's systemd never
# finishes starting ("Too many open files") and sshd never comes up.
INOTIFY_PER_HOST = 6
INOTIFY_LIMIT = "/proc/sys/fs/inotify/max_user_instances"


def check_inotify(n, limit_path=INOTIFY_LIMIT):
    """Fail before any host is made when N hosts would not fit the inotify limit."""
    try:
        with open(limit_path) as fh:
            limit = int(fh.read().strip())
    except (OSError, ValueError):
        return
    need = n * INOTIFY_PER_HOST
    if limit < need:
        raise SandboxError("%d sandbox hosts need about %d inotify instances (%d each, for systemd), and "
                           "fs.inotify.max_user_instances is %d: raise it first, e.g. "
                           "`sysctl -w fs.inotify.max_user_instances=%d`" % (n, need, INOTIFY_PER_HOST, limit, need))


def clone(n):
    """sbx2..sbxN anew, each a copy of sbx1's files as they are now: one
    podman commit of sbx1 (its upper layer becomes an image layer that every
    copy shares), then a container per host from it with its own name, port
    and hostname. The copies keep sbx1's host key; known_hosts names each
    port. Hosts above N are left as they are."""
    if n < 2:
        raise SandboxError("clone needs --hosts of at least 2, got %d" % n)
    check_inotify(n)
    first = container(1)
    c = containers().get(first)
    if c is None or c.get("State") != "running":
        raise SandboxError("clone copies %s, which is %s: run `sandbox.py up` (and deploy it) first"
                           % (first, "missing" if c is None else c.get("State")))
    key, pubkey = ensure_key()
    t0 = time.monotonic()
    run(["podman", "commit", "-q", "--change", 'LABEL %s' % LABEL, first, CLONE_IMAGE], timeout=900)
    committed = time.monotonic() - t0
    hosts = {host_name(1): wait_ssh(first, port_of(first))}
    for i in range(2, n + 1):
        name = container(i)
        remove(name)
        create(name, i, CLONE_IMAGE)
        prepare(name, pubkey)
        hosts[host_name(i)] = wait_ssh(name, port_of(name))
    publish(hosts, key)
    print("sandbox clone: sbx2..sbx%d copied from sbx1 (commit %.0f s, hosts %.0f s); inventory %s"
          % (n, committed, time.monotonic() - t0 - committed, os.path.relpath(INVENTORY, ROOT)))


def up(n):
    if n < 1:
        raise SandboxError("--hosts must be at least 1, got %d" % n)
    check_inotify(n)
    key, pubkey = ensure_key()
    existing = containers()
    hosts = {}
    for i in range(1, n + 1):
        name = container(i)
        c = existing.get(name)
        if c is not None and not current(c):
            # Made by an older sandbox (another network set-up) or stuck
            # half-way (stopping, paused): a throwaway host is made anew.
            print("sandbox: %s is %s (sandbox revision %s); making it anew"
                  % (name, c.get("State"), (c.get("Labels") or {}).get(REVISION_KEY, "1")),
                  file=sys.stderr)
            remove(name)
            c = None
        fresh = c is None
        try:
            if fresh:
                create(name, i)
                prepare(name, pubkey)
            elif c.get("State") != "running":
                run(["podman", "start", name])
                prepare(name, pubkey)
            elif not alive(name):
                # podman's record says running, but nothing runs in it (its
                # init and conmon ended without podman seeing it: every exec
                # is refused with "cannot exec in a stopped container").
                raise SandboxError("%s is recorded as running but its init is gone\n%s"
                                   % (name, diagnose(name, port_of(name))))
            hosts[host_name(i)] = wait_ssh(name, port_of(name))
        except SandboxError as e:
            if fresh:
                raise
            # A host this run did not make may be broken beyond a restart of
            # its sshd, refuse to start ("container state improper") or have
            # no init left: one new host, after saying why.
            head, sep, rest = str(e).partition("\n")
            record("sandbox.py up: %s; making it anew%s%s" % (head, sep, rest))
            remove(name)
            create(name, i)
            prepare(name, pubkey)
            hosts[host_name(i)] = wait_ssh(name, port_of(name))
    publish(hosts, key)
    print("sandbox up: %d host(s): %s; inventory %s"
          % (n, ", ".join("%s=%s:%d" % (h, a, p) for h, (a, p) in hosts.items()),
             os.path.relpath(INVENTORY, ROOT)))


def alive(name):
    """True when a process can be started in the container (its init runs)."""
    return run(["podman", "exec", name, "true"], check=False, timeout=60).returncode == 0


def remove(name):
    """podman rm -f; a second time where the first fails: for a container whose
    conmon is gone, the first attempt waits for an exit file no one writes,
    fails, and leaves the container recorded as stopped."""
    if run(["podman", "rm", "-f", "-t", "2", name], check=False, timeout=120).returncode != 0:
        run(["podman", "rm", "-f", "-t", "2", name], timeout=120)


def record(message):
    """A sandbox event worth seeing at the end of `make test`: on stderr, and
    appended to $GPUFLEET_SANDBOX_FAILURE_LOG where that is set."""
    print("sandbox: %s" % message, file=sys.stderr)
    append_log(message)


def append_log(message):
    path = os.environ.get("GPUFLEET_SANDBOX_FAILURE_LOG")
    if path:
        with open(path, "a") as f:
            f.write(message.rstrip("\n") + "\n")


def current(c):
    """A container this revision of the sandbox made, in a state it can use."""
    labels = c.get("Labels") or {}
    return (labels.get(REVISION_KEY) == REVISION
            and c.get("State") in STARTABLE + ("running",))


def publish(hosts, key):
    """known_hosts, the inventory and the address record for hosts
    {name: (address, port)}; then every host is checked over real SSH."""
    known = []
    for h, (addr, port) in hosts.items():
        kt, kv = host_key(PREFIX + h[3:])
        known.append("[%s]:%d %s %s" % (addr, port, kt, kv))
    with open(os.path.join(STATE, "known_hosts"), "w") as f:
        f.write("\n".join(known) + "\n")
    write_inventory(hosts, key)
    for h, (addr, port) in hosts.items():
        proc = run(ssh_argv(addr, port, key) + ["true"], check=False, timeout=60)
        if proc.returncode != 0:
            raise SandboxError("ssh to %s (%s:%d) failed: %s" % (h, addr, port, proc.stderr.strip()))


def start(host):
    """Start a stopped host again and wait for its sshd."""
    name = PREFIX + host[3:]
    run(["podman", "start", name])
    dummy, pubkey = ensure_key()
    prepare(name, pubkey)
    wait_ssh(name, port_of(name))


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
    for name in names:
        remove(name)
    for f in ("id_ed25519", "id_ed25519.pub", "known_hosts", "addresses.json"):
        p = os.path.join(STATE, f)
        if os.path.exists(p):
            os.remove(p)
    if os.path.isdir(STATE) and not os.listdir(STATE):
        os.rmdir(STATE)
    if os.path.exists(INVENTORY):
        os.remove(INVENTORY)
    run(["podman", "rmi", "-f", "-i", CLONE_IMAGE], check=False, timeout=300)
    print("sandbox down: removed %d host(s)" % len(names))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", choices=["up", "down", "clone", "stop", "start", "tmpfs", "status"])
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
        elif a.action == "clone":
            clone(a.hosts)
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
        append_log("sandbox.py %s: %s" % (" ".join(sys.argv[1:]), e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
