# -*- coding: utf-8 -*-
"""The fleet report's trend (plugin_utils report.trend): series per host, GPU and
GPU model over the kept history, the steady decline, the history that is not
there or not readable, and the sparklines."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import os
import re

import pytest

from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import format as fmt
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import store
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import trend

START = datetime.datetime(2026, 3, 1, 6, 0, 0, tzinfo=datetime.timezone.utc)
MODEL = "NVIDIA H200"


def when(run):
    return (START + datetime.timedelta(days=run)).strftime("%Y-%m-%dT%H:%M:%SZ")


def row(host, gpus, status="ok"):
    """A report row as fleet_report writes it: gpus {index: (bf16 TFLOP/s, worst kernel error, uuid)}."""
    kernels = []
    for i, (dummy, err, dummy2) in sorted(gpus.items()):
        # two checks per GPU: the worst is the one that counts
        kernels += [{"check": "torch.fp8_scaled_mm", "device": i, "status": "ok", "relative_error": err},
                    {"check": "sgl_kernel.rmsnorm", "device": i, "status": "ok", "relative_error": err / 2}]
    return {"host": host, "status": status,
            "gpus": [{"index": i, "name": MODEL, "uuid": uuid, "tflops": {"bfloat16": tflops, "float16": 310.0}}
                     for i, (tflops, dummy, uuid) in sorted(gpus.items())],
            "facts": {"torch": {"kernels": kernels}}}


def healthy(host, n=4):
    return dict((i, (300.0, 0.002, "GPU-%s-%d" % (host, i))) for i in range(n))


def report(run, rows, mode="verify"):
    return {"generated": when(run), "mode": mode, "hosts": rows}


def save(history, rpt):
    """A report kept the way write_report keeps it: history/<time>-<mode>.json."""
    os.makedirs(history, exist_ok=True)
    name = "%s-%s.json" % (rpt["generated"].replace(":", "").replace("-", ""), rpt["mode"])
    with open(os.path.join(history, name), "w", encoding="utf-8") as fh:
        json.dump(rpt, fh)


def sinking(run):
    """Host b's GPU 3 loses 6% a run and its kernel error grows 1.5x a run."""
    gpus = healthy("b")
    gpus[3] = (300.0 * (1 - 0.06 * run), 0.002 * 1.5 ** run, "GPU-b-3")
    return report(run, [row("a", healthy("a")), row("b", gpus)])


def by_host(rpt):
    return dict((r["host"], r) for r in rpt["hosts"])


def test_a_gpu_that_sinks_run_after_run_is_flagged(tmp_path):
    history = str(tmp_path / "history")
    for run in range(5):
        save(history, sinking(run))
    current = sinking(5)
    assert trend.attach(current, None, history) == {"runs": 6, "files_read": 5}

    assert [r["generated"] for r in current["trend_runs"]] == [when(i) for i in range(6)]
    gpu = by_host(current)["b"]["trend"]["gpus"]["3"]
    assert gpu["uuid"] == "GPU-b-3"
    assert gpu["tflops"]["values"] == [300.0, 282.0, 264.0, 246.0, 228.0, 210.0]
    assert gpu["tflops"]["metric"] == "bfloat16"
    assert gpu["tflops"]["change"] == pytest.approx(-0.3)
    assert (gpu["tflops"]["steady"], gpu["tflops"]["worsening"]) == ("decline", True)
    assert gpu["kernel_error"]["values"] == pytest.approx([0.002 * 1.5 ** i for i in range(6)])
    assert (gpu["kernel_error"]["steady"], gpu["kernel_error"]["worsening"]) == ("rise", True)
    # the host follows its slowest GPU and its worst check; its healthy neighbour and GPUs stay quiet
    host = by_host(current)["b"]["trend"]
    assert host["tflops"]["worsening"] and host["kernel_error"]["worsening"]
    assert trend.gpus_worsening(by_host(current)["b"]) == ["3"]
    assert not trend.gpus_worsening(by_host(current)["a"]) and not trend.worsening(by_host(current)["a"]["trend"])
    assert by_host(current)["b"]["trend"]["gpus"]["0"]["tflops"] == {
        "values": [300.0] * 6, "points": 6, "change": 0.0, "steady": None, "worsening": False, "metric": "bfloat16"}
    # the model's median GPU does not move
    model = current["trend_models"][MODEL]
    assert model["tflops"]["values"] == [300.0] * 6 and not model["tflops"]["worsening"]
    assert current["trend_seen"] == {"a": when(5), "b": when(5)}
    assert trend.trend_text(gpu["tflops"]) == "300 → … → 228 → 210 bfloat16 TFLOP/s (-30% over 6 runs, steady decline)"
    assert trend.trend_text(gpu["kernel_error"], "kernel_error", 8) == (
        "kernel error 0.002 → 0.003 → 0.0045 → 0.0067 → 0.01 → 0.015 (+659% over 6 runs, steady rise)")


def test_a_swapped_gpu_starts_a_new_series(tmp_path):
    history = str(tmp_path / "history")
    for run in range(4):
        gpus = healthy("b")
        if run >= 2:  # a new GPU in slot 3 from the third run on
            gpus[3] = (250.0 + run, 0.003, "GPU-b-3-new")
        save(history, report(run, [row("b", gpus)]))
    gpus = healthy("b")
    gpus[3] = (260.0, 0.003, "GPU-b-3-new")
    gpus[1] = (300.0, 0.002, None)  # no UUID read: the slot's series goes on by index ...
    current = report(4, [row("b", gpus)])
    trend.attach(current, None, history)
    got = by_host(current)["b"]["trend"]["gpus"]
    assert got["3"]["uuid"] == "GPU-b-3-new"
    assert got["3"]["tflops"]["values"] == [None, None, 252.0, 253.0, 260.0] and got["3"]["tflops"]["points"] == 3
    assert got["2"]["tflops"]["values"] == [300.0] * 5
    # ... where it had one before, so its older values are another GPU's as far as the report knows
    assert got["1"]["uuid"] is None and got["1"]["tflops"]["values"] == [None, None, None, None, 300.0]
    # the GPUs no longer seen keep their series for the runs to come
    earlier = by_host(current)["b"]["trend"]["earlier"]
    assert [(e["index"], e["uuid"], e["tflops"]["points"]) for e in earlier] == [(1, "GPU-b-1", 4), (3, "GPU-b-3", 2)]


def test_a_host_unreachable_for_a_run_keeps_its_gpu_series():
    previous = None
    for run in range(4):
        b = row("b", healthy("b")) if run != 2 else {"host": "b", "status": "unreachable", "gpus": []}
        rpt = report(run, [row("a", healthy("a")), b])
        trend.attach(rpt, previous)
        if run == 2:
            assert by_host(rpt)["b"]["trend"]["gpus"] == {} and len(by_host(rpt)["b"]["trend"]["earlier"]) == 4
            assert by_host(rpt)["b"]["trend"]["tflops"]["values"] == [300.0, 300.0, None]
        previous = json.loads(json.dumps(rpt))
    got = by_host(rpt)["b"]["trend"]
    assert got["gpus"]["0"]["tflops"]["values"] == [300.0, 300.0, None, 300.0] and got["earlier"] == []


def test_no_history_gives_one_point():
    current = sinking(0)
    assert trend.attach(current) == {"runs": 1, "files_read": 0}
    assert current["trend_runs"] == [{"generated": when(0), "mode": "verify"}]
    gpu = by_host(current)["b"]["trend"]["gpus"]["3"]
    assert gpu["tflops"] == {"values": [300.0], "points": 1, "change": None, "steady": None, "worsening": False,
                             "metric": "bfloat16"}
    assert gpu["kernel_error"]["values"] == [0.002]
    assert trend.trend_text(gpu["tflops"]) == "300 bfloat16 TFLOP/s (1 run)"
    assert current["trend_models"][MODEL]["tflops"]["values"] == [300.0]


def test_missing_malformed_and_older_history_is_skipped(tmp_path):
    history = tmp_path / "history"
    assert trend.attach(sinking(5), None, str(history))["files_read"] == 0  # no folder at all
    save(str(history), sinking(0))
    save(str(history), sinking(2))
    bad = {
        "20260302T060000Z-verify.json": "{not json",
        "20260302T070000Z-verify.json": "[1, 2]",
        "20260302T080000Z-verify.json": json.dumps({"generated": "2026-03-02T08:00:00Z", "hosts": "b"}),
        "20260302T090000Z-verify.json": json.dumps({"hosts": [row("b", healthy("b"))]}),  # no time
        # an older shape: rows without gpus or facts, values of the wrong type
        "20260303T000000Z-verify.json": json.dumps({"generated": "2026-03-03T00:00:00Z", "mode": "verify", "hosts": [
            "b", 3, {"host": 5}, {"host": "b", "gpus": "8x H200", "facts": [], "smoke_tflops": [{"device": 0}]}]}),
        # a carried trend that does not fit its runs
        "20260303T010000Z-verify.json": json.dumps({"generated": "2026-03-03T01:00:00Z", "mode": "verify",
                                                    "trend_runs": [{"generated": "x"}], "trend_models": [],
                                                    "hosts": [{"host": "b", "trend": {"tflops": {"values": [1, 2]}, "gpus": []},
                                                               "gpus": [{"index": "3", "tflops": {"bfloat16": "fast"}}]}]}),
        "20260303T020000Z-verify.json": "",
        "notes.txt": "not a report",
        "fleet-report.json.tmp": "{}",
    }
    for name, text in bad.items():
        (history / name).write_text(text, encoding="utf-8")
    (history / "20260304T000000Z-verify.json").mkdir()  # unreadable as a file
    current = sinking(5)
    got = trend.attach(current, None, str(history))
    assert got["files_read"] == 10  # each named file once, none twice
    gpu = by_host(current)["b"]["trend"]["gpus"]["3"]
    kept = [r["generated"] for r in current["trend_runs"]]
    assert kept[:2] == [when(0), when(2)] and kept[-1] == when(5)
    assert [v for v in gpu["tflops"]["values"] if v is not None] == [300.0, 264.0, 210.0]
    assert gpu["tflops"]["worsening"]


def test_each_history_file_is_read_once(tmp_path, monkeypatch):
    history = str(tmp_path / "history")
    for run in range(25):
        rpt = sinking(run % 5)
        rpt["generated"] = when(run)
        save(history, rpt)
    reads = []
    real = trend.read_report
    monkeypatch.setattr(trend, "read_report", lambda path: reads.append(path) or real(path))
    current = report(25, [row("a", healthy("a")), row("b", healthy("b"))])
    trend.attach(current, None, history)
    # the window: this run and the newest 19 kept before it
    assert len(reads) == len(set(reads)) == 19
    assert len(current["trend_runs"]) == trend.WINDOW and current["trend_runs"][0]["generated"] == when(6)


def test_the_previous_report_carries_the_trend(tmp_path, monkeypatch):
    history = str(tmp_path / "history")
    previous = None
    for run in range(24):
        rpt = sinking(run % 6)
        rpt["generated"] = when(run)
        trend.attach(rpt, previous, history)
        save(history, rpt)
        previous = json.loads(json.dumps(rpt))
    monkeypatch.setattr(trend, "read_report", lambda path: pytest.fail("read %s: the previous report carries the trend" % path))
    current = sinking(0)
    current["generated"] = when(24)
    assert trend.attach(current, previous, history) == {"runs": 20, "files_read": 0}
    values = by_host(current)["b"]["trend"]["gpus"]["3"]["tflops"]["values"]
    assert len(values) == 20 and values[-1] == 300.0
    assert values[:-1] == [round(300.0 * (1 - 0.06 * (run % 6)), 3) for run in range(5, 24)]
    assert current["trend_models"][MODEL]["tflops"]["values"] == [300.0] * 20


def test_a_host_left_out_of_the_last_run_is_read_from_its_own(tmp_path, monkeypatch):
    history = str(tmp_path / "history")
    previous = None
    for run, hosts in enumerate((("a", "b"), ("a", "b"), ("a",))):  # the third run had --limit a
        rpt = report(run, [row(h, healthy(h)) for h in hosts])
        trend.attach(rpt, previous, history)
        save(history, rpt)
        previous = rpt
    assert previous["trend_seen"] == {"a": when(2), "b": when(1)}
    reads = []
    real = trend.read_report
    monkeypatch.setattr(trend, "read_report", lambda path: reads.append(os.path.basename(path)) or real(path))
    current = report(3, [row(h, healthy(h)) for h in ("a", "b", "c")])
    assert trend.attach(current, previous, history) == {"runs": 4, "files_read": 1}
    assert reads == ["20260302T060000Z-verify.json"]
    hosts = by_host(current)
    assert hosts["a"]["trend"]["tflops"]["values"] == [300.0] * 4
    assert hosts["b"]["trend"]["tflops"]["values"] == [300.0, 300.0, None, 300.0]
    assert hosts["c"]["trend"]["tflops"]["values"] == [None, None, None, 300.0]


def test_the_current_run_is_the_last_point(tmp_path):
    history = str(tmp_path / "history")
    ahead = sinking(0)
    ahead["generated"] = when(9)  # a run stamped later than this one (a controller clock put back)
    save(history, ahead)
    current = sinking(5)
    trend.attach(current, None, history)
    assert [r["generated"] for r in current["trend_runs"]] == [when(9), when(5)]
    assert by_host(current)["b"]["trend"]["gpus"]["3"]["tflops"]["values"] == [300.0, 210.0]


def test_failed_hosts_stay_out_of_the_model_median():
    current = report(0, [row("a", healthy("a")), row("b", dict((i, (100.0, 0.5, None)) for i in range(4)), status="failed")])
    trend.attach(current)
    assert current["trend_models"][MODEL]["tflops"]["values"] == [300.0]
    assert current["trend_models"][MODEL]["kernel_error"]["values"] == [0.002]
    assert by_host(current)["b"]["trend"]["tflops"]["values"] == [100.0]


def test_history_names_are_the_ones_write_report_gives(tmp_path):
    rpt = store.build_report({"mode": "deploy", "hosts": ["a"], "results": [{"status": "unreachable"}]},
                             now=START + datetime.timedelta(hours=1))
    store.write_report(rpt, str(tmp_path))
    found = trend.history_files(str(tmp_path / trend.HISTORY_DIRNAME))
    assert [rid for rid, dummy in found] == [("2026-03-01T07:00:00Z", "deploy")]
    assert trend.read_report(found[0][1])["trend_runs"] == [{"generated": "2026-03-01T07:00:00Z", "mode": "deploy"}]


@pytest.mark.parametrize("values, noise, change, expected", [
    ([300, 282, 264, 246], 0.02, 0.05, "decline"),
    ([300, 301, 299, 300, 280, 262], 0.02, 0.05, "decline"),  # flat, then down run after run
    ([300, 300, 300, 300, 270], 0.02, 0.05, None),  # one drop is a step, not a steady decline
    ([300, 270, 290, 280, 275], 0.02, 0.05, None),  # back up beyond the noise
    ([300, 299, 298, 297, 296], 0.02, 0.05, None),  # within the noise
    ([300, 290, 296, 289, 283, 275], 0.02, 0.05, "decline"),  # small steps back are noise
    ([300, 282], 0.02, 0.05, None),
    ([300], 0.02, 0.05, None),
    ([0.002, 0.003, 0.0045], 0.05, 0.5, "rise"),
    ([0.002, 0.0021, 0.0022, 0.0023], 0.05, 0.5, None),
    ([0.0, 0.001, 0.004], 0.05, 0.5, "rise"),  # from an exact result
    ([0.004, 0.002, 0.001], 0.05, 0.5, "decline"),
])
def test_steady(values, noise, change, expected):
    assert trend.steady(values, noise, change) == expected


def _points(markup, kind):
    found = re.search(r'<polyline class="%s"[^>]* points="([^"]+)"' % kind, str(markup))
    return [tuple(float(c) for c in p.split(",")) for p in found.group(1).split()]


def test_sparklines():
    runs = [{"generated": when(i), "mode": "verify"} for i in range(6)]
    gt = {"uuid": "GPU-b-3", "tflops": trend.series([{"bfloat16": 300.0 - 18 * i} for i in range(6)], "tflops"),
          "kernel_error": trend.series([None, None] + [0.002 * 2 ** i for i in range(4)], "kernel_error")}
    spark = str(trend.gpu_sparkline(gt, runs, "b", 3))
    assert spark.startswith('<span class="spark worsening" data-trend="gpu" data-host="b" data-gpu="3" title="b GPU 3 (GPU-b-3)')
    tflops = _points(spark, "tflops")
    assert len(tflops) == 6 and [x for x, y in tflops] == sorted(x for x, y in tflops)
    assert [y for x, y in tflops] == sorted(y for x, y in tflops) and tflops[0][1] < tflops[-1][1]  # SVG y grows downwards
    errors = _points(spark, "kernel_error")
    assert len(errors) == 4 and errors[0][0] == tflops[2][0]  # the runs' x axis: the error starts at the third run
    assert "\nUTC: TFLOP/s, kernel error\n2026-03-01 06:00: 300.0, -\n" in spark
    assert "\n2026-03-06 06:00: 210.0, 0.016" in spark
    # one series of a row; none where there is nothing to draw; markup in a name is escaped
    host = str(trend.sparkline(gt["tflops"], runs, "tflops", "<b>"))
    assert 'data-trend="tflops"' in host
    assert 'title="&lt;b&gt;: 300 → … → 228 → 210 bfloat16 TFLOP/s (-30% over 6 runs, steady decline)\nUTC: TFLOP/s\n' in host
    assert "\n2026-03-02 06:00: 282.0\n" in host
    assert str(trend.sparkline(None, runs)) == "" and str(trend.gpu_sparkline({}, runs)) == ""
    assert str(trend.sparkline(gt["tflops"], runs[:2])) == ""  # a series that does not fit its runs
    one = str(trend.sparkline(trend.series([{"bfloat16": 300.0}], "tflops"), runs[:1]))
    assert _points(one, "tflops") == [(42.0, 10.0)]


def _entry(tflops):
    gpus = [{"index": i, "name": MODEL, "uuid": "GPU-%d" % i} for i in range(2)]
    smoke = [{"device": i, "dtype": "bfloat16", "tflops": tflops if i == 1 else 300.0} for i in range(2)]
    return {"status": "ok", "gpu": {"gpus": gpus}, "torch": {"smoke": smoke}}


def test_renderings_carry_the_trend_and_a_report_without_one_still_renders():
    previous = None
    for run in range(4):
        rpt = store.build_report({"mode": "verify", "hosts": ["a"], "results": [_entry(300.0 - 20 * run)]}, previous,
                                 now=START + datetime.timedelta(days=run))
        previous = json.loads(json.dumps(rpt))
    md, html = fmt.render(rpt, "md"), fmt.render(rpt, "html")
    assert "- GPU 1 (GPU-1) worsening: 300 → 280 → 260 → 240 bfloat16 TFLOP/s (-20% over 4 runs, steady decline)" in md
    assert "| 300 → … → 260 → 240 bfloat16 TFLOP/s (-20% over 4 runs, steady decline) |" in md
    assert "## Trend per GPU model over 4 runs (median GPU)" in md
    assert 'class="spark worsening" data-trend="gpu" data-host="a" data-gpu="1"' in html
    assert "1</span> GPU worsening over 4 runs" in html
    for key in ("trend_runs", "trend_models", "trend_seen"):
        del rpt[key]
    del rpt["hosts"][0]["trend"]
    md, html = fmt.render(rpt, "md"), fmt.render(rpt, "html")
    body = html.split("</style>")[1]
    assert "worsening" not in md and "spark" not in body and "worsening" not in body


def test_a_wobble_draws_a_nearly_flat_line():
    runs = [{"generated": when(i), "mode": "verify"} for i in range(4)]
    wobble = trend.series([{"bfloat16": v} for v in (300.0, 297.0, 300.0, 297.0)], "tflops")
    ys = [y for x, y in _points(trend.sparkline(wobble, runs), "tflops")]
    assert max(ys) - min(ys) < 2.0  # 1% of a 10% span: a pixel or two of the 15
    falling = trend.series([{"bfloat16": v} for v in (300.0, 280.0, 260.0, 240.0)], "tflops")
    ys = [y for x, y in _points(trend.sparkline(falling, runs), "tflops")]
    assert ys[0] == 2.5 and ys[-1] == 17.5
