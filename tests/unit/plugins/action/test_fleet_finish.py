# -*- coding: utf-8 -*-
"""Action plugin fleet_finish: the host's metrics put in place in one command, then the host failed when asked.

The command the action sends runs here, in a real shell, on a real directory.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import subprocess
from unittest.mock import MagicMock

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar

from ansible_collections.gpufleet.inference.plugins.action.fleet_finish import ActionModule

METRICS = b'gpufleet_host_status{status="ok"} 1\n'


def finish(args, check_mode=False):
    task = MagicMock()
    task.args = dict(args)
    task.action = "gpufleet.inference.fleet_finish"
    task.async_val = 0
    task.check_mode = check_mode
    task.diff = False
    loader = DataLoader()
    act = ActionModule(task, MagicMock(), PlayContext(), loader, Templar(loader=loader), None)
    sent = []

    def execute(cmd, sudoable=True, in_data=None, **kwargs):
        sent.append((cmd, in_data, sudoable))
        run = subprocess.run(cmd, shell=True, input=in_data, capture_output=True, check=False)
        return {"rc": run.returncode, "stdout": run.stdout.decode(), "stderr": run.stderr.decode()}

    act._low_level_execute_command = execute
    return act.run(task_vars={}), sent


@pytest.fixture()
def src(tmp_path):
    path = tmp_path / "h1.prom"
    path.write_bytes(METRICS)
    return str(path)


def test_the_metrics_are_put_in_place_once_then_left_alone(tmp_path, src):
    out = tmp_path / "textfile"
    out.mkdir()
    res, sent = finish({"textfile_src": src, "textfile_dir": str(out)})
    assert res["changed"] is True and not res.get("failed") and "warnings" not in res
    assert (out / "gpufleet.prom").read_bytes() == METRICS
    assert sorted(p.name for p in out.iterdir()) == ["gpufleet.prom"]
    # one command, the metrics on its standard input, never through become
    assert len(sent) == 1 and sent[0][1] == METRICS and sent[0][2] is False
    res, sent = finish({"textfile_src": src, "textfile_dir": str(out)})
    assert res["changed"] is False
    assert sorted(p.name for p in out.iterdir()) == ["gpufleet.prom"]


def test_a_directory_it_cannot_write_is_a_warning_not_a_failure(tmp_path, src):
    res, dummy = finish({"textfile_src": src, "textfile_dir": str(tmp_path / "missing")})
    assert not res.get("failed") and res["changed"] is False
    assert res["warnings"][0].startswith("the metrics for node_exporter were not written to %s/gpufleet.prom: "
                                         % (tmp_path / "missing"))


def test_the_host_is_failed_after_its_metrics_are_written(tmp_path, src):
    out = tmp_path / "textfile"
    out.mkdir()
    res, dummy = finish({"textfile_src": src, "textfile_dir": str(out), "fail": True, "msg": "h1: failed in torch: x"})
    assert res["failed"] is True and res["msg"] == "h1: failed in torch: x"
    assert (out / "gpufleet.prom").read_bytes() == METRICS


def test_check_mode_writes_nothing_and_nothing_is_sent_without_a_directory(tmp_path, src):
    out = tmp_path / "textfile"
    out.mkdir()
    res, sent = finish({"textfile_src": src, "textfile_dir": str(out)}, check_mode=True)
    assert res["changed"] is True and sent == [] and list(out.iterdir()) == []
    res, sent = finish({"textfile_src": src, "textfile_dir": ""})
    assert res["changed"] is False and sent == [] and not res.get("failed")
    res, sent = finish({"textfile_src": "", "textfile_dir": str(out), "fail": True})
    assert res["failed"] is True and res["msg"] == "failed" and sent == []
