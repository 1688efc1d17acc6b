#!/usr/bin/env python
"""verify.yml's controller CPU per host under several controller set-ups,
side by side in one run: the checkout as it is against each variant (another
ssh client, other ansible.cfg settings), runs alternated, cold ssh masters.

    bench/fleet_variants.py [--hosts 64] [--runs 3]
        --variant 'openssh10:ssh=.cache/openssh10/client/usr/bin/ssh'
        --variant 'openssh10+poll:ssh=.cache/openssh10/client/usr/bin/ssh:cfg=internal_poll_interval=0.05'

A variant is LABEL, then any of ssh=PATH (the ssh client of the run, as
fleet_scale.py --ssh-executable) and cfg=[SECTION.]NAME=VALUE (an ansible.cfg
setting, as fleet_scale.py --cfg; repeatable), separated by colons. Each
round runs the checkout, then each variant, each a verify.yml over the first
--hosts sandbox hosts with no live ssh control master; each keeps its own
report directory (cleared first), so that every run after the first compares
with its predecessor, as a fleet's runs do. CPU is fleet_scale.py's: user +
system of the command and all it waited for. Printed: each run, then per
variant the median CPU per host and the median of its pair-by-pair ratios to
the checkout. The sandbox must be up with the hosts deployed
(bench/fleet_scale.py leaves it so; bench/openssh10_sandbox.py puts OpenSSH
10 on them).
"""
import argparse
import os
import shutil
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import fleet_scale  # noqa: E402  pylint: disable=wrong-import-position


def parse_variant(text):
    """(label, ssh path or "ssh", [cfg settings]) from LABEL[:ssh=PATH][:cfg=K=V]..."""
    label, *parts = text.split(":")
    if not label or "=" in label:
        raise ValueError("a variant starts with its label (got %r)" % text)
    ssh, cfg = "ssh", []
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not value or key not in ("ssh", "cfg"):
            raise ValueError("a variant's parts are ssh=PATH or cfg=[SECTION.]NAME=VALUE (got %r in %r)" % (part, text))
        if key == "ssh":
            if not os.access(value, os.X_OK):
                raise ValueError("ssh=%s is not an executable file" % value)
            ssh = os.path.abspath(value)
        else:
            if "=" not in value:
                raise ValueError("cfg= takes [SECTION.]NAME=VALUE (got %r)" % value)
            cfg.append(value)
    return label, ssh, cfg


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("--hosts", type=int, default=64)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--variant", action="append", default=[], required=True,
                   help="LABEL[:ssh=PATH][:cfg=[SECTION.]NAME=VALUE]... (repeatable)")
    a = p.parse_args()
    setups = [("checkout", "ssh", fleet_scale.CFG["path"])]
    try:
        for i, text in enumerate(a.variant):
            label, ssh, cfg = parse_variant(text)
            path = fleet_scale.CFG["path"]
            if cfg:
                path = fleet_scale.write_cfg(cfg, os.path.join(fleet_scale.WORK, "variant-%d.cfg" % i))
            setups.append((label, ssh, path))
    except ValueError as exc:
        p.error(str(exc))
    names, dummy = fleet_scale.hosts()
    if len(names) < a.hosts:
        raise SystemExit("%d sandbox hosts are up, %d needed" % (len(names), a.hosts))
    log = os.path.join(fleet_scale.WORK, "variants.log")
    open(log, "w").close()
    for i in range(len(setups)):
        shutil.rmtree(os.path.join(fleet_scale.WORK, "reports-variant-%d" % i), ignore_errors=True)
    cpu = {label: [] for label, dummy, dummy in setups}
    try:
        for r in range(a.runs):
            for i, (label, ssh, cfg) in enumerate(setups):
                fleet_scale.SSH["path"], fleet_scale.CFG["path"] = ssh, cfg
                wall, used, dummy = fleet_scale.run_or_exit(
                    [fleet_scale.playbook("verify.yml", names, a.hosts, "variant-%d" % i)], log)
                cpu[label].append(used / a.hosts)
                print("run %d  %-20s wall %6.1f s  CPU %.3f s a host" % (r + 1, label, wall, used / a.hosts),
                      flush=True)
    finally:
        for d in fleet_scale.MASTERS["dirs"]:
            shutil.rmtree(d, ignore_errors=True)
    base = cpu["checkout"]
    print("\n%d hosts, %d runs each, alternated, cold ssh masters: medians" % (a.hosts, a.runs))
    for label, values in cpu.items():
        ratio = statistics.median(v / b for v, b in zip(values, base))
        print("%-20s %.3f s a host  (runs %s)  vs checkout %.2f" % (
            label, statistics.median(values), " ".join("%.3f" % v for v in values), ratio))


if __name__ == "__main__":
    main()
