#!/usr/bin/env python
"""The controller's cost per host of a fleet run, at 16, 32 and 64 sandbox
hosts, side by side in one run.

For each fleet size N, RUNS pairs, in turn:
  A  verify.yml on the first N hosts (--limit);
  B  what an operator would run instead: a bounded parallel loop (as many at
     once as ansible.cfg's forks) of `ssh host ~/ml-env/bin/python -c
     "import torch, flashinfer, sgl_kernel; ..."` over the same N hosts.
Then, at the largest size, RUNS pairs of
  A  the same hosts as 4 slices run side by side (4 verify.yml, each --limit
     to a quarter, with one gpufleet_run_id and a gpufleet_report_part each:
     what job slicing runs on one execution node), then the merge
     (playbooks/merge.yml) of their 4 parts into the fleet report;
  B  verify.yml over all of them at once;
and, on the first 4 hosts, RUNS pairs of a no-op deploy.yml (A) against
verify.yml (B).

Controller CPU is the operating system's own accounting of the finished
command and of every process it waited for (user + system, os.wait4): the
ansible-playbook process, its workers and their ssh clients; for the slices,
the sum over the 4 commands, their wall from the first start to the last
end. The sandbox hosts are containers on the same machine, but their
processes are not the command's children, so their work (sshd, the hosts'
own `import torch`) is not in the figure. Every figure is the median over
the pairs; the ratios are taken pair by pair. The controller's free memory
(MemAvailable, its lowest while each side ran) is printed beside them.

    bench/fleet_scale.py [--runs 3] [--sizes 16,32,64] [--setup-hosts N | --no-setup]
                         [--masters cold|shared] [--ssh-option KexAlgorithms=curve25519-sha256]
                         [--cfg internal_poll_interval=0.05] [--ssh-executable PATH]

By default no timed ansible-playbook finds a live ssh control master (each
gets a control path directory of its own): every run pays one key exchange
per host, as the loop does, whatever ran before it. With --masters shared a
run reuses the masters an earlier one left alive (ansible.cfg keeps them
60 s), which makes its figure depend on how long the runs between took.
--cfg sets an ansible.cfg option for every run, in a copy of the checkout's
ansible.cfg under .cache/fleet-scale/ (some settings, such as
internal_poll_interval, have no environment variable). --ssh-executable
runs another ssh client on both sides (ansible's ssh_executable and the
loop's), e.g. OpenSSH 10.0 with its post-quantum default key exchange
mlkem768x25519-sha256, after bench/openssh10_sandbox.py has put its sshd on
the hosts.

It brings the sandbox up with one host, deploys it (not timed), then makes
the other hosts copies of it (scripts/sandbox.py clone): every timed deploy
is a no-op, and 64 deployed hosts cost the disk one stack. --setup-hosts N
instead brings up the largest size and deploys the first N hosts (N >= 4 for
the no-op deploy), e.g. to measure another version of the code on hosts
that already carry a stack. 32 and more systemd containers need more
inotify instances than the kernel's default 128
(fs.inotify.max_user_instances; the script says so when a host does not come
up). Goals: verify.yml at <= 0.15 s of
controller CPU per host at 64 hosts, a cost per host that does not grow from
16 to 64, the no-op deploy at <= 1.3x verify.yml on 4 hosts.
"""
import argparse
import configparser
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INV = os.path.join(ROOT, "inventories", "sandbox")
WORK = os.path.join(ROOT, ".cache", "fleet-scale")
BIN = os.path.join(ROOT, ".venv", "bin")
# what the operator's loop runs on each host
PROBE = ("import torch, flashinfer, sgl_kernel; "
         "print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), torch.cuda.device_count())")


# How each timed ansible-playbook finds the ssh control masters (--masters):
# "cold" gives every command a control path directory of its own, so that it
# starts none warm (one key exchange per host, as a run from cron minutes
# after the last; the loop's plain ssh pays one per host too); "shared" keeps
# ansible's default directory, where a master that a run before left alive
# (ControlPersist) is reused, and whether it is depends on how long the runs
# between took. SSH_OPTIONS (--ssh-option) go to both sides' ssh.
MASTERS = {"mode": "cold", "dirs": []}
SSH_OPTIONS = []
# the ssh client of both sides (--ssh-executable), else the one on PATH
SSH = {"path": "ssh"}


# the ansible.cfg every run takes: the checkout's, or the copy --cfg writes
CFG = {"path": os.path.join(ROOT, "ansible.cfg")}
# the checkout's ansible.cfg options that name a path relative to it
CFG_PATHS = ("collections_path", "roles_path", "inventory", "fact_caching_connection", "local_tmp")


def write_cfg(settings, out=os.path.join(WORK, "ansible.cfg")):
    """A copy of the checkout's ansible.cfg (OUT, under .cache/ unless given)
    with its relative paths made absolute and the --cfg settings in it
    (ansible-core reads some only from a file, internal_poll_interval among
    them)."""
    cfg = configparser.ConfigParser(interpolation=None)
    cfg.read(CFG["path"])
    for section in cfg.sections():
        for name in CFG_PATHS:
            if cfg.has_option(section, name) and not os.path.isabs(cfg.get(section, name)):
                cfg.set(section, name, os.path.join(ROOT, cfg.get(section, name)))
    for item in settings:
        key, value = item.split("=", 1)
        section, name = key.split(".", 1) if "." in key else ("defaults", key)
        cfg.set(section, name, value)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        cfg.write(f)
    return out


def env():
    out = dict(os.environ)
    out["PATH"] = BIN + os.pathsep + out.get("PATH", "")
    out["ANSIBLE_CONFIG"] = CFG["path"]
    if MASTERS["mode"] == "cold":
        # short: a control socket's path must fit 108 bytes
        MASTERS["dirs"].append(tempfile.mkdtemp(prefix="gpufleet-cp-"))
        out["ANSIBLE_SSH_CONTROL_PATH_DIR"] = MASTERS["dirs"][-1]
    if SSH["path"] != "ssh":
        out["ANSIBLE_SSH_EXECUTABLE"] = SSH["path"]
    if SSH_OPTIONS:
        out["ANSIBLE_SSH_EXTRA_ARGS"] = " ".join("-o " + o for o in SSH_OPTIONS)
    return out


def mem_available_mib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    return -1


class LowestMemory:
    """The controller's lowest MemAvailable while the block runs (sampled
    every 0.2 s)."""

    def __enter__(self):
        self.lowest = mem_available_mib()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.2):
            self.lowest = min(self.lowest, mem_available_mib())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.lowest = min(self.lowest, mem_available_mib())


def timed_many(argvs, log):
    """(wall s, controller CPU s, worst rc, lowest MemAvailable MiB) of
    commands run side by side: wall from the first start to the last end, CPU
    the sum of each and all it waited for."""
    with open(log, "ab") as out, LowestMemory() as mem:
        start = time.monotonic()
        procs = [subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env())
                 for argv in argvs]
        cpu, rc = 0.0, 0
        for proc in procs:
            status, usage = os.wait4(proc.pid, 0)[1:]
            cpu += usage.ru_utime + usage.ru_stime
            rc = rc or os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
    return wall, cpu, rc, mem.lowest


def timed(argv, log):
    """(wall s, controller CPU s, rc, lowest MemAvailable MiB) of one command
    and all it waited for."""
    return timed_many([argv], log)


def run_or_exit(argvs, log):
    wall, cpu, rc, mem = timed_many(argvs, log)
    if rc != 0:
        raise SystemExit("%s exited %d (log: %s)" % (" ".join(argvs[-1][:4]), rc, log))
    return wall, cpu, mem


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
xargs -P %d -L 1 sh -c '%s -o BatchMode=yes%s -o UserKnownHostsFile="$4" -i "$3" -p "$0" "$1@$2" \\
  "~/ml-env/bin/python -c \\"%s\\""' \\
  < %s
""" % (parallel, SSH["path"], "".join(" -o " + o for o in SSH_OPTIONS), PROBE, listing))
    os.chmod(script, 0o755)
    return [script]


def playbook(name, names, n, tag, first=0, extra=()):
    return [os.path.join(BIN, "ansible-playbook"), "-i", INV, os.path.join(ROOT, "playbooks", name),
            "--limit", ",".join(names[first:n]),
            "-e", "gpufleet_report_dir=%s" % os.path.join(WORK, "reports-" + tag)] + list(extra)


def pairs(a, b, runs, log):
    """RUNS A/B pairs after one warm-up pair: lists of (wall, cpu, lowest
    free MiB) per side."""
    sides = {"a": [], "b": []}
    for i in range(runs + 1):
        for side, argv in (("a", a), ("b", b)):
            figures = run_or_exit([argv], log)
            if i:
                sides[side].append(figures)
    return sides["a"], sides["b"]


SLICES = 4


def slices(names, n, run_id):
    """SLICES verify.yml over the first n hosts, a quarter each, one run id,
    a part each: what job slicing runs on one execution node."""
    size = -(-n // SLICES)
    return [playbook("verify.yml", names, min(n, (k + 1) * size), "sliced-%d" % n, first=k * size,
                     extra=("-e", "gpufleet_run_id=" + run_id, "-e", "gpufleet_report_part=%d" % (k + 1)))
            for k in range(SLICES)]


def merge(n, run_id):
    return [os.path.join(BIN, "ansible-playbook"), "-i", INV, os.path.join(ROOT, "playbooks", "merge.yml"),
            "-e", "gpufleet_report_dir=%s" % os.path.join(WORK, "reports-sliced-%d" % n),
            "-e", "gpufleet_run_id=" + run_id, "-e", "gpufleet_report_parts=%d" % SLICES]


def sliced_pairs(names, n, runs, log):
    """RUNS triples after a warm-up: the slices side by side, their merge,
    verify.yml over the same n hosts at once."""
    sl, mg, whole = [], [], []
    for i in range(runs + 1):
        run_id = "bench-%d-%d" % (os.getpid(), i)
        figures = (run_or_exit(slices(names, n, run_id), log), run_or_exit([merge(n, run_id)], log),
                   run_or_exit([playbook("verify.yml", names, n, "verify-%d" % n)], log))
        if i:
            for dest, f in zip((sl, mg, whole), figures):
                dest.append(f)
    return sl, mg, whole


def med(values):
    return statistics.median(values)


def sandbox(*args):
    done = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "sandbox.py")] + list(args),
                          env=env(), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit("sandbox.py %s failed (32 and more systemd containers need "
                         "fs.inotify.max_user_instances above the default 128)" % " ".join(args))
    return done.stdout


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--sizes", default="16,32,64")
    p.add_argument("--setup-hosts", type=int, default=0,
                   help="deploy only the first N of hosts already up (default: deploy sbx1, clone it to the largest size)")
    p.add_argument("--no-setup", action="store_true",
                   help="use the hosts that are up as they are (they must carry a stack, e.g. from a run before)")
    p.add_argument("--masters", choices=("cold", "shared"), default="cold",
                   help="cold: no timed run finds a live ssh control master (default); shared: ansible's default "
                        "control path, reused where a master of an earlier run is still alive")
    p.add_argument("--ssh-option", action="append", default=[], metavar="NAME=VALUE",
                   help="an ssh -o option for both sides, e.g. KexAlgorithms=curve25519-sha256 (repeatable)")
    p.add_argument("--cfg", action="append", default=[], metavar="[SECTION.]NAME=VALUE",
                   help="an ansible.cfg setting for every run (section defaults unless named), e.g. "
                        "internal_poll_interval=0.05 (repeatable)")
    p.add_argument("--ssh-executable", default="", metavar="PATH",
                   help="the ssh client of both sides, e.g. OpenSSH 10 from bench/openssh10_sandbox.py")
    a = p.parse_args()
    if a.ssh_executable:
        if not os.access(a.ssh_executable, os.X_OK):
            p.error("--ssh-executable %r is not an executable file" % a.ssh_executable)
        SSH["path"] = os.path.abspath(a.ssh_executable)
    for item in a.cfg:
        if "=" not in item:
            p.error("--cfg takes [SECTION.]NAME=VALUE (got %r)" % item)
    if a.cfg:
        CFG["path"] = write_cfg(a.cfg)
    MASTERS["mode"] = a.masters
    SSH_OPTIONS.extend(a.ssh_option)
    try:
        measure(a)
    finally:
        for d in MASTERS["dirs"]:
            shutil.rmtree(d, ignore_errors=True)


def measure(a):
    sizes = sorted(int(s) for s in a.sizes.split(","))
    os.makedirs(WORK, exist_ok=True)
    # a report directory of an earlier run holds that run's baselines: hosts
    # deployed anew since then would all show drift and fail the runs
    for name in os.listdir(WORK):
        if name.startswith("reports-"):
            shutil.rmtree(os.path.join(WORK, name))
    log = os.path.join(WORK, "runs.log")
    open(log, "w").close()
    setup = os.path.join(WORK, "setup.log")
    open(setup, "w").close()
    print("controller before the sandbox: MemAvailable %d MiB" % mem_available_mib())
    if a.no_setup:
        names, hostvars = hosts()
        if len(names) < sizes[-1]:
            raise SystemExit("--no-setup: %d hosts are up, %d needed" % (len(names), sizes[-1]))
    elif a.setup_hosts:
        sandbox("up", "--hosts", str(sizes[-1]))
        names, hostvars = hosts()
        wall, dummy, rc, dummy = timed(playbook("deploy.yml", names, a.setup_hosts, "setup"), setup)
        if rc != 0:
            raise SystemExit("the untimed deploy failed (rc %d), see %s" % (rc, setup))
        print("untimed deploy of %d hosts: %.0f s" % (a.setup_hosts, wall))
    else:
        sandbox("up", "--hosts", "1")
        names, hostvars = hosts()
        wall, dummy, rc, dummy = timed(playbook("deploy.yml", names, 1, "setup"), setup)
        if rc != 0:
            raise SystemExit("the untimed deploy failed (rc %d), see %s" % (rc, setup))
        print("untimed deploy of sbx1: %.0f s" % wall)
        print(sandbox("clone", "--hosts", str(sizes[-1])).strip())
        names, hostvars = hosts()
    print("controller with %d hosts up: MemAvailable %d MiB" % (len(names), mem_available_mib()))

    parallel = forks()
    client = subprocess.run([SSH["path"], "-V"], capture_output=True, text=True, check=False).stderr.strip()
    print("ssh control masters: %s%s%s; ssh client: %s" % (
        a.masters, "; ssh options: " + " ".join(SSH_OPTIONS) if SSH_OPTIONS else "",
        "; ansible.cfg: " + " ".join(a.cfg) if a.cfg else "", client))
    print("\n== verify.yml (A) vs a parallel ssh loop (B, %d at once), %d pairs each, medians" % (parallel, a.runs))
    print("%5s | %12s %12s | %13s %13s | %10s | %s" % ("hosts", "verify wall", "loop wall", "verify cpu/h",
                                                       "loop cpu/h", "wall A/B", "lowest free MiB (A)"))
    for n in sizes:
        va, lb = pairs(playbook("verify.yml", names, n, "verify-%d" % n),
                       ssh_loop_script(names, hostvars, n, parallel), a.runs, log)
        print("%5d | %11.2fs %11.2fs | %12.3fs %12.3fs | %10.2f | %d" % (
            n, med(x[0] for x in va), med(x[0] for x in lb), med(x[1] for x in va) / n, med(x[1] for x in lb) / n,
            med(x[0] / y[0] for x, y in zip(va, lb)), min(x[2] for x in va)))

    n = sizes[-1]
    print("\n== %d hosts as %d slices side by side, then the merge (A), vs verify.yml over all (B), %d runs, medians"
          % (n, SLICES, a.runs))
    sl, mg, whole = sliced_pairs(names, n, a.runs, log)
    print("slices %.2fs (cpu %.3fs/host, lowest free %d MiB)  merge %.2fs (cpu %.2fs)  whole %.2fs (cpu %.3fs/host)" % (
        med(x[0] for x in sl), med(x[1] for x in sl) / n, min(x[2] for x in sl), med(x[0] for x in mg),
        med(x[1] for x in mg), med(x[0] for x in whole), med(x[1] for x in whole) / n))
    print("slices+merge / whole: wall %.2f  cpu %.2f" % (
        med((x[0] + m[0]) / y[0] for x, m, y in zip(sl, mg, whole)),
        med((x[1] + m[1]) / y[1] for x, m, y in zip(sl, mg, whole))))

    print("\n== no-op deploy.yml (A) vs verify.yml (B) on 4 hosts, %d pairs, medians" % a.runs)
    da, vb = pairs(playbook("deploy.yml", names, 4, "deploy-4"), playbook("verify.yml", names, 4, "verify-4"),
                   a.runs, log)
    print("deploy %.2fs (cpu %.2fs)  verify %.2fs (cpu %.2fs)  wall A/B %.2f  cpu A/B %.2f" % (
        med(x[0] for x in da), med(x[1] for x in da), med(x[0] for x in vb), med(x[1] for x in vb),
        med(x[0] / y[0] for x, y in zip(da, vb)), med(x[1] / y[1] for x, y in zip(da, vb))))


if __name__ == "__main__":
    main()
