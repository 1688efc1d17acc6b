#!/usr/bin/env python
"""The controller's CPU for one new ssh connection, by key exchange, side by
side in one run.

A fleet run that finds no live ssh control master (ansible.cfg keeps one 60 s
after its last use, so a verification every few minutes from cron starts
cold) opens one new connection per host, and the key exchange is the
client's work. This times, alternating, RUNS connections of
`ssh ... true` to a sandbox host for each key exchange: the client's own
default (the first OpenSSH offers that the server takes; `ssh -G` and
`ssh -v` name it) and each one given with --kex. CPU is the operating
system's accounting of the finished ssh client (user + system, os.wait4);
each figure is the median, each ratio is the median of the pair-by-pair
ratios against the default.

    bench/ssh_kex.py [--runs 20] [--host 1] [--kex curve25519-sha256,...]

The sandbox must be up (scripts/sandbox.py up). To choose a key exchange for
the fleet's connections: ansible.cfg's ssh_args, or ansible_ssh_common_args
in the inventory, with -o KexAlgorithms=...; weigh the CPU against what the
default protects (a post-quantum hybrid, against traffic recorded now and
decrypted later).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import sandbox  # noqa: E402  pylint: disable=wrong-import-position


def negotiated(argv):
    """The key exchange the client and the server agree on (ssh -v)."""
    proc = subprocess.run(argv[:1] + ["-v"] + argv[1:] + ["true"], capture_output=True, text=True, check=False)
    found = re.search(r"kex: algorithm: (\S+)", proc.stderr)
    return found.group(1) if found else "? (rc %d: %s)" % (proc.returncode, proc.stderr.strip()[-200:])


def cpu_of(argv):
    """User + system CPU seconds of one finished command."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    dummy, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit("%s failed (rc %d): %s" % (" ".join(argv), proc.returncode, proc.stderr.read().decode()))
    return usage.ru_utime + usage.ru_stime


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--host", type=int, default=1, help="the sandbox host's number (sbxN)")
    p.add_argument("--kex", default="curve25519-sha256",
                   help="comma-separated key exchanges to compare with the client's default")
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")
    key = os.path.join(sandbox.STATE, "id_ed25519")
    base = sandbox.ssh_argv("127.0.0.1", sandbox.port_of(sandbox.container(args.host)), key)
    # a new connection every time: no control master, no reuse
    base = base[:1] + ["-o", "ControlMaster=no", "-o", "ControlPath=none"] + base[1:]
    sides = [("default", base)] + [(kex, base[:1] + ["-o", "KexAlgorithms=" + kex] + base[1:])
                                   for kex in args.kex.split(",") if kex]
    version = subprocess.run(["ssh", "-V"], capture_output=True, text=True, check=False).stderr.strip()
    print("%s; sbx%d; %d connections each, alternated" % (version, args.host, args.runs))
    names = dict((label, negotiated(argv)) for label, argv in sides)
    cpu = dict((label, []) for label, dummy in sides)
    for dummy in range(args.runs):
        for label, argv in sides:
            cpu[label].append(cpu_of(argv + ["true"]))
    for label, dummy in sides:
        ratios = [a / b for a, b in zip(cpu[label], cpu["default"]) if b > 0]
        print("%-22s %-36s CPU a connection %6.1f ms   vs default %.2f"
              % (label, names[label], 1000 * statistics.median(cpu[label]), statistics.median(ratios)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
