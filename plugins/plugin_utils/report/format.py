# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The report as people read it: the cells of a row (format_tflops,
format_kernels, format_allreduce, format_model, gpu_notes, kernel_notes), the
Markdown and HTML renderings of the templates in plugin_utils/templates
(render), the plain-text table for terminals (summary_table) and the one-line
summary (summary_line). Built on sections, rows and trend (its filters).
"""

from __future__ import annotations

import os

from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import trend
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report.rows import STATUS_ORDER, TRACKED
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report.sections import is_number, one_line

# The order of the TFLOP/s labels of one device: smoke dtypes (sorted) first, then these.
_TFLOPS_LAST = ("fp8", "fp4")


def _env():
    import jinja2

    # the templates lie beside this package, in plugin_utils/templates
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "templates")
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
    env.filters.update(trend.FILTERS)
    return env


def render(report, kind):
    return _env().get_template("report.%s.j2" % kind).render(report=report, tracked=TRACKED)


def _kernel_device(dev):
    return "cpu" if dev == "cpu" else "gpu%s" % dev


def _devices(devices):
    devs = [_kernel_device(d) for d in devices or []]
    return ", ".join(devs) if devs else "?"


def _tflops_order(key):
    return (key in _TFLOPS_LAST, _TFLOPS_LAST.index(key) if key in _TFLOPS_LAST else 0, key)


def format_tflops(smoke):
    parts = []
    for d in smoke or []:
        vals = ", ".join("%s %.1f" % (k, v) for k, v in sorted(d.items(), key=lambda kv: _tflops_order(kv[0]))
                         if k != "device" and is_number(v))
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
    return "%s: %s" % (a.get("status"), one_line(a.get("reason"), 160))


def format_model(row):
    """The model cell: ``qwen3-30b-a3b tp 2: --moe-runner-backend flashinfer_cutlass`` or ``-``."""
    model = row.get("model") if isinstance(row, dict) else None
    if not isinstance(model, dict):
        return "-"
    head = "%s tp %s (%s)" % (model.get("name"), model.get("tp"), model.get("precision"))
    if model.get("status") == "selected":
        return "%s: %s%s" % (head, model.get("args") or "no flags needed", format_served(model.get("served")))
    if model.get("status") == "skipped":
        return "%s: backends not qualified (%s)" % (head, model.get("reason"))
    return "%s: %s" % (head, "; ".join(model.get("problems") or []) or model.get("status"))


def format_served(served):
    """The served check after the flags: ``, served (ready 61.5 s, 812.0 tokens/s)``, ``, served: skipped (why)``."""
    if not isinstance(served, dict):
        return ""
    if served.get("status") == "passed":
        return ", served (ready %s s, %s tokens/s%s)" % (served.get("ready_seconds"), served.get("tokens_per_second"),
                                                         "; excluded %s" % ", ".join(served["excluded"])
                                                         if served.get("excluded") else "")
    return ", served: %s (%s)" % (served.get("status"), one_line(served.get("reason"), 200))


def gpu_notes(gpu):
    """One GPU's health marks and outliers as one line of text."""
    notes = list(gpu.get("marks") or [])
    for o in gpu.get("outliers") or []:
        if "ratio" in o:
            notes.append("outlier: %s %s, %.2f of the median %s" % (o["what"], o["value"], o["ratio"], o["median"]))
        else:
            notes.append("outlier: %s %s where most have %s" % (o["what"], o["value"], o["typical"]))
    return "; ".join(notes)


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
                                                               " (%.1f s in all)" % secs if is_number(secs) else ""))
    if kernels.get("error"):
        notes.append("kernel checks error: %s" % one_line(kernels["error"]))
    model = row.get("model") if isinstance(row.get("model"), dict) else {}
    if model:
        notes.append("model %s" % format_model(row))
        for v in model.get("verdicts") or []:
            if v.get("status") != "qualified":
                notes.append("backend %s %s %s on %s: %s" % (v.get("family"), v.get("backend"), v.get("status"),
                                                             v.get("gpu"), one_line(v.get("reason"), 240)))
        for c in model.get("not_passed") or []:
            notes.append("model check %s %s on %s: %s" % (c.get("check"), c.get("status"), _kernel_device(c.get("device")),
                                                          one_line(c.get("reason"), 240)))
        if model.get("error"):
            notes.append("model checks error: %s" % one_line(model["error"]))
        if model.get("flags_check"):
            notes.append("serving flags %s" % one_line(model["flags_check"], 240))
        for gpu, backend in sorted((model.get("sglang_auto") or {}).items()):
            notes.append("sglang auto would run moe_runner %s on %s (%s)"
                         % (backend, gpu, one_line(model.get("sglang_auto_how"), 240)))
    use = row.get("gpu_use") or {}
    for s in use.get("skipped") or []:
        where = "GPU %s" % s.get("gpu") if isinstance(s.get("gpu"), int) else "numeric checks"
        notes.append("%s skipped: %s" % (where, one_line(s.get("reason"), 240)))
    proof = row.get("proof") or {}
    for d in proof.get("devices") or []:
        if d.get("age_hours") is not None and d.get("proven_at"):
            notes.append("%s last proven %s (%s checks)" % (d.get("label"), d.get("proven_at"), len(d.get("checks") or [])))
    if proof.get("error"):
        notes.append("proof record: %s" % one_line(proof["error"]))
    serving = row.get("serving") or {}
    for action in serving.get("actions") or []:
        notes.append("hook %s" % one_line(action, 240))
    if serving.get("carried"):
        notes.append("still drained by gpufleet since an earlier run: %s" % one_line(serving.get("reason"), 240))
    if serving.get("error"):
        notes.append("hook error: %s" % one_line(serving["error"]))
    return notes


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
        out.append(fmt % (cells[:-1] + (one_line(cells[-1], widths[-1]),)))
    counts = ", ".join("%d %s" % (n, s) for s, n in sorted(report["counts"].items(), key=lambda kv: STATUS_ORDER.get(kv[0], 0)))
    out.append("%d hosts: %s" % (report["total"], counts or "none"))
    return "\n".join(out)


def summary_line(report):
    """``3 hosts: 1 failed, 2 ok`` (worst first)."""
    counts = report["counts"]
    return "%d hosts: %s" % (report["total"], ", ".join(
        "%d %s" % (counts[k], k) for k in sorted(counts, key=lambda k: STATUS_ORDER.get(k, 0))))
