#!/usr/bin/env python
"""What one task costs on a molecule scenario host, reached through podman
(containers.podman.podman: no pipelining; every task is a temporary folder,
a `podman cp`, a chown, a chmod and the module, each a `podman exec`) and over
SSH (ansible.cfg's pipelining and ControlPersist: one ssh execution a task),
measured side by side on the same container in one run.

    bench/molecule_connection.py [--tasks 30] [--rounds 3]

One container of the test image (as molecule's platforms make it: systemd,
the controller's network, sshd on 127.0.0.1:22499). The playbook runs
--tasks small tasks of the kinds the roles run (command, stat, copy of a
small file, file) as the deploy user; the two connections alternate, round
after round. Per run: wall seconds, and the CPU seconds of the whole machine
(/proc/stat: the controller's ansible-playbook, podman, conmon and the
runtime, and the container's own processes). Medians and the ratio
podman / SSH are printed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGE = "localhost/gpufleet-debian12:latest"
NAME = "gpufleet-bench-connection"
PORT = 22499

PLAYBOOK = """
- hosts: all
  gather_facts: false
  tasks:
    - name: command
      ansible.builtin.command: "true"
      loop: "{{ range(n) | list }}"
      changed_when: false
    - name: stat
      ansible.builtin.stat:
        path: /etc/hostname
      loop: "{{ range(n) | list }}"
    - name: copy
      ansible.builtin.copy:
        content: "{{ item }}\\n"
        dest: /tmp/bench-{{ item }}
        mode: "0644"
      loop: "{{ range(n) | list }}"
    - name: file
      ansible.builtin.file:
        path: /tmp/bench-{{ item }}
        state: absent
      loop: "{{ range(n) | list }}"
"""


def machine_cpu():
    with open("/proc/stat", encoding="ascii") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    return (sum(fields) - fields[3] - fields[4]) / ticks  # all but idle and iowait


def run(argv, **kw):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kw)


def start(work):
    subprocess.run(["podman", "rm", "-f", NAME], capture_output=True, check=False)
    run(["podman", "run", "-d", "--name", NAME, "--hostname", NAME, "--network", "host",
         "--add-host", NAME + ":127.0.1.1", "--systemd=always", IMAGE, "/sbin/init"])
    key = os.path.join(work, "id_ed25519")
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key])
    script = ("set -e; ssh-keygen -A >/dev/null; printf 'Port %d\\nListenAddress 127.0.0.1\\n' "
              "> /etc/ssh/sshd_config.d/bench.conf; install -d -m 0700 -o deploy -g deploy /home/deploy/.ssh; "
              "cp /dev/stdin /home/deploy/.ssh/authorized_keys; chown deploy: /home/deploy/.ssh/authorized_keys; "
              "systemctl restart ssh.service" % PORT)
    with open(key + ".pub", encoding="ascii") as pub:
        text = pub.read()
    for dummy in range(50):
        if subprocess.run(["podman", "exec", "-i", NAME, "sh", "-c", script], input=text, text=True,
                          capture_output=True, check=False).returncode == 0:
            return key
        time.sleep(0.2)
    sys.exit("bench: sshd in %s could not be set up" % NAME)


def inventories(work, key):
    podman = os.path.join(work, "podman.yml")
    ssh = os.path.join(work, "ssh.yml")
    with open(podman, "w", encoding="ascii") as fh:
        fh.write("all:\n  hosts:\n    %s:\n      ansible_connection: containers.podman.podman\n"
                 "      ansible_user: deploy\n      ansible_python_interpreter: /usr/bin/python3\n" % NAME)
    with open(ssh, "w", encoding="ascii") as fh:
        fh.write("all:\n  hosts:\n    %s:\n      ansible_connection: ssh\n      ansible_host: 127.0.0.1\n"
                 "      ansible_port: %d\n      ansible_user: deploy\n      ansible_python_interpreter: /usr/bin/python3\n"
                 "      ansible_ssh_private_key_file: %s\n      ansible_ssh_common_args: -o UserKnownHostsFile=%s "
                 "-o StrictHostKeyChecking=accept-new\n" % (NAME, PORT, key, os.path.join(work, "known_hosts")))
    return {"podman": podman, "ssh": ssh}


def one(inventory, playbook, tasks):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    argv = [os.path.join(ROOT, ".venv", "bin", "ansible-playbook"), "-i", inventory, playbook, "-e", json.dumps({"n": tasks})]
    cpu0, t0 = machine_cpu(), time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    wall, cpu = time.monotonic() - t0, machine_cpu() - cpu0
    if proc.returncode != 0:
        sys.exit("bench: the playbook failed:\n" + proc.stdout[-3000:] + proc.stderr[-2000:])
    return wall, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--tasks", type=int, default=30, help="tasks of each of the 4 kinds per run")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        playbook = os.path.join(work, "tasks.yml")
        with open(playbook, "w", encoding="ascii") as fh:
            fh.write(PLAYBOOK)
        try:
            invs = inventories(work, start(work))
            for kind in invs:  # warm-up, not counted (SSH: known_hosts, the master connection)
                one(invs[kind], playbook, 1)
            runs = {kind: [] for kind in invs}
            for dummy in range(args.rounds):
                for kind, inv in invs.items():
                    runs[kind].append(one(inv, playbook, args.tasks))
        finally:
            subprocess.run(["podman", "rm", "-f", NAME], capture_output=True, check=False)
    n = 4 * args.tasks
    print("%d tasks a run, %d rounds, medians:" % (n, args.rounds))
    med = {}
    for kind, values in runs.items():
        wall = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        med[kind] = (wall, cpu)
        print("  %-7s wall %6.1f s (%.3f s a task)   machine CPU %6.1f s (%.3f s a task)"
              % (kind, wall, wall / n, cpu, cpu / n))
    print("  podman / ssh: wall %.2fx, machine CPU %.2fx"
          % (med["podman"][0] / med["ssh"][0], med["podman"][1] / med["ssh"][1]))


if __name__ == "__main__":
    main()
