# -*- coding: utf-8 -*-
"""Sliced runs: each slice writes its part, the merge writes the one report of
the run, with the same statuses, outliers and drift as one run over the whole
fleet; bad parts are refused, naming what is wrong."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import store
from ansible_collections.gpufleet.inference.tests.unit.plugins.plugin_utils.fleet_report_cases import (
    NOW,
    health_entry,
    run,
)

HOSTS = ["gpu%02d" % i for i in range(1, 7)]
SLICES = [HOSTS[0:2], HOSTS[2:4], HOSTS[4:6]]


def _fleet():
    """Six hosts: gpu05's GPUs all run at 0.8 of the others (its slice mate
    gpu06 too: a slice of slow hosts looks normal to itself), gpu02 has one
    slow GPU, gpu03's torch moved since the previous run (drift)."""
    entries = {h: health_entry() for h in HOSTS}
    entries["gpu02"] = health_entry(slow={5: 200.0})
    entries["gpu05"] = health_entry(tflops=240.0)
    entries["gpu06"] = health_entry(tflops=240.0)
    return entries


def _previous(tmp_path):
    """The fleet's previous report (one whole run), the baseline of drift."""
    store.publish(run("verify", **_fleet()), str(tmp_path), now=NOW)


def _view(report):
    return dict((r["host"], (r["status"], sorted(r["notes"]["outlier"]), sorted(r["notes"]["drift"]),
                             [g["index"] for g in r["gpus"] if g.get("outliers")])) for r in report["hosts"])


def _moved(entries):
    entries["gpu03"]["torch"]["torch_version"] = "2.12.0"
    return entries


def test_three_parts_merge_into_the_report_of_one_whole_run(tmp_path):
    whole_dir, sliced_dir = tmp_path / "whole", tmp_path / "sliced"
    for folder in (whole_dir, sliced_dir):
        _previous(folder)
    whole = store.build_report(run("verify", **_moved(_fleet())), store.load_previous(str(whole_dir)), now=NOW)
    entries = _moved(_fleet())
    slice_outcomes = []
    for i, hosts in enumerate(SLICES, 1):
        part = run("verify", **dict((h, entries[h]) for h in hosts))
        slice_outcomes.append(store.write_part(part, str(sliced_dir), "run-4711", str(i), now=NOW))
    # a slice writes its part and each host's metrics, never the fleet report
    assert sorted(os.listdir(sliced_dir / "parts" / "run-4711")) == ["1.json", "2.json", "3.json"]
    assert all(os.path.exists(sliced_dir / "textfile" / ("%s.prom" % h)) for h in HOSTS)
    with open(sliced_dir / "fleet-report.json", encoding="utf-8") as fh:
        still = json.load(fh)  # the previous run's report, untouched by the slices
    assert [r["torch_version"] for r in still["hosts"] if r["host"] == "gpu03"] == ["2.12.0.dev20260307+cu130"]
    assert len(os.listdir(sliced_dir / "history")) == 1
    # the third slice alone (gpu05, gpu06, both slow) sees no outlier: its own median is theirs
    assert slice_outcomes[2]["outliers_only"] == []
    merged_outcome = store.merge_parts(str(sliced_dir), "run-4711", expect_parts=3, now=NOW)
    assert merged_outcome["parts"] == ["1", "2", "3"]
    merged = store.load_previous(str(sliced_dir))
    assert _view(merged) == _view(whole)
    view = _view(merged)
    # judged against the whole fleet: the slow hosts' GPUs and gpu02's GPU 5 are outliers, gpu03 drifted
    assert view["gpu05"][3] == list(range(8)) and view["gpu06"][3] == list(range(8))
    assert view["gpu02"][3] == [5]
    assert any("torch" in line for line in view["gpu03"][2])
    assert merged["total"] == 6 and [r["host"] for r in merged["hosts"]] == [r["host"] for r in whole["hosts"]]


def test_the_slices_finish_as_the_whole_run_would(tmp_path):
    _previous(tmp_path)
    entries = _moved(_fleet())
    entries["gpu04"] = {"status": "failed", "message": "torch: expected torch importable"}
    whole = store.build_report(run("verify", **entries), store.load_previous(str(tmp_path)), now=NOW)
    finish = {}
    for i, hosts in enumerate(SLICES, 1):
        part = run("verify", **dict((h, entries[h]) for h in hosts))
        finish.update(store.write_part(part, str(tmp_path), "r1", "s%d" % i, now=NOW)["finish"])
    # failed and drift fail their hosts in the slice as in the whole run (outliers never, by default)
    assert dict((h, f["fail"]) for h, f in finish.items() if h != "gpu05" and h != "gpu06") == \
        dict((r["host"], store.finish_entry(r)["fail"]) for r in whole["hosts"] if r["host"] not in ("gpu05", "gpu06"))
    assert finish["gpu04"]["fail"] and finish["gpu03"]["fail"] and not finish["gpu01"]["fail"]


def _write(tmp_path, run_id, name, data):
    folder = tmp_path / "parts" / run_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize("case, parts, expect, words", [
    ("none", [], None, "no part of run 'r'"),
    ("missing", [("1.json", run("verify", gpu01=health_entry()))], 2, "expected 2 parts of run 'r', found 1 (1)"),
    ("twice", [("1.json", run("verify", gpu01=health_entry())), ("2.json", run("verify", gpu01=health_entry()))], None,
     "host gpu01 is in two parts of run 'r': 1.json and 2.json"),
    ("modes", [("1.json", run("verify", gpu01=health_entry())), ("2.json", run("deploy", gpu02=health_entry()))], None,
     "parts of run 'r' differ in mode: 'verify' in 1.json, 'deploy' in 2.json"),
    ("garbage", [("1.json", "{not json")], None, "part 1.json of run 'r' cannot be read"),
    ("shape", [("1.json", {"x": 1})], None, "part 1.json of run 'r' is not a part of a fleet run"),
])
def test_bad_parts_are_refused_naming_what_is_wrong_and_nothing_is_written(tmp_path, case, parts, expect, words):
    for name, data in parts:
        _write(tmp_path, "r", name, data)
    with pytest.raises(store.PartsError) as caught:
        store.merge_parts(str(tmp_path), "r", expect_parts=expect, now=NOW)
    assert words in str(caught.value), (case, str(caught.value))
    assert not os.path.exists(tmp_path / "fleet-report.json")


@pytest.mark.parametrize("run_id, part", [("a b", "1"), ("../x", "1"), ("r", "1/2"), ("", "1"), ("r", "." * 2)])
def test_a_bad_run_id_or_part_is_refused_before_anything_is_written(tmp_path, run_id, part):
    with pytest.raises(store.PartsError) as caught:
        store.write_part(run("verify", gpu01=health_entry()), str(tmp_path), run_id, part, now=NOW)
    assert "must be 1-64 letters, digits" in str(caught.value)
    assert not os.path.exists(tmp_path / "parts")
