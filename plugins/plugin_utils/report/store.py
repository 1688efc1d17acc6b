# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The report of one run, built and kept: build_report (the rows, their
outliers, the digest and the trend), load_previous and write_report (the JSON,
Markdown, HTML and Prometheus files and the history under the report
directory), publish (both, for one run), and what the calling task returns
(outcome, finish_entry, finish_unwritten). A sliced run's slices write their
parts (write_part) and merge_parts builds the run's one report from them.
Built on every other report module.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os

from ansible_collections.gpufleet.inference.plugins.module_utils import atomic_file
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import textfile, trend
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report.format import render, summary_line
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report.freeze import freeze_dirs
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report.outliers import DEFAULT_OUTLIER_RATIO, flag_allreduce_outliers, flag_gpu_outliers
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report.rows import BAD_STATUSES, STATUS_ORDER, TRACKED, host_row
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.common import part_name_error

REPORT_BASENAME = "fleet-report"
# 2: a row's package baseline and its diff are the keys "freeze" and "freeze_diff"
SCHEMA_VERSION = 2


def load_previous(out_dir):
    path = os.path.join(out_dir, REPORT_BASENAME + ".json")
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("hosts"), list):
        return None
    return data


def build_report(run, previous=None, freeze_dir=None, now=None, history_dir=None):
    """run: {mode, playbook, hosts: [name...], results: [entry|None...], started: [bool...]};
    freeze_dir: a folder or a list of folders of the venv freezes (find_freeze);
    history_dir: the kept reports (write_report's history/), read for the trend
    only where the previous report does not carry it (trend.attach)."""
    mode = run.get("mode") or "verify"
    names = list(run.get("hosts") or [])
    results = list(run.get("results") or [])
    stages = list(run.get("stages") or [])
    prev_rows = {r["host"]: r for r in (previous or {}).get("hosts", []) if isinstance(r, dict) and "host" in r}
    rows = []
    for i, name in enumerate(names):
        entry = results[i] if i < len(results) else None
        if not entry:
            # No record at all: the play ended (max_fail_percentage, a
            # failed batch) before this host's serial batch started.
            entry = {"status": "not_run", "message": "not run: the play stopped before this host's batch"}
        elif entry.get("status") == "running" and not entry.get("stage") and i < len(stages) and stages[i]:
            entry = dict(entry, stage=stages[i])
        rows.append(host_row(name, entry, prev_rows.get(name), freeze_dir, mode))
    ratio = float(run.get("outlier_ratio") or DEFAULT_OUTLIER_RATIO)
    flag_gpu_outliers(rows, ratio)
    flag_allreduce_outliers(rows, ratio)
    if run.get("outliers_fail"):
        # the inventory asked for outliers to fail their hosts (gpufleet_outliers_fail)
        for r in rows:
            if r["status"] == "drift" and (any(g["outliers"] for g in r["gpus"])
                                           or (r.get("allreduce") or {}).get("outlier")):
                r["status"] = "failed"
    for r in rows:
        # drift that is only outliers among siblings: reported, not a failed host
        r["outliers_only"] = r["status"] == "drift" and 0 < len(r["drift"]) == r.pop("outlier_drift", 0)
    rows.sort(key=lambda r: (STATUS_ORDER.get(r["status"], 0), r["host"]))
    counts = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    now = now or datetime.datetime.now(datetime.timezone.utc)
    report = {
        "schema": SCHEMA_VERSION,
        "generated": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "mode": mode,
        "playbook": run.get("playbook"),
        "inventory": run.get("inventory"),
        "previous": (previous or {}).get("generated"),
        "counts": counts,
        "total": len(rows),
        "healthy": not any(r["status"] in BAD_STATUSES and not r["outliers_only"] for r in rows) and "not_run" not in counts,
        "hosts": rows,
    }
    report["digest"] = fleet_digest(report)
    # throughput and kernel error over the kept runs: the previous report carries them, history_dir fills the gaps
    trend.attach(report, previous, history_dir)
    return report


def fleet_digest(report):
    """Hash of what the fleet IS (statuses, versions, drift), not of when it was looked at."""
    keep = []
    for r in report["hosts"]:
        keep.append([r["host"], r["status"]] + [r.get(k) for _l, k in TRACKED] + [sorted(r.get("packages", {}).items()), r["drift"]])
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()


def write_report(report, out_dir, keep_history=20):
    """Write the three renderings (atomically) and keep the JSON of past runs."""
    os.makedirs(out_dir, exist_ok=True)
    hist = os.path.join(out_dir, "history")
    os.makedirs(hist, exist_ok=True)
    paths = {}
    text = json.dumps(report, indent=2, sort_keys=True, default=str) + "\n"
    stamp = report["generated"].replace(":", "").replace("-", "")
    atomic_file.write_text(os.path.join(hist, "%s-%s.json" % (stamp, report["mode"])), text)
    old = sorted(f for f in os.listdir(hist) if f.endswith(".json"))
    for f in old[: max(0, len(old) - keep_history)]:
        os.unlink(os.path.join(hist, f))
    for kind, ext in (("json", "json"), ("md", "md"), ("html", "html")):
        path = os.path.join(out_dir, "%s.%s" % (REPORT_BASENAME, ext))
        atomic_file.write_text(path, text if kind == "json" else render(report, kind))
        paths[kind] = path
    # Prometheus text: the fleet's, and each host's own for its node_exporter
    # (the playbooks copy it to the host's gpufleet_textfile_dir)
    paths["prom"] = os.path.join(out_dir, "%s.prom" % REPORT_BASENAME)
    atomic_file.write_text(paths["prom"], textfile.render(report))
    hosts_dir = os.path.join(out_dir, "textfile")
    os.makedirs(hosts_dir, exist_ok=True)
    for row in report["hosts"]:
        atomic_file.write_text(os.path.join(hosts_dir, "%s.prom" % row["host"]), textfile.render(report, [row["host"]]))
    paths["textfile_dir"] = hosts_dir
    return paths


def outcome(report, previous, paths):
    """What the calling task returns: ``changed`` only when what the fleet is
    (statuses, versions, drift: the digest) differs from the previous report,
    so that a run that changed nothing stays changed=0."""
    return {
        "changed": previous is None or previous.get("digest") != report["digest"],
        "healthy": report["healthy"],
        "counts": report["counts"],
        "summary": summary_line(report),
        "failing": [r["host"] for r in report["hosts"] if r["status"] in BAD_STATUSES and not r["outliers_only"]],
        "outliers_only": [r["host"] for r in report["hosts"] if r["outliers_only"]],
        "status": {r["host"]: r["status"] for r in report["hosts"]},
        # what the run's last task on each host reads (the fleet role's
        # finish.yml): a few words per host, so that it never templates the
        # whole report or the host's variables again
        "finish": {r["host"]: finish_entry(r) for r in report["hosts"]},
        "paths": paths,
    }


def finish_entry(row):
    """One host's end of the run: fail it or not, with the message that says why."""
    fail = row["status"] in BAD_STATUSES and not row["outliers_only"]
    message = row.get("message") or ("see the fleet report for the drift" if row["status"] == "drift" else "")
    return {
        "status": row["status"],
        "fail": fail,
        "msg": "%s: %s%s: %s" % (row["host"], row["status"], " in " + row["stage"] if row.get("stage") else "",
                                 message) if fail else "",
        # a host the run never reached has no metrics of this run to put in place
        "textfile": row["status"] not in ("unreachable", "not_run"),
    }


def finish_unwritten(run, out_dir, freeze_dir=None, now=None):
    """outcome()'s ``finish`` for a run whose report is not written (check
    mode): built the same way, with no metrics to put in place."""
    out_dir = os.path.abspath(out_dir)
    report = build_report(run, load_previous(out_dir), freeze_dirs(out_dir, freeze_dir), now=now)
    return {r["host"]: dict(finish_entry(r), textfile=False) for r in report["hosts"]}


def publish(run, out_dir, freeze_dir=None, now=None):
    """Build the report of one run against the previous one in out_dir, write it
    (the freezes are read from freeze_dir, by default out_dir/freezes, and from
    out_dir/locks, see freeze_dirs) and return outcome()."""
    out_dir = os.path.abspath(out_dir)
    previous = load_previous(out_dir)
    report = build_report(run, previous, freeze_dirs(out_dir, freeze_dir), now=now,
                          history_dir=os.path.join(out_dir, trend.HISTORY_DIRNAME))
    return outcome(report, previous, write_report(report, out_dir))


# Sliced runs (an AWX / Automation Controller job template with job slicing:
# N separate ansible-playbook runs over 1/N of the inventory each): each slice
# writes its part of the run under <out_dir>/parts/<run_id>/<part>.json, and
# merge_parts() builds the one fleet report of the run from all of them, so
# that outliers are judged against the whole fleet's medians and drift
# against the fleet's baselines (the previous merged report, the freezes).
PARTS_DIRNAME = "parts"


class PartsError(ValueError):
    """The parts of a run cannot be merged (the message names what is wrong)."""


def write_part(run, out_dir, run_id, part, freeze_dir=None, now=None):
    """A slice's part of the run: the run's record of its hosts, for
    merge_parts(). The fleet report itself is not written (the merge writes
    it); each host's textfile metrics are, from the slice judged against the
    fleet's previous report, so that its end of the run (finish) stands as
    without slicing. Returns outcome()'s keys with changed False."""
    for name, value in (("gpufleet_run_id", run_id), ("gpufleet_report_part", part)):
        error = part_name_error(name, value)
        if error:
            raise PartsError(error)
    out_dir = os.path.abspath(out_dir)
    folder = os.path.join(out_dir, PARTS_DIRNAME, run_id)
    os.makedirs(folder, exist_ok=True)
    previous = load_previous(out_dir)
    report = build_report(run, previous, freeze_dirs(out_dir, freeze_dir), now=now)
    record = dict(run, part=part, run_id=run_id, written=report["generated"])
    path = os.path.join(folder, "%s.json" % part)
    atomic_file.write_text(path, json.dumps(record, indent=1, sort_keys=True, default=str) + "\n")
    hosts_dir = os.path.join(out_dir, "textfile")
    os.makedirs(hosts_dir, exist_ok=True)
    for row in report["hosts"]:
        atomic_file.write_text(os.path.join(hosts_dir, "%s.prom" % row["host"]), textfile.render(report, [row["host"]]))
    result = outcome(report, previous, {"part": path, "textfile_dir": hosts_dir})
    result.update(changed=False, summary="part %s of run %s: %s" % (part, run_id, summary_line(report)))
    return result


def read_parts(out_dir, run_id, expect_parts=None):
    """The run of all parts of run_id, as one: hosts, results and stages
    concatenated. Refused, naming what is wrong: no part, fewer parts than
    expect_parts, a host in two parts, parts of different playbooks or
    outlier settings, a part that is not a part."""
    error = part_name_error("gpufleet_run_id", run_id)
    if error:
        raise PartsError(error)
    folder = os.path.join(os.path.abspath(out_dir), PARTS_DIRNAME, run_id)
    names = sorted(f for f in os.listdir(folder) if f.endswith(".json")) if os.path.isdir(folder) else []
    if not names:
        raise PartsError("gpufleet_run_id: no part of run %r under %s (each slice writes one with gpufleet_run_id and "
                         "gpufleet_report_part)" % (run_id, folder))
    if expect_parts is not None and len(names) != expect_parts:
        raise PartsError("gpufleet_report_parts: expected %d parts of run %r, found %d (%s)"
                         % (expect_parts, run_id, len(names), ", ".join(n[:-5] for n in names)))
    merged, seen = None, {}
    for name in names:
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as fh:
                part = json.load(fh)
        except (OSError, ValueError) as exc:
            raise PartsError("part %s of run %r cannot be read: %s" % (name, run_id, exc)) from exc
        if not isinstance(part, dict) or not isinstance(part.get("hosts"), list):
            raise PartsError("part %s of run %r is not a part of a fleet run" % (name, run_id))
        if merged is None:
            merged = {k: part.get(k) for k in ("mode", "playbook", "inventory", "outlier_ratio", "outliers_fail")}
            merged.update(hosts=[], results=[], stages=[], parts=[])
        for key in ("mode", "outlier_ratio", "outliers_fail"):
            if part.get(key) != merged[key]:
                raise PartsError("parts of run %r differ in %s: %r in %s, %r in %s"
                                 % (run_id, key, merged[key], names[0], part.get(key), name))
        results = list(part.get("results") or [])
        stages = list(part.get("stages") or [])
        for i, host in enumerate(part["hosts"]):
            if host in seen:
                raise PartsError("host %s is in two parts of run %r: %s and %s (each slice must have its own hosts)"
                                 % (host, run_id, seen[host], name))
            seen[host] = name
            merged["hosts"].append(host)
            merged["results"].append(results[i] if i < len(results) else None)
            merged["stages"].append(stages[i] if i < len(stages) else "")
        merged["parts"].append(part.get("part") or name[:-5])
        if part.get("inventory") and part.get("inventory") != merged.get("inventory"):
            merged["inventory"] = ",".join(x for x in (merged.get("inventory"), part["inventory"]) if x)
    return merged


def merge_parts(out_dir, run_id, expect_parts=None, freeze_dir=None, now=None):
    """The one fleet report of a sliced run, from its parts: written like any
    run's (history, renderings, the fleet's and each host's metrics), judged
    against the previous report; returns outcome() with the parts merged."""
    run = read_parts(out_dir, run_id, expect_parts)
    result = publish(run, out_dir, freeze_dir, now=now)
    result["parts"] = run["parts"]
    return result
