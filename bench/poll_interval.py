#!/usr/bin/env python
"""What a longer internal_poll_interval costs short tasks: the wall time of one
playbook of short tasks at two settings, side by side in one run.

ansible-playbook looks for finished workers every internal_poll_interval
seconds while a task runs, so a task ends up to one interval late. A fleet
controller saves CPU with a longer interval (README, Sizing the controller);
a run of many short tasks (a deploy, the test suite) pays it in wall time.
This runs TASKS tasks (a set_fact and a command, alternately) on HOSTS hosts
of the local connection, RUNS times per setting, alternated, each with a
copy of the checkout's ansible.cfg that differs only in the setting, and
prints the wall time per task of each and their difference (medians).

    bench/poll_interval.py [--runs 3] [--tasks 100] [--hosts 4] [--intervals 0.01,0.05]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, ".venv", "bin")
sys.path.insert(0, os.path.join(ROOT, "bench"))

import fleet_scale  # noqa: E402  pylint: disable=wrong-import-position


def write_playbook(work, tasks, hosts):
    lines = ["- hosts: all", "  gather_facts: false", "  tasks:"]
    for i in range(tasks):
        if i % 2:
            lines += ["    - ansible.builtin.command: 'true'", "      changed_when: false"]
        else:
            lines += ["    - ansible.builtin.set_fact:", "        step_%d: %d" % (i, i)]
    playbook = os.path.join(work, "short-tasks.yml")
    with open(playbook, "w") as f:
        f.write("\n".join(lines) + "\n")
    inventory = os.path.join(work, "hosts.ini")
    with open(inventory, "w") as f:
        f.write("[all]\n" + "".join("local%d ansible_connection=local ansible_python_interpreter=%s\n"
                                    % (i, os.path.join(BIN, "python")) for i in range(hosts)))
    return playbook, inventory


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--tasks", type=int, default=100)
    p.add_argument("--hosts", type=int, default=4)
    p.add_argument("--intervals", default="0.01,0.05")
    a = p.parse_args()
    intervals = [float(x) for x in a.intervals.split(",")]
    if len(intervals) != 2 or min(intervals) <= 0:
        p.error("--intervals takes two positive numbers, e.g. 0.01,0.05 (got %r)" % a.intervals)
    work = tempfile.mkdtemp(prefix="gpufleet-poll-")
    playbook, inventory = write_playbook(work, a.tasks, a.hosts)
    cfgs = {}
    for value in intervals:
        cfgs[value] = fleet_scale.write_cfg(["internal_poll_interval=%s" % value],
                                            os.path.join(work, "ansible-%s.cfg" % value))
    walls = {value: [] for value in intervals}
    for dummy in range(a.runs):
        for value in intervals:
            env = dict(os.environ, ANSIBLE_CONFIG=cfgs[value])
            start = time.monotonic()
            done = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inventory, playbook],
                                  env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit("the playbook failed at %s: %s" % (value, done.stdout[-2000:]))
            walls[value].append((time.monotonic() - start) / a.tasks)
    low, high = intervals
    print("%d tasks on %d local hosts, %d runs each, alternated" % (a.tasks, a.hosts, a.runs))
    for value in intervals:
        print("internal_poll_interval %-5s %.3f s a task (runs: %s)" % (
            value, statistics.median(walls[value]), " ".join("%.3f" % w for w in walls[value])))
    print("%s vs %s: %+.3f s a task (median of the pair-by-pair differences)" % (
        high, low, statistics.median(h - lo for h, lo in zip(walls[high], walls[low]))))


if __name__ == "__main__":
    main()
