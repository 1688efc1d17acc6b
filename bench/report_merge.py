#!/usr/bin/env python
"""What a sliced run's report costs the controller against one whole run's.

At N hosts of 8 GPUs each (synthetic verify results: health, a bf16 smoke
figure per GPU, a few slow GPUs and a few hosts whose torch moved, so that
outliers and drift are found), side by side in one run, RUNS pairs in turn:
  A  the whole run: store.publish() of all N hosts (what the last task
     of an unsliced verify.yml does: the report against the previous one,
     history, renderings, metrics);
  B  the sliced run: write_part() of each of SLICES slices (what each slice's
     last task does), then merge_parts() (merge.yml).
Each pair starts from the same report folder (a previous whole run, the
baseline of drift). The ratio B/A is taken pair by pair; its median is
printed with the medians of A, of the slices' parts and of the merge alone,
and the merged report is checked to have the whole run's statuses and
outliers. No goal is set: the figure says what slicing adds on the controller.

    bench/report_merge.py [--hosts 1000] [--slices 4] [--runs 3] [--json out.json]
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".collections"))
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import store  # noqa: E402
from ansible_collections.gpufleet.inference.tests.unit.plugins.plugin_utils.fleet_report_cases import (  # noqa: E402
    health_entry,
    run,
)


def fleet(hosts, moved=False):
    entries = {}
    for i in range(hosts):
        slow = {i % 8: 200.0} if i % 97 == 5 else None  # one slow GPU on about 1 host in 100
        entry = health_entry(slow=slow)
        if moved and i % 50 == 7:  # the torch of about 1 host in 50 moved since the baseline
            entry["torch"]["torch_version"] = "2.12.0"
        entries["gpu%05d" % i] = entry
    return entries


def view(report):
    return {r["host"]: (r["status"], r["drift"], [g["index"] for g in r["gpus"] if g.get("outliers")])
            for r in report["hosts"]}


def load(folder):
    with open(os.path.join(folder, store.REPORT_BASENAME + ".json"), encoding="utf-8") as fh:
        return json.load(fh)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--slices", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="gpufleet-merge-bench-")
    try:
        baseline = os.path.join(work, "baseline")
        store.publish(run("verify", **fleet(args.hosts)), baseline)
        entries = fleet(args.hosts, moved=True)
        names = sorted(entries)
        slices = [names[k::args.slices] for k in range(args.slices)]
        pairs = []
        for number in range(args.runs):
            whole_dir, sliced_dir = os.path.join(work, "whole%d" % number), os.path.join(work, "sliced%d" % number)
            for folder in (whole_dir, sliced_dir):
                shutil.copytree(baseline, folder)
            start = time.perf_counter()
            store.publish(run("verify", **entries), whole_dir)
            a = time.perf_counter() - start
            start = time.perf_counter()
            for part, hosts in enumerate(slices, 1):
                store.write_part(run("verify", **{h: entries[h] for h in hosts}), sliced_dir, "bench", str(part))
            parts = time.perf_counter() - start
            store.merge_parts(sliced_dir, "bench", expect_parts=args.slices)
            b = time.perf_counter() - start
            if view(load(sliced_dir)) != view(load(whole_dir)):
                raise SystemExit("report_merge: the merged report differs from the whole run's")
            pairs.append({"whole_s": a, "parts_s": parts, "merge_s": b - parts, "sliced_s": b, "ratio": b / a})
            print("pair %d: whole %.2f s, sliced %.2f s (parts %.2f s, merge %.2f s), ratio %.3f"
                  % (number + 1, a, b, parts, b - parts, b / a), flush=True)
        med = {k: statistics.median(p[k] for p in pairs) for k in pairs[0]}
        report = load(os.path.join(work, "sliced0"))
        outliers = sum(1 for r in report["hosts"] for g in r["gpus"] if g.get("outliers"))
        print("%d hosts x 8 GPUs, %d slices, %d pairs: whole run %.2f s (%.2f ms a host); sliced %.2f s "
              "(parts %.2f s, merge %.2f s); median ratio sliced/whole %.3f (min %.3f, max %.3f); "
              "%d GPU outliers, %d hosts with drift, in both"
              % (args.hosts, args.slices, args.runs, med["whole_s"], 1000 * med["whole_s"] / args.hosts,
                 med["sliced_s"], med["parts_s"], med["merge_s"], med["ratio"], min(p["ratio"] for p in pairs),
                 max(p["ratio"] for p in pairs), outliers, sum(1 for r in report["hosts"] if r["drift"])))
        if args.json:
            with open(args.json, "w", encoding="utf-8") as fh:
                json.dump({"hosts": args.hosts, "slices": args.slices, "pairs": pairs, "median": med}, fh, indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
