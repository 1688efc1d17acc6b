# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet report as Prometheus text (node_exporter's textfile collector format).

One renderer for both files: the fleet's, written next to the report on the
controller, and each host's own, which the playbooks put into the host's
`gpufleet_textfile_dir` for the node_exporter already running there. Every
metric is a gauge; a value the GPU or the run did not report is left out
(Prometheus has no null), never written as 0.
"""
from __future__ import annotations

import calendar
import datetime

from ansible_collections.gpufleet.inference.plugins.module_utils import backends

PREFIX = "gpufleet_"

# name -> help; the GPU metrics take their value from gpu["health"][key].
HOST_METRICS = (
    ("host_status", "1 for the host's status in the last verification (label status)"),
    ("host_healthy", "1 when the host passed the last verification with no drift"),
    ("host_verification_timestamp_seconds", "When the last verification's report was made (Unix time)"),
    ("host_allreduce_busbw_gbps", "All-reduce bus bandwidth across the host's GPUs in GB/s, per message size"),
    ("host_allreduce_correct", "1 when every rank's all-reduce sum was exact"),
    ("host_kernel_proof_age_seconds", "Age of the oldest GPU's last numeric pass under the host's stack (absent when a GPU has none)"),
    ("host_kernel_proof_missing", "Number of GPUs never proven by a numeric pass under the host's stack"),
    ("host_stack_info", "1 per host, with the stack it runs: torch, flashinfer, the sgl-kernel key, the driver, the deploy key"),
    ("host_kernel_proof_timestamp_seconds", "When the oldest GPU's last numeric pass under the host's stack was (Unix time)"),
    ("host_serving_backend", "1 per backend family for the sglang backend the host's verification chose (label flag)"),
    ("host_backend_status", "1 for each serving backend's verdict per GPU model in the last verification (label status)"),
    ("host_xid_log_read", "1 when the last verification read the host's kernel log for Xid errors, 0 when it could not (label source)"),
    ("host_xid_errors_since_last_run", "Xid errors in the host's kernel log since its previous verification (all GPUs, ignored codes left out)"),
)
GPU_HEALTH = (
    ("gpu_pcie_link_gen", "pcie_gen_current", "PCIe generation of the link as trained"),
    ("gpu_pcie_link_gen_max", "pcie_gen_max", "Highest PCIe generation of the link"),
    ("gpu_pcie_link_width", "pcie_width_current", "PCIe link width as trained (lanes)"),
    ("gpu_pcie_link_width_max", "pcie_width_max", "Widest PCIe link width (lanes)"),
    ("gpu_ecc_enabled", "ecc_enabled", "1 when ECC is on"),
    ("gpu_ecc_uncorrected_volatile_errors", "ecc_uncorrected_volatile", "Uncorrected ECC errors since the driver loaded"),
    ("gpu_retired_pages_pending", "retired_pages_pending", "1 when a retired page waits for a reset"),
    ("gpu_remapped_rows_pending", "remapped_rows_pending", "1 when a row remap waits for a reset"),
    ("gpu_remapped_rows_failure", "remapped_rows_failure", "1 when a row remap failed"),
    ("gpu_persistence_mode", "persistence_mode", "1 when persistence mode is on"),
    ("gpu_clocks_event_reasons_active", "clocks_event_reasons_active", "Active clock event reasons (NVML bit mask)"),
    ("gpu_temperature_celsius", "temperature_c", "GPU temperature"),
    ("gpu_power_draw_watts", "power_draw_w", "Power draw"),
    ("gpu_power_limit_watts", "power_limit_w", "Power limit"),
    ("gpu_sm_clock_mhz", "clocks_sm_mhz", "SM clock"),
    ("gpu_sm_clock_max_mhz", "clocks_max_sm_mhz", "Highest SM clock"),
)
GPU_OTHER = (
    ("gpu_info", "1 per GPU, with its name and compute capability"),
    ("gpu_health_problems", "Number of health marks on the GPU (link trained down, ECC errors, pending remaps, slowdown)"),
    ("gpu_tflops", "Measured TFLOP/s of the GPU per data type (smoke test and GEMM kernel checks)"),
    ("gpu_throughput_ratio", "The GPU's lowest throughput relative to the fleet median of its model"),
    ("gpu_outlier", "1 when the GPU is an outlier among its siblings (throughput, link or clock)"),
    ("gpu_busy", "1 when another program used the GPU, so the run left its numeric checks out"),
    ("gpu_kernel_check", "1 for each kernel or model check's result on the GPU in the last verification (label status)"),
    ("gpu_kernel_check_relative_error", "Relative error of a kernel or model check on the GPU against fp32 (worst size)"),
    ("gpu_xid_errors_since_last_run", "Xid errors of the GPU in the kernel log since the host's previous verification (ignored codes left out)"),
    ("gpu_xid_code_errors_since_last_run", "Xid errors of the GPU since the host's previous verification, per Xid code (label xid)"),
)
STATUSES = ("ok", "drift", "failed", "busy", "unreachable", "not_run", "unverified")


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**labels):
    return "{%s}" % ",".join('%s="%s"' % (k, _escape(v)) for k, v in sorted(labels.items()))


def _value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def _number(value):
    return isinstance(value, (int, float))


def report_time(report):
    try:
        when = datetime.datetime.strptime(report["generated"], "%Y-%m-%dT%H:%M:%SZ")
    except (KeyError, TypeError, ValueError):
        return None
    return calendar.timegm(when.utctimetuple())


def render(report, hosts=None):
    """Prometheus text for the report's hosts (or only those named in hosts)."""
    samples = {}

    def add(name, labels, value):
        if value is None or not _number(value):
            return
        samples.setdefault(name, []).append("%s%s%s %s" % (PREFIX, name, _labels(**labels), _value(value)))

    when = report_time(report)
    for row in report.get("hosts") or []:
        host = row.get("host")
        if hosts is not None and host not in hosts:
            continue
        for status in STATUSES:
            add("host_status", {"host": host, "status": status}, 1 if row.get("status") == status else 0)
        add("host_healthy", {"host": host}, 1 if row.get("status") == "ok" else 0)
        add("host_verification_timestamp_seconds", {"host": host}, when)
        allreduce = row.get("allreduce") or {}
        for entry in allreduce.get("results") or []:
            add("host_allreduce_busbw_gbps", {"host": host, "size_mib": entry.get("size_mib")}, entry.get("busbw_gbps"))
        if allreduce.get("correct") is not None:
            add("host_allreduce_correct", {"host": host}, bool(allreduce["correct"]))
        proof = row.get("proof") or {}
        if proof.get("devices"):
            age = proof.get("oldest_age_hours")
            add("host_kernel_proof_age_seconds", {"host": host}, round(age * 3600, 1) if _number(age) else None)
            add("host_kernel_proof_missing", {"host": host}, len(proof.get("never") or []))
            if when is not None and _number(age):
                add("host_kernel_proof_timestamp_seconds", {"host": host}, round(when - age * 3600))
        if row.get("status") not in ("unreachable", "not_run"):
            add("host_stack_info", {"host": host, "torch": row.get("torch_version") or "",
                                    "flashinfer": row.get("flashinfer_version") or "",
                                    "sgl_kernel_key": row.get("sgl_kernel_abi_key") or "",
                                    "driver": row.get("driver_version") or "", "deploy_key": row.get("deploy_key") or ""}, 1)
        model = row.get("model") if isinstance(row.get("model"), dict) else {}
        flags = backends.families_of(backends.DEFAULT_SGLANG_VERSION)
        for family, backend in sorted((model.get("flags") or {}).items()):
            add("host_serving_backend", {"host": host, "family": family, "backend": backend, "model": model.get("name") or "",
                                         "flag": (flags.get(family) or {}).get("flag", family)}, 1)
        for verdict in model.get("verdicts") or []:
            add("host_backend_status", {"host": host, "gpu_name": verdict.get("gpu") or "", "family": verdict.get("family"),
                                        "backend": verdict.get("backend"), "status": verdict.get("status")}, 1)
        xid = row.get("xid") if isinstance(row.get("xid"), dict) else {}
        if xid.get("source") or (xid.get("error") and row.get("status") not in ("unreachable", "not_run")):
            add("host_xid_log_read", {"host": host, "source": xid.get("source") or ""}, bool(xid.get("read")))
        if xid.get("read"):
            add("host_xid_errors_since_last_run", {"host": host}, xid.get("new_count") or 0)
        identity = {}
        for gpu in row.get("gpus") or []:
            ids = {"host": host, "gpu": gpu.get("index")}
            # dcgm-exporter's label names, so that its series and these join on the GPU
            if gpu.get("uuid"):
                ids["UUID"] = gpu["uuid"]
            if gpu.get("pci_bus_id"):
                ids["pci_bus_id"] = gpu["pci_bus_id"]
            identity[gpu.get("index")] = ids
            add("gpu_info", dict(ids, name=gpu.get("name") or "", compute_capability=gpu.get("compute_capability") or ""), 1)
            health = gpu.get("health") or {}
            for name, key, dummy in GPU_HEALTH:
                add(name, ids, health.get(key))
            if gpu.get("health") is not None:
                add("gpu_health_problems", ids, len(gpu.get("marks") or []))
            for dtype, value in sorted((gpu.get("tflops") or {}).items()):
                add("gpu_tflops", dict(ids, dtype=dtype), value)
            add("gpu_throughput_ratio", ids, gpu.get("ratio"))
            add("gpu_outlier", ids, bool(gpu.get("outliers")))
            if "busy" in gpu:
                add("gpu_busy", ids, bool(gpu.get("busy")))
            if xid.get("read"):
                codes = gpu.get("xid") or {}
                add("gpu_xid_errors_since_last_run", ids, sum(codes.values()))
                for code, count in sorted(codes.items(), key=lambda kv: int(kv[0])):
                    add("gpu_xid_code_errors_since_last_run", dict(ids, xid=code), count)
        torch = (row.get("facts") or {}).get("torch") or {}
        for check in (torch.get("kernels") or []) + (torch.get("model_checks") or []):
            if not isinstance(check, dict) or not isinstance(check.get("device"), int):
                continue  # the CPU, or a check without a device
            ids = dict(identity.get(check["device"]) or {"host": host, "gpu": check["device"]}, check=check.get("check") or "")
            add("gpu_kernel_check", dict(ids, status=check.get("status") or ""), 1)
            add("gpu_kernel_check_relative_error", ids, check.get("relative_error"))

    helps = dict((name, text) for name, text in HOST_METRICS + GPU_OTHER)
    helps.update((name, text) for name, dummy, text in GPU_HEALTH)
    order = [name for name, dummy in HOST_METRICS] + [name for name, dummy in GPU_OTHER[:2]] + \
        [name for name, dummy, dummy2 in GPU_HEALTH] + [name for name, dummy in GPU_OTHER[2:]]
    lines = []
    for name in order:
        if name not in samples:
            continue
        lines.append("# HELP %s%s %s" % (PREFIX, name, helps[name]))
        lines.append("# TYPE %s%s gauge" % (PREFIX, name))
        lines.extend(samples[name])
    return "\n".join(lines) + "\n" if lines else ""
