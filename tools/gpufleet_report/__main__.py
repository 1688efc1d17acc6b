"""``python -m gpufleet_report --out-dir reports < run.json``

Reads one run's per-host results (JSON on stdin or --input), writes the fleet
report and prints a JSON line for the calling task: ``changed`` is true only
when what the fleet is (statuses, versions, drift) differs from the previous
report, so that a no-op run stays changed=0.
"""

import argparse
import json
import os
import sys

from . import BAD_STATUSES, STATUS_ORDER, build_report, load_previous, summary_table, write_report


def main(argv=None):
    p = argparse.ArgumentParser(prog="gpufleet_report", description=__doc__.splitlines()[0])
    p.add_argument("--out-dir", required=True, help="report folder (fleet-report.{json,md,html}, history/)")
    p.add_argument("--lock-dir", help="locks fetched by torch_nightly (default: <out-dir>/locks)")
    p.add_argument("--input", help="run JSON (default: stdin)")
    p.add_argument("--table", action="store_true", help="also print the summary table on stderr")
    args = p.parse_args(argv)
    if args.input:
        with open(args.input, encoding="utf-8") as fh:
            raw = fh.read()
    else:
        raw = sys.stdin.read()
    try:
        run = json.loads(raw)
    except ValueError as exc:
        print("gpufleet_report: input is not JSON: %s" % exc, file=sys.stderr)
        return 2
    if not isinstance(run, dict) or not isinstance(run.get("hosts"), list):
        print("gpufleet_report: input must be an object with a 'hosts' list", file=sys.stderr)
        return 2
    out_dir = os.path.abspath(args.out_dir)
    previous = load_previous(out_dir)
    report = build_report(run, previous, args.lock_dir or os.path.join(out_dir, "locks"))
    paths = write_report(report, out_dir)
    if args.table:
        print(summary_table(report), file=sys.stderr)
    print(json.dumps({
        "changed": previous is None or previous.get("digest") != report["digest"],
        "healthy": report["healthy"],
        "counts": report["counts"],
        "summary": "%d hosts: %s" % (report["total"], ", ".join(
            "%d %s" % (report["counts"][k], k) for k in sorted(report["counts"], key=lambda k: STATUS_ORDER.get(k, 0)))),
        "failing": [r["host"] for r in report["hosts"] if r["status"] in BAD_STATUSES and not r["outliers_only"]],
        "outliers_only": [r["host"] for r in report["hosts"] if r["outliers_only"]],
        "status": {r["host"]: r["status"] for r in report["hosts"]},
        "paths": paths,
    }, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
