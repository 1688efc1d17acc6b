# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One host's row of the report (host_row): its status (STATUS_ORDER, worst
first; BAD_STATUSES), the versions compared with the previous run (TRACKED),
its GPUs with their health marks, busy reasons, failed checks and Xid errors,
its changes and its drift from the deployed freeze, each as a note of its
kind (note). Built on sections and freeze.
"""

from __future__ import annotations

import re

from ansible_collections.gpufleet.inference.plugins.module_utils import xid as xids
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report.freeze import diff_versions, find_freeze, normalise_packages
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report.sections import (
    first,
    import_version,
    is_number,
    one_line,
    read_adopted,
    read_allreduce,
    read_gpu_use,
    read_kernels,
    read_model,
    read_proof,
    read_requirement_conflicts,
    read_serving,
    read_smoke,
)

# Worst first: the order of the rows in every rendering.
STATUS_ORDER = {"failed": 0, "unreachable": 1, "busy": 2, "drift": 3, "not_run": 4, "unverified": 5, "ok": 6}
# busy: a full verification refused before any CUDA work (a GPU serves); not
# a failed GPU, but not verified either
BAD_STATUSES = ("failed", "unreachable", "busy", "drift")
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

_EXPECT_ITEM = re.compile(r"(?P<name>[A-Za-z0-9_.\[\]-]+): expected (?P<expected>.*?), found (?P<found>[^;\n]*?)\s*(?=;|\n|$)")


def parse_expectation_failures(message):
    """torch_verify lists each mismatch as ``name: expected X, found Y``."""
    out = []
    for m in _EXPECT_ITEM.finditer(message or ""):
        out.append(m.groupdict())
    return out


def note(row, kind, text):
    """One line of the row's notes: "failed" (a failed expectation, a failed stage,
    unreachable, busy), "drift" (moved from the deployed freeze or the last run) or
    "outlier" (unlike its siblings). All of them are in row["drift"] too (the
    status and the history read that list); the report shows them by kind."""
    row["drift"].append(text)
    row.setdefault("notes", {"failed": [], "drift": [], "outlier": []})[kind].append(text)


def _gpu_rows(gpu, torch):
    gpus = []
    for g in (gpu or {}).get("gpus") or []:
        # the UUID and PCI bus id name the GPU the way dcgm-exporter, an RMA form and a slot do
        gpus.append({"index": g.get("index"), "name": g.get("name"), "compute_capability": g.get("compute_capability"),
                     "memory_total_mib": g.get("memory_total_mib"), "health": g.get("health"),
                     "uuid": g.get("uuid"), "pci_bus_id": g.get("pci_bus_id"), "serial": g.get("serial")})
    if not gpus:
        for i, d in enumerate(first(torch or {}, "devices") or []):
            gpus.append({"index": d.get("index", i), "name": d.get("name"), "compute_capability": d.get("compute_capability"),
                         "memory_total_mib": d.get("memory_total_mib"), "health": None, "uuid": d.get("uuid"),
                         "pci_bus_id": d.get("pci_bus_id"), "serial": None})
    by_device = dict((entry["device"], entry) for entry in read_smoke(torch))
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
    if is_number(gen) and is_number(gen_max) and gen < gen_max and health.get("pcie_read_under_load"):
        marks.append("PCIe Gen%s of Gen%s" % (gen, gen_max))
    if is_number(width) and is_number(width_max) and width < width_max:
        marks.append("PCIe x%s of x%s" % (width, width_max))
    if is_number(health.get("ecc_uncorrected_volatile")) and health["ecc_uncorrected_volatile"] > 0:
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


def _gpu_summary(gpus):
    if not gpus:
        return "none"
    counts = {}
    for g in gpus:
        counts[g.get("name") or "?"] = counts.get(g.get("name") or "?", 0) + 1
    return ", ".join("%dx %s" % (c, n) for n, c in sorted(counts.items()))


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
        "adopted": read_adopted(entry.get("adopted")),
        "gpus": gpus,
        "gpu_count": len(gpus),
        "gpu_summary": _gpu_summary(gpus) if status not in ("unreachable", "not_run") else None,
        "driver_version": gpu.get("driver_version") or first(torch, "driver_version", "driver.version"),
        "cuda_version": first(torch, "torch_cuda_version", "cuda_version", "torch.cuda_version", "version_cuda") or gpu.get("cuda_driver_version"),
        "cuda_driver_version": gpu.get("cuda_driver_version"),
        "torch_version": first(torch, "torch_version", "torch.version", "version") or packages.get("torch"),
        "flashinfer_version": import_version(torch, "flashinfer") or packages.get("flashinfer-python"),
        "sgl_kernel_abi_key": entry.get("sgl_kernel_abi_key"),
        "deploy_key": entry.get("deploy_key") or "",
        # the GPU targets the installed sgl_kernel wheel carries (its arch audit)
        "sgl_kernel_targets": list(entry.get("sgl_kernel_targets") or []),
        # the published wheel or a source build ({source, reason}), {} when not recorded
        "sgl_kernel_choice": dict(entry.get("sgl_kernel_choice") or {}),
        "smoke_tflops": read_smoke(torch),
        "kernels": read_kernels(torch),
        # the served model and the sglang flags its qualified backends gave, None without a model
        "model": read_model(torch),
        "allreduce": read_allreduce(torch),
        "requirement_conflicts": read_requirement_conflicts(entry, torch),
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
        "gpu_use": read_gpu_use(entry.get("gpu_use")),
        # how old the last numeric pass under this stack is
        "proof": read_proof(entry.get("proof")),
        # the drain and return hooks of this run (or, where none ran, a drain still standing from an earlier one)
        "serving": read_serving(entry.get("serving"), previous_row),
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
        note(row, "failed", "unreachable" if status == "unreachable" else "not run in this play")
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
        note(row, "failed", "%s: expected %s, found %s" % (f["name"], f["expected"], f["found"]))
    if status == "failed" and not row["expectation_failures"]:
        note(row, "failed", "failed%s: %s" % (" in " + row["stage"] if row["stage"] else "", one_line(row["message"])))
    for d in row["freeze_diff"]:
        note(row, "drift", "freeze %s: %s -> %s" % (d["name"], d["old"] or "absent", d["new"] or "absent"))
    # A deploy or rollback changes versions on purpose: those are reported as
    # changes, not drift. Between two verify runs nothing should move; where the
    # deployed freeze is known it is the baseline (a host put back by hand is not
    # drift again), else the previous run is.
    if mode == "verify" and freeze is None:
        for c in row["changes"]:
            note(row, "drift", "%s changed since the previous run: %s -> %s" % (c["name"], c["old"], c["new"]))
    if status == "ok" and row["drift"]:
        row["status"] = "drift"
    if status == "busy":
        note(row, "failed", "busy: %s" % one_line(row["message"]))
    return row
