# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Fleet report: one row per host from what deploy/verify/rollback registered.

The action plugin gpufleet.inference.fleet_report hands this module the
per-host results of one run; it compares them with the previous run's report
and with the venv freezes that the uv_venv role fetched under
``<report dir>/freezes/<host>/``, and writes ``fleet-report.json`` (everything,
the next run's baseline), ``fleet-report.md`` and ``fleet-report.html`` (one
row per host, failing hosts first), ``fleet-report.prom`` and one
``textfile/<host>.prom`` per host (report_textfile). Pure Python + jinja2, on
the controller; tools/fleet_verify.py prints summary_table from the JSON.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re

from ansible_collections.gpufleet.inference.plugins.module_utils import atomic_file, xid as xids
from ansible_collections.gpufleet.inference.plugins.module_utils.freeze import canonical_name, parse_freeze
from ansible_collections.gpufleet.inference.plugins.plugin_utils import report_textfile as textfile
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.common import part_name_error
from ansible_collections.gpufleet.inference.plugins.plugin_utils import report_trend

REPORT_BASENAME = "fleet-report"
# 2: a row's package baseline and its diff are the keys "freeze" and "freeze_diff"
SCHEMA_VERSION = 2
# The venv freezes (the drift check's baselines), per host, under the report
# directory unless the run names another folder.
FREEZE_DIRNAME = "freezes"
# Where versions before the freeze rename fetched them (<report dir>/locks/<host>/<venv>.lock.txt):
# read as well, so that a host not deployed again since keeps its baseline.
LEGACY_FREEZE_DIRNAME = "locks"
# The names a fetched freeze may have: <venv>.freeze.txt, and the names of earlier versions.
FREEZE_SUFFIXES = (".txt", ".lock")

# Worst first: the order of the rows in every rendering.
STATUS_ORDER = {"failed": 0, "unreachable": 1, "busy": 2, "drift": 3, "not_run": 4, "unverified": 5, "ok": 6}
# busy: a full verification refused before any CUDA work (a GPU serves); not
# a failed GPU, but not verified either
BAD_STATUSES = ("failed", "unreachable", "busy", "drift")
# A GPU (or a host's all-reduce) below this share of its siblings' median is flagged (gpufleet_outlier_ratio).
DEFAULT_OUTLIER_RATIO = 0.9
# Clock event reasons that mean hardware or heat holds the GPU back (module_utils gpu.SLOWDOWN_REASONS).
SLOWDOWN_REASONS = ("hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")

# The versions compared with the previous run (report column -> row key).
TRACKED = (
    ("driver", "driver_version"),
    ("cuda", "cuda_version"),
    ("torch", "torch_version"),
    ("flashinfer", "flashinfer_version"),
    ("sgl-kernel key", "sgl_kernel_abi_key"),
    ("gpus", "gpu_summary"),
    ("active venv", "active_venv"),
)

# Kernel checks whose TFLOP/s go next to the smoke bf16/fp16 figures (check -> label).
KERNEL_TFLOPS = {"torch.fp8_scaled_mm": "fp8", "torch.nvfp4_scaled_mm": "fp4"}
# The order of the TFLOP/s labels of one device: smoke dtypes (sorted) first, then these.
_TFLOPS_LAST = ("fp8", "fp4")

_EXPECT_ITEM = re.compile(r"(?P<name>[A-Za-z0-9_.\[\]-]+): expected (?P<expected>.*?), found (?P<found>[^;\n]*?)\s*(?=;|\n|$)")


def normalise_packages(packages):
    if not packages:
        return {}
    return {canonical_name(k): str(v) for k, v in packages.items()}


def diff_versions(old, new):
    """Sorted list of {name, old, new}; old/new None for added/removed packages."""
    old = old or {}
    new = new or {}
    out = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a != b:
            out.append({"name": name, "old": a, "new": b})
    return out


def parse_expectation_failures(message):
    """torch_verify lists each mismatch as ``name: expected X, found Y``."""
    out = []
    for m in _EXPECT_ITEM.finditer(message or ""):
        out.append(m.groupdict())
    return out


def _first(mapping, *paths):
    """First non-empty value among dotted paths in nested dicts."""
    for path in paths:
        cur = mapping
        for part in path.split("."):
            if isinstance(cur, dict) and part in cur:
                cur = cur[part]
            else:
                cur = None
                break
        if cur not in (None, "", [], {}):
            return cur
    return None


def freeze_dirs(out_dir, freeze_dir=None):
    """The folders the report reads the venv freezes from: freeze_dir (default
    ``<out_dir>/freezes``), then ``<out_dir>/locks``, where earlier versions fetched them."""
    dirs = [freeze_dir or os.path.join(out_dir, FREEZE_DIRNAME)]
    legacy = os.path.join(out_dir, LEGACY_FREEZE_DIRNAME)
    if os.path.abspath(legacy) != os.path.abspath(dirs[0]):
        dirs.append(legacy)
    return dirs


def find_freeze(freeze_dir, host, venv=None):
    """The freeze the deploy recorded for this host: {packages, path} or None.

    The deploy (uv_venv's freeze tasks) fetches ``<freeze_dir>/<host>/<venv>.freeze.txt``.
    freeze_dir is one folder or a list of them (freeze_dirs: the current one and
    the one of earlier versions, whose files are ``<venv>.lock.txt``), looked at
    together: the freeze named after the active venv wins, then the newest. The
    path is relative to the parent of the folder it was found in.
    """
    dirs = [freeze_dir] if isinstance(freeze_dir, str) else list(freeze_dir or [])
    files = []
    for top in dirs:
        d = os.path.join(top, host)
        if not os.path.isdir(d):
            continue
        for root, _dirs, names in os.walk(d):
            for n in names:
                if n.endswith(FREEZE_SUFFIXES):
                    files.append((os.path.join(root, n), top))
    if not files:
        return None
    chosen = None
    if venv:
        base = os.path.basename(str(venv).rstrip("/"))
        named = [f for f in files if base and base in os.path.basename(f[0])]
        if named:
            chosen = max(named, key=lambda f: os.path.getmtime(f[0]))
    if chosen is None:
        chosen = max(files, key=lambda f: os.path.getmtime(f[0]))
    path, top = chosen
    with open(path, encoding="utf-8", errors="replace") as fh:
        return {"path": os.path.relpath(path, os.path.dirname(top.rstrip("/")) or "."), "packages": parse_freeze(fh.read())}


def _mark_failed_checks(row):
    """Each GPU's failed kernel and model checks (g["failed_checks"]): a GPU that
    failed one is a GPU to look at, like an outlier or a health mark."""
    by_index = dict((g.get("index"), g) for g in row.get("gpus") or [])
    failed = [(p.get("check"), d) for p in (row.get("kernels") or {}).get("problems") or []
              if p.get("status") == "failed" for d in p.get("devices") or []]
    failed += [(c.get("check"), c.get("device")) for c in (row.get("model") or {}).get("not_passed") or []
               if c.get("status") == "failed"]
    for check, device in failed:
        g = by_index.get(device)
        if g is not None and check not in g.setdefault("failed_checks", []):
            g["failed_checks"].append(check)


def _note(row, kind, text):
    """One line of the row's notes: "failed" (a failed expectation, a failed stage,
    unreachable, busy), "drift" (moved from the deployed freeze or the last run) or
    "outlier" (unlike its siblings). All of them are in row["drift"] too (the
    status and the history read that list); the report shows them by kind."""
    row["drift"].append(text)
    row.setdefault("notes", {"failed": [], "drift": [], "outlier": []})[kind].append(text)


def _xid(gpu_facts, previous_row, gpus):
    """The host's Xid errors since its previous run: the events after the cursor
    its previous row left (the whole boot where there is none), each GPU's as
    marks (a GPU to look at), and the failures of the expectation
    no_xid_since_last_run. A host whose log was not read keeps the old cursor."""
    answer = (gpu_facts or {}).get("xid")
    expect = (gpu_facts or {}).get("xid_expect") or {}
    previous = (previous_row or {}).get("xid") if isinstance(previous_row, dict) else None
    cursor = (previous or {}).get("cursor")
    if not isinstance(answer, dict):
        answer = None
    if answer is None and not expect:
        return {"read": False, "source": None, "error": None, "since": None, "events": [], "new_count": 0, "ignored": 0,
                "count_boot": None, "failures": [], "cursor": cursor}
    judged = xids.judge(answer, cursor, expect)
    by_index = dict((g.get("index"), g) for g in gpus)
    counts = {}
    for event in judged["new"]:
        counts[(event.get("gpu"), event["code"])] = counts.get((event.get("gpu"), event["code"]), 0) + 1
    for (index, code), n in sorted(counts.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        g = by_index.get(index)
        if g is not None:
            g.setdefault("xid", {})[str(code)] = n
            g["marks"].append("Xid %d (%s)%s since the last run" % (code, xids.meaning(code), " x%d" % n if n > 1 else ""))
    read = answer is not None and not answer.get("error")
    return {
        "read": read,
        "source": (answer or {}).get("source"),
        "error": (answer or {}).get("error") or (None if answer is not None else "not read (no GPU, or gpufleet_xid: off)"),
        "since": ("last run" if cursor else "boot") if read else None,
        # the newest first is what a person reads; the rest is in the host's log
        "events": [dict((k, e.get(k)) for k in ("code", "meaning", "gpu", "uuid", "pci", "pid", "process", "time", "text"))
                   for e in judged["new"][-50:]],
        "new_count": len(judged["new"]),
        "ignored": len(judged["ignored"]),
        "count_boot": (answer or {}).get("count"),
        "failures": judged["failures"],
        "cursor": xids.cursor_of(answer, cursor),
    }


def _gpu_rows(gpu, torch):
    gpus = []
    for g in (gpu or {}).get("gpus") or []:
        # the UUID and PCI bus id name the GPU the way dcgm-exporter, an RMA form and a slot do
        gpus.append({"index": g.get("index"), "name": g.get("name"), "compute_capability": g.get("compute_capability"),
                     "memory_total_mib": g.get("memory_total_mib"), "health": g.get("health"),
                     "uuid": g.get("uuid"), "pci_bus_id": g.get("pci_bus_id"), "serial": g.get("serial")})
    if not gpus:
        for i, d in enumerate(_first(torch or {}, "devices") or []):
            gpus.append({"index": d.get("index", i), "name": d.get("name"), "compute_capability": d.get("compute_capability"),
                         "memory_total_mib": d.get("memory_total_mib"), "health": None, "uuid": d.get("uuid"),
                         "pci_bus_id": d.get("pci_bus_id"), "serial": None})
    by_device = dict((entry["device"], entry) for entry in _smoke(torch))
    for g in gpus:
        g["tflops"] = dict((k, v) for k, v in by_device.get(g["index"], {}).items() if k != "device")
        g["marks"] = health_marks(g.get("health"))
        g["ratio"] = None
        g["outliers"] = []
    return gpus


def health_marks(health):
    """What a person should look at in one GPU's health, as short marks (empty when nothing)."""
    if not isinstance(health, dict):
        return []
    marks = []
    gen, gen_max = health.get("pcie_gen_current"), health.get("pcie_gen_max")
    width, width_max = health.get("pcie_width_current"), health.get("pcie_width_max")
    # a GPU may lower its link generation at idle: only a link read under load
    # (torch_verify reads it again right after the smoke test) is judged by it
    if _number(gen) and _number(gen_max) and gen < gen_max and health.get("pcie_read_under_load"):
        marks.append("PCIe Gen%s of Gen%s" % (gen, gen_max))
    if _number(width) and _number(width_max) and width < width_max:
        marks.append("PCIe x%s of x%s" % (width, width_max))
    if _number(health.get("ecc_uncorrected_volatile")) and health["ecc_uncorrected_volatile"] > 0:
        marks.append("%s uncorrected ECC errors" % health["ecc_uncorrected_volatile"])
    for key, text in (("retired_pages_pending", "retired pages pending"), ("remapped_rows_pending", "row remap pending"),
                      ("remapped_rows_failure", "row remap failed")):
        if health.get(key):
            marks.append(text)
    slow = [r for r in health.get("clocks_event_reasons") or [] if r in SLOWDOWN_REASONS]
    if slow:
        marks.append("clocks held back: " + ", ".join(slow))
    if health.get("persistence_mode") is False:
        marks.append("persistence mode off")
    return marks


def _link_text(health):
    """The link a GPU's siblings are compared by: its width, and its generation where it was read under load."""
    width, gen = health.get("pcie_width_current"), health.get("pcie_gen_current")
    if width is None:
        return None
    return ("Gen%s x%s" % (gen, width)) if gen is not None and health.get("pcie_read_under_load") else "x%s" % width


def flag_gpu_outliers(rows, ratio):
    """Per GPU model, each GPU's throughput (smoke dtypes, FP8/FP4 GEMM checks) against
    the fleet median of that model, and its PCIe link and maximum SM clock against
    what most of its siblings have. A GPU below ratio x the median, or unlike most
    of its siblings, is an outlier: drift for its host, not a failed verification."""
    models = {}
    for r in rows:
        # a failed host's figures do not set the medians the others are judged by
        if r["status"] in ("unreachable", "not_run", "failed"):
            continue
        for g in r["gpus"]:
            models.setdefault(g.get("name") or "?", []).append((r, g))
    for name, members in models.items():
        metrics = sorted(set(k for dummy, g in members for k in g["tflops"]))
        for metric in metrics:
            values = [g["tflops"][metric] for dummy, g in members if _number(g["tflops"].get(metric))]
            if len(values) < 2:
                continue
            median = _median(values)
            if median <= 0:
                continue
            for r, g in members:
                value = g["tflops"].get(metric)
                if not _number(value):
                    continue
                share = value / median
                g["ratio"] = round(share if g["ratio"] is None else min(g["ratio"], share), 3)
                if share < ratio:
                    g["outliers"].append({"what": "%s TFLOP/s" % metric, "value": value, "median": round(median, 3),
                                          "ratio": round(share, 3), "siblings": len(values)})
                    _note(r, "outlier", "GPU %s: %s TFLOP/s %s is %.2f of the median %.4g of %d %s GPUs"
                          % (g["index"], metric, value, share, median, len(values), name))
                    r["outlier_drift"] = r.get("outlier_drift", 0) + 1
        if len(members) < 3:
            continue
        for what, key in (("PCIe link", _link_text),
                          ("max SM clock", lambda h: "%s MHz" % h["clocks_max_sm_mhz"] if h.get("clocks_max_sm_mhz") else None)):
            seen = [(r, g, key(g["health"])) for r, g in members if isinstance(g.get("health"), dict)]
            seen = [(r, g, v) for r, g, v in seen if v is not None]
            counts = {}
            for dummy, dummy2, v in seen:
                counts[v] = counts.get(v, 0) + 1
            if not counts:
                continue
            typical, count = max(counts.items(), key=lambda item: (item[1], item[0]))
            if count * 2 <= len(seen):
                continue  # no majority: nothing to compare with
            for r, g, v in seen:
                if v != typical:
                    g["outliers"].append({"what": what, "value": v, "typical": typical, "siblings": len(seen)})
                    _note(r, "outlier", "GPU %s: %s %s where %d of %d %s GPUs have %s"
                          % (g["index"], what, v, count, len(seen), name, typical))
                    r["outlier_drift"] = r.get("outlier_drift", 0) + 1
    for r in rows:
        if r["status"] == "ok" and any(g["outliers"] for g in r["gpus"]):
            r["status"] = "drift"


def _gpu_summary(gpus):
    if not gpus:
        return "none"
    counts = {}
    for g in gpus:
        counts[g.get("name") or "?"] = counts.get(g.get("name") or "?", 0) + 1
    return ", ".join("%dx %s" % (c, n) for n, c in sorted(counts.items()))


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kernel_entries(torch):
    entries = (torch or {}).get("kernels")
    if not isinstance(entries, list):
        return []
    return [k for k in entries if isinstance(k, dict)]


def _smoke(torch):
    """Per-device TFLOP/s: [{device, <dtype>: tflops, ..., fp8, fp4}].

    torch_verify lists one smoke entry per device and dtype
    ({device, dtype, tflops, nonfinite, relative_error, ...}); the FP8 and
    NVFP4 GEMM kernel checks (KERNEL_TFLOPS) add "fp8"/"fp4" for the devices
    where they passed.
    """
    by_device = {}
    for item in (torch or {}).get("smoke") or []:
        if not isinstance(item, dict):
            continue
        dev = item.get("device", 0)
        entry = by_device.setdefault(dev, {"device": dev})
        if _number(item.get("tflops")):
            entry[str(item.get("dtype") or "tflops")] = item["tflops"]
    for item in _kernel_entries(torch):
        label = KERNEL_TFLOPS.get(item.get("check"))
        if label is None or item.get("status") != "ok" or not _number(item.get("tflops")):
            continue
        dev = item.get("device", 0)
        entry = by_device.setdefault(dev, {"device": dev})
        entry.setdefault(label, item["tflops"])
    return [by_device[k] for k in sorted(by_device, key=str)]


def _kernel_device(dev):
    return "cpu" if dev == "cpu" else "gpu%s" % dev


def _model(torch):
    """The served model and its serving backends (torch_verify's model, model_checks
    and backends), or None without a model: name, tp, precision, status, flags,
    args, problems, per GPU model and family the backends' verdicts, and the
    model checks that did not pass."""
    model = (torch or {}).get("model")
    if not isinstance(model, dict):
        return None
    backends = (torch or {}).get("backends") if isinstance((torch or {}).get("backends"), dict) else {}
    verdicts = []
    for gpu, families in sorted((backends.get("qualification") or {}).items()):
        for family, per_backend in sorted((families or {}).items()):
            for backend, verdict in sorted((per_backend or {}).items()):
                verdicts.append({"gpu": gpu, "family": family, "backend": backend, "status": verdict.get("status"),
                                 "reason": verdict.get("reason")})
    checks = [c for c in (torch or {}).get("model_checks") or [] if isinstance(c, dict)]
    return {
        "name": model.get("name"), "tp": model.get("tp"), "precision": model.get("precision"),
        "status": backends.get("status"), "reason": backends.get("reason"),
        "flags": dict(backends.get("flags") or {}), "args": backends.get("args"),
        "problems": list(backends.get("problems") or []), "verdicts": verdicts,
        "checks_ok": sum(1 for c in checks if c.get("status") == "ok"),
        "not_passed": [{"check": c.get("check"), "device": c.get("device"), "status": c.get("status"),
                        "reason": c.get("reason")} for c in checks if c.get("status") != "ok"],
        "error": (torch or {}).get("model_checks_error"),
    }


def format_model(row):
    """The model cell: ``qwen3-30b-a3b tp 2: --moe-runner-backend flashinfer_cutlass`` or ``-``."""
    model = row.get("model") if isinstance(row, dict) else None
    if not isinstance(model, dict):
        return "-"
    head = "%s tp %s (%s)" % (model.get("name"), model.get("tp"), model.get("precision"))
    if model.get("status") == "selected":
        return "%s: %s" % (head, model.get("args") or "no flags needed")
    if model.get("status") == "skipped":
        return "%s: backends not qualified (%s)" % (head, model.get("reason"))
    return "%s: %s" % (head, "; ".join(model.get("problems") or []) or model.get("status"))


def _kernels(torch):
    """Summary of torch_verify's kernel checks (``torch.kernels``, one entry per check and device).

    Counts are per entry; the names (``failed_checks``, ``skipped_checks``,
    ``compiled``) are unique, in the order torch_verify listed them.
    ``problems`` groups the entries that did not pass by check, status and
    reason (failed first, then skipped) with the devices each applies to.
    """
    entries = _kernel_entries(torch)
    error = (torch or {}).get("kernels_error") or None
    out = {"ran": bool(entries), "total": len(entries), "passed": 0, "failed": 0, "skipped": 0,
           "failed_checks": [], "skipped_checks": [], "problems": [], "compiled": [], "compile_seconds": None,
           "error": str(error) if error is not None else None}
    groups = {}
    compile_seconds = 0.0
    any_compile_time = False
    for k in entries:
        name = str(k.get("check") or "?")
        status = k.get("status")
        # Anything but ok/skipped (an unknown status, a missing one) counts as a failure.
        status = status if status in ("ok", "skipped") else "failed"
        out["passed" if status == "ok" else status] += 1
        if status != "ok":
            names = out["failed_checks" if status == "failed" else "skipped_checks"]
            if name not in names:
                names.append(name)
            key = (status, name, k.get("reason"))
            group = groups.get(key)
            if group is None:
                group = groups[key] = {"check": name, "status": status, "reason": k.get("reason"), "devices": [],
                                       "device_name": k.get("device_name")}
                out["problems"].append(group)
            group["devices"].append(k.get("device"))
        if k.get("compiled") is True and name not in out["compiled"]:
            out["compiled"].append(name)
        if _number(k.get("compile_seconds")):
            compile_seconds += k["compile_seconds"]
            any_compile_time = True
    out["problems"].sort(key=lambda g: 0 if g["status"] == "failed" else 1)  # stable: listed order within each
    if any_compile_time:
        out["compile_seconds"] = round(compile_seconds, 3)
    if entries:
        parts = ["%d ok" % out["passed"]]
        if out["failed"]:
            parts.append("%d failed (%s)" % (out["failed"], ", ".join(out["failed_checks"])))
        if out["skipped"]:
            parts.append("%d skipped" % out["skipped"])
        summary = ", ".join(parts)
        if out["error"]:
            summary += "; error: " + _one_line(out["error"], 120)
    else:
        summary = "not run" + (": " + _one_line(out["error"], 120) if out["error"] else "")
    out["summary"] = summary
    return out


def _allreduce(torch):
    """torch_verify's all-reduce check, as the report keeps it (None when it was not asked for)."""
    result = (torch or {}).get("collectives")
    if not isinstance(result, dict):
        return None
    sizes = [r for r in result.get("results") or [] if isinstance(r, dict) and r.get("busbw_gbps") is not None]
    largest = max(sizes, key=lambda r: r.get("size_mib") or 0) if sizes else None
    return {
        "status": result.get("status"),
        "reason": result.get("reason"),
        "backend": result.get("backend"),
        "world_size": result.get("world_size"),
        "correct": result.get("correct"),
        "results": sizes,
        "size_mib": largest.get("size_mib") if largest else None,
        "busbw_gbps": largest.get("busbw_gbps") if largest else None,
        "nccl_version": result.get("nccl_version"),
        "outlier": None,
    }


def _median(values):
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0


def flag_allreduce_outliers(rows, ratio):
    """Hosts whose all-reduce bus bandwidth is below ratio x the median of their siblings:
    the hosts with the same GPUs (model and count) measured at the same message size.
    The flag is drift, not a failed verification."""
    groups = {}
    for r in rows:
        a = r.get("allreduce")
        if r["status"] in ("ok", "drift") and a and a["status"] == "ok" and a["busbw_gbps"] is not None:
            groups.setdefault((r.get("gpu_summary"), a["world_size"], a["size_mib"]), []).append(r)
    for (gpus, world, size), members in groups.items():
        if len(members) < 2:
            continue
        median = _median([m["allreduce"]["busbw_gbps"] for m in members])
        if median <= 0:
            continue
        for m in members:
            share = m["allreduce"]["busbw_gbps"] / median
            if share < ratio:
                m["allreduce"]["outlier"] = {"ratio": round(share, 3), "median_gbps": round(median, 3),
                                             "siblings": len(members)}
                _note(m, "outlier", "all-reduce busbw %s GB/s at %s MiB is %.2f of the median %.3g GB/s of %d hosts with %s"
                      % (m["allreduce"]["busbw_gbps"], size, share, median, len(members), gpus or "the same GPUs"))
                m["outlier_drift"] = m.get("outlier_drift", 0) + 1
                if m["status"] == "ok":
                    m["status"] = "drift"


def _requirement_conflicts(entry, torch):
    raw = (torch or {}).get("requirement_conflicts")
    if raw in (None, "", []):
        raw = entry.get("requirement_conflicts")
    if raw in (None, "", []):
        return []
    if isinstance(raw, str):
        raw = [raw]
    return [str(c) for c in raw if c not in (None, "")]


def _import_version(torch, name):
    imports = _first(torch or {}, "imports")
    if isinstance(imports, dict):
        imports = [dict(v, name=k) for k, v in imports.items() if isinstance(v, dict)]
    for item in imports or []:
        if isinstance(item, dict) and item.get("name") == name and item.get("ok", item.get("status") == "ok"):
            return item.get("version")
    return None


def _adopted(record):
    """The hand-built venv a deploy found at the stable path (gpufleet_adopt_existing_venv),
    as found: where it was and went, its torch, whether it verified, its distributions."""
    if not isinstance(record, dict) or not record.get("moved_to"):
        return None
    packages = record.get("packages") or {}
    return {
        "moved_from": record.get("moved_from") or "",
        "moved_to": record.get("moved_to"),
        "moved": bool(record.get("moved")),
        "verified": bool(record.get("verified")),
        "message": record.get("message") or "",
        "torch_version": record.get("torch_version") or "",
        "cuda_version": record.get("cuda_version") or "",
        "python_version": record.get("python_version") or "",
        "package_count": len(packages),
        "packages": dict(sorted(packages.items())) if isinstance(packages, dict) else {},
    }


def _gpu_use(use):
    use = use if isinstance(use, dict) else {}
    return {"mode": use.get("requested"), "skipped": [s for s in use.get("skipped") or [] if isinstance(s, dict)],
            "collectives_skip": use.get("collectives_skip")} if use else {}


def _proof(proof):
    proof = proof if isinstance(proof, dict) else {}
    if not proof:
        return {}
    return {"summary": proof.get("summary"), "oldest_age_hours": proof.get("oldest_age_hours"),
            "never": proof.get("never") or [], "devices": proof.get("devices") or [], "error": proof.get("error")}


def _serving(serving, previous_row):
    serving = dict(serving) if isinstance(serving, dict) else {}
    before = (previous_row or {}).get("serving") if isinstance(previous_row, dict) else None
    if not serving and isinstance(before, dict) and before.get("drained"):
        # no hook ran this time: the drain of an earlier run still stands
        serving = dict(before, actions=[], carried=True)
    return serving


def _mark_busy(gpus, gpu_facts, use):
    """Each GPU row's busy reason, processes and skip (from nvidia-smi and the run's plan)."""
    facts = dict((g.get("index"), g) for g in (gpu_facts or {}).get("gpus") or [] if isinstance(g, dict))
    skipped = dict((s.get("gpu"), s.get("reason")) for s in (use or {}).get("skipped") or [])
    for g in gpus:
        found = facts.get(g["index"]) or {}
        g["busy"] = found.get("busy_reason")
        g["processes"] = found.get("processes") or []
        g["usage"] = found.get("usage")
        g["skipped"] = skipped.get(g["index"])


def host_row(name, entry, previous_row, freeze_dir, mode):
    """One report row from the host's registered result of this run."""
    entry = dict(entry or {})
    status = entry.get("status") or "unreachable"
    if status == "running":
        # Still "running" at report time: the connection was lost mid-run.
        status = "unreachable"
        entry.setdefault("message", "")
        entry["message"] = entry["message"] or "host became unreachable during the run (last stage: %s)" % (entry.get("stage") or "?")
    gpu = entry.get("gpu") or {}
    torch = entry.get("torch") or {}
    packages = normalise_packages(entry.get("packages"))
    gpus = _gpu_rows(gpu, torch)
    row = {
        "host": name,
        "status": status,
        "stage": entry.get("stage"),
        "message": entry.get("message") or "",
        "venv": entry.get("venv"),
        "active_venv": entry.get("active_venv"),
        "previous_venv": entry.get("previous_venv"),
        "activated": bool(entry.get("activated")),
        "fast_path": bool(entry.get("fast_path")),
        "adopted": _adopted(entry.get("adopted")),
        "gpus": gpus,
        "gpu_count": len(gpus),
        "gpu_summary": _gpu_summary(gpus) if status not in ("unreachable", "not_run") else None,
        "driver_version": gpu.get("driver_version") or _first(torch, "driver_version", "driver.version"),
        "cuda_version": _first(torch, "torch_cuda_version", "cuda_version", "torch.cuda_version", "version_cuda") or gpu.get("cuda_driver_version"),
        "cuda_driver_version": gpu.get("cuda_driver_version"),
        "torch_version": _first(torch, "torch_version", "torch.version", "version") or packages.get("torch"),
        "flashinfer_version": _import_version(torch, "flashinfer") or packages.get("flashinfer-python"),
        "sgl_kernel_abi_key": entry.get("sgl_kernel_abi_key"),
        "deploy_key": entry.get("deploy_key") or "",
        # the GPU targets the installed sgl_kernel wheel carries (its arch audit)
        "sgl_kernel_targets": list(entry.get("sgl_kernel_targets") or []),
        # the published wheel or a source build ({source, reason}), {} when not recorded
        "sgl_kernel_choice": dict(entry.get("sgl_kernel_choice") or {}),
        "smoke_tflops": _smoke(torch),
        "kernels": _kernels(torch),
        # the served model and the sglang flags its qualified backends gave, None without a model
        "model": _model(torch),
        "allreduce": _allreduce(torch),
        "requirement_conflicts": _requirement_conflicts(entry, torch),
        "expectation_failures": parse_expectation_failures("\n".join(entry.get("mismatches") or []) or entry.get("message"))
        if status == "failed" else [],
        "changes": [],
        "freeze": None,
        "freeze_diff": [],
        "packages": packages,
        "facts": {"gpu": gpu, "torch": torch},
        "drift": [],
        # the same lines by kind, for the report's columns
        "notes": {"failed": [], "drift": [], "outlier": []},
        # the verification's depth, the GPUs it left out and why
        "gpu_use": _gpu_use(entry.get("gpu_use")),
        # how old the last numeric pass under this stack is
        "proof": _proof(entry.get("proof")),
        # the drain and return hooks of this run (or, where none ran, a drain still standing from an earlier one)
        "serving": _serving(entry.get("serving"), previous_row),
    }
    _mark_busy(gpus, gpu, row["gpu_use"])
    _mark_failed_checks(row)
    row["xid"] = _xid(gpu, previous_row, gpus)
    if status in ("unreachable", "not_run"):
        # Keep the last known stack so the operator sees what the host had.
        if previous_row:
            for _label, key in TRACKED:
                if row.get(key) in (None, "", []):
                    row[key] = previous_row.get(key)
        _note(row, "failed", "unreachable" if status == "unreachable" else "not run in this play")
        return row

    if previous_row and previous_row.get("status") not in ("unreachable", "not_run", None):
        for label, key in TRACKED:
            old, new = previous_row.get(key), row.get(key)
            if old not in (None, "") and old != new:
                row["changes"].append({"name": label, "old": old, "new": new})

    freeze = find_freeze(freeze_dir, name, row["active_venv"] or row["venv"]) if freeze_dir else None
    if freeze is not None and packages:
        row["freeze"] = freeze["path"]
        row["freeze_diff"] = diff_versions(freeze["packages"], packages)

    # Xid errors since the last run: judged here, where the previous run's cursor is
    for text in row["xid"]["failures"]:
        failure = parse_expectation_failures(text)
        row["expectation_failures"].extend(f for f in failure if f not in row["expectation_failures"])
        if status in ("ok", "drift"):
            status = row["status"] = "failed"
            row["stage"] = row["stage"] or "verify"
            row["message"] = row["message"] or text
    for f in row["expectation_failures"]:
        _note(row, "failed", "%s: expected %s, found %s" % (f["name"], f["expected"], f["found"]))
    if status == "failed" and not row["expectation_failures"]:
        _note(row, "failed", "failed%s: %s" % (" in " + row["stage"] if row["stage"] else "", _one_line(row["message"])))
    for d in row["freeze_diff"]:
        _note(row, "drift", "freeze %s: %s -> %s" % (d["name"], d["old"] or "absent", d["new"] or "absent"))
    # A deploy or rollback changes versions on purpose: those are reported as
    # changes, not drift. Between two verify runs nothing should move; where the
    # deployed freeze is known it is the baseline (a host put back by hand is not
    # drift again), else the previous run is.
    if mode == "verify" and freeze is None:
        for c in row["changes"]:
            _note(row, "drift", "%s changed since the previous run: %s -> %s" % (c["name"], c["old"], c["new"]))
    if status == "ok" and row["drift"]:
        row["status"] = "drift"
    if status == "busy":
        _note(row, "failed", "busy: %s" % _one_line(row["message"]))
    return row


def _one_line(text, limit=300):
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


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
    only where the previous report does not carry it (report_trend.attach)."""
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
    report_trend.attach(report, previous, history_dir)
    return report


def fleet_digest(report):
    """Hash of what the fleet IS (statuses, versions, drift), not of when it was looked at."""
    keep = []
    for r in report["hosts"]:
        keep.append([r["host"], r["status"]] + [r.get(k) for _l, k in TRACKED] + [sorted(r.get("packages", {}).items()), r["drift"]])
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()


def _env():
    import jinja2

    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(here), autoescape=jinja2.select_autoescape(["html.j2"]),
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["tflops"] = format_tflops
    env.filters["md"] = lambda s: str("" if s is None else s).replace("|", "\\|").replace("\n", " ")
    env.filters["kernels"] = format_kernels
    env.filters["allreduce"] = format_allreduce
    env.filters["gpu_notes"] = gpu_notes
    env.filters["kernel_notes"] = kernel_notes
    env.filters["has_notes"] = has_notes
    env.filters["model"] = format_model
    env.filters.update(report_trend.FILTERS)
    return env


def _tflops_order(key):
    return (key in _TFLOPS_LAST, _TFLOPS_LAST.index(key) if key in _TFLOPS_LAST else 0, key)


def format_tflops(smoke):
    parts = []
    for d in smoke or []:
        vals = ", ".join("%s %.1f" % (k, v) for k, v in sorted(d.items(), key=lambda kv: _tflops_order(kv[0]))
                         if k != "device" and _number(v))
        if vals:
            parts.append("%s: %s" % (_kernel_device(d.get("device")), vals))
    return "; ".join(parts) or "-"


def format_kernels(row):
    """The "kernels" cell: ``12 ok, 1 failed (sgl_kernel.rmsnorm), 3 skipped`` or ``not run``."""
    kernels = row.get("kernels") if isinstance(row, dict) else None
    if not isinstance(kernels, dict):  # a report written before the kernel checks
        return "not run"
    text = kernels.get("summary") or "not run"
    skipped = [s for s in (row.get("gpu_use") or {}).get("skipped") or [] if isinstance(s.get("gpu"), int)]
    if skipped:
        text += "; GPU %s skipped (%s)" % (", ".join(str(s["gpu"]) for s in skipped),
                                           "busy" if all(str(s.get("reason", "")).startswith("busy") for s in skipped)
                                           else (row.get("gpu_use") or {}).get("mode") or "skipped")
    proof = (row.get("proof") or {}).get("summary")
    return text + ("; " + proof if proof else "")


def gpu_notes(gpu):
    """One GPU's health marks and outliers as one line of text."""
    notes = list(gpu.get("marks") or [])
    for o in gpu.get("outliers") or []:
        if "ratio" in o:
            notes.append("outlier: %s %s, %.2f of the median %s" % (o["what"], o["value"], o["ratio"], o["median"]))
        else:
            notes.append("outlier: %s %s where most have %s" % (o["what"], o["value"], o["typical"]))
    return "; ".join(notes)


def format_allreduce(row):
    """The "all-reduce" cell: ``ok 21.3 GB/s at 64 MiB, 8 ranks``, ``skipped: 1 GPU``, ``failed: ...`` or ``-``."""
    a = row.get("allreduce") if isinstance(row, dict) else None
    if not isinstance(a, dict):
        return "-"
    if a.get("status") == "ok":
        text = "ok %s GB/s at %s MiB, %s ranks" % (a.get("busbw_gbps"), a.get("size_mib"), a.get("world_size"))
        if a.get("outlier"):
            text += " (outlier: %.2f of the median)" % a["outlier"]["ratio"]
        return text
    return "%s: %s" % (a.get("status"), _one_line(a.get("reason"), 160))


def _devices(devices):
    devs = [_kernel_device(d) for d in devices or []]
    return ", ".join(devs) if devs else "?"


def has_notes(row):
    """Whether the row deserves its Markdown section for the kernel checks alone:
    a failed check, a JIT compile, the kernel run's error or a requirement conflict
    (skipped checks alone do not: a GPU without FP4 skips the same checks every run)."""
    if not isinstance(row, dict):
        return False
    kernels = row.get("kernels") if isinstance(row.get("kernels"), dict) else {}
    model = row.get("model") if isinstance(row.get("model"), dict) else {}
    return bool(kernels.get("failed") or kernels.get("compiled") or kernels.get("error") or row.get("requirement_conflicts")
                or model.get("problems") or [c for c in model.get("not_passed") or [] if c.get("status") == "failed"]
                or (row.get("gpu_use") or {}).get("skipped") or (row.get("serving") or {}).get("actions")
                or (row.get("serving") or {}).get("error"))


def kernel_notes(row):
    """Plain-text detail lines for one row's kernel checks: failures and skips with their
    reasons, JIT compiles, the kernel run's error. Empty when there is nothing to say."""
    if not isinstance(row, dict):
        return []
    notes = []
    kernels = row.get("kernels") if isinstance(row.get("kernels"), dict) else {}
    for p in kernels.get("problems") or []:
        notes.append("kernel %s %s on %s%s" % (p.get("check"), p.get("status"), _devices(p.get("devices")),
                                               ": %s" % p["reason"] if p.get("reason") else ""))
    if kernels.get("compiled"):
        secs = kernels.get("compile_seconds")
        notes.append("JIT compiled during the checks: %s%s" % (", ".join(kernels["compiled"]),
                                                               " (%.1f s in all)" % secs if _number(secs) else ""))
    if kernels.get("error"):
        notes.append("kernel checks error: %s" % _one_line(kernels["error"]))
    model = row.get("model") if isinstance(row.get("model"), dict) else {}
    if model:
        notes.append("model %s" % format_model(row))
        for v in model.get("verdicts") or []:
            if v.get("status") != "qualified":
                notes.append("backend %s %s %s on %s: %s" % (v.get("family"), v.get("backend"), v.get("status"),
                                                             v.get("gpu"), _one_line(v.get("reason"), 240)))
        for c in model.get("not_passed") or []:
            notes.append("model check %s %s on %s: %s" % (c.get("check"), c.get("status"), _kernel_device(c.get("device")),
                                                          _one_line(c.get("reason"), 240)))
        if model.get("error"):
            notes.append("model checks error: %s" % _one_line(model["error"]))
    use = row.get("gpu_use") or {}
    for s in use.get("skipped") or []:
        where = "GPU %s" % s.get("gpu") if isinstance(s.get("gpu"), int) else "numeric checks"
        notes.append("%s skipped: %s" % (where, _one_line(s.get("reason"), 240)))
    proof = row.get("proof") or {}
    for d in proof.get("devices") or []:
        if d.get("age_hours") is not None and d.get("proven_at"):
            notes.append("%s last proven %s (%s checks)" % (d.get("label"), d.get("proven_at"), len(d.get("checks") or [])))
    if proof.get("error"):
        notes.append("proof record: %s" % _one_line(proof["error"]))
    serving = row.get("serving") or {}
    for action in serving.get("actions") or []:
        notes.append("hook %s" % _one_line(action, 240))
    if serving.get("carried"):
        notes.append("still drained by gpufleet since an earlier run: %s" % _one_line(serving.get("reason"), 240))
    if serving.get("error"):
        notes.append("hook error: %s" % _one_line(serving["error"]))
    return notes


def render(report, kind):
    return _env().get_template("report.%s.j2" % kind).render(report=report, tracked=TRACKED)


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


def summary_table(report, width=None):
    """Plain-text table for terminals (the fleet_verify entry point prints it)."""
    cols = ("host", "status", "gpus", "driver", "cuda", "torch", "flashinfer", "sgl-kernel key", "drift")
    lines = []
    for r in report["hosts"]:
        lines.append((r["host"], r["status"].upper(), r.get("gpu_summary") or "-", r.get("driver_version") or "-",
                      r.get("cuda_version") or "-", r.get("torch_version") or "-", r.get("flashinfer_version") or "-",
                      (r.get("sgl_kernel_abi_key") or "-")[:12], "; ".join(r["drift"]) or "-"))
    widths = [max(len(str(c)), *(len(str(cells[i])) for cells in lines)) if lines else len(c) for i, c in enumerate(cols)]
    widths[-1] = min(widths[-1], width or 80)
    fmt = "  ".join("%%-%ds" % w for w in widths)
    out = [fmt % cols, fmt % tuple("-" * w for w in widths)]
    for cells in lines:
        out.append(fmt % (cells[:-1] + (_one_line(cells[-1], widths[-1]),)))
    counts = ", ".join("%d %s" % (n, s) for s, n in sorted(report["counts"].items(), key=lambda kv: STATUS_ORDER.get(kv[0], 0)))
    out.append("%d hosts: %s" % (report["total"], counts or "none"))
    return "\n".join(out)


def summary_line(report):
    """``3 hosts: 1 failed, 2 ok`` (worst first)."""
    counts = report["counts"]
    return "%d hosts: %s" % (report["total"], ", ".join(
        "%d %s" % (counts[k], k) for k in sorted(counts, key=lambda k: STATUS_ORDER.get(k, 0))))


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
                          history_dir=os.path.join(out_dir, report_trend.HISTORY_DIRNAME))
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
