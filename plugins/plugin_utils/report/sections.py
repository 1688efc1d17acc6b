# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sections of a host's row, each read from one part of the host's
registered result: torch_verify's smoke TFLOP/s (read_smoke), kernel checks
(read_kernels), served model and backends (read_model) and all-reduce
(read_allreduce); the requirement conflicts, an import's version, the adopted
hand-built venv, the verification's depth (read_gpu_use), the proof record and
the serving hooks. Also the small readers every report module shares: first,
is_number and one_line. Imports no other report module.
"""

from __future__ import annotations

# Kernel checks whose TFLOP/s go next to the smoke bf16/fp16 figures (check -> label).
KERNEL_TFLOPS = {"torch.fp8_scaled_mm": "fp8", "torch.nvfp4_scaled_mm": "fp4"}


def first(mapping, *paths):
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


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def one_line(text, limit=300):
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kernel_entries(torch):
    entries = (torch or {}).get("kernels")
    if not isinstance(entries, list):
        return []
    return [k for k in entries if isinstance(k, dict)]


def read_smoke(torch):
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
        if is_number(item.get("tflops")):
            entry[str(item.get("dtype") or "tflops")] = item["tflops"]
    for item in _kernel_entries(torch):
        label = KERNEL_TFLOPS.get(item.get("check"))
        if label is None or item.get("status") != "ok" or not is_number(item.get("tflops")):
            continue
        dev = item.get("device", 0)
        entry = by_device.setdefault(dev, {"device": dev})
        entry.setdefault(label, item["tflops"])
    return [by_device[k] for k in sorted(by_device, key=str)]


def read_model(torch):
    """The served model and its serving backends (torch_verify's model, model_checks
    and backends), or None without a model: name, tp, precision, status, flags,
    args, problems, per GPU model and family the backends' verdicts, the flags'
    check by sglang's parser and what sglang's auto would run, and the model
    checks that did not pass."""
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
        # the flags through the installed sglang's parser, and what its auto would run per GPU model
        "flags_check": backends.get("flags_check"), "sglang_auto": dict(backends.get("sglang_auto") or {}),
        "sglang_auto_how": backends.get("sglang_auto_how"),
        "checks_ok": sum(1 for c in checks if c.get("status") == "ok"),
        "not_passed": [{"check": c.get("check"), "device": c.get("device"), "status": c.get("status"),
                        "reason": c.get("reason")} for c in checks if c.get("status") != "ok"],
        "error": (torch or {}).get("model_checks_error"),
        # a request served by sglang with the flags (torch_verify served_check), None where not asked
        "served": _served(backends.get("served")),
    }


def _served(served):
    if not isinstance(served, dict):
        return None
    return {"status": served.get("status"), "reason": served.get("reason"), "args": served.get("args"),
            "excluded": list(served.get("excluded") or []), "ready_seconds": served.get("ready_seconds"),
            "tokens_per_second": served.get("tokens_per_second")}


def read_kernels(torch):
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
        if is_number(k.get("compile_seconds")):
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
            summary += "; error: " + one_line(out["error"], 120)
    else:
        summary = "not run" + (": " + one_line(out["error"], 120) if out["error"] else "")
    out["summary"] = summary
    return out


def read_allreduce(torch):
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


def read_requirement_conflicts(entry, torch):
    raw = (torch or {}).get("requirement_conflicts")
    if raw in (None, "", []):
        raw = entry.get("requirement_conflicts")
    if raw in (None, "", []):
        return []
    if isinstance(raw, str):
        raw = [raw]
    return [str(c) for c in raw if c not in (None, "")]


def import_version(torch, name):
    imports = first(torch or {}, "imports")
    if isinstance(imports, dict):
        imports = [dict(v, name=k) for k, v in imports.items() if isinstance(v, dict)]
    for item in imports or []:
        if isinstance(item, dict) and item.get("name") == name and item.get("ok", item.get("status") == "ok"):
            return item.get("version")
    return None


def read_adopted(record):
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


def read_gpu_use(use):
    use = use if isinstance(use, dict) else {}
    return {"mode": use.get("requested"), "skipped": [s for s in use.get("skipped") or [] if isinstance(s, dict)],
            "collectives_skip": use.get("collectives_skip")} if use else {}


def read_proof(proof):
    proof = proof if isinstance(proof, dict) else {}
    if not proof:
        return {}
    return {"summary": proof.get("summary"), "oldest_age_hours": proof.get("oldest_age_hours"),
            "never": proof.get("never") or [], "devices": proof.get("devices") or [], "error": proof.get("error")}


def read_serving(serving, previous_row):
    serving = dict(serving) if isinstance(serving, dict) else {}
    before = (previous_row or {}).get("serving") if isinstance(previous_row, dict) else None
    if not serving and isinstance(before, dict) and before.get("drained"):
        # no hook ran this time: the drain of an earlier run still stands
        serving = dict(before, actions=[], carried=True)
    return serving
