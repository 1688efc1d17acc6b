#!/usr/bin/env python
"""OpenSSH 10.0 on both ends of the sandbox: the hosts' sshd and a client for
the controller, from Debian 12's backports (the same Debian as the sandbox
hosts and this controller, so the binaries run on both as they are).

OpenSSH 10's default key exchange is mlkem768x25519-sha256, a post-quantum
hybrid that costs the client about what the classical curve25519-sha256
does; OpenSSH 9.x's default, sntrup761x25519-sha512, costs it about five
times as much (bench/ssh_kex_openssh10.py). This makes a cold fleet run with
OpenSSH 10's defaults measurable end to end:

    bench/openssh10_sandbox.py
    bench/fleet_scale.py --no-setup --sizes 64 --runs 1 --ssh-executable .cache/openssh10/client/usr/bin/ssh

It downloads the three packages (pinned: version and sha256, checked before
use) into .cache/openssh10/, installs them on every sandbox host that is up
(one ad hoc ansible run: copy, dpkg -i keeping the host's sshd_config; a
host that already has them is left as it is), unpacks the client under
.cache/openssh10/client/ (nothing on the controller is installed), then
connects to the first host with that client and prints the key exchange
they agree on. Hosts copied later from sbx1 (scripts/sandbox.py clone) carry
what sbx1 carries.
"""
import hashlib
import json
import os
import re
import subprocess
import sys
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INV = os.path.join(ROOT, "inventories", "sandbox")
BIN = os.path.join(ROOT, ".venv", "bin")
CACHE = os.path.join(ROOT, ".cache", "openssh10")
CLIENT = os.path.join(CACHE, "client", "usr", "bin", "ssh")
MIRROR = os.environ.get("GPUFLEET_DEBIAN_MIRROR", "http://deb.debian.org/debian")
VERSION = "1:10.0p1-7~bpo12+1"
# bookworm-backports' Packages index, 2026-12: (package, sha256)
PACKAGES = (
    ("openssh-client", "8de7af71a08bd3ffec0f00621d7389fb53194245689ece0e0d1e92fe30e5caa5"),
    ("openssh-sftp-server", "b2d13f03eefc4847c21a27732c8e2efdfe950e62d2f31b8541f442b4286a8c0f"),
    ("openssh-server", "b773deb955342131cbe0bc254421fcd5ff4c39ee2db8dfd4f98ac53fa07b75a4"),
)
REMOTE_DIR = "/tmp/gpufleet-openssh10"


def deb_name(package):
    return "%s_%s_amd64.deb" % (package, VERSION.split(":", 1)[1])


def fetch():
    """The pinned packages in CACHE, each checked against its sha256."""
    os.makedirs(CACHE, exist_ok=True)
    paths = []
    for package, sha256 in PACKAGES:
        path = os.path.join(CACHE, deb_name(package))
        if not os.path.exists(path):
            url = "%s/pool/main/o/openssh/%s" % (MIRROR, deb_name(package).replace("~", "%7E"))
            with urllib.request.urlopen(url, timeout=120) as resp:
                data = resp.read()
            with open(path + ".part", "wb") as f:
                f.write(data)
            os.replace(path + ".part", path)
        with open(path, "rb") as f:
            found = hashlib.sha256(f.read()).hexdigest()
        if found != sha256:
            os.unlink(path)
            raise SystemExit("%s: sha256 %s, pinned %s (removed; run again)" % (path, found, sha256))
        paths.append(path)
    return paths


def adhoc(module, args, become=True):
    argv = [os.path.join(BIN, "ansible"), "-i", INV, "all", "-m", module, "-a", args] + (["-b"] if become else [])
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=ROOT)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-2000:])
        raise SystemExit("ansible %s failed on a host (rc %d)" % (module, done.returncode))
    return done.stdout


def install(paths):
    """Every host up: the packages copied and installed, unless sshd is 10.0 already."""
    adhoc("ansible.builtin.file", "path=%s state=directory mode=0700" % REMOTE_DIR)
    for path in paths:
        adhoc("ansible.builtin.copy", "src=%s dest=%s/ mode=0600" % (path, REMOTE_DIR))
    script = ("dpkg-query -W -f='${Version}' openssh-server | grep -qxF '%s' && echo already || "
              "{ DEBIAN_FRONTEND=noninteractive UCF_FORCE_CONFFOLD=1 dpkg -i --force-confold %s >/dev/null "
              "&& echo installed; }" % (VERSION, " ".join("%s/%s" % (REMOTE_DIR, os.path.basename(p)) for p in paths)))
    out = adhoc("ansible.builtin.shell", script)
    return out.count("installed"), out.count("already")


def unpack_client(paths):
    client_deb = [p for p in paths if os.path.basename(p).startswith("openssh-client_")][0]
    subprocess.run(["dpkg-deb", "-x", client_deb, os.path.join(CACHE, "client")], check=True)
    return CLIENT


def agreed(client):
    """The client's version and the key exchange it agrees with the first host."""
    listing = subprocess.run([os.path.join(BIN, "ansible-inventory"), "-i", INV, "--host", "sbx1"],
                             capture_output=True, text=True, check=True, cwd=ROOT).stdout
    hv = json.loads(listing)
    argv = [client, "-v", "-o", "BatchMode=yes", "-o", "ControlMaster=no", "-o", "ControlPath=none"]
    argv += hv.get("ansible_ssh_common_args", "").split()
    argv += ["-i", hv["ansible_ssh_private_key_file"], "-p", str(hv.get("ansible_port", 22)),
             "%s@%s" % (hv.get("ansible_user", "deploy"), hv["ansible_host"]), "true"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    found = re.search(r"kex: algorithm: (\S+)", done.stderr)
    remote = re.search(r"Remote protocol version [^,]+, remote software version (\S+)", done.stderr)
    version = subprocess.run([client, "-V"], capture_output=True, text=True, check=False).stderr.strip()
    if done.returncode != 0 or not found:
        raise SystemExit("%s could not reach sbx1: %s" % (client, done.stderr[-1500:]))
    return version, remote.group(1) if remote else "?", found.group(1)


def main():
    paths = fetch()
    installed, already = install(paths)
    client = unpack_client(paths)
    version, server, kex = agreed(client)
    print("hosts: %d installed, %d already had %s; client %s (%s), server %s; key exchange agreed: %s"
          % (installed, already, VERSION, os.path.relpath(client, ROOT), version, server, kex))
    print("next: bench/fleet_scale.py --no-setup --ssh-executable %s" % os.path.relpath(client, ROOT))


if __name__ == "__main__":
    main()
