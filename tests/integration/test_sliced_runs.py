"""A sliced run on the controller: verify.yml over three hosts once whole and
once as three slices (three ansible-playbook runs, each over one host, each
writing its part), then playbooks/merge.yml: the merged report has the hosts,
statuses and drift of the whole run. The hosts are three inventory names for
this machine (connection local) with the real CPU torch venv; the merge's
refusals (a missing part, a bad run id) leave the report as it was."""

import json
import os

from conftest import ROOT, run_playbook

VERIFY = os.path.join(ROOT, "playbooks", "verify.yml")
MERGE = os.path.join(ROOT, "playbooks", "merge.yml")
HOSTS = ["n1", "n2", "n3"]


def _inventory(tmp_path, venv):
    link = tmp_path / "ml-env"
    os.symlink(venv, link)
    lines = ["[gpu_nodes]"] + ["%s ansible_connection=local ansible_python_interpreter=%s" % (h, os.path.join(
        ROOT, ".venv", "bin", "python")) for h in HOSTS]
    path = tmp_path / "hosts.ini"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, str(link)


def _report(folder):
    with open(os.path.join(folder, "fleet-report.json"), encoding="utf-8") as fh:
        return json.load(fh)


def _view(report):
    return dict((r["host"], (r["status"], r["drift"], r["torch_version"])) for r in report["hosts"])


def test_three_slices_merge_into_the_report_of_the_whole_run(tmp_path, torch_cpu_venv):
    inventory, link = _inventory(tmp_path, torch_cpu_venv)
    common = {"gpufleet_venv_link": link, "gpufleet_verify_smoke": False, "gpufleet_verify_kernels": False}
    whole_dir, sliced_dir = str(tmp_path / "whole"), str(tmp_path / "sliced")
    whole = run_playbook(VERIFY, inventory, dict(common, gpufleet_report_dir=whole_dir), timeout=300)
    assert whole.rc == 0, whole.out[-3000:]
    for i, host in enumerate(HOSTS, 1):
        part = run_playbook(VERIFY, inventory, dict(common, gpufleet_report_dir=sliced_dir, gpufleet_run_id="run-7",
                                                    gpufleet_report_part=str(i)), limit=host, timeout=300)
        assert part.rc == 0, part.out[-3000:]
        assert "merge the parts with playbooks/merge.yml" in part.out
    assert sorted(os.listdir(os.path.join(sliced_dir, "parts", "run-7"))) == ["1.json", "2.json", "3.json"]
    assert not os.path.exists(os.path.join(sliced_dir, "fleet-report.json"))
    assert sorted(os.listdir(os.path.join(sliced_dir, "textfile"))) == ["n1.prom", "n2.prom", "n3.prom"]

    # a missing part is refused, naming the count, and nothing is written
    short = run_playbook(MERGE, "localhost,", {"gpufleet_report_dir": sliced_dir, "gpufleet_run_id": "run-7",
                                               "gpufleet_report_parts": 4}, timeout=120)
    assert short.rc != 0 and "expected 4 parts of run 'run-7', found 3 (1, 2, 3)" in short.out, short.out[-3000:]
    assert not os.path.exists(os.path.join(sliced_dir, "fleet-report.json"))

    merged = run_playbook(MERGE, "localhost,", {"gpufleet_report_dir": sliced_dir, "gpufleet_run_id": "run-7",
                                                "gpufleet_report_parts": 3}, timeout=120)
    assert merged.rc == 0, merged.out[-3000:]
    assert "fleet report of run run-7 (3 parts), 3 hosts: 3 ok" in merged.out
    assert _view(_report(sliced_dir)) == _view(_report(whole_dir))
    assert sorted(_view(_report(sliced_dir))) == HOSTS
    for ext in ("md", "html", "prom"):
        assert os.path.exists(os.path.join(sliced_dir, "fleet-report." + ext))


def test_a_bad_run_id_is_refused_before_the_verification(tmp_path, torch_cpu_venv):
    inventory, link = _inventory(tmp_path, torch_cpu_venv)
    bad = run_playbook(VERIFY, inventory, {"gpufleet_venv_link": link, "gpufleet_report_dir": str(tmp_path / "r"),
                                           "gpufleet_run_id": "../x", "gpufleet_report_part": "1"}, limit="n1", timeout=300)
    assert bad.rc != 0
    # refused by the checks of the verification's task (argument_errors), before torch_verify
    assert "argument_errors:\n    - gpufleet_run_id must be 1-64 letters, digits" in bad.out, bad.out[-3000:]
    assert not os.path.exists(tmp_path / "r" / "parts")
    merge = run_playbook(MERGE, "localhost,", {"gpufleet_report_dir": str(tmp_path / "r"), "gpufleet_run_id": "a b"},
                         timeout=120)
    assert merge.rc != 0 and "gpufleet_run_id must be 1-64 letters, digits" in merge.out, merge.out[-3000:]
    assert not os.path.exists(tmp_path / "r" / "fleet-report.md")
