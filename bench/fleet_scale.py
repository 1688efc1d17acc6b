#!/usr/bin/env python
"""The controller's cost per host of a fleet run, at 8, 16 and 32 sandbox
hosts, side by side in one run.

For each fleet size N, RUNS pairs, in turn:
  A  verify.yml on the first N hosts (--limit);
  B  what an operator would run instead: a bounded parallel loop (as many at
     once as ansible.cfg's forks) of `ssh host ~/ml-env/bin/python -c
     "import torch, flashinfer, sgl_kernel; ..."` over the same N hosts.
Then, on the first 4 hosts, RUNS pairs of a no-op deploy.yml (A) against
verify.yml (B).

Controller CPU is the operating system's own accounting of the finished
command and of every process it waited for (user + system, os.wait4): the
ansible-playbook process, its workers and their ssh clients. The sandbox hosts
are containers on the same machine, but their processes are not the
command's children, so their work (sshd, the hosts' own `import torch`) is not
in the figure. Every figure is the median over the pairs; the ratios are
taken pair by pair.

    bench/fleet_scale.py [--runs 3] [--sizes 8,16,32] [--setup-hosts N]

It brings the sandbox up with the largest size and deploys every host once
first (not timed), so every timed deploy is a no-op (--setup-hosts 4 deploys
only the first 4: enough for the no-op deploy, when the hosts already carry a
stack, e.g. to measure another version of the code on them). 32 systemd containers
need more inotify instances than the kernel's default 128
(fs.inotify.max_user_instances; the script says so when a host does not come
up). Goals (issue "fleet scale"): verify.yml at <= 0.3 s of controller CPU per
host at 16 and 32 hosts, the no-op deploy at <= 1.3x verify.yml on 4 hosts.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INV = os.path.join(ROOT, "inventories", "sandbox")
WORK = os.path.join(ROOT, ".cache", "fleet-scale")
BIN = os.path.join(ROOT, ".venv", "bin")
# what the operator's loop runs on each host
PROBE = ("import torch, flashinfer, sgl_kernel; "
         "print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.cuda.device_count())")


def env():
    out = dict(os.environ)
    out["PATH"] = BIN + os.pathsep + out.get("PATH", "")
    out["ANSIBLE_CONFIG"] = os.path.join(ROOT, "ansible.cfg")
    return out


def timed(argv, log):
    """(wall s, controller CPU s, rc) of one command and all it waited for."""
    with open(log, "ab") as out:
        start = time.monotonic()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env())
        status, usage = os.wait4(proc.pid, 0)[1:]
        wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode


def forks():
    with open(os.path.join(ROOT, "ansible.cfg")) as f:
        for line in f:
            if line.replace(" ", "").startswith("forks="):
                return int(line.split("=", 1)[1])
    return 5


def hosts():
    listing = subprocess.run([os.path.join(BIN, "ansible-inventory"), "-i", INV, "--list"],
                             env=env(), capture_output=True, text=True, check=True)
    hostvars = json.loads(listing.stdout)["_meta"]["hostvars"]
    names = sorted(hostvars, key=lambda h: int(h[3:]) if h[3:].isdigit() else 0)
    return names, hostvars


def ssh_loop_script(names, hostvars, n, parallel):
    """A shell script: the operator's loop over the first n hosts."""
    lines = []
    for h in names[:n]:
        v = hostvars[h]
        known = v["ansible_ssh_common_args"].split("UserKnownHostsFile=")[1].split()[0]
        lines.append("%s %s %s %s %s" % (v.get("ansible_port", 22), v.get("ansible_user", "deploy"),
                                         v["ansible_host"], v["ansible_ssh_private_key_file"], known))
    listing = os.path.join(WORK, "hosts-%d.txt" % n)
    with open(listing, "w") as f:
        f.write("\n".join(lines) + "\n")
    script = os.path.join(WORK, "ssh_loop-%d.sh" % n)
    with open(script, "w") as f:
        f.write("""#!/bin/bash
set -euo pipefail
xargs -P %d -L 1 sh -c 'ssh -o BatchMode=yes -o UserKnownHostsFile="$4" -i "$3" -p "$0" "$1@$2" \\
  "~/ml-env/bin/python -c \\"%s\\""' \\
  < %s
""" % (parallel, PROBE, listing))
    os.chmod(script, 0o755)
    return [script]


def playbook(name, names, n, tag):
    return [os.path.join(BIN, "ansible-playbook"), "-i", INV, os.path.join(ROOT, "playbooks", name),
            "--limit", ",".join(names[:n]), "-e", "gpufleet_report_dir=%s" % os.path.join(WORK, "reports-" + tag)]


def pairs(a, b, runs, log):
    """RUNS A/B pairs after one warm-up pair: lists of (wall, cpu) per side."""
    sides = {"a": [], "b": []}
    for i in range(runs + 1):
        for side, argv in (("a", a), ("b", b)):
            wall, cpu, rc = timed(argv, log)
            if rc != 0:
                raise SystemExit("%s exited %d (log: %s)" % (" ".join(argv[:4]), rc, log))
            if i:
                sides[side].append((wall, cpu))
    return sides["a"], sides["b"]


def med(values):
    return statistics.median(values)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--sizes", default="8,16,32")
    p.add_argument("--setup-hosts", type=int, default=0,
                   help="hosts the untimed deploy covers (default: the largest size; the no-op deploy needs 4)")
    a = p.parse_args()
    sizes = sorted(int(s) for s in a.sizes.split(","))
    os.makedirs(WORK, exist_ok=True)
    log = os.path.join(WORK, "runs.log")
    open(log, "w").close()

    up = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "sandbox.py"), "up", "--hosts", str(sizes[-1])],
                        env=env(), capture_output=True, text=True, check=False)
    if up.returncode != 0:
        sys.stderr.write(up.stdout[-3000:] + up.stderr[-3000:])
        raise SystemExit("the sandbox did not come up with %d hosts (32 systemd containers need "
                         "fs.inotify.max_user_instances above the default 128)" % sizes[-1])
    names, hostvars = hosts()
    setup = os.path.join(WORK, "setup.log")
    open(setup, "w").close()
    setup_hosts = a.setup_hosts or sizes[-1]
    wall, dummy, rc = timed(playbook("deploy.yml", names, setup_hosts, "setup"), setup)
    if rc != 0:
        raise SystemExit("the untimed deploy failed (rc %d), see %s" % (rc, setup))
    print("untimed deploy of %d hosts: %.0f s" % (setup_hosts, wall))

    parallel = forks()
    print("\n== verify.yml (A) vs a parallel ssh loop (B, %d at once), %d pairs each, medians" % (parallel, a.runs))
    print("%5s | %12s %12s | %13s %13s | %10s" % ("hosts", "verify wall", "loop wall", "verify cpu/h", "loop cpu/h",
                                                  "wall A/B"))
    for n in sizes:
        va, lb = pairs(playbook("verify.yml", names, n, "verify-%d" % n),
                       ssh_loop_script(names, hostvars, n, parallel), a.runs, log)
        print("%5d | %11.2fs %11.2fs | %12.3fs %12.3fs | %10.2f" % (
            n, med(x[0] for x in va), med(x[0] for x in lb), med(x[1] for x in va) / n, med(x[1] for x in lb) / n,
            med(x[0] / y[0] for x, y in zip(va, lb))))

    print("\n== no-op deploy.yml (A) vs verify.yml (B) on 4 hosts, %d pairs, medians" % a.runs)
    da, vb = pairs(playbook("deploy.yml", names, 4, "deploy-4"), playbook("verify.yml", names, 4, "verify-4"),
                   a.runs, log)
    print("deploy %.2fs (cpu %.2fs)  verify %.2fs (cpu %.2fs)  wall A/B %.2f  cpu A/B %.2f" % (
        med(x[0] for x in da), med(x[1] for x in da), med(x[0] for x in vb), med(x[1] for x in vb),
        med(x[0] / y[0] for x, y in zip(da, vb)), med(x[1] / y[1] for x, y in zip(da, vb))))


if __name__ == "__main__":
    main()
