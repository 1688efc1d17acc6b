"""tools/fleet_verify.py: what its options make of the playbook's variables."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import fleet_verify  # noqa: E402  pylint: disable=wrong-import-position


def test_mode_sets_the_depth_and_is_left_to_the_inventory_without_it():
    args = fleet_verify.parse_args(["-i", "inv", "--mode", "in_service", "--report-dir", "/r"])
    assert fleet_verify.extra_vars(args) == {"gpufleet_report_dir": "/r", "gpufleet_verify_mode": "in_service"}
    assert "gpufleet_verify_mode" not in fleet_verify.extra_vars(fleet_verify.parse_args(["-i", "inv"]))


def test_an_unknown_mode_is_refused_naming_the_choices(capsys):
    with pytest.raises(SystemExit):
        fleet_verify.parse_args(["-i", "inv", "--mode", "quick"])
    assert "invalid choice: 'quick' (choose from 'auto', 'in_service', 'full')" in capsys.readouterr().err


def test_extra_vars_keep_json_and_key_value_and_refuse_anything_else():
    args = fleet_verify.parse_args(["-i", "inv", "-e", '{"gpufleet_drain_hook": ["scontrol", "x"]}', "-e", "a=b",
                                    "--no-smoke"])
    out = fleet_verify.extra_vars(args)
    assert out["gpufleet_drain_hook"] == ["scontrol", "x"] and out["a"] == "b" and out["gpufleet_verify_smoke"] is False
    with pytest.raises(SystemExit):
        fleet_verify.extra_vars(fleet_verify.parse_args(["-i", "inv", "-e", "nonsense"]))


def test_ee_options_need_an_image(capsys):
    with pytest.raises(SystemExit):
        fleet_verify.parse_args(["-i", "inv", "--ee-option=--network=host"])
    assert "--ee-option and --ee-mount need --ee IMAGE" in capsys.readouterr().err


def test_ee_mounts_what_lies_outside_the_working_directory_once(tmp_path, monkeypatch):
    work, reports, keys = tmp_path / "fleet", tmp_path / "reports", tmp_path / "keys"
    for d in (work, work / "inventory", reports, reports / "sub", keys):
        d.mkdir()
    monkeypatch.chdir(work)
    args = fleet_verify.parse_args(["-i", "inventory", "--ee", "localhost/gpufleet-ee:0.1.0",
                                    "--ee-option=--network=host", "--ee-mount", str(keys)])
    settings = fleet_verify.ee_settings(args, {"ANSIBLE_CONFIG": str(work / "ansible.cfg"), "PATH": "/venv/bin"},
                                        [str(reports), str(reports / "sub"), str(work / "inventory"), str(work)])
    # the working directory is the container's (host_cwd); the rest at its own path, a folder inside a mount once
    assert settings["host_cwd"] == str(work) and settings["project_dir"] == str(work)
    assert settings["container_volume_mounts"] == ["%s:%s:Z" % (reports, reports), "%s:%s:Z" % (keys, keys)]
    assert settings["container_image"] == "localhost/gpufleet-ee:0.1.0" and settings["process_isolation"] is True
    assert settings["container_options"] == fleet_verify.ee_user_options("podman") + ["--network=host"]
    assert settings["playbook"] == "gpufleet.inference.verify"
    # the image's collection, never a path of the controller's venv
    assert settings["envvars"] == {"ANSIBLE_FORCE_COLOR": "false", "ANSIBLE_CONFIG": str(work / "ansible.cfg"),
                                   "ANSIBLE_COLLECTIONS_PATH": "/usr/share/ansible/collections"}


def test_ee_refuses_a_path_that_does_not_exist(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = fleet_verify.parse_args(["-i", "inv", "--ee", "img", "--ee-mount", str(tmp_path / "nowhere")])
    with pytest.raises(SystemExit, match="--ee: .*nowhere does not exist"):
        fleet_verify.ee_settings(args, {}, [])


def test_ee_runs_as_the_user_who_owns_the_mounted_folders():
    assert fleet_verify.ee_user_options("podman", uid=0) == ["--user=0"]
    assert fleet_verify.ee_user_options("/usr/bin/podman", uid=1001) == ["--userns=keep-id"]
    assert fleet_verify.ee_user_options("docker", uid=1001) == ["--user=1001"]
    args = fleet_verify.parse_args(["-i", "inv", "--ee", "img", "--ee-option=--user=4242"])
    assert fleet_verify.ee_settings(args, {}, [])["container_options"] == ["--user=4242"]


@pytest.mark.parametrize("ee", [False, True])
def test_every_inventory_and_check_reach_ansible_runner(tmp_path, monkeypatch, ee):
    """Outside a container the first inventory is ansible-runner's own and the
    rest go on the command line; in one, all of them do (its private inventory
    folder stays empty)."""
    first, second = tmp_path / "a b", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    monkeypatch.chdir(tmp_path)
    seen = {}

    class Result(object):
        status, rc, stats = "failed", 2, {}

        class stdout(object):  # noqa: N801  (the runner's file-like attribute)
            @staticmethod
            def read():
                return ""

    def run(**kwargs):
        seen.update(kwargs)
        seen["inventory_folder"] = sorted(os.listdir(os.path.join(kwargs["private_data_dir"])))
        return Result()

    import ansible_runner  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(ansible_runner, "run", run)
    argv = ["-i", str(first), "-i", str(second), "--check", "--report-dir", str(tmp_path / "r")]
    if ee:
        argv += ["--ee", "localhost/gpufleet-ee:0.1.0"]
    assert fleet_verify.main(argv) == 2  # the fake run writes no report
    if ee:
        assert "inventory" not in seen and seen["inventory_folder"] == ["inventory"]
        assert seen["cmdline"] == "-i '%s' -i %s --check" % (first, second)
    else:
        assert seen["inventory"] == str(first)
        assert seen["cmdline"] == "-i %s --check" % second


def event(kind, host, task, play="Verify the fleet", res=None):
    return {"event": kind, "event_data": {"host": host, "task": task, "play": play, "res": res or {}}}


VERIFY_TASK = "gpufleet.inference.verify : Verify | Check the inputs, read the stable path and the GPUs"
REPORT_TASK = "gpufleet.inference.fleet : Report | Write the fleet report"
FINISH_META = "gpufleet.inference.fleet : Finish | End here for a host that passed, with no metrics to put in place"
FINISH_TASK = "gpufleet.inference.fleet : Finish | Put the host's metrics in place and fail the hosts that did not pass"


def test_progress_counts_a_host_done_when_the_report_judged_it(tmp_path):
    """A host that passed has no finish task (a meta task ends it): the
    report's verdicts say it is done; a failed host is not counted twice when
    its finish task fails it, and the meta task's skip is no verdict."""
    import io

    out = io.StringIO()
    progress = fleet_verify.Progress(out)
    for host in ("sbx1", "sbx2"):
        progress(event("runner_on_ok", host, VERIFY_TASK))
    progress(event("runner_on_unreachable", "sbx3", VERIFY_TASK))
    assert progress.done == {"sbx3": "unreachable"}
    progress(event("runner_on_skipped", "sbx2", FINISH_META))
    assert "sbx2" not in progress.done
    # the report runs once, on the first host; a host outside this run is not counted
    progress(event("runner_on_ok", "sbx1", REPORT_TASK, res={"finish": {
        "sbx1": {"status": "ok", "fail": False}, "sbx2": {"status": "failed", "fail": True},
        "sbx3": {"status": "unreachable", "fail": True}, "sbx9": {"status": "not_run", "fail": True}}}))
    assert progress.done == {"sbx1": "ok", "sbx2": "not ok", "sbx3": "unreachable"}
    progress(event("runner_on_failed", "sbx2", FINISH_TASK))
    lines = out.getvalue().splitlines()
    assert [line.split("]", 1)[1].split() for line in lines] == [
        ["1/3", "hosts", "done", "sbx3", "unreachable"],
        ["2/3", "hosts", "done", "sbx1", "ok"],
        ["3/3", "hosts", "done", "sbx2", "not", "ok"]]


def test_progress_takes_the_finish_task_for_a_host_the_report_left_out():
    import io

    progress = fleet_verify.Progress(io.StringIO(), quiet=True)
    progress(event("runner_on_ok", "sbx1", VERIFY_TASK))
    progress(event("runner_on_ok", "sbx1", REPORT_TASK, res={"finish": {}}))
    assert progress.done == {}
    progress(event("runner_on_failed", "sbx1", FINISH_TASK))
    assert progress.done == {"sbx1": "not ok"}
