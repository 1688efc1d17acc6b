# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet report's trend: each host's, each GPU's and each GPU model's
smoke-test throughput (TFLOP/s) and worst kernel-check relative error over the
runs that write_report keeps (``<report dir>/history/*.json``, the last 20).

attach() gives the current report, whose values are always the last point:
``report["trend_runs"]`` (the runs with a figure, oldest first, this one
last), ``row["trend"]`` (the host's
series, and one per GPU, keyed by its index; a GPU with a UUID continues only
its own series, so a GPU swapped into the slot starts a new one; under
``earlier`` those of GPUs this run did not see, for the runs to come),
``report["trend_models"]`` (per GPU model, the median of its GPUs) and
``report["trend_seen"]`` (each host's last run). Each series holds one value
(or null) per run of ``trend_runs``, the change from its first to its last
value, and whether it moves steadily the bad way (``worsening``).

Reading 20 history files of a large fleet costs more than writing the report
(the facts are most of each file), so each report carries its trend forward:
the previous report, already in memory, has every series up to the last run;
a history file is read only for a host the previous report lacks (a run with
--limit), named by ``trend_seen``, or when no earlier report carries a trend
(the first run of this version): then each kept file is read once, newest
first, until every host is found. A file that is missing, not JSON or of
another shape is skipped; nothing here fails the report.
"""

from __future__ import annotations

import json
import math
import os
import re

HISTORY_DIRNAME = "history"
# The current run and the newest 19 before it: the 20 reports write_report keeps.
WINDOW = 20
# A step within NOISE of the value before it is no move at all; a steady decline
# (or rise, for the errors) needs at least two steps beyond it, none back, and
# MIN_CHANGE from the first to the last value of the steady part.
TFLOPS_NOISE, TFLOPS_MIN_CHANGE = 0.02, 0.05
ERROR_NOISE, ERROR_MIN_CHANGE = 0.05, 0.5
# The smoke dtype a TFLOP/s series follows, first found first; then any other, then the GEMM checks' figures.
_METRIC_FIRST = ("bfloat16", "float16", "tflops")
_METRIC_LAST = ("fp8", "fp4")
# Hosts whose figures do not set a model's median (as for the outlier check).
_NOT_IN_MEDIAN = ("failed", "unreachable", "not_run")
# write_report's history file name: <generated without - and :>-<mode>.json
_HISTORY_NAME = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z-(.+)\.json$")
_GENERATED = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
# What a malformed source can raise while it is read; such a source is skipped.
_BAD_SOURCE = (AttributeError, KeyError, TypeError, ValueError, IndexError)

_SPARK_W, _SPARK_H, _SPARK_PAD = 84, 20, 2.5
# The least span a sparkline's height stands for, as a share of its largest value: a
# GPU that wobbles by 1% run to run draws a nearly flat line, not a zigzag.
_SPARK_SPAN = {"tflops": 0.1, "kernel_error": 0.5}


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _median(values):
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0


def _metric_rank(metric):
    if metric in _METRIC_FIRST:
        return (0, _METRIC_FIRST.index(metric), "")
    if metric in _METRIC_LAST:
        return (2, _METRIC_LAST.index(metric), "")
    return (1, 0, metric)


def run_id(report):
    """(generated, mode) of a report: what names a run, here and in the history file name."""
    generated = report.get("generated") if isinstance(report, dict) else None
    if not isinstance(generated, str) or not generated:
        return None
    mode = report.get("mode")
    return (generated, mode if isinstance(mode, str) else "")


def history_files(history_dir, limit=WINDOW - 1):
    """The newest ``limit`` history files as [(run id, path)], newest first; [] when the folder is missing."""
    try:
        names = os.listdir(history_dir) if history_dir else []
    except OSError:
        return []
    found = []
    for name in names:
        m = _HISTORY_NAME.match(name)
        if m:
            generated = "%s-%s-%sT%s:%s:%sZ" % m.groups()[:6]
            found.append(((generated, m.group(7)), os.path.join(history_dir, name)))
    found.sort(reverse=True)
    return found[:limit]


def read_report(path):
    """One history file as a report dict, or None where it is missing, not JSON or not a report."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("hosts"), list) or run_id(data) is None:
        return None
    return data


def _gpu_key(uuid, index):
    return "uuid:%s" % uuid if isinstance(uuid, str) and uuid else "index:%s" % index


def row_values(row):
    """One report row's own figures of its run: (host, gpus).

    host: {"tflops": {metric: the slowest GPU's}, "error": the worst kernel check's};
    gpus: {key: {index, uuid, name, tflops: {metric: value}, error}} with key the
    GPU's UUID where it has one, else its index."""
    facts = row.get("facts") if isinstance(row.get("facts"), dict) else {}
    torch = facts.get("torch") if isinstance(facts.get("torch"), dict) else {}
    kernels = torch.get("kernels") if isinstance(torch.get("kernels"), list) else []
    by_device = {}
    host_error = None
    for k in kernels:
        if not isinstance(k, dict) or not _number(k.get("relative_error")):
            continue
        err = k["relative_error"]
        host_error = err if host_error is None else max(host_error, err)
        dev = k.get("device")
        if isinstance(dev, int) and not isinstance(dev, bool):
            by_device[dev] = err if dev not in by_device else max(by_device[dev], err)
    gpus = {}
    host_tflops = {}
    for g in row.get("gpus") if isinstance(row.get("gpus"), list) else []:
        if not isinstance(g, dict) or not isinstance(g.get("index"), int):
            continue
        measured = g.get("tflops") if isinstance(g.get("tflops"), dict) else {}
        tflops = dict((str(m), v) for m, v in measured.items() if _number(v))
        for m, v in tflops.items():
            host_tflops[m] = v if m not in host_tflops else min(host_tflops[m], v)
        uuid = g.get("uuid") if isinstance(g.get("uuid"), str) and g.get("uuid") else None
        gpus[_gpu_key(uuid, g["index"])] = {"index": g["index"], "uuid": uuid,
                                            "name": g.get("name") if isinstance(g.get("name"), str) else None,
                                            "tflops": tflops, "error": by_device.get(g["index"])}
    return {"tflops": host_tflops, "error": host_error}, gpus


def _add_to_models(per, gpus):
    for g in gpus.values():
        if not g["name"]:
            continue
        entry = per.setdefault(g["name"], {"tflops": {}, "error": []})
        for m, v in g["tflops"].items():
            entry["tflops"].setdefault(m, []).append(v)
        if g["error"] is not None:
            entry["error"].append(g["error"])


def _medians(per):
    return dict((name, {"tflops": dict((m, round(_median(v), 3)) for m, v in e["tflops"].items()),
                        "error": _median(e["error"]) if e["error"] else None}) for name, e in per.items())


def model_values(rows):
    """Per GPU model, the median over its GPUs in one run (failed and unreachable hosts
    left out, as for the outlier check): {name: {"tflops": {metric: median}, "error": median}}."""
    per = {}
    for row in rows:
        if isinstance(row, dict) and row.get("status") not in _NOT_IN_MEDIAN:
            _add_to_models(per, row_values(row)[1])
    return _medians(per)


def _new_store():
    return {"hosts": {}, "models": {}, "seen": {}}


def _host_store(store, host):
    return store["hosts"].setdefault(host, {"tflops": {}, "error": {}, "gpus": {}})


def _put(points, rid, value):
    """A point of one run; a newer source already read for that run keeps its value."""
    if value not in (None, {}) and rid not in points:
        points[rid] = value


def _see(store, host, generated):
    if generated > store["seen"].get(host, ""):
        store["seen"][host] = generated


def _merge_own(store, report, rid, wanted, covered, models_wanted):
    """A report's own figures (its run only), for the wanted hosts not yet covered
    and, where models_wanted, the medians of the GPU models."""
    per = {}
    for row in report.get("hosts") or []:
        if not isinstance(row, dict) or not isinstance(row.get("host"), str):
            continue
        name = row["host"]
        _see(store, name, rid[0])
        want = name in wanted and name not in covered
        median = models_wanted and row.get("status") not in _NOT_IN_MEDIAN
        if not (want or median):
            continue
        host, gpus = row_values(row)
        if median:
            _add_to_models(per, gpus)
        if not want:
            continue
        h = _host_store(store, name)
        _put(h["tflops"], rid, host["tflops"])
        _put(h["error"], rid, host["error"])
        for key, g in gpus.items():
            entry = h["gpus"].setdefault(key, {"index": g["index"], "uuid": g["uuid"], "tflops": {}, "error": {}})
            _put(entry["tflops"], rid, g["tflops"])
            _put(entry["error"], rid, g["error"])
    for name, m in _medians(per).items():
        entry = store["models"].setdefault(name, {"tflops": {}, "error": {}})
        _put(entry["tflops"], rid, m["tflops"])
        _put(entry["error"], rid, m["error"])


def _chained_runs(report):
    """A report's trend_runs as run ids, or None where it carries no trend."""
    runs = report.get("trend_runs")
    if not isinstance(runs, list) or not runs:
        return None
    out = []
    for r in runs:
        if not isinstance(r, dict) or not isinstance(r.get("generated"), str) or not _GENERATED.match(r["generated"]):
            return None
        out.append((r["generated"], r.get("mode") if isinstance(r.get("mode"), str) else ""))
    return out


def _chained_points(carried, rids, metric=False):
    """{run id: value} of a carried series (for TFLOP/s {run id: {metric: value}}); {} where it is not one."""
    if not isinstance(carried, dict) or not isinstance(carried.get("values"), list) or len(carried["values"]) != len(rids):
        return {}
    if metric and not isinstance(carried.get("metric"), str):
        return {}
    points = {}
    for rid, v in zip(rids, carried["values"]):
        if _number(v):
            points[rid] = {carried["metric"]: v} if metric else v
    return points


def _merge_chained(store, report, rids, wanted, covered, models_wanted):
    """The series a report carries, for the wanted hosts not yet covered (and the
    models): they hold every run before it. Returns whether the models were taken."""
    for row in report.get("hosts") or []:
        if not isinstance(row, dict) or not isinstance(row.get("host"), str):
            continue
        name, trend = row["host"], row.get("trend")
        if name not in wanted or name in covered or not isinstance(trend, dict) or not isinstance(trend.get("gpus"), dict):
            continue
        h = _host_store(store, name)
        for kind, metric in (("tflops", True), ("kernel_error", False)):
            for rid, v in _chained_points(trend.get(kind), rids, metric).items():
                _put(h["tflops" if metric else "error"], rid, v)
        gpus = [(int(i) if str(i).isdigit() else i, gt) for i, gt in trend["gpus"].items()]
        gpus += [(gt.get("index"), gt) for gt in trend.get("earlier") or [] if isinstance(gt, dict)]
        for index, gt in gpus:
            if not isinstance(gt, dict) or not isinstance(index, int):
                continue
            uuid = gt.get("uuid") if isinstance(gt.get("uuid"), str) and gt.get("uuid") else None
            entry = h["gpus"].setdefault(_gpu_key(uuid, index), {"index": index, "uuid": uuid, "tflops": {}, "error": {}})
            for rid, v in _chained_points(gt.get("tflops"), rids, True).items():
                _put(entry["tflops"], rid, v)
            for rid, v in _chained_points(gt.get("kernel_error"), rids).items():
                _put(entry["error"], rid, v)
        covered.add(name)
    models = report.get("trend_models")
    if not models_wanted or not isinstance(models, dict):
        return False
    for name, m in models.items():
        if not isinstance(m, dict):
            continue
        entry = store["models"].setdefault(name, {"tflops": {}, "error": {}})
        for rid, v in _chained_points(m.get("tflops"), rids, True).items():
            _put(entry["tflops"], rid, v)
        for rid, v in _chained_points(m.get("kernel_error"), rids).items():
            _put(entry["error"], rid, v)
    return True


def _pick_metric(points):
    """The dtype a TFLOP/s series follows: of those the newest point has, the one most points have (smoke dtypes first)."""
    newest = next((p for p in reversed(points) if p), None)
    if not newest:
        return None
    counts = dict((m, sum(1 for p in points if p and m in p)) for m in newest)
    return min(counts, key=lambda m: (-counts[m], _metric_rank(m)))


def steady(values, noise, min_change):
    """"decline" or "rise" where the last values move one way run after run (the
    longest tail with no step back beyond noise, at least two steps beyond it and
    min_change over that tail), else None. values: chronological, no nulls."""
    for direction, sign in (("decline", -1), ("rise", 1)):
        start = len(values) - 1
        while start > 0:
            before, after = values[start - 1], values[start]
            if sign * (after - before) < -noise * abs(before):
                break  # a step back: the steady part starts after it
            start -= 1
        tail = values[start:]
        moves = sum(1 for a, b in zip(tail, tail[1:]) if sign * (b - a) > noise * abs(a))
        # from 0 (an exact kernel) any steady move is one
        if moves >= 2 and sign * (tail[-1] - tail[0]) >= min_change * abs(tail[0]) and tail[-1] != tail[0]:
            return direction
    return None


def series(points, kind):
    """One series over the runs: points is one value (TFLOP/s: {metric: value}) or None per run.
    None where there is no value at all."""
    metric = None
    if kind == "tflops":
        metric = _pick_metric(points)
        values = [p.get(metric) if p and metric else None for p in points]
        values = [round(v, 3) if _number(v) else None for v in values]
    else:
        values = [float("%.6g" % v) if _number(v) else None for v in points]
    present = [v for v in values if v is not None]
    if not present:
        return None
    noise, min_change = (TFLOPS_NOISE, TFLOPS_MIN_CHANGE) if kind == "tflops" else (ERROR_NOISE, ERROR_MIN_CHANGE)
    how = steady(present, noise, min_change)
    out = {"values": values, "points": len(present),
           "change": round((present[-1] - present[0]) / present[0], 4) if len(present) > 1 and present[0] else None,
           "steady": how, "worsening": how == ("decline" if kind == "tflops" else "rise")}
    if metric is not None:
        out["metric"] = metric
    return out


def _gather(report, previous, history_dir, window):
    """Every point the current report's hosts and the GPU models had in the kept runs, and how many files it read."""
    store = _new_store()
    rows = [r for r in report.get("hosts") or [] if isinstance(r, dict) and isinstance(r.get("host"), str)]
    wanted = set(r["host"] for r in rows)
    covered = set()
    current = run_id(report) or ("", "")
    state = {"models": True, "read": 0, "done": set([current]), "seen": None}

    def take(source, rid):
        state["done"].add(rid)
        rids = _chained_runs(source)
        try:
            if rids is not None:
                if _merge_chained(store, source, rids, wanted, covered, state["models"]):
                    state["models"] = False
                if state["seen"] is None and isinstance(source.get("trend_seen"), dict):
                    state["seen"] = dict((h, g) for h, g in source["trend_seen"].items() if isinstance(g, str))
                    for h, g in state["seen"].items():
                        _see(store, h, g)
            _merge_own(store, source, rid, wanted, covered, state["models"])
        except _BAD_SOURCE:
            return

    if run_id(previous) is not None and run_id(previous) not in state["done"]:
        take(previous, run_id(previous))
    for rid, path in history_files(history_dir, window - 1) if history_dir else []:
        if wanted <= covered and not state["models"]:
            break
        if rid in state["done"]:
            continue
        if state["seen"] is not None and rid[0] not in set(g for h, g in state["seen"].items() if h in wanted and h not in covered):
            continue  # a report carried the trend: only the runs where a missing host was last seen are left to read
        source = read_report(path)
        state["read"] += 1
        if source is not None and run_id(source) not in state["done"]:
            take(source, run_id(source))
    # the current run last: its own values, and it wins over a history file of the same run
    for h in store["hosts"].values():
        for points in (h["tflops"], h["error"]):
            points.pop(current, None)
        for g in h["gpus"].values():
            g["tflops"].pop(current, None)
            g["error"].pop(current, None)
    for m in store["models"].values():
        m["tflops"].pop(current, None)
        m["error"].pop(current, None)
    _merge_own(store, report, current, wanted, set(), True)
    return store, state["read"]


def attach(report, previous=None, history_dir=None, window=WINDOW):
    """Put the trend into the report (see the module's doc): the runs, each row's
    series, the models' series and where each host was last seen. previous: the
    report before this one (it carries the trend so far); history_dir: the kept
    reports. Returns {"runs": n, "files_read": n}."""
    store, read = _gather(report, previous, history_dir, window)
    current = run_id(report) or ("", "")  # as _gather names it
    runs = set()
    for h in store["hosts"].values():
        for points in [h["tflops"], h["error"]] + [p for g in h["gpus"].values() for p in (g["tflops"], g["error"])]:
            runs.update(points)
    for m in store["models"].values():
        runs.update(m["tflops"])
        runs.update(m["error"])
    runs.discard(current)
    past = sorted(runs)[-(window - 1):] if window > 1 else []
    order = past + [current]
    report["trend_runs"] = [{"generated": g, "mode": m} for g, m in order]
    for row in report.get("hosts") or []:
        if not isinstance(row, dict) or not isinstance(row.get("host"), str):
            continue
        h = store["hosts"].get(row["host"], {"tflops": {}, "error": {}, "gpus": {}})
        trend = {"tflops": series([h["tflops"].get(r) for r in order], "tflops"),
                 "kernel_error": series([h["error"].get(r) for r in order], "kernel_error"), "gpus": {}, "earlier": []}
        used = set()
        for g in row.get("gpus") or []:
            if not isinstance(g, dict) or not isinstance(g.get("index"), int):
                continue
            uuid = g.get("uuid") if isinstance(g.get("uuid"), str) and g.get("uuid") else None
            used.add(_gpu_key(uuid, g["index"]))
            entry = h["gpus"].get(_gpu_key(uuid, g["index"]), {"tflops": {}, "error": {}})
            trend["gpus"][str(g["index"])] = {
                "uuid": uuid, "tflops": series([entry["tflops"].get(r) for r in order], "tflops"),
                "kernel_error": series([entry["error"].get(r) for r in order], "kernel_error")}
        # the GPUs this run did not see (a host unreachable now, a GPU swapped out): kept for the next run
        for key, entry in sorted(h["gpus"].items(), key=lambda kv: (kv[1]["index"], kv[0])):
            if key in used:
                continue
            t, e = series([entry["tflops"].get(r) for r in order], "tflops"), series([entry["error"].get(r) for r in order], "kernel_error")
            if t or e:
                trend["earlier"].append({"index": entry["index"], "uuid": entry["uuid"], "tflops": t, "kernel_error": e})
        row["trend"] = trend
    models = {}
    for name, m in sorted(store["models"].items()):
        t, e = series([m["tflops"].get(r) for r in order], "tflops"), series([m["error"].get(r) for r in order], "kernel_error")
        if t or e:
            models[name] = {"tflops": t, "kernel_error": e}
    report["trend_models"] = models
    kept = set(g for g, dummy in order)
    report["trend_seen"] = dict(sorted((h, g) for h, g in store["seen"].items() if g in kept))
    return {"runs": len(order), "files_read": read}


# The renderings (jinja filters of the report's templates)

def _fmt(value, kind, exact=False):
    if kind == "tflops":
        return ("%.1f" if exact else "%.4g") % value
    return "%.3g" % value if exact else "%.2g" % value


def _when(run):
    """A run of trend_runs as ``2026-03-08 12:00`` (UTC)."""
    generated = run.get("generated") if isinstance(run, dict) else None
    return generated[:16].replace("T", " ") if isinstance(generated, str) else "?"


def _coord(value):
    text = "%.1f" % value
    return text[:-2] if text.endswith(".0") else text


def trend_text(s, kind="tflops", most=3):
    """``412 → 380 → 301 bfloat16 TFLOP/s (-27% over 5 runs, steady decline)``; the
    first value and the last most-1 where there are more; "" without a series."""
    if not isinstance(s, dict) or not isinstance(s.get("values"), list):
        return ""
    present = [v for v in s["values"] if _number(v)]
    if not present:
        return ""
    shown = []
    for v in present:
        text = _fmt(v, kind)
        if not shown or shown[-1] != text:  # a flat stretch is one value
            shown.append(text)
    if len(shown) > most:
        shown = shown[:1] + ["…"] + shown[-(most - 1):] if most > 1 else shown[-1:]
    if kind == "tflops":
        head = "%s %sTFLOP/s" % (" → ".join(shown), s["metric"] + " " if s.get("metric") else "")
    else:
        head = "kernel error " + " → ".join(shown)
    tail = []
    if len(present) > 1 and _number(s.get("change")):
        tail.append("%+.0f%% over %d runs" % (s["change"] * 100, len(present)))
    else:
        tail.append("%d run%s" % (len(present), "" if len(present) == 1 else "s"))
    if s.get("steady"):
        tail.append("steady %s" % s["steady"])
    return "%s (%s)" % (head, ", ".join(tail))


def worsening(trend):
    """Whether a row's or a GPU's trend (or one series) moves steadily the bad way."""
    if not isinstance(trend, dict):
        return False
    if "values" in trend:
        return bool(trend.get("worsening"))
    return any(isinstance(s, dict) and s.get("worsening") for s in (trend.get("tflops"), trend.get("kernel_error")))


def gpus_worsening(row):
    """The indexes (as text) of a row's GPUs whose trend worsens."""
    gpus = ((row or {}).get("trend") or {}).get("gpus") if isinstance(row, dict) else None
    order = sorted((gpus or {}).items(), key=lambda kv: (len(str(kv[0])), str(kv[0])))  # 2 before 10
    return [str(i) for i, gt in order if worsening(gt)]


def _polyline(values, kind):
    """SVG points of one series on the runs' x axis, scaled to its own range (at least
    _SPARK_SPAN of its largest value, centred); the page's CSS colours it by its class."""
    n = len(values)
    present = [v for v in values if _number(v)]
    lo, hi = min(present), max(present)
    span = max(hi - lo, _SPARK_SPAN[kind] * abs(hi))
    top = (hi + lo + span) / 2.0
    width, height = _SPARK_W - 2 * _SPARK_PAD, _SPARK_H - 2 * _SPARK_PAD
    pts = []
    for i, v in enumerate(values):
        if not _number(v):
            continue
        x = _SPARK_PAD + (width * i / (n - 1) if n > 1 else width / 2)
        y = _SPARK_PAD + (height / 2 if span == 0 else height * (top - v) / span)
        pts.append("%s,%s" % (_coord(x), _coord(y)))
    last = pts[-1].split(",")
    return '<polyline class="%s" points="%s"/><circle class="%s" cx="%s" cy="%s" r="1.8"/>' % (kind, " ".join(pts), kind, last[0], last[1])


def _svg(lines, title, attrs):
    import markupsafe

    body = "".join(_polyline(s["values"], kind) for kind, s in lines)
    cls = "spark" + (" worsening" if any(s.get("worsening") for dummy, s in lines) else "")
    extra = "".join(' %s="%s"' % (k, markupsafe.escape(v)) for k, v in attrs)
    svg = '<svg width="%d" height="%d" viewBox="0 0 %d %d" aria-hidden="true">%s</svg>' % (_SPARK_W, _SPARK_H, _SPARK_W, _SPARK_H, body)
    return markupsafe.Markup('<span class="%s"%s title="%s">%s</span>' % (cls, extra, markupsafe.escape(title), svg))


def _usable(s, runs):
    return isinstance(s, dict) and isinstance(s.get("values"), list) and len(s["values"]) == len(runs) \
        and any(_number(v) for v in s["values"])


def sparkline(s, runs, kind="tflops", what=""):
    """One series as an inline SVG line; its title: what, the text form and each run's time and value. "" without a series."""
    import markupsafe

    runs = runs if isinstance(runs, list) else []
    if not _usable(s, runs):
        return markupsafe.Markup("")
    lines = [(what + ": " if what else "") + trend_text(s, kind), "UTC: %s" % ("TFLOP/s" if kind == "tflops" else "kernel error")]
    for r, v in zip(runs, s["values"]):
        if _number(v):
            lines.append("%s: %s" % (_when(r), _fmt(v, kind, exact=True)))
    return _svg([(kind, s)], "\n".join(lines), [("data-trend", kind)])


def gpu_sparkline(gt, runs, host="", index=""):
    """One GPU's throughput (blue) and worst kernel error (red) in one inline SVG; its title names both per run."""
    import markupsafe

    runs = runs if isinstance(runs, list) else []
    if not isinstance(gt, dict):
        return markupsafe.Markup("")
    lines = [(kind, gt.get(kind)) for kind in ("tflops", "kernel_error") if _usable(gt.get(kind), runs)]
    if not lines:
        return markupsafe.Markup("")
    head = "%s GPU %s%s" % (host, index, " (%s)" % gt["uuid"] if gt.get("uuid") else "")
    title = [head] + [trend_text(s, kind) for kind, s in lines]
    title.append("UTC: " + ", ".join("TFLOP/s" if kind == "tflops" else "kernel error" for kind, dummy in lines))
    for i, r in enumerate(runs):
        cells = [_fmt(s["values"][i], kind, exact=True) if _number(s["values"][i]) else "-" for kind, s in lines]
        if any(c != "-" for c in cells):
            title.append("%s: %s" % (_when(r), ", ".join(cells)))
    return _svg(lines, "\n".join(title), [("data-trend", "gpu"), ("data-host", host), ("data-gpu", index)])


# The filters the templates use (format._env registers them).
FILTERS = {"trend_text": trend_text, "sparkline": sparkline, "gpu_sparkline": gpu_sparkline, "worsening": worsening,
           "gpus_worsening": gpus_worsening}
