#!/usr/bin/env python
"""What a fleet run costs per host, counted: tasks the controller runs for
each host and remote round trips (ssh executions) to it, for verify.yml and
for a no-op deploy.yml (the fast path), on the same sandbox hosts in one run.

A task counts once per host it ran for, whatever its outcome (ok, changed,
skipped, failed); a run_once task counts for the host it ran on. A round
trip is one `ssh ... host` execution in the -vvv log (with pipelining, one per
module run; a connection that ControlPersist reuses still counts).

    bench/fleet_round_trips.py [--hosts 4] [--json out.json]

It brings the sandbox up with that many hosts and deploys once first (not
counted), so the counted deploy takes the fast path.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INV = os.path.join(ROOT, "inventories", "sandbox")
WORK = os.path.join(ROOT, ".cache", "fleet-round-trips")
# "ok: [sbx1]", "skipping: [sbx1]", "changed: [sbx2] => ...", "fatal: [sbx3]: FAILED!"
RESULT = re.compile(r"^(ok|changed|skipping|fatal|failed): \[([^\]\s]+)(?: -> [^\]]+)?\]")
# "<127.0.0.1> SSH: EXEC ssh ... -o Port=22201 ..." names the host by its port
EXEC = re.compile(r"SSH: EXEC ssh .*?-o '?Port=(\d+)")


def env():
    out = dict(os.environ)
    out.update({
        "PATH": os.path.join(ROOT, ".venv", "bin") + os.pathsep + out.get("PATH", ""),
        "ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"),
        "ANSIBLE_DISPLAY_SKIPPED_HOSTS": "true",
        "ANSIBLE_DISPLAY_OK_HOSTS": "true",
        "ANSIBLE_NOCOLOR": "1",
    })
    return out


def ports():
    listing = subprocess.run([os.path.join(ROOT, ".venv", "bin", "ansible-inventory"), "-i", INV, "--list"],
                             env=env(), capture_output=True, text=True, check=True)
    hostvars = json.loads(listing.stdout)["_meta"]["hostvars"]
    return {str(v.get("ansible_port", 22)): h for h, v in hostvars.items()}


def count(playbook, hosts, extra):
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-vvv", "-i", INV,
            os.path.join(ROOT, "playbooks", playbook), "--limit", ",".join(hosts)] + extra
    run = subprocess.run(argv, env=env(), capture_output=True, text=True, check=False)
    if run.returncode != 0:
        sys.stderr.write(run.stdout[-4000:] + run.stderr[-2000:])
        raise SystemExit("%s failed (rc %d)" % (playbook, run.returncode))
    by_port = ports()
    tasks, trips = collections.Counter(), collections.Counter()
    for line in run.stdout.splitlines():
        m = RESULT.match(line)
        if m and m.group(2) in hosts:
            tasks[m.group(2)] += 1
        m = EXEC.search(line)
        if m and by_port.get(m.group(1)) in hosts:
            trips[by_port[m.group(1)]] += 1
    return {"tasks": dict(tasks), "round_trips": dict(trips)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args(argv)
    os.makedirs(WORK, exist_ok=True)
    subprocess.run([os.path.join(ROOT, ".venv", "bin", "python"), os.path.join(ROOT, "scripts", "sandbox.py"),
                    "up", "--hosts", str(args.hosts)], env=env(), check=True, stdout=subprocess.DEVNULL)
    hosts = ["sbx%d" % i for i in range(1, args.hosts + 1)]
    reports = ["-e", "gpufleet_report_dir=%s/reports" % WORK]
    setup = subprocess.run([os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", INV,
                            os.path.join(ROOT, "playbooks", "deploy.yml"), "--limit", ",".join(hosts)] + reports,
                           env=env(), capture_output=True, text=True, check=False)
    if setup.returncode != 0:
        sys.stderr.write(setup.stdout[-4000:])
        raise SystemExit("the setup deploy failed")
    figures = {"verify.yml": count("verify.yml", hosts, reports), "deploy.yml (no-op)": count("deploy.yml", hosts, reports)}
    print("%-20s %-12s %s" % ("run", "per host", "tasks / round trips (min-max over %d hosts)" % len(hosts)))
    for name, fig in figures.items():
        t, r = list(fig["tasks"].values()), list(fig["round_trips"].values())
        print("%-20s tasks %d-%d   round trips %d-%d" % (name, min(t), max(t), min(r or [0]), max(r or [0])))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(figures, fh, indent=2, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
