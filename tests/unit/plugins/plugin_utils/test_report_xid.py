# -*- coding: utf-8 -*-
"""Xid errors in the fleet report: counted since the cursor the host's
previous row left, shown as GPU marks, failing the host under
no_xid_since_last_run, and exported as metrics that parse back."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import store
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import textfile
from ansible_collections.gpufleet.inference.tests.unit.plugins.plugin_utils.fleet_report_cases import (
    NOW,
    metric_samples as _samples,
    health_entry,
    run,
)

BOOT = "1b629215-6ec9-4d26-818d-c812f7799105"


def _event(code, gpu, mono, boot=BOOT):
    return {"code": code, "gpu": gpu, "uuid": "GPU-%d" % gpu if gpu is not None else None, "pci": "0000:18:00",
            "pid": None, "process": None, "text": "x", "meaning": "m", "boot_id": boot, "monotonic_us": mono,
            "time": 1772971000.0}


def _entry(events, expect=None, read_us=1000, error=None, source="dmesg"):
    entry = health_entry(gpus=2)
    entry["gpu"]["xid"] = {"source": source, "error": error, "boot_id": BOOT, "read_monotonic_us": read_us,
                           "count": len(events), "events": events, "cursor": None}
    entry["gpu"]["xid_expect"] = expect or {}
    return entry


def _row(report, host="gpu01"):
    return [r for r in report["hosts"] if r["host"] == host][0]


def test_first_run_counts_the_boot_and_leaves_a_cursor_for_the_next():
    report = store.build_report(run("verify", gpu01=_entry([_event(79, 1, 500), _event(13, 0, 600)])), now=NOW)
    row = _row(report)
    assert row["status"] == "ok"  # no expectation: counted and shown, never a failure
    assert row["xid"]["since"] == "boot" and row["xid"]["new_count"] == 2
    assert row["xid"]["cursor"] == {"boot_id": BOOT, "monotonic_us": 1000}
    assert row["gpus"][1]["xid"] == {"79": 1}
    assert "Xid 79 (GPU has fallen off the bus) since the last run" in row["gpus"][1]["marks"]
    samples = _samples(textfile.render(report))
    per_gpu = dict((lab["gpu"], v) for lab, v in samples["gpufleet_gpu_xid_errors_since_last_run"])
    assert per_gpu == {"0": 1, "1": 1}
    codes = dict(((lab["gpu"], lab["xid"]), v) for lab, v in samples["gpufleet_gpu_xid_code_errors_since_last_run"])
    assert codes == {("1", "79"): 1, ("0", "13"): 1}
    assert samples["gpufleet_host_xid_log_read"] == [({"host": "gpu01", "source": "dmesg"}, 1.0)]
    assert samples["gpufleet_host_xid_errors_since_last_run"] == [({"host": "gpu01"}, 2.0)]


def test_the_next_run_counts_only_what_came_after_and_fails_under_the_expectation():
    first = store.build_report(run("verify", gpu01=_entry([_event(79, 1, 500)])), now=NOW)
    expect = {"no_xid_since_last_run": True, "ignore_xids": [13]}
    events = [_event(79, 1, 500), _event(13, 0, 1500), _event(48, 1, 1600)]
    second = store.build_report(run("verify", gpu01=_entry(events, expect, read_us=2000)), previous=first, now=NOW)
    row = _row(second)
    assert row["xid"]["since"] == "last run"
    assert [e["code"] for e in row["xid"]["events"]] == [48] and row["xid"]["ignored"] == 1
    assert row["status"] == "failed" and row["stage"] == "verify"
    assert row["message"].startswith("no_xid_since_last_run: expected no Xid since the last run (ignoring 13), found Xid 48 on GPU 1")
    assert [f["name"] for f in row["expectation_failures"]] == ["no_xid_since_last_run"]
    assert any(n.startswith("no_xid_since_last_run: expected no Xid") for n in row["notes"]["failed"])
    assert store.finish_entry(row)["fail"]
    assert row["gpus"][1]["xid"] == {"48": 1} and "xid" not in row["gpus"][0]
    # a third run with nothing new passes
    third = store.build_report(run("verify", gpu01=_entry(events, expect, read_us=3000)), previous=second, now=NOW)
    assert _row(third)["status"] == "ok" and _row(third)["xid"]["new_count"] == 0
    samples = _samples(textfile.render(third))
    assert dict((lab["gpu"], v) for lab, v in samples["gpufleet_gpu_xid_errors_since_last_run"]) == {"0": 0, "1": 0}
    assert "gpufleet_gpu_xid_code_errors_since_last_run" not in samples


def test_a_reboot_counts_the_new_boot_from_its_start():
    first = store.build_report(run("verify", gpu01=_entry([], read_us=9000000)), now=NOW)
    rebooted = _entry([_event(79, 0, 100, boot="other-boot")])
    rebooted["gpu"]["xid"]["boot_id"] = "other-boot"
    row = _row(store.build_report(run("verify", gpu01=rebooted), previous=first, now=NOW))
    assert row["xid"]["new_count"] == 1 and row["xid"]["cursor"]["boot_id"] == "other-boot"


def test_a_log_not_read_fails_the_expectation_and_keeps_the_old_cursor():
    first = store.build_report(run("verify", gpu01=_entry([], read_us=700)), now=NOW)
    unread = _entry([], {"no_xid_since_last_run": True}, error="dmesg: read kernel buffer failed: Operation not permitted")
    report = store.build_report(run("verify", gpu01=unread), previous=first, now=NOW)
    row = _row(report)
    assert row["status"] == "failed"
    assert "found the kernel log not read: dmesg: read kernel buffer failed" in row["message"]
    assert row["xid"]["cursor"] == {"boot_id": BOOT, "monotonic_us": 700}
    samples = _samples(textfile.render(report))
    assert samples["gpufleet_host_xid_log_read"] == [({"host": "gpu01", "source": "dmesg"}, 0.0)]
    assert "gpufleet_gpu_xid_errors_since_last_run" not in samples  # not read: no count, not a zero


def test_an_unreachable_host_keeps_its_cursor_and_a_failed_one_keeps_its_message():
    first = store.build_report(run("verify", gpu01=_entry([], read_us=700)), now=NOW)
    lost = store.build_report(run("verify", gpu01=None), previous=first, now=NOW)
    assert _row(lost)["status"] in ("unreachable", "not_run")
    assert _row(lost)["xid"]["cursor"] == {"boot_id": BOOT, "monotonic_us": 700}
    failed = _entry([_event(79, 0, 900)], {"no_xid_since_last_run": True})
    failed.update(status="failed", message="torch: expected torch importable")
    row = _row(store.build_report(run("verify", gpu01=failed), previous=lost, now=NOW))
    assert row["status"] == "failed" and row["message"] == "torch: expected torch importable"
    assert [f["name"] for f in row["expectation_failures"]][-1] == "no_xid_since_last_run"
