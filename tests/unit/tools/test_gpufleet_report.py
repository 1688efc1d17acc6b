"""Fleet report: rows, drift, ordering, lock diff, renderings, the CLI contract."""

import datetime
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import gpufleet_report as rep  # noqa: E402  pylint: disable=wrong-import-position

NOW = datetime.datetime(2026, 3, 8, 12, 0, 0, tzinfo=datetime.timezone.utc)


def ok_entry(torch="2.12.0.dev20260307+cu130", packages=None, gpus=8):
    return {
        "status": "ok",
        "venv": "/home/deploy/ml-env-abc",
        "active_venv": "/home/deploy/ml-env-abc",
        "gpu": {"present": True, "driver_version": "590.48.01", "cuda_driver_version": "13.1",
                "gpus": [{"index": i, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                          "compute_capability": "12.0"} for i in range(gpus)]},
        "torch": {"torch_version": torch, "torch_cuda_version": "13.0",
                  "imports": {"flashinfer": {"ok": True, "version": "0.6.4"}},
                  "smoke": [{"device": 0, "dtype": "bfloat16", "tflops": 301.5},
                            {"device": 0, "dtype": "float16", "tflops": 310.25}]},
        "packages": packages if packages is not None else {"torch": torch, "Flashinfer_Python": "0.6.4"},
        "sgl_kernel_abi_key": "0123456789abcdef0123",
    }


def run(mode, **hosts):
    names = sorted(hosts)
    return {"mode": mode, "hosts": names, "results": [hosts[n] for n in names]}


def test_ok_row_has_the_columns():
    report = rep.build_report(run("verify", gpu1=ok_entry()), now=NOW)
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
    report = rep.build_report(run("verify", a=ok_entry(), b=bad, c=None, d={"status": "running", "stage": "torch"}), now=NOW)
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
    first = rep.build_report(run("deploy", a=ok_entry(), b=ok_entry()), now=NOW)
    second = rep.build_report(run("verify", a=ok_entry(), b=ok_entry(torch="2.12.0.dev20260308+cu130")), previous=first, now=NOW)
    rows = {r["host"]: r for r in second["hosts"]}
    assert rows["a"]["status"] == "ok"
    assert rows["b"]["status"] == "drift"
    assert {"name": "torch", "old": "2.12.0.dev20260307+cu130", "new": "2.12.0.dev20260308+cu130"} in rows["b"]["changes"]
    assert second["hosts"][0]["host"] == "b"


def test_deploy_changes_are_not_drift():
    first = rep.build_report(run("deploy", a=ok_entry()), now=NOW)
    second = rep.build_report(run("deploy", a=ok_entry(torch="2.12.0.dev20260308+cu130")), previous=first, now=NOW)
    row = second["hosts"][0]
    assert row["status"] == "ok" and row["changes"] and not row["drift"]


def test_lock_diff_against_the_recorded_lock(tmp_path):
    locks = tmp_path / "locks" / "a"
    locks.mkdir(parents=True)
    (locks / "ml-env-abc.txt").write_text("# uv pip freeze\ntorch==2.12.0.dev20260307+cu130\nflashinfer-python==0.6.4\nnumpy==2.3.0\n")
    entry = ok_entry(packages={"torch": "2.12.0.dev20260307+cu130", "flashinfer_python": "0.6.3", "extra": "1"})
    report = rep.build_report(run("verify", a=entry), lock_dir=str(tmp_path / "locks"), now=NOW)
    row = report["hosts"][0]
    assert row["status"] == "drift"
    assert row["lock_diff"] == [
        {"name": "extra", "old": None, "new": "1"},
        {"name": "flashinfer-python", "old": "0.6.4", "new": "0.6.3"},
        {"name": "numpy", "old": "2.3.0", "new": None}]
    assert "lock flashinfer-python: 0.6.4 -> 0.6.3" in row["drift"]


def test_parse_lock_handles_freeze_forms():
    text = "torch==2.13.0\nsgl-kernel @ file:///x/sgl_kernel-0.1-cp312.whl\n-e /src/pkg\n# note\nA_B.c===1.0\n"
    assert rep.parse_lock(text) == {"torch": "2.13.0", "sgl-kernel": "file:///x/sgl_kernel-0.1-cp312.whl", "a-b-c": "1.0"}


def test_unreachable_host_keeps_its_last_known_stack():
    first = rep.build_report(run("deploy", a=ok_entry()), now=NOW)
    second = rep.build_report(run("verify", a={"status": "unreachable", "message": "ssh: connect refused"}), previous=first, now=NOW)
    row = second["hosts"][0]
    assert row["status"] == "unreachable" and row["torch_version"] == "2.12.0.dev20260307+cu130"
    assert row["drift"] == ["unreachable"]


def test_digest_ignores_the_time_but_not_the_state():
    a = rep.build_report(run("deploy", a=ok_entry()), now=NOW)
    b = rep.build_report(run("deploy", a=ok_entry()), previous=a, now=NOW + datetime.timedelta(hours=1))
    c = rep.build_report(run("deploy", a=ok_entry(torch="2.13.0")), previous=a, now=NOW)
    assert a["digest"] == b["digest"] != c["digest"]


def test_renderings_escape_and_contain_every_host(tmp_path):
    bad = dict(ok_entry(), status="failed", stage="verify", message="<script>x</script> | pipe")
    report = rep.build_report(run("verify", a=ok_entry(), b=bad), now=NOW)
    paths = rep.write_report(report, str(tmp_path))
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


def test_cli_reports_changed_only_when_the_fleet_changed(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "tools"))
    data = json.dumps(run("deploy", a=ok_entry(), b=dict(ok_entry(), status="failed", message="x: expected 1, found 2")))

    def call():
        out = subprocess.run([sys.executable, "-m", "gpufleet_report", "--out-dir", str(tmp_path)],
                             input=data, capture_output=True, text=True, env=env, check=True)
        return json.loads(out.stdout)

    first, second = call(), call()
    assert first["changed"] is True and second["changed"] is False
    assert first["failing"] == ["b"] and first["status"] == {"a": "ok", "b": "failed"}
    assert first["summary"] == "2 hosts: 1 failed, 1 ok"


@pytest.mark.parametrize("payload", ["not json", "[]", '{"hosts": 3}'])
def test_cli_refuses_bad_input(tmp_path, payload):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "tools"))
    out = subprocess.run([sys.executable, "-m", "gpufleet_report", "--out-dir", str(tmp_path)],
                         input=payload, capture_output=True, text=True, env=env, check=False)
    assert out.returncode == 2 and "gpufleet_report" in out.stderr
    assert not (tmp_path / "fleet-report.json").exists()
