#!/usr/bin/env python
"""The client's CPU for one new ssh connection with OpenSSH 10's key
exchanges, side by side in one run: mlkem768x25519-sha256 (OpenSSH 10's
default, post-quantum hybrid), sntrup761x25519-sha512 (OpenSSH 9.x's default,
post-quantum hybrid) and curve25519-sha256 (classical).

bench/ssh_kex.py measures the controller's own OpenSSH (9.2 on Debian 12)
against a sandbox host, where the post-quantum default is sntrup761x25519 and
costs about 0.08 s of CPU a connection: most of a cold fleet run's CPU per
host. ML-KEM needs OpenSSH 9.9 or later on both sides, so this runs client
and server inside one container of Debian 13 (trixie, OpenSSH 10.0), built
here from Debian's packages with debootstrap (no registry is reachable):

    bench/ssh_kex_openssh10.py [--runs 20]

The root filesystem is kept in .cache/kex-trixie/ and imported once as the
podman image localhost/gpufleet-kex-trixie:latest (remove it with podman rmi).
In the container: sshd on 127.0.0.1 (no network namespace of the host's),
then RUNS new connections (no control master) of `ssh ... true` per key
exchange, alternated. CPU is the kernel's accounting of the finished ssh
client (user + system, os.wait4); each figure is the median, each ratio the
median of the pair-by-pair ratios against sntrup761x25519.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, ".cache", "kex-trixie")
IMAGE = "localhost/gpufleet-kex-trixie:latest"
MIRROR = os.environ.get("GPUFLEET_DEBIAN_MIRROR", "http://deb.debian.org/debian")
PORT = 2222
KEXES = ("mlkem768x25519-sha256", "sntrup761x25519-sha512", "curve25519-sha256")
BASELINE = "sntrup761x25519-sha512"


# -- inside the container ------------------------------------------------------

def ssh_argv(kex):
    return ["ssh", "-o", "KexAlgorithms=" + kex, "-o", "ControlMaster=no", "-o", "ControlPath=none",
            "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
            "-o", "LogLevel=ERROR", "-i", "/root/.ssh/id_ed25519", "-p", str(PORT), "root@127.0.0.1", "true"]


def cpu_of(argv):
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dummy, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("%s failed: %s" % (" ".join(argv), proc.stderr.read().decode()))
    return usage.ru_utime + usage.ru_stime


def inner(runs):
    for cmd in (["ssh-keygen", "-A"], ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", "/root/.ssh/id_ed25519"]):
        subprocess.run(cmd, check=True, capture_output=True)
    with open("/root/.ssh/id_ed25519.pub", encoding="utf-8") as src, \
            open("/root/.ssh/authorized_keys", "w", encoding="utf-8") as dst:
        dst.write(src.read())
    os.makedirs("/run/sshd", exist_ok=True)
    subprocess.run(["/usr/sbin/sshd", "-p", str(PORT), "-o", "ListenAddress=127.0.0.1",
                    "-o", "PermitRootLogin=prohibit-password"], check=True)
    version = subprocess.run(["ssh", "-V"], capture_output=True, text=True, check=False).stderr.strip()
    probe = subprocess.run(["ssh", "-v"] + ssh_argv(KEXES[0])[1:], capture_output=True, text=True, check=False)
    agreed = re.search(r"kex: algorithm: (\S+)", probe.stderr)
    default = subprocess.run(["ssh", "-G", "127.0.0.1"], capture_output=True, text=True, check=False).stdout
    first = re.search(r"^kexalgorithms (\S+)", default, re.M)
    print("%s, client and server in one container; the client's first key exchange: %s; %d connections each, "
          "alternated" % (version, first.group(1).split(",")[0] if first else "?", runs))
    if not agreed or agreed.group(1) != KEXES[0]:
        raise SystemExit("the server did not agree to %s: %s" % (KEXES[0], probe.stderr[-500:]))
    cpu = {kex: [] for kex in KEXES}
    for dummy in range(runs):
        for kex in KEXES:
            cpu[kex].append(cpu_of(ssh_argv(kex)))
    for kex in KEXES:
        ratios = [a / b for a, b in zip(cpu[kex], cpu[BASELINE]) if b > 0]
        print("%-24s CPU a connection %6.1f ms   vs %s %.2f"
              % (kex, 1000 * statistics.median(cpu[kex]), BASELINE, statistics.median(ratios)))


# -- on the controller ---------------------------------------------------------

def run(argv, **kw):
    done = subprocess.run(argv, capture_output=True, text=True, check=False, **kw)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr)[-2000:]
        raise SystemExit("%s failed (rc %d): %s" % (" ".join(argv), done.returncode, tail))
    return done.stdout


def image():
    if subprocess.run(["podman", "image", "exists", IMAGE], check=False).returncode == 0:
        return
    rootfs = os.path.join(CACHE, "rootfs")
    if not os.path.exists(os.path.join(rootfs, "usr", "sbin", "sshd")):
        os.makedirs(CACHE, exist_ok=True)
        print("debootstrap trixie from %s (about a minute)" % MIRROR, flush=True)
        run(["debootstrap", "--variant=minbase", "--include=openssh-client,openssh-server,python3",
             "trixie", rootfs, MIRROR])
    tar = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
    run(["podman", "import", "--change", "LABEL=gpufleet.bench=1", "-", IMAGE], stdin=tar.stdout)
    if tar.wait() != 0:
        raise SystemExit("tar of %s failed" % rootfs)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--in-container", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")
    if args.in_container:
        inner(args.runs)
        return 0
    image()
    here = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run(["podman", "run", "--rm", "--network", "none", "-v", "%s:/bench:ro" % here, IMAGE,
                           "python3", "/bench/" + os.path.basename(__file__), "--in-container", "--runs",
                           str(args.runs)], check=False)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
