# -*- coding: utf-8 -*-
"""Action plugin fleet_report: each play host's result read from hostvars (also where a
host has none), the report's files written, changed only when the fleet changed, check
mode, and nothing ever sent to a host."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleActionFail
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

from ansible_collections.gpufleet.inference.plugins.action.fleet_report import ActionModule
from ansible_collections.gpufleet.inference.tests.unit.plugins.plugin_utils.fleet_report_cases import health_entry, ok_entry

HOSTS = ("gpu01", "gpu02", "gpu03")


def fleet(facts, hosts=HOSTS, inventory_file=None):
    """hostvars as a play has them: set_fact results (facts) over an inventory of hosts
    (or the YAML inventory_file, whose variables are templated as Ansible templates them)."""
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(inventory_file) if inventory_file else ",".join(hosts) + ","])
    variables = VariableManager(loader=loader, inventory=inventory)
    for host, values in facts.items():
        variables.set_nonpersistent_facts(host, values)
    return HostVars(inventory=inventory, variable_manager=variables, loader=loader)


def task_vars(hostvars, hosts=HOSTS, **extra):
    out = {"hostvars": hostvars, "ansible_play_hosts_all": list(hosts), "ansible_play_batch": list(hosts),
           "ansible_inventory_sources": ["/srv/inventories/cluster", "/srv/inventories/extra.yml"],
           "inventory_hostname": hosts[0]}
    out.update(extra)
    return out


def report(args, variables, check_mode=False, run_once=True):
    """Runs the action as the task executor would; returns (result, connection, action)."""
    task = MagicMock()
    task.args = args
    task.async_val = 0
    task.check_mode = check_mode
    task.diff = False
    task.run_once = run_once
    task.action = "gpufleet.inference.fleet_report"
    connection = MagicMock()
    connection._shell.tmpdir = None
    loader = DataLoader()
    action = ActionModule(task, connection, PlayContext(), loader, Templar(loader=loader), None)
    action._execute_module = MagicMock(side_effect=AssertionError("fleet_report ran a module"))
    action._transfer_data = MagicMock(side_effect=AssertionError("fleet_report transferred a file"))
    return action.run(task_vars=variables), connection, action


def read_json(path):
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


# ------------------------------------------------------------ hostvars

def test_hosts_with_and_without_a_result_and_the_files_written(tmp_path):
    hostvars = fleet({"gpu01": {"gpufleet_result": ok_entry(), "gpufleet_stage": "verify"},
                      # lost mid-run: the result says running, the stage says where
                      "gpu02": {"gpufleet_result": {"status": "running"}, "gpufleet_stage": "torch"}})
    out = tmp_path / "reports"
    result, connection, action = report({"out_dir": str(out), "mode": "verify"}, task_vars(hostvars))

    # gpu03 (a later serial batch, say) has neither variable: not run, as the Jinja loop had it
    assert result["status"] == {"gpu01": "ok", "gpu02": "unreachable", "gpu03": "not_run"}
    assert result["changed"] is True and result["healthy"] is False
    assert result["failing"] == ["gpu02"] and result["outliers_only"] == []
    assert result["counts"] == {"ok": 1, "unreachable": 1, "not_run": 1}
    assert result["summary"] == "3 hosts: 1 unreachable, 1 not_run, 1 ok"
    assert "failed" not in result and "skipped" not in result

    # the layout of the report directory
    paths = result["paths"]
    assert paths == {"json": str(out / "fleet-report.json"), "md": str(out / "fleet-report.md"),
                     "html": str(out / "fleet-report.html"), "prom": str(out / "fleet-report.prom"),
                     "textfile_dir": str(out / "textfile")}
    assert sorted(os.listdir(out)) == ["fleet-report.html", "fleet-report.json", "fleet-report.md",
                                       "fleet-report.prom", "history", "textfile"]
    assert sorted(os.listdir(out / "textfile")) == ["gpu01.prom", "gpu02.prom", "gpu03.prom"]
    assert len(os.listdir(out / "history")) == 1
    assert 'gpufleet_host_healthy{host="gpu01"} 1' in (out / "textfile" / "gpu01.prom").read_text()

    data = read_json(paths["json"])
    rows = {r["host"]: r for r in data["hosts"]}
    assert data["mode"] == "verify" and data["playbook"] == "verify.yml"
    assert data["inventory"] == "/srv/inventories/cluster,/srv/inventories/extra.yml"
    assert rows["gpu01"]["torch_version"] == "2.12.0.dev20260307+cu130"
    assert rows["gpu02"]["message"] == "host became unreachable during the run (last stage: torch)"
    assert rows["gpu03"]["message"] == "not run: the play stopped before this host's batch"

    # controller only: the host's connection is never used
    assert connection.method_calls == [] and connection.mock_calls == []
    assert ActionModule._requires_connection is False and action.TRANSFERS_FILES is False
    assert action._execute_module.call_count == 0 and action._transfer_data.call_count == 0


def test_an_identical_second_run_is_not_changed_and_a_new_state_is(tmp_path):
    hostvars = fleet({"gpu01": {"gpufleet_result": ok_entry()}, "gpu02": {"gpufleet_result": ok_entry()},
                      "gpu03": {"gpufleet_result": ok_entry()}})
    args = {"out_dir": str(tmp_path), "mode": "verify"}
    first, _c, _a = report(args, task_vars(hostvars))
    second, _c, _a = report(args, task_vars(hostvars))
    assert first["changed"] is True and second["changed"] is False
    assert second["healthy"] is True and second["summary"] == "3 hosts: 3 ok"
    assert len(os.listdir(tmp_path / "history")) >= 1
    moved = fleet({"gpu01": {"gpufleet_result": ok_entry()}, "gpu02": {"gpufleet_result": ok_entry(torch="2.13.0")},
                   "gpu03": {"gpufleet_result": ok_entry()}})
    third, _c, _a = report(args, task_vars(moved))
    assert third["changed"] is True and third["status"]["gpu02"] == "drift"


def test_other_variable_names_hosts_and_inventory(tmp_path):
    # the role keeps its run state under its own names; one host is left out by hosts
    hostvars = fleet({"gpu01": {"fleet_result": ok_entry(), "gpufleet_result": {"status": "failed"}},
                      "gpu03": {"fleet_result": {"status": "running"}, "fleet_stage": "sgl_kernel"}})
    result, _c, _a = report({"out_dir": str(tmp_path), "mode": "deploy", "result_var": "fleet_result",
                             "stage_var": "fleet_stage", "hosts": ["gpu03", "gpu01"], "inventory": "inventories/x"},
                            task_vars(hostvars))
    assert result["status"] == {"gpu01": "ok", "gpu03": "unreachable"}
    data = read_json(result["paths"]["json"])
    assert data["inventory"] == "inventories/x" and data["mode"] == "deploy" and data["playbook"] == "deploy.yml"
    assert "sgl_kernel" in [r for r in data["hosts"] if r["host"] == "gpu03"][0]["message"]


def test_a_variable_that_cannot_be_rendered_yet_counts_as_missing(tmp_path):
    # an inventory variable templated from a fact the host never got: undefined, not an error
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    gpu01:\n    gpu02:\n      gpufleet_result: \"{{ never_set }}\"\n"
                         "      gpufleet_stage: \"{{ never_set.stage }}\"\n    gpu03:\n")
    hostvars = fleet({"gpu01": {"gpufleet_result": ok_entry()}}, inventory_file=inventory)
    result, _c, _a = report({"out_dir": str(tmp_path / "reports"), "mode": "verify"}, task_vars(hostvars))
    assert result["status"] == {"gpu01": "ok", "gpu02": "not_run", "gpu03": "not_run"}


def test_a_result_that_is_not_a_dict_is_refused(tmp_path):
    hostvars = fleet({"gpu01": {"gpufleet_result": "ok"}})
    with pytest.raises(AnsibleActionFail, match="gpufleet_result of gpu01 must be a dict"):
        report({"out_dir": str(tmp_path), "mode": "verify"}, task_vars(hostvars))
    assert not os.listdir(tmp_path)


def test_freezes_outlier_ratio_and_outliers_fail_reach_the_report(tmp_path):
    (tmp_path / "freezes" / "gpu01").mkdir(parents=True)
    (tmp_path / "freezes" / "gpu01" / "ml-env-abc.freeze.txt").write_text("torch===2.0.0\n")
    slow = health_entry(slow={3: 240.0})  # 0.8 of the median
    hostvars = fleet({"gpu01": {"gpufleet_result": ok_entry()}, "gpu02": {"gpufleet_result": slow},
                      "gpu03": {"gpufleet_result": health_entry()}})
    args = {"out_dir": str(tmp_path), "mode": "verify"}
    result, _c, _a = report(args, task_vars(hostvars))
    # the freeze under out_dir/freezes is the baseline; the slow GPU is drift that is only an outlier
    assert result["status"] == {"gpu01": "drift", "gpu02": "drift", "gpu03": "ok"}
    assert result["outliers_only"] == ["gpu02"] and result["failing"] == ["gpu01"]
    # another freeze directory (none for gpu01), a looser ratio: both clean
    result, _c, _a = report(dict(args, freeze_dir=str(tmp_path / "none"), outlier_ratio=0.75), task_vars(hostvars))
    assert result["status"] == {"gpu01": "ok", "gpu02": "ok", "gpu03": "ok"}
    # outliers_fail: the outlier fails its host (given as the strings a template renders)
    result, _c, _a = report(dict(args, freeze_dir=str(tmp_path / "none"), outlier_ratio="0.9", outliers_fail="true"),
                            task_vars(hostvars))
    assert result["status"]["gpu02"] == "failed" and result["failing"] == ["gpu02"] and result["outliers_only"] == []


# ------------------------------------------------------------ check mode

def test_check_mode_writes_nothing_unless_asked(tmp_path):
    hostvars = fleet({"gpu01": {"gpufleet_result": ok_entry()}})
    out = tmp_path / "reports"
    result, connection, _a = report({"out_dir": str(out), "mode": "verify"}, task_vars(hostvars), check_mode=True)
    assert result["skipped"] is True and result["changed"] is False
    assert "in_check_mode" in result["msg"] and "status" not in result
    assert not out.exists() and connection.mock_calls == []
    # what finish reads is said all the same, with no metrics to put in place
    assert result["finish"] == {"gpu01": {"status": "ok", "fail": False, "msg": "", "textfile": False},
                                "gpu02": {"status": "not_run", "fail": False, "msg": "", "textfile": False},
                                "gpu03": {"status": "not_run", "fail": False, "msg": "", "textfile": False}}
    # in_check_mode: the controller's record is written under --check too
    result, _c, _a = report({"out_dir": str(out), "mode": "verify", "in_check_mode": True}, task_vars(hostvars),
                            check_mode=True)
    assert "skipped" not in result and result["changed"] is True and result["status"]["gpu01"] == "ok"
    assert (out / "fleet-report.json").is_file()


def test_in_check_mode_changes_nothing_outside_check_mode(tmp_path):
    hostvars = fleet({"gpu01": {"gpufleet_result": ok_entry()}})
    result, _c, _a = report({"out_dir": str(tmp_path), "mode": "verify", "in_check_mode": False}, task_vars(hostvars))
    assert result["status"]["gpu01"] == "ok" and (tmp_path / "fleet-report.json").is_file()


# ------------------------------------------------------------ bad arguments

@pytest.mark.parametrize("args, message", [
    ({"mode": "verify"}, "out_dir"),
    ({"out_dir": "/tmp/x"}, "mode"),
    ({"out_dir": "/tmp/x", "mode": "install"}, "mode"),
    ({"out_dir": "/tmp/x", "mode": "verify", "outlier_ratio": 1.5}, "outlier_ratio must be a number above 0 and at most 1"),
    ({"out_dir": "/tmp/x", "mode": "verify", "outlier_ratio": 0}, "outlier_ratio must be a number above 0 and at most 1"),
    ({"out_dir": "/tmp/x", "mode": "verify", "outliers": True}, "outliers"),
])
def test_bad_arguments_fail_before_anything_is_written(args, message):
    with pytest.raises(AnsibleActionFail, match=message):
        report(args, task_vars(fleet({})))


def test_once_per_play_not_once_per_host(tmp_path):
    with pytest.raises(AnsibleActionFail, match="run_once: true"):
        report({"out_dir": str(tmp_path), "mode": "verify"}, task_vars(fleet({})), run_once=False)
    assert not os.listdir(tmp_path)
    # a play of one host needs no run_once
    result, _c, _a = report({"out_dir": str(tmp_path), "mode": "verify"},
                            task_vars(fleet({}, hosts=["gpu01"]), hosts=["gpu01"]), run_once=False)
    assert result["status"] == {"gpu01": "not_run"}


def test_an_unwritable_report_directory_fails_the_task(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(AnsibleActionFail, match="cannot write the report under"):
        report({"out_dir": str(blocker / "reports"), "mode": "verify"}, task_vars(fleet({})))


# ------------------------------------------------------------ deploy.yml's records

VERIFIED = {"passed": True, "target": "/home/deploy/ml-env-abc", "active_venv": "/home/deploy/ml-env-abc",
            "torch": {"torch_version": "2.13.0"}, "packages": {"torch": "2.13.0"}, "fail_message": ""}


def test_a_host_still_running_is_ok_when_it_got_through_and_unreachable_when_it_left_the_play(tmp_path):
    """No record task on the ok path: a host still "running" and still in the play got
    through (its verification decides), one that left the play was lost."""
    hostvars = fleet({"gpu01": {"_r": {"status": "running"}, "_s": "verify", "verify_result": VERIFIED},
                      "gpu02": {"_r": {"status": "running"}, "_s": "torch"},
                      "gpu03": {"_r": {"status": "running"}, "_s": "verify",
                                "verify_result": dict(VERIFIED, passed=False, fail_message="wrong torch")}})
    result, dummy, dummy = report({"out_dir": str(tmp_path), "mode": "deploy", "result_var": "_r", "stage_var": "_s"},
                                  task_vars(hostvars, ansible_play_hosts=["gpu01", "gpu03"]))
    assert result["status"] == {"gpu01": "ok", "gpu02": "unreachable", "gpu03": "failed"}
    rows = {r["host"]: r for r in read_json(tmp_path / "fleet-report.json")["hosts"]}
    assert rows["gpu01"]["torch_version"] == "2.13.0" and rows["gpu01"]["stage"] == ""
    assert "host became unreachable during the run (last stage: torch)" in rows["gpu02"]["message"]
    assert (rows["gpu03"]["stage"], rows["gpu03"]["message"]) == ("verify", "wrong torch")
    # what finish.yml reads: a few words per host
    assert result["finish"]["gpu01"] == {"status": "ok", "fail": False, "msg": "", "textfile": True}
    assert result["finish"]["gpu02"]["fail"] is True and result["finish"]["gpu02"]["textfile"] is False
    assert result["finish"]["gpu03"] == {"status": "failed", "fail": True, "textfile": True,
                                         "msg": "gpu03: failed in verify: wrong torch"}


def test_the_reach_steps_record_and_stage_stand_for_the_hosts_own(tmp_path):
    reach = {"record": {"status": "running"}, "stage": "verify", "fast": True}
    lost = {"record": {"status": "unreachable", "stage": "connect", "message": "ssh: no route"}, "stage": "connect"}
    hostvars = fleet({"gpu01": {"fleet_reach": reach, "verify_result": VERIFIED},
                      # the rescue's record (set_fact) wins over the reach step's
                      "gpu02": {"fleet_reach": dict(reach, fast=False), "_s": "torch",
                                "_r": {"status": "failed", "stage": "torch", "message": "no index"}},
                      "gpu03": {"fleet_reach": lost}})
    args = {"out_dir": str(tmp_path), "mode": "deploy", "result_var": "_r", "stage_var": "_s", "reach_var": "fleet_reach"}
    result, dummy, dummy = report(args, task_vars(hostvars, ansible_play_hosts=list(HOSTS)))
    assert result["status"] == {"gpu01": "ok", "gpu02": "failed", "gpu03": "unreachable"}
    rows = {r["host"]: r for r in read_json(tmp_path / "fleet-report.json")["hosts"]}
    assert rows["gpu01"]["fast_path"] is True and rows["gpu02"]["fast_path"] is False
    assert rows["gpu02"]["message"] == "no index" and rows["gpu03"]["message"] == "ssh: no route"
    assert result["finish"]["gpu03"]["msg"] == "gpu03: unreachable in connect: ssh: no route"


class CountingHostVars:
    """hostvars whose hosts count each variable read (each read renders the variable whole)."""

    def __init__(self, hostvars):
        self.hostvars, self.reads = hostvars, []

    def __contains__(self, host):
        return host in self.hostvars

    def __getitem__(self, host):
        outer, inner = self, self.hostvars[host]

        class Host:
            def get(self, name, default=None):
                outer.reads.append((host, name))
                return inner.get(name, default)

        return Host()


def test_each_variable_of_a_host_is_read_once(tmp_path):
    """verify.yml's hosts have no record of their own: the record is built from
    verify_result, the host's largest variable, read once, not once per use."""
    hostvars = CountingHostVars(fleet({"gpu01": {"verify_result": VERIFIED},
                                       "gpu02": {"verify_result": dict(VERIFIED, passed=False, fail_message="bad")}},
                                      hosts=("gpu01", "gpu02")))
    result, dummy, dummy = report({"out_dir": str(tmp_path), "mode": "verify"},
                                  task_vars(hostvars, hosts=("gpu01", "gpu02")))
    assert result["status"] == {"gpu01": "ok", "gpu02": "failed"}
    assert hostvars.reads.count(("gpu01", "verify_result")) == 1
    assert len(hostvars.reads) == len(set(hostvars.reads)) > 4
    rows = {r["host"]: r for r in read_json(tmp_path / "fleet-report.json")["hosts"]}
    assert rows["gpu01"]["torch_version"] == "2.13.0" and rows["gpu02"]["message"] == "bad"
