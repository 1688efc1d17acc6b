# -*- coding: utf-8 -*-
"""The Prometheus export (plugin_utils report.textfile), read back with the official text-format parser."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import format as fmt
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import store
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import textfile
from ansible_collections.gpufleet.inference.tests.unit.plugins.plugin_utils.fleet_report_cases import (
    NOW,
    health_entry,
    run,
)


def _samples(text):
    out = {}
    for family in text_string_to_metric_families(text):
        assert family.type == "gauge", family.name
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def _fleet():
    entry = health_entry(slow={2: 240.0}, health={4: {"ecc_uncorrected_volatile": 3, "power_draw_w": None}})
    entry["torch"]["collectives"] = {"status": "ok", "world_size": 8, "correct": True,
                                     "results": [{"size_mib": 64, "busbw_gbps": 21.5}]}
    failed = {"status": "failed", "message": "torch: expected torch importable"}
    return store.build_report(run("verify", gpu01=entry, gpu02=health_entry(), gpu03=failed), now=NOW)


def test_the_fleet_file_parses_and_says_what_the_report_says():
    samples = _samples(textfile.render(_fleet()))
    status = dict(((labels["host"], labels["status"]), value) for labels, value in samples["gpufleet_host_status"])
    assert status[("gpu01", "drift")] == 1 and status[("gpu01", "ok")] == 0
    assert status[("gpu03", "failed")] == 1 and status[("gpu02", "ok")] == 1
    assert sorted(samples["gpufleet_host_healthy"], key=lambda s: s[0]["host"]) == [
        ({"host": "gpu01"}, 0), ({"host": "gpu02"}, 1), ({"host": "gpu03"}, 0)]
    assert {v for dummy, v in samples["gpufleet_host_verification_timestamp_seconds"]} == {1772971200.0}
    assert samples["gpufleet_host_allreduce_busbw_gbps"] == [({"host": "gpu01", "size_mib": "64"}, 21.5)]
    ratio = dict(((l["host"], l["gpu"]), v) for l, v in samples["gpufleet_gpu_throughput_ratio"])
    assert ratio[("gpu01", "2")] == 0.8 and ratio[("gpu02", "0")] == 1.0
    outlier = dict(((l["host"], l["gpu"]), v) for l, v in samples["gpufleet_gpu_outlier"])
    assert outlier[("gpu01", "2")] == 1 and sum(outlier.values()) == 1
    ecc = dict(((l["host"], l["gpu"]), v) for l, v in samples["gpufleet_gpu_ecc_uncorrected_volatile_errors"])
    assert ecc[("gpu01", "4")] == 3 and ecc[("gpu02", "4")] == 0
    # a value the GPU did not report is left out, not written as 0
    power = dict(((l["host"], l["gpu"]), v) for l, v in samples["gpufleet_gpu_power_draw_watts"])
    assert ("gpu01", "4") not in power and power[("gpu01", "3")] == 41.5
    tflops = [(l, v) for l, v in samples["gpufleet_gpu_tflops"] if l["host"] == "gpu01" and l["gpu"] == "2"]
    assert tflops == [({"host": "gpu01", "gpu": "2", "dtype": "bfloat16", "UUID": "GPU-5e1f0c2a-77b3-4c1e-9d0a-000000000002",
                        "pci_bus_id": "00000000:38:00.0"}, 240.0)]
    info = [l for l, v in samples["gpufleet_gpu_info"] if l["host"] == "gpu02" and l["gpu"] == "0"]
    assert info == [{"host": "gpu02", "gpu": "0", "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                     "compute_capability": "12.0", "UUID": "GPU-5e1f0c2a-77b3-4c1e-9d0a-000000000000",
                     "pci_bus_id": "00000000:18:00.0"}]
    # 16 GPUs with health, and the failed host has no GPU rows
    assert len(samples["gpufleet_gpu_pcie_link_width"]) == 16


def test_a_host_file_has_only_that_host_and_odd_names_are_escaped():
    report = _fleet()
    samples = _samples(textfile.render(report, ["gpu02"]))
    assert {labels["host"] for values in samples.values() for labels, dummy in values} == {"gpu02"}
    report["hosts"][0]["host"] = 'we"ird\\host'
    parsed = _samples(textfile.render(report, ['we"ird\\host']))
    assert {labels["host"] for values in parsed.values() for labels, dummy in values} == {'we"ird\\host'}


def test_write_report_writes_the_fleet_file_and_one_per_host(tmp_path):
    paths = store.write_report(_fleet(), str(tmp_path))
    assert paths["prom"] == str(tmp_path / "fleet-report.prom")
    assert sorted(os.listdir(paths["textfile_dir"])) == ["gpu01.prom", "gpu02.prom", "gpu03.prom"]
    text = (tmp_path / "textfile" / "gpu03.prom").read_text()
    assert _samples(text)["gpufleet_host_status"][0][0]["host"] == "gpu03"
    assert "gpufleet_gpu_" not in text  # nothing was measured on it


def _model_fleet():
    """gpu01 serves Qwen3-30B-A3B with the flag qualified; on gpu02 the backend
    made wrong on purpose failed and no other qualified."""
    good = health_entry(gpus=1)
    good["torch"]["model"] = {"name": "qwen3-30b-a3b", "tp": 1, "precision": "none", "families": ["moe_runner"],
                              "shapes": {}}
    good["torch"]["model_checks"] = [{"check": "moe.flashinfer_cutlass.bf16", "device": 0, "status": "ok"}]
    good["torch"]["backends"] = {
        "status": "selected", "flags": {"moe_runner": "flashinfer_cutlass"},
        "args": "--moe-runner-backend flashinfer_cutlass", "problems": [],
        "qualification": {"NVIDIA H200": {"moe_runner": {"flashinfer_cutlass": {"status": "qualified", "reason": None}}}}}
    bad = health_entry(gpus=1)
    bad["torch"]["model"] = dict(good["torch"]["model"])
    reason = "relative error 0.91 > tolerance 0.02 at moe, M=1"
    bad["torch"]["model_checks"] = [{"check": "moe.flashinfer_cutlass.bf16", "device": 0, "status": "failed",
                                     "reason": reason}]
    problem = "no moe_runner backend qualified on NVIDIA H200: tried flashinfer_cutlass (failed: %s)" % reason
    bad["torch"]["backends"] = {
        "status": "failed", "flags": {}, "args": "", "problems": [problem],
        "qualification": {"NVIDIA H200": {"moe_runner": {"flashinfer_cutlass": {"status": "failed", "reason": reason}}}}}
    bad["status"] = "failed"
    return store.build_report(run("verify", gpu01=good, gpu02=bad), now=NOW)


def test_the_serving_backends_in_rows_notes_and_metrics():
    report = _model_fleet()
    rows = dict((row["host"], row) for row in report["hosts"])
    assert fmt.format_model(rows["gpu01"]) == "qwen3-30b-a3b tp 1 (none): --moe-runner-backend flashinfer_cutlass"
    assert rows["gpu02"]["model"]["problems"][0].startswith("no moe_runner backend qualified on NVIDIA H200")
    notes = fmt.kernel_notes(rows["gpu02"])
    assert "backend moe_runner flashinfer_cutlass failed on NVIDIA H200: relative error 0.91 > tolerance 0.02 at moe, M=1" \
        in notes, notes
    assert any(n.startswith("model check moe.flashinfer_cutlass.bf16 failed on ") for n in notes), notes
    assert fmt.has_notes(rows["gpu02"]) and not fmt.has_notes(rows["gpu01"])
    samples = _samples(textfile.render(report))
    assert samples["gpufleet_host_serving_backend"] == [
        ({"host": "gpu01", "family": "moe_runner", "backend": "flashinfer_cutlass", "model": "qwen3-30b-a3b",
          "flag": "--moe-runner-backend"}, 1)]
    status = dict((l["host"], l["status"]) for l, v in samples["gpufleet_host_backend_status"])
    assert status == {"gpu01": "qualified", "gpu02": "failed"}


def test_stack_identity_checks_and_proof_time_parse_back():
    entry = health_entry(gpus=2)
    entry["deploy_stamp"] = {"key": "k"}  # the record carries deploy_key, not the stamp
    entry["deploy_key"] = "d3adb33fd3adb33fd3adb33f"
    entry["torch"]["kernels"] = [
        {"check": "flashinfer.rmsnorm", "device": 0, "device_name": "x", "status": "ok", "relative_error": 0.0012},
        {"check": "flashinfer.rmsnorm", "device": 1, "device_name": "x", "status": "failed", "relative_error": None,
         "reason": "3 NaN/Inf"},
        {"check": "sgl_kernel.rmsnorm", "device": "cpu", "device_name": "cpu", "status": "skipped"}]
    entry["torch"]["model_checks"] = [{"check": "model.gemm.bf16", "device": 1, "status": "ok", "relative_error": 0.004}]
    entry["proof"] = {"summary": "kernels last proven 2.0 h ago", "oldest_age_hours": 2.0, "never": [],
                      "devices": [{"label": "GPU 0", "age_hours": 2.0}]}
    report = store.build_report(run("verify", gpu01=entry), now=NOW)
    samples = _samples(textfile.render(report))
    assert samples["gpufleet_host_stack_info"] == [(
        {"host": "gpu01", "torch": "2.12.0.dev20260307+cu130", "flashinfer": "0.6.4",
         "sgl_kernel_key": "0123456789abcdef0123", "driver": "590.48.01", "deploy_key": "d3adb33fd3adb33fd3adb33f"}, 1)]
    checks = dict(((l["gpu"], l["check"]), (l["status"], l["UUID"], l["pci_bus_id"]))
                  for l, v in samples["gpufleet_gpu_kernel_check"])
    assert checks == {("0", "flashinfer.rmsnorm"): ("ok", "GPU-5e1f0c2a-77b3-4c1e-9d0a-000000000000", "00000000:18:00.0"),
                      ("1", "flashinfer.rmsnorm"): ("failed", "GPU-5e1f0c2a-77b3-4c1e-9d0a-000000000001",
                                                    "00000000:28:00.0"),
                      ("1", "model.gemm.bf16"): ("ok", "GPU-5e1f0c2a-77b3-4c1e-9d0a-000000000001", "00000000:28:00.0")}
    errors = dict(((l["gpu"], l["check"]), v) for l, v in samples["gpufleet_gpu_kernel_check_relative_error"])
    assert errors == {("0", "flashinfer.rmsnorm"): 0.0012, ("1", "model.gemm.bf16"): 0.004}  # no value: no sample
    assert samples["gpufleet_host_kernel_proof_timestamp_seconds"] == [({"host": "gpu01"}, 1772971200.0 - 7200)]
