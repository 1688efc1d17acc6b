# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Outliers, judged across the rows of one run: a GPU whose throughput is
below the ratio x the median of the fleet's GPUs of its model, or whose PCIe
link or maximum SM clock differs from most of its siblings'
(flag_gpu_outliers), and a host whose all-reduce bus bandwidth is below the
ratio x the median of the hosts with the same GPUs (flag_allreduce_outliers).
An outlier is drift for its host, noted as rows.note does, not a failed
verification. Built on sections and rows.
"""

from __future__ import annotations

from ansible_collections.gpufleet.inference.plugins.plugin_utils.report.rows import note
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report.sections import is_number

# A GPU (or a host's all-reduce) below this share of its siblings' median is flagged (gpufleet_outlier_ratio).
DEFAULT_OUTLIER_RATIO = 0.9


def _median(values):
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0


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
            values = [g["tflops"][metric] for dummy, g in members if is_number(g["tflops"].get(metric))]
            if len(values) < 2:
                continue
            median = _median(values)
            if median <= 0:
                continue
            for r, g in members:
                value = g["tflops"].get(metric)
                if not is_number(value):
                    continue
                share = value / median
                g["ratio"] = round(share if g["ratio"] is None else min(g["ratio"], share), 3)
                if share < ratio:
                    g["outliers"].append({"what": "%s TFLOP/s" % metric, "value": value, "median": round(median, 3),
                                          "ratio": round(share, 3), "siblings": len(values)})
                    note(r, "outlier", "GPU %s: %s TFLOP/s %s is %.2f of the median %.4g of %d %s GPUs"
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
                    note(r, "outlier", "GPU %s: %s %s where %d of %d %s GPUs have %s"
                         % (g["index"], what, v, count, len(seen), name, typical))
                    r["outlier_drift"] = r.get("outlier_drift", 0) + 1
    for r in rows:
        if r["status"] == "ok" and any(g["outliers"] for g in r["gpus"]):
            r["status"] = "drift"


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
                note(m, "outlier", "all-reduce busbw %s GB/s at %s MiB is %.2f of the median %.3g GB/s of %d hosts with %s"
                     % (m["allreduce"]["busbw_gbps"], size, share, median, len(members), gpus or "the same GPUs"))
                m["outlier_drift"] = m.get("outlier_drift", 0) + 1
                if m["status"] == "ok":
                    m["status"] = "drift"
