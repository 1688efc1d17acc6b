# -*- coding: utf-8 -*-
"""A serving fleet in the host's record, the report and the textfile metrics: busy GPUs, the proof's age, the hooks."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import format as fmt
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import store
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import textfile
from ansible_collections.gpufleet.inference.plugins.plugin_utils.fleet_record import fleet_record
from ansible_collections.gpufleet.inference.tests.unit.plugins.plugin_utils.fleet_report_cases import (
    NOW,
    metric_samples as _samples,
    ok_entry,
    run,
)

REASON = "busy (pid 4242 python3 -m sglang.launch_server, 86.1 GiB)"
PROCESS = {"pid": 4242, "process_name": "python3", "used_memory_mib": 88166, "command": "python3 -m sglang.launch_server"}
VERIFIED = {"passed": True, "fail_message": "", "target": "/home/deploy/ml-env-abc", "active_venv": "/home/deploy/ml-env-abc",
            "mismatches": [], "host_unreachable": False, "gpu": {}, "torch": {}}


def busy_entry(gpus=2, busy=(1,), proof_summary="kernels last proven 3.2 h ago under this stack", oldest=3.2, never=()):
    """A verified host (auto) whose GPUs in busy were skipped."""
    entry = ok_entry(gpus=gpus)
    for g in entry["gpu"]["gpus"]:
        g["busy"] = g["index"] in busy
        g["busy_reason"] = REASON if g["index"] in busy else None
        g["processes"] = [PROCESS] if g["index"] in busy else []
        g["usage"] = {"memory_used_mib": 88166 if g["index"] in busy else 1, "utilization_pct": 97 if g["index"] in busy else 0}
    entry["gpu_use"] = {"requested": "auto", "numeric": True, "skipped": [{"gpu": i, "reason": REASON} for i in busy],
                        "collectives_skip": "GPU 1 busy" if busy else None}
    entry["proof"] = {"summary": proof_summary, "oldest_age_hours": oldest, "never": list(never),
                      "devices": [{"label": "GPU %d" % i, "proven_at": "2026-12-03T12:00:00Z" if not never else None,
                                   "age_hours": oldest, "checks": ["smoke.bfloat16"]} for i in range(gpus)]}
    return entry


def test_a_busy_refusal_is_its_own_status_never_a_failed_gpu():
    verify = dict(VERIFIED, passed=False, busy_refused=True,
                  fail_message="verification of x failed: full verification refused before any CUDA work: GPU 0 " + REASON)
    rec = fleet_record({"verify_result": verify}, "ok", None, "verify")
    assert (rec["status"], rec["stage"]) == ("busy", "verify")
    row = store.build_report(run("verify", gpu01=rec), now=NOW)["hosts"][0]
    assert row["status"] == "busy" and row["expectation_failures"] == []
    assert row["drift"] == ["busy: " + rec["message"]]
    finish = store.finish_entry(row)
    # not a pass: the host is failed at the end, with the processes named
    assert finish["fail"] and "pid 4242" in finish["msg"] and finish["msg"].startswith("gpu01: busy in verify")


def test_a_failed_hook_fails_the_host_at_stage_serving_even_after_a_pass():
    serving = {"drained": True, "returned": False, "reason": "gpufleet: full verification", "error":
               "the return hook failed (rc 1): slurm_update error: Invalid user id", "actions": ["drain", "return failed"],
               "drained_before": False}
    rec = fleet_record({"verify_result": VERIFIED, "fleet_serving": serving}, "ok", None, "verify")
    assert (rec["status"], rec["stage"]) == ("failed", "serving")
    assert rec["message"] == serving["error"]
    assert "drained_before" not in rec["serving"] and rec["serving"]["actions"] == ["drain", "return failed"]


def test_a_drain_that_worked_keeps_the_verifications_outcome():
    serving = {"drained": True, "returned": False, "reason": "gpufleet: torch_version: expected 1, found 2", "error": "",
               "actions": ["drain: gpufleet: torch_version: expected 1, found 2"], "drained_before": False}
    failed = dict(VERIFIED, passed=False, fail_message="verification of x failed: torch_version: expected 1, found 2")
    rec = fleet_record({"verify_result": failed, "fleet_serving": serving}, "ok", None, "verify")
    assert (rec["status"], rec["stage"]) == ("failed", "verify")
    assert rec["serving"]["drained"] and rec["serving"]["reason"].startswith("gpufleet: torch_version")


def test_skipped_busy_gpus_and_the_proofs_age_are_in_the_row_and_the_renderings(tmp_path):
    report = store.build_report(run("verify", gpu01=busy_entry()), now=NOW)
    row = report["hosts"][0]
    assert row["status"] == "ok"  # a skip is not a failure
    assert [g["busy"] for g in row["gpus"]] == [None, REASON]
    assert [g["skipped"] for g in row["gpus"]] == [None, REASON]
    assert row["gpus"][1]["processes"][0]["pid"] == 4242
    cell = fmt.format_kernels(row)
    assert cell.endswith("GPU 1 skipped (busy); kernels last proven 3.2 h ago under this stack"), cell
    notes = fmt.kernel_notes(row)
    assert "GPU 1 skipped: " + REASON in notes
    assert fmt.has_notes(row)
    paths = store.write_report(report, str(tmp_path))
    markdown = open(paths["md"], encoding="utf-8").read()
    html = open(paths["html"], encoding="utf-8").read()
    assert "GPU 1 skipped (busy)" in markdown and "- GPU 1 skipped: " + REASON in markdown
    assert "kernels last proven 3.2 h ago under this stack" in html


def test_a_drain_from_an_earlier_run_stands_until_a_hook_returns_it():
    serving = {"drained": True, "returned": False, "reason": "gpufleet: x", "actions": ["drain: gpufleet: x"]}
    previous = store.build_report(run("verify", gpu01=dict(ok_entry(), status="failed", message="x", serving=serving)),
                                  now=NOW)
    # no hook ran this time (the host was unreachable, or the hooks were left out): the drain still stands
    row = store.build_report(run("verify", gpu01=ok_entry()), previous=previous, now=NOW)["hosts"][0]
    assert row["serving"]["drained"] and row["serving"]["carried"] and row["serving"]["actions"] == []
    assert "still drained by gpufleet since an earlier run: gpufleet: x" in fmt.kernel_notes(row)
    # a hook that returned it ends it
    back = dict(ok_entry(), serving={"drained": False, "returned": True, "reason": "", "actions": ["return"]})
    row = store.build_report(run("verify", gpu01=back), previous=previous, now=NOW)["hosts"][0]
    assert not row["serving"]["drained"] and row["serving"]["returned"] and "carried" not in row["serving"]


def test_the_metrics_say_busy_gpus_the_proofs_age_and_the_busy_status():
    busy = fleet_record({"verify_result": dict(VERIFIED, passed=False, busy_refused=True, fail_message="refused")}, "ok")
    never = busy_entry(busy=(), never=("GPU 0",), oldest=None, proof_summary="never proven")
    report = store.build_report(run("verify", gpu01=busy_entry(), gpu02=never, gpu03=busy), now=NOW)
    samples = _samples(textfile.render(report))
    busy_gpus = dict(((labels["host"], labels["gpu"]), value) for labels, value in samples["gpufleet_gpu_busy"])
    assert busy_gpus == {("gpu01", "0"): 0, ("gpu01", "1"): 1, ("gpu02", "0"): 0, ("gpu02", "1"): 0}
    age = dict((labels["host"], value) for labels, value in samples["gpufleet_host_kernel_proof_age_seconds"])
    assert age == {"gpu01": 3.2 * 3600}  # gpu02 has a GPU never proven: no age, a count instead
    missing = dict((labels["host"], value) for labels, value in samples["gpufleet_host_kernel_proof_missing"])
    assert missing == {"gpu01": 0, "gpu02": 1}
    status = dict(((labels["host"], labels["status"]), value) for labels, value in samples["gpufleet_host_status"])
    assert status[("gpu03", "busy")] == 1 and status[("gpu03", "failed")] == 0
