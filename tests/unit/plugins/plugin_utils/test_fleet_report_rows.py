# -*- coding: utf-8 -*-
"""Fleet report (plugin_utils report): rows, drift, ordering, freeze diff, renderings."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os

from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import format as fmt
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import freeze as report_freeze
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import rows as report_rows
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import store
from ansible_collections.gpufleet.inference.tests.unit.plugins.plugin_utils.fleet_report_cases import (
    HEALTHY,
    NOW,
    health_entry,
    ok_entry,
    run,
)


def test_ok_row_has_the_columns():
    report = store.build_report(run("verify", gpu1=ok_entry()), now=NOW)
    row = report["hosts"][0]
    assert row["status"] == "ok"
    assert row["gpu_summary"] == "8x NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert row["driver_version"] == "590.48.01"
    assert row["cuda_version"] == "13.0"
    assert row["torch_version"] == "2.12.0.dev20260307+cu130"
    assert row["flashinfer_version"] == "0.6.4"
    assert row["smoke_tflops"] == [{"device": 0, "bfloat16": 301.5, "float16": 310.25}]
    assert report["healthy"] is True
    assert report["generated"] == "2026-03-08T12:00:00Z"


def test_failing_hosts_come_first_with_their_expectation_diff():
    bad = dict(ok_entry(), status="failed", stage="verify",
               mismatches=["device_count: expected 8, found 7", "torch_version: expected 2.12.0, found 2.13.0"])
    report = store.build_report(run("verify", a=ok_entry(), b=bad, c=None, d={"status": "running", "stage": "torch"}), now=NOW)
    order = [(r["host"], r["status"]) for r in report["hosts"]]
    assert order == [("b", "failed"), ("d", "unreachable"), ("c", "not_run"), ("a", "ok")]
    failed = report["hosts"][0]
    assert failed["expectation_failures"] == [
        {"name": "device_count", "expected": "8", "found": "7"},
        {"name": "torch_version", "expected": "2.12.0", "found": "2.13.0"}]
    assert "device_count: expected 8, found 7" in failed["drift"]
    assert "torch" in report["hosts"][1]["message"]
    assert report["healthy"] is False


def test_verify_flags_a_version_change_since_the_previous_run():
    first = store.build_report(run("deploy", a=ok_entry(), b=ok_entry()), now=NOW)
    second = store.build_report(run("verify", a=ok_entry(), b=ok_entry(torch="2.12.0.dev20260308+cu130")), previous=first, now=NOW)
    rows = {r["host"]: r for r in second["hosts"]}
    assert rows["a"]["status"] == "ok"
    assert rows["b"]["status"] == "drift"
    assert {"name": "torch", "old": "2.12.0.dev20260307+cu130", "new": "2.12.0.dev20260308+cu130"} in rows["b"]["changes"]
    assert second["hosts"][0]["host"] == "b"


def test_deploy_changes_are_not_drift():
    first = store.build_report(run("deploy", a=ok_entry()), now=NOW)
    second = store.build_report(run("deploy", a=ok_entry(torch="2.12.0.dev20260308+cu130")), previous=first, now=NOW)
    row = second["hosts"][0]
    assert row["status"] == "ok" and row["changes"] and not row["drift"]


def test_freeze_diff_against_the_recorded_freeze(tmp_path):
    freezes = tmp_path / "freezes" / "a"
    freezes.mkdir(parents=True)
    (freezes / "ml-env-abc.txt").write_text("# uv pip freeze\ntorch==2.12.0.dev20260307+cu130\nflashinfer-python==0.6.4\nnumpy==2.3.0\n")
    entry = ok_entry(packages={"torch": "2.12.0.dev20260307+cu130", "flashinfer_python": "0.6.3", "extra": "1"})
    report = store.build_report(run("verify", a=entry), freeze_dir=str(tmp_path / "freezes"), now=NOW)
    row = report["hosts"][0]
    assert row["status"] == "drift"
    assert row["freeze_diff"] == [
        {"name": "extra", "old": None, "new": "1"},
        {"name": "flashinfer-python", "old": "0.6.4", "new": "0.6.3"},
        {"name": "numpy", "old": "2.3.0", "new": None}]
    assert "freeze flashinfer-python: 0.6.4 -> 0.6.3" in row["drift"]


def test_the_freeze_is_read_with_the_collections_freeze_parser(tmp_path):
    # the freeze as pip or uv may write it: === pins, a direct reference, an editable, extras, comments
    freezes = tmp_path / "freezes" / "a"
    freezes.mkdir(parents=True)
    (freezes / "ml-env-abc.freeze.txt").write_text(
        "torch==2.12.0.dev20260307+cu130  # pinned\n"
        "Flashinfer_Python===0.6.4\n"
        "sgl-kernel @ file:///w/sgl_kernel-0.3.0-cp310-abi3-linux_x86_64.whl\n"
        "-e /src/tool\n"
        "numpy[extra]==2.3.0 ; python_version >= '3.10'\n")
    packages = {"torch": "2.12.0.dev20260307+cu130", "flashinfer-python": "0.6.4", "numpy": "2.3.0"}
    row = store.build_report(run("verify", a=ok_entry(packages=packages)), freeze_dir=str(tmp_path / "freezes"),
                             now=NOW)["hosts"][0]
    # the direct reference is left out of the freeze as it is of the host's packages: no "sgl-kernel absent" drift
    assert row["freeze"] == "freezes/a/ml-env-abc.freeze.txt"
    assert row["freeze_diff"] == [] and row["status"] == "ok"
    # a freeze that still names the torch of yesterday is drift, version for version
    (freezes / "ml-env-abc.freeze.txt").write_text("torch===2.12.0.dev20260306+cu130\n")
    row = store.build_report(run("verify", a=ok_entry(packages={"torch": "2.12.0.dev20260307+cu130"})),
                             freeze_dir=str(tmp_path / "freezes"), now=NOW)["hosts"][0]
    assert row["freeze_diff"] == [{"name": "torch", "old": "2.12.0.dev20260306+cu130", "new": "2.12.0.dev20260307+cu130"}]
    assert "freeze torch: 2.12.0.dev20260306+cu130 -> 2.12.0.dev20260307+cu130" in row["drift"]


def test_unreachable_host_keeps_its_last_known_stack():
    first = store.build_report(run("deploy", a=ok_entry()), now=NOW)
    second = store.build_report(run("verify", a={"status": "unreachable", "message": "ssh: connect refused"}), previous=first, now=NOW)
    row = second["hosts"][0]
    assert row["status"] == "unreachable" and row["torch_version"] == "2.12.0.dev20260307+cu130"
    assert row["drift"] == ["unreachable"]


def test_digest_ignores_the_time_but_not_the_state():
    a = store.build_report(run("deploy", a=ok_entry()), now=NOW)
    b = store.build_report(run("deploy", a=ok_entry()), previous=a, now=NOW + datetime.timedelta(hours=1))
    c = store.build_report(run("deploy", a=ok_entry(torch="2.13.0")), previous=a, now=NOW)
    assert a["digest"] == b["digest"] != c["digest"]


def test_renderings_escape_and_contain_every_host(tmp_path):
    bad = dict(ok_entry(), status="failed", stage="verify", message="<script>x</script> | pipe")
    report = store.build_report(run("verify", a=ok_entry(), b=bad), now=NOW)
    paths = store.write_report(report, str(tmp_path))
    with open(paths["html"], encoding="utf-8") as fh:
        html = fh.read()
    with open(paths["md"], encoding="utf-8") as fh:
        md = fh.read()
    assert "<script>x" not in html and "&lt;script&gt;" in html
    assert 'id="host-a"' in html and 'id="host-b"' in html
    assert "| b | **failed** |" in md and "\\| pipe" in md
    with open(paths["json"], encoding="utf-8") as fh:
        assert json.load(fh)["hosts"][0]["host"] == "b"
    assert len(os.listdir(tmp_path / "history")) == 1


def kernel(check, device=0, status="ok", reason=None, tflops=None, compiled=None, compile_seconds=None):
    return {"check": check, "set": check.split(".", 1)[0], "device": device, "device_name": "NVIDIA H200",
            "status": status, "reason": reason, "relative_error": 0.001 if status == "ok" else None,
            "tolerance": 0.008, "nonfinite": 0, "sizes": [1, 16, 128, 1024], "failed_sizes": [],
            "seconds": 0.004, "compiled": compiled, "compile_seconds": compile_seconds, "tflops": tflops}


def kernel_entry(kernels, kernels_error=None, conflicts=None, gpus=8):
    entry = ok_entry(gpus=gpus)
    entry["torch"] = dict(entry["torch"], kernels=kernels, kernels_error=kernels_error)
    if conflicts is not None:
        entry["torch"]["requirement_conflicts"] = conflicts
    return entry


KERNELS = [
    kernel("torch.fp8_scaled_mm", 0, tflops=1384.2),
    kernel("torch.fp8_scaled_mm", 1, tflops=1370.04),
    kernel("torch.nvfp4_scaled_mm", 0, tflops=2901.5),
    kernel("torch.nvfp4_scaled_mm", 1, status="skipped", reason="op not in this version", tflops=2000.0),
    kernel("sgl_kernel.skipme", 0, status="skipped", reason="op not in this version"),
    kernel("sgl_kernel.skipme", 1, status="skipped", reason="op not in this version"),
    kernel("sgl_kernel.rmsnorm", 0),
    kernel("sgl_kernel.rmsnorm", 1, status="failed", reason="relative error 0.41 > tolerance 0.008 at M=128, 1024"),
    kernel("flashinfer.mm_fp4.cutlass", 0, compiled=True, compile_seconds=39.1),
    kernel("flashinfer.mm_fp4.cutlass", 1, status="failed", reason="<script>alert(1)</script>",
           compiled=True, compile_seconds=0.25),
    kernel("flashinfer.rmsnorm", 0, compiled=False, compile_seconds=None),
]


def test_kernel_summary_counts_and_failed_names_first():
    row = store.build_report(run("verify", a=kernel_entry(KERNELS)), now=NOW)["hosts"][0]
    k = row["kernels"]
    assert (k["ran"], k["total"], k["passed"], k["failed"], k["skipped"]) == (True, 11, 6, 2, 3)
    assert k["failed_checks"] == ["sgl_kernel.rmsnorm", "flashinfer.mm_fp4.cutlass"]
    assert k["skipped_checks"] == ["torch.nvfp4_scaled_mm", "sgl_kernel.skipme"]
    assert k["summary"] == "6 ok, 2 failed (sgl_kernel.rmsnorm, flashinfer.mm_fp4.cutlass), 3 skipped"
    # Failed first, then skipped; same check+reason on several devices is one problem.
    assert [(p["status"], p["check"], p["devices"]) for p in k["problems"]] == [
        ("failed", "sgl_kernel.rmsnorm", [1]),
        ("failed", "flashinfer.mm_fp4.cutlass", [1]),
        ("skipped", "torch.nvfp4_scaled_mm", [1]),
        ("skipped", "sgl_kernel.skipme", [0, 1])]
    assert k["problems"][0]["reason"] == "relative error 0.41 > tolerance 0.008 at M=128, 1024"
    assert k["problems"][3]["reason"] == "op not in this version"
    assert k["compiled"] == ["flashinfer.mm_fp4.cutlass"] and k["compile_seconds"] == 39.35
    assert k["error"] is None
    assert row["requirement_conflicts"] == []


def test_fp8_and_fp4_tflops_per_device_only_when_ok():
    row = store.build_report(run("verify", a=kernel_entry(KERNELS)), now=NOW)["hosts"][0]
    assert row["smoke_tflops"] == [
        {"device": 0, "bfloat16": 301.5, "float16": 310.25, "fp8": 1384.2, "fp4": 2901.5},
        {"device": 1, "fp8": 1370.04}]  # fp4 on gpu1 was skipped: its tflops are not shown
    assert fmt.format_tflops(row["smoke_tflops"]) == (
        "gpu0: bfloat16 301.5, float16 310.2, fp8 1384.2, fp4 2901.5; gpu1: fp8 1370.0")
    # A failed GEMM check's figure is left out too, and CPU runs are labelled as such.
    smoke = store.build_report(run("verify", a=kernel_entry([
        kernel("torch.fp8_scaled_mm", 0, status="failed", reason="nan", tflops=9.0),
        kernel("torch.fp8_scaled_mm", "cpu", tflops=0.5)])), now=NOW)["hosts"][0]["smoke_tflops"]
    assert smoke == [{"device": 0, "bfloat16": 301.5, "float16": 310.25}, {"device": "cpu", "fp8": 0.5}]
    assert fmt.format_tflops(smoke).endswith("; cpu: fp8 0.5")


def test_kernel_column_and_details_in_renderings(tmp_path):
    conflicts = ["torchvision 0.24.1 requires torch==2.9.1, installed torch is 2.11.0+cu130"]
    report = store.build_report(run("verify", a=kernel_entry(KERNELS, conflicts=conflicts), b=ok_entry()), now=NOW)
    rows = {r["host"]: r for r in report["hosts"]}
    assert rows["a"]["requirement_conflicts"] == conflicts
    assert rows["b"]["kernels"]["ran"] is False and rows["b"]["kernels"]["summary"] == "not run"
    paths = store.write_report(report, str(tmp_path))
    with open(paths["html"], encoding="utf-8") as fh:
        html = fh.read()
    with open(paths["md"], encoding="utf-8") as fh:
        md = fh.read()
    with open(paths["json"], encoding="utf-8") as fh:
        data = {r["host"]: r for r in json.load(fh)["hosts"]}
    summary = "6 ok, 2 failed (sgl_kernel.rmsnorm, flashinfer.mm_fp4.cutlass), 3 skipped"
    # The reason with markup is escaped in HTML, kept verbatim in JSON.
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert data["a"]["kernels"]["problems"][1]["reason"] == "<script>alert(1)</script>"
    assert data["a"]["requirement_conflicts"] == conflicts
    assert data["a"]["kernels"]["compiled"] == ["flashinfer.mm_fp4.cutlass"]
    assert "<td>%s</td>" % summary in html and "<td>not run</td>" in html
    assert "kernel sgl_kernel.rmsnorm failed on gpu1: relative error 0.41" in html
    assert "kernel sgl_kernel.skipme skipped on gpu0, gpu1: op not in this version" in html
    assert "JIT compiled during the checks: flashinfer.mm_fp4.cutlass (39.4 s in all)" in html
    assert "torchvision 0.24.1 requires torch==2.9.1" in html
    assert "| kernels |" in md and "| %s |" % summary in md and "| not run |" in md
    assert "fp8 1384.2, fp4 2901.5" in md
    # The ok host with a failing kernel, a compile and a conflict gets its own section; the plain one does not.
    assert "## a: ok" in md and "## b:" not in md
    assert "- kernel sgl_kernel.rmsnorm failed on gpu1: relative error 0.41 > tolerance 0.008 at M=128, 1024" in md
    assert "- JIT compiled during the checks: flashinfer.mm_fp4.cutlass (39.4 s in all)" in md
    assert "- requirement conflict: torchvision 0.24.1 requires torch==2.9.1, installed torch is 2.11.0+cu130" in md


def test_kernels_not_run_and_error():
    report = store.build_report(run("verify", a=kernel_entry([], kernels_error="ImportError: no sgl_kernel"),
                                    b=None, c={"status": "unreachable"}), now=NOW)
    rows = {r["host"]: r for r in report["hosts"]}
    assert rows["a"]["kernels"]["summary"] == "not run: ImportError: no sgl_kernel"
    assert rows["a"]["kernels"]["error"] == "ImportError: no sgl_kernel"
    for host in ("b", "c"):
        assert rows[host]["kernels"]["summary"] == "not run" and rows[host]["kernels"]["total"] == 0
    md = fmt.render(report, "md")
    assert "- kernel checks error: ImportError: no sgl_kernel" in md
    # Only skipped checks on an ok host: no section of its own, the column still counts them.
    skipped = store.build_report(run("verify", a=kernel_entry([kernel("torch.nvfp4_scaled_mm", 0, status="skipped",
                                                                      reason="needs sm_100")])), now=NOW)
    md = fmt.render(skipped, "md")
    assert "| 0 ok, 1 skipped |" in md and "## a:" not in md
    assert "torch.nvfp4_scaled_mm skipped on gpu0: needs sm_100" in fmt.render(skipped, "html")


def test_old_reports_without_kernel_keys_still_render(tmp_path):
    report = store.build_report(run("verify", a=ok_entry(), b=dict(ok_entry(), status="failed", message="x")), now=NOW)
    for r in report["hosts"]:
        del r["kernels"], r["requirement_conflicts"]
    md, html = fmt.render(report, "md"), fmt.render(report, "html")
    assert "| not run |" in md and "<td>not run</td>" in html
    # An old baseline does not trip the new run: the rows compare as before.
    second = store.build_report(run("verify", a=kernel_entry(KERNELS), b=ok_entry()), previous=report, now=NOW)
    assert {r["host"]: r["status"] for r in second["hosts"]} == {"a": "ok", "b": "ok"}


def test_sgl_kernel_targets_from_the_arch_audit_are_shown(tmp_path):
    entry = dict(ok_entry(), sgl_kernel_abi_key="0123456789abcdef0123", sgl_kernel_targets=["sm_120a"])
    report = store.build_report(run("verify", a=entry, b=ok_entry()), now=NOW)
    rows = {r["host"]: r for r in report["hosts"]}
    assert rows["a"]["sgl_kernel_targets"] == ["sm_120a"] and rows["b"]["sgl_kernel_targets"] == []
    paths = store.write_report(report, str(tmp_path))
    with open(paths["md"], encoding="utf-8") as fh:
        assert "| 0123456789abcdef (sm_120a) |" in fh.read()
    with open(paths["html"], encoding="utf-8") as fh:
        assert "<br>sm_120a</td>" in fh.read()


def _with_allreduce(busbw, status="ok", reason=None, gpus=8):
    entry = ok_entry(gpus=gpus)
    entry["torch"]["collectives"] = {
        "status": status, "reason": reason, "backend": "nccl", "world_size": gpus, "correct": status == "ok",
        "results": [] if busbw is None else [{"size_mib": 16, "busbw_gbps": busbw / 2}, {"size_mib": 64, "busbw_gbps": busbw}],
    }
    return entry


def test_allreduce_figures_per_host_and_the_slow_host_is_flagged():
    report = store.build_report(run("verify", a=_with_allreduce(40.0), b=_with_allreduce(41.0), c=_with_allreduce(39.0),
                                    d=_with_allreduce(24.0)), now=NOW)
    rows = {r["host"]: r for r in report["hosts"]}
    assert [r["host"] for r in report["hosts"]] == ["d", "a", "b", "c"]  # drift sorts first
    assert rows["d"]["status"] == "drift"
    assert rows["d"]["allreduce"]["outlier"] == {"ratio": 0.608, "median_gbps": 39.5, "siblings": 4}
    assert rows["d"]["drift"] == ["all-reduce busbw 24.0 GB/s at 64 MiB is 0.61 of the median 39.5 GB/s of 4 hosts "
                                  "with 8x NVIDIA RTX PRO 6000 Blackwell Server Edition"]
    for name in "abc":
        assert rows[name]["status"] == "ok" and rows[name]["allreduce"]["outlier"] is None
    assert fmt.format_allreduce(rows["a"]) == "ok 40.0 GB/s at 64 MiB, 8 ranks"
    assert fmt.format_allreduce(rows["d"]) == "ok 24.0 GB/s at 64 MiB, 8 ranks (outlier: 0.61 of the median)"
    md = fmt.render(report, "md")
    assert "| all-reduce |" in md and "ok 24.0 GB/s at 64 MiB, 8 ranks (outlier: 0.61 of the median)" in md
    assert "<th>all-reduce</th>" in fmt.render(report, "html")


def test_allreduce_outliers_compare_like_with_like_and_follow_the_ratio():
    # a 4-GPU host is not compared with 8-GPU hosts; one host alone has no siblings
    report = store.build_report(run("verify", a=_with_allreduce(40.0), b=_with_allreduce(40.0),
                                    c=_with_allreduce(10.0, gpus=4)), now=NOW)
    assert all(r["status"] == "ok" for r in report["hosts"])
    # 35 of a median of 38.5 is 0.91: flagged only where the ratio asks for more
    hosts = dict(a=_with_allreduce(40.0), b=_with_allreduce(38.5), c=_with_allreduce(35.0))
    assert all(r["status"] == "ok" for r in store.build_report(run("verify", **hosts), now=NOW)["hosts"])
    strict = dict(run("verify", **hosts), outlier_ratio=0.95)
    assert [r["host"] for r in store.build_report(strict, now=NOW)["hosts"] if r["status"] == "drift"] == ["c"]


def test_allreduce_skips_and_failures_are_shown_and_not_medians():
    report = store.build_report(run("verify", a=_with_allreduce(40.0), b=_with_allreduce(None, "skipped", "1 GPU", gpus=8),
                                    c=_with_allreduce(4.0, "failed", "expected the exact sum on every rank, found ...")), now=NOW)
    rows = {r["host"]: r for r in report["hosts"]}
    assert fmt.format_allreduce(rows["b"]) == "skipped: 1 GPU"
    assert fmt.format_allreduce(rows["c"]) == "failed: expected the exact sum on every rank, found ..."
    # the failed one is not a sibling: a alone has nothing to be compared with
    assert rows["a"]["allreduce"]["outlier"] is None
    assert fmt.format_allreduce({"allreduce": None}) == "-"


def test_a_slow_gpu_is_an_outlier_against_the_fleet_median_of_its_model():
    hosts = {"h%02d" % i: health_entry() for i in range(4)}
    hosts["h02"] = health_entry(slow={5: 240.0})
    report = store.build_report(run("verify", **hosts), now=NOW)
    rows = {r["host"]: r for r in report["hosts"]}
    slow = rows["h02"]["gpus"][5]
    assert slow["ratio"] == 0.8
    assert slow["outliers"] == [{"what": "bfloat16 TFLOP/s", "value": 240.0, "median": 300.0, "ratio": 0.8, "siblings": 32}]
    assert rows["h02"]["status"] == "drift"
    assert rows["h02"]["drift"] == ["GPU 5: bfloat16 TFLOP/s 240.0 is 0.80 of the median 300 of 32 "
                                    "NVIDIA RTX PRO 6000 Blackwell Server Edition GPUs"]
    assert all(r["status"] == "ok" for name, r in rows.items() if name != "h02")
    assert rows["h00"]["gpus"][0]["ratio"] == 1.0 and rows["h00"]["gpus"][0]["outliers"] == []
    # reported, not a failed verification: the fleet still counts as healthy
    assert rows["h02"]["outliers_only"] is True and report["healthy"] is True
    # the Markdown keeps it too
    assert ("- GPU 5 (NVIDIA RTX PRO 6000 Blackwell Server Edition), 0.8 of the model median: "
            "outlier: bfloat16 TFLOP/s 240.0, 0.80 of the median 300.0") in fmt.render(report, "md")
    # a stricter inventory: 0.8 passes 0.75, and outliers can be made to fail their hosts
    assert store.build_report(dict(run("verify", **hosts), outlier_ratio=0.75), now=NOW)["hosts"][0]["status"] == "ok"
    failing = store.build_report(dict(run("verify", **hosts), outliers_fail=True), now=NOW)
    assert [(r["host"], r["status"]) for r in failing["hosts"]][0] == ("h02", "failed")
    assert failing["healthy"] is False and failing["hosts"][0]["outliers_only"] is False


def test_a_link_or_clock_unlike_its_siblings_is_an_outlier_and_marked():
    hosts = {"h%02d" % i: health_entry() for i in range(3)}
    hosts["h01"] = health_entry(health={3: {"pcie_width_current": 8}, 6: {"remapped_rows_pending": True},
                                        7: {"clocks_event_reasons": ["hw_slowdown"], "clocks_max_sm_mhz": 2100}})
    report = store.build_report(run("verify", **hosts), now=NOW)
    row = [r for r in report["hosts"] if r["host"] == "h01"][0]
    assert row["gpus"][3]["marks"] == ["PCIe x8 of x16"]
    assert row["gpus"][3]["outliers"] == [{"what": "PCIe link", "value": "Gen5 x8", "typical": "Gen5 x16", "siblings": 24}]
    assert row["gpus"][6]["marks"] == ["row remap pending"] and row["gpus"][6]["outliers"] == []
    assert row["gpus"][7]["marks"] == ["clocks held back: hw_slowdown"]
    assert row["gpus"][7]["outliers"] == [{"what": "max SM clock", "value": "2100 MHz", "typical": "2617 MHz", "siblings": 24}]
    assert row["status"] == "drift"
    assert "GPU 3: PCIe link Gen5 x8 where 23 of 24 NVIDIA RTX PRO 6000 Blackwell Server Edition GPUs have Gen5 x16" in row["drift"]


def test_outliers_need_siblings_and_models_are_not_mixed():
    # one host alone: its GPUs are compared with each other; a fleet of one GPU has nothing to compare
    alone = store.build_report(run("verify", a=health_entry(gpus=1, tflops=100.0)), now=NOW)
    assert alone["hosts"][0]["status"] == "ok" and alone["hosts"][0]["gpus"][0]["ratio"] is None
    # two models: the slower model is not an outlier of the faster one
    h200 = health_entry(gpus=2, tflops=700.0)
    for g in h200["gpu"]["gpus"]:
        g["name"] = "NVIDIA H200"
    report = store.build_report(run("verify", a=health_entry(gpus=2), b=h200), now=NOW)
    assert all(r["status"] == "ok" for r in report["hosts"])
    assert [g["ratio"] for r in report["hosts"] for g in r["gpus"]] == [1.0, 1.0, 1.0, 1.0]


def test_health_marks():
    assert report_rows.health_marks(HEALTHY) == []
    assert report_rows.health_marks(None) == []
    # a generation read at idle says nothing (the GPU may have lowered it); the width does
    idle = dict(HEALTHY, pcie_gen_current=1, pcie_width_current=8, pcie_read_under_load=None)
    assert report_rows.health_marks(idle) == ["PCIe x8 of x16"]
    assert report_rows.health_marks(dict(HEALTHY, pcie_gen_current=3, ecc_uncorrected_volatile=4, persistence_mode=False,
                                         retired_pages_pending=True, remapped_rows_failure=True,
                                         clocks_event_reasons=["sw_power_cap", "sw_thermal_slowdown"])) == [
        "PCIe Gen3 of Gen5", "4 uncorrected ECC errors", "retired pages pending", "row remap failed",
        "clocks held back: sw_thermal_slowdown", "persistence mode off"]


def test_a_failed_host_does_not_set_the_medians():
    # two healthy hosts at 300 and a failed one whose GPUs ran at 100: the median stays 300
    broken = dict(health_entry(tflops=100.0), status="failed", message="kernels: expected ... found NaN")
    report = store.build_report(run("verify", a=health_entry(), b=health_entry(slow={1: 280.0}), c=broken), now=NOW)
    rows = {r["host"]: r for r in report["hosts"]}
    assert rows["b"]["gpus"][1]["ratio"] == 0.933 and rows["b"]["status"] == "ok"
    assert rows["c"]["status"] == "failed" and all(g["outliers"] == [] for g in rows["c"]["gpus"])


def test_publish_is_changed_only_when_the_fleet_changed(tmp_path):
    hosts = dict(a=ok_entry(), b=dict(ok_entry(), status="failed", message="x: expected 1, found 2"))
    first = store.publish(run("deploy", **hosts), str(tmp_path), now=NOW)
    second = store.publish(run("deploy", **hosts), str(tmp_path), now=NOW + datetime.timedelta(hours=1))
    assert first["changed"] is True and second["changed"] is False
    assert first["failing"] == ["b"] and first["status"] == {"a": "ok", "b": "failed"}
    assert first["summary"] == "2 hosts: 1 failed, 1 ok" and first["healthy"] is False
    assert first["counts"] == {"failed": 1, "ok": 1} and first["outliers_only"] == []
    assert first["paths"]["json"] == str(tmp_path / "fleet-report.json")
    assert sorted(os.listdir(tmp_path / "history")) == ["20260308T120000Z-deploy.json", "20260308T130000Z-deploy.json"]
    third = store.publish(run("deploy", a=ok_entry(), b=ok_entry()), str(tmp_path), now=NOW)
    assert third["changed"] is True and third["healthy"] is True and third["summary"] == "2 hosts: 2 ok"


def test_publish_reads_the_freezes_under_the_report_by_default(tmp_path):
    (tmp_path / "freezes" / "a").mkdir(parents=True)
    (tmp_path / "freezes" / "a" / "ml-env-abc.freeze.txt").write_text("torch==2.0.0\n")
    out = store.publish(run("verify", a=ok_entry(packages={"torch": "2.12.0"})), str(tmp_path), now=NOW)
    assert out["status"] == {"a": "drift"} and out["failing"] == ["a"]
    # another freeze directory: that one is read instead
    other = tmp_path / "elsewhere"
    (other / "a").mkdir(parents=True)
    (other / "a" / "ml-env-abc.freeze.txt").write_text("torch==2.12.0\n")
    assert store.publish(run("verify", a=ok_entry(packages={"torch": "2.12.0"})), str(tmp_path), str(other),
                         now=NOW)["status"] == {"a": "ok"}


def test_a_baseline_fetched_before_the_freeze_rename_still_counts(tmp_path):
    # a fleet deployed by an earlier version: the baseline is <report dir>/locks/<host>/<venv>.lock.txt
    # (the venv itself holds gpufleet-lock.txt) and nothing is under freezes/ yet
    legacy = tmp_path / "locks" / "a"
    legacy.mkdir(parents=True)
    (legacy / "ml-env-abc.lock.txt").write_text("torch==2.0.0\n")
    os.utime(str(legacy / "ml-env-abc.lock.txt"), (1000, 1000))
    verify = run("verify", a=ok_entry(packages={"torch": "2.12.0"}))
    assert store.publish(verify, str(tmp_path), now=NOW)["status"] == {"a": "drift"}
    row = store.build_report(verify, freeze_dir=report_freeze.freeze_dirs(str(tmp_path)), now=NOW)["hosts"][0]
    assert row["freeze"] == "locks/a/ml-env-abc.lock.txt"
    assert row["freeze_diff"] == [{"name": "torch", "old": "2.0.0", "new": "2.12.0"}]
    assert "freeze torch: 2.0.0 -> 2.12.0" in row["drift"]
    # the fleet role names the freeze folder itself: the earlier folder is still read
    assert store.publish(verify, str(tmp_path), str(tmp_path / "freezes"), now=NOW)["status"] == {"a": "drift"}
    # a deploy of this version fetched a freeze of another venv: the active venv's own baseline still wins
    (tmp_path / "freezes" / "a").mkdir(parents=True)
    (tmp_path / "freezes" / "a" / "ml-env-new.freeze.txt").write_text("torch==2.12.0\n")
    row = store.build_report(verify, freeze_dir=report_freeze.freeze_dirs(str(tmp_path)), now=NOW)["hosts"][0]
    assert row["freeze"] == "locks/a/ml-env-abc.lock.txt" and row["status"] == "drift"
    # the same venv frozen again by this version: the newer freeze is the baseline
    (tmp_path / "freezes" / "a" / "ml-env-abc.freeze.txt").write_text("torch==2.12.0\n")
    row = store.build_report(verify, freeze_dir=report_freeze.freeze_dirs(str(tmp_path)), now=NOW)["hosts"][0]
    assert row["freeze"] == "freezes/a/ml-env-abc.freeze.txt" and row["freeze_diff"] == [] and row["status"] == "ok"


def test_the_freeze_folders_are_the_given_or_default_one_then_the_earlier_one(tmp_path):
    out = str(tmp_path)
    assert report_freeze.freeze_dirs(out) == [os.path.join(out, "freezes"), os.path.join(out, "locks")]
    assert report_freeze.freeze_dirs(out, "/srv/freezes") == ["/srv/freezes", os.path.join(out, "locks")]
    # an operator who pointed the freeze folder at the earlier one reads it once
    assert report_freeze.freeze_dirs(out, os.path.join(out, "locks")) == [os.path.join(out, "locks")]
    assert report_freeze.find_freeze([], "a") is None and report_freeze.find_freeze(str(tmp_path / "none"), "a") is None


def test_failed_drift_and_outliers_are_told_apart_and_a_failed_gpu_is_one_to_look_at(tmp_path):
    slow = health_entry(gpus=4, slow={1: 200.0})
    failed = health_entry(gpus=4)
    failed["status"] = "failed"
    failed["message"] = "1 check(s) failed: kernels: expected flashinfer.rmsnorm to match fp32 on device 2"
    failed["mismatches"] = ["device_count: expected 8, found 4"]
    failed["torch"]["kernels"] = [{"check": "flashinfer.rmsnorm", "device": 2, "device_name": "x", "status": "failed",
                                   "reason": "3 NaN/Inf of 2048 at M=128"}]
    report = store.build_report(run("verify", a=slow, b=failed, c=health_entry(gpus=4), d=health_entry(gpus=4)), now=NOW)
    rows = dict((r["host"], r) for r in report["hosts"])
    assert rows["b"]["notes"]["failed"] == ["device_count: expected 8, found 4"]
    assert rows["b"]["notes"]["outlier"] == [] and rows["b"]["notes"]["drift"] == []
    assert rows["a"]["notes"]["failed"] == [] and len(rows["a"]["notes"]["outlier"]) == 1
    assert rows["a"]["notes"]["outlier"][0].startswith("GPU 1: bfloat16 TFLOP/s 200.0 is 0.67 of the median")
    assert [g.get("failed_checks") for g in rows["b"]["gpus"]] == [None, None, ["flashinfer.rmsnorm"], None]
    paths = store.write_report(report, str(tmp_path / "r"))
    with open(paths["html"], encoding="utf-8") as fh:
        page = fh.read()
    assert "GPUs to look at (2)" in page, "the outlier and the GPU that failed a check"
    assert "failed: flashinfer.rmsnorm" in page
    assert "<th>failed</th><th>drift</th><th>outliers</th>" in page
    with open(paths["md"], encoding="utf-8") as fh:
        md = fh.read()
    assert "| failed | drift | outliers |" in md and "device_count: expected 8, found 4" in md
