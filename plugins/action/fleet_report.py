# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin gpufleet.inference.fleet_report: the fleet report of one run, on the controller.

Reads every play host's result and stage from hostvars, compares them with the
previous report and the deploy-time venv freezes (plugin_utils report), writes
the JSON, Markdown, HTML and Prometheus files, and returns what changed. It
never touches a host: no connection, no module, no file transfer.
"""

from __future__ import annotations

import json
import os

from ansible.errors import AnsibleActionFail, AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.inference.plugins.plugin_utils.fleet_record import fleet_record
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import store
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report.outliers import DEFAULT_OUTLIER_RATIO

ARGUMENT_SPEC = {
    "out_dir": {"type": "path", "required": True},
    "freeze_dir": {"type": "path"},
    "mode": {"type": "str", "choices": ["deploy", "verify", "rollback"]},
    "hosts": {"type": "list", "elements": "str"},
    "result_var": {"type": "str", "default": "gpufleet_result"},
    "stage_var": {"type": "str", "default": "gpufleet_stage"},
    "reach_var": {"type": "str"},
    "outlier_ratio": {"type": "float", "default": DEFAULT_OUTLIER_RATIO},
    "outliers_fail": {"type": "bool", "default": False},
    "inventory": {"type": "str"},
    "in_check_mode": {"type": "bool", "default": False},
    # a slice of a sliced run writes its part; merge builds the run's report from all parts
    "run_id": {"type": "str", "default": ""},
    "part": {"type": "str", "default": ""},
    "merge": {"type": "bool", "default": False},
    "expect_parts": {"type": "int"},
}


def _plain(value):
    """Templated host data as plain JSON types (what the report stores and compares)."""
    return json.loads(json.dumps(value, default=str))


class _ReadOnce:
    """One host's variables, each rendered at most once. Each read of a
    host's variable renders it whole; the report reads verify_result (a
    host's largest variable) for the record and again to build it."""

    def __init__(self, hostvars):
        self._hostvars = hostvars
        self._read = {}

    def get(self, name, default=None):
        if name not in self._read:
            try:
                self._read[name] = (self._hostvars.get(name), None)
            except AnsibleUndefinedVariable as e:  # defined by a template that cannot be rendered yet
                self._read[name] = (None, e)
        value, error = self._read[name]
        if error is not None:
            raise error
        return default if value is None else value


def host_record(hostvars, host, result_var, stage_var, mode="verify", through=(), reach_var=None):
    """(result, stage) of one host. Its record is built here, as the fleet
    role's record.yml would with status "ok", where the host has none of its
    own but its verification ran in this play (verify.yml records none on the
    host: its verify_result is the record), and where its record still says
    "running" but the host got through the play (it is in ``through``, the
    play's hosts that neither failed nor became unreachable: a failure was
    caught and recorded by the play's rescue, so a host still "running" and
    still in the play ended without one). A host still "running" that is not
    in ``through`` was lost on the connection; the report says so. A host
    with neither (a later serial batch, a host the play never reached) gives
    (None, '')."""
    if host not in hostvars:
        return None, ""
    hv = _ReadOnce(hostvars[host])  # computes the host's variables: once per host

    def read(name):
        try:
            return hv.get(name)
        except AnsibleUndefinedVariable:  # defined by a template that cannot be rendered yet
            return None

    result = read(result_var)
    stage = read(stage_var)
    reach = read(reach_var) if reach_var else None
    if isinstance(reach, dict) and isinstance(reach.get("record"), dict):
        # the reach step's (gpufleet.inference.fleet_reach) stand for the
        # host's own until it sets them
        result = reach["record"] if result is None else result
        stage = reach.get("stage") if stage is None else stage
    if result is None and isinstance(read("verify_result"), dict):
        return _plain(fleet_record(hv, "ok", None, mode)), mode
    if isinstance(result, dict) and result.get("status") == "running" and host in through:
        stage = str(stage or "")
        return _plain(fleet_record(hv, "ok", None, stage)), stage
    if result is not None and not isinstance(result, dict):
        raise AnsibleActionFail("fleet_report: %s of %s must be a dict or undefined (got %s)"
                                % (result_var, host, type(result).__name__))
    return (_plain(result) if result is not None else None), str(stage or "")


class ActionModule(ActionBase):
    """Build and write the fleet report; changed when what the fleet is changed."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _requires_connection = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        ratio = args["outlier_ratio"]
        if not 0 < ratio <= 1:
            raise AnsibleActionFail("fleet_report: outlier_ratio must be a number above 0 and at most 1 (got %r)" % ratio)
        writes = not self._task.check_mode or args["in_check_mode"]
        out_dir = os.path.abspath(args["out_dir"])
        if args["merge"]:
            return self._merge(result, args, out_dir, writes)
        if args["mode"] is None:
            raise AnsibleActionFail("fleet_report: mode is required (deploy, verify or rollback), but with merge: true")
        if bool(args["run_id"]) != bool(args["part"]):
            raise AnsibleActionFail("fleet_report: a slice of a sliced run needs both gpufleet_run_id and gpufleet_report_part "
                                    "(got run id %r, part %r)" % (args["run_id"], args["part"]))
        batch = task_vars.get("ansible_play_batch") or []
        if writes and len(batch) > 1 and not self._task.run_once:
            raise AnsibleActionFail("fleet_report: one report for the whole play: run the task with run_once: true "
                                    "(it would be written once per host of %s)" % ", ".join(batch))

        hosts = args["hosts"] if args["hosts"] is not None else list(task_vars.get("ansible_play_hosts_all") or [])
        hostvars = task_vars.get("hostvars") or {}
        # the play's hosts that neither failed nor became unreachable, in
        # every serial batch so far
        through = frozenset(task_vars.get("ansible_play_hosts") or ())
        results, stages = [], []
        for host in hosts:
            entry, stage = host_record(hostvars, host, args["result_var"], args["stage_var"], args["mode"], through,
                                       args["reach_var"])
            results.append(entry)
            stages.append(stage)
        inventory = args["inventory"]
        if inventory is None:
            inventory = ",".join(str(s) for s in task_vars.get("ansible_inventory_sources") or [])
        run = {
            "mode": args["mode"],
            "playbook": args["mode"] + ".yml",
            "inventory": inventory,
            "hosts": [str(h) for h in hosts],
            "results": results,
            "stages": stages,
            "outlier_ratio": ratio,
            "outliers_fail": args["outliers_fail"],
        }
        if not writes:
            # nothing written, but each host's end of the run is still the
            # report's to say (finish.yml reads it under --check too)
            result.update(skipped=True, changed=False, finish=store.finish_unwritten(run, out_dir, args["freeze_dir"]),
                          msg="check mode: the fleet report is written under --check only with in_check_mode: true")
            return result
        try:
            if args["run_id"]:
                result.update(store.write_part(run, out_dir, args["run_id"], args["part"], args["freeze_dir"]))
            else:
                result.update(store.publish(run, out_dir, args["freeze_dir"]))
        except store.PartsError as exc:
            raise AnsibleActionFail("fleet_report: %s" % exc) from exc
        except OSError as exc:
            raise AnsibleActionFail("fleet_report: cannot write the report under %s: %s" % (out_dir, exc)) from exc
        return result

    def _merge(self, result, args, out_dir, writes):
        """The one report of a sliced run, from the parts its slices wrote."""
        if not args["run_id"]:
            raise AnsibleActionFail("fleet_report: merge needs gpufleet_run_id, the id every slice of the run was given")
        try:
            if not writes:
                run = store.read_parts(out_dir, args["run_id"], args["expect_parts"])
                result.update(skipped=True, changed=False, parts=run["parts"], hosts=len(run["hosts"]),
                              msg="check mode: %d parts of run %s would be merged into one report under %s"
                              % (len(run["parts"]), args["run_id"], out_dir))
                return result
            result.update(store.merge_parts(out_dir, args["run_id"], args["expect_parts"], args["freeze_dir"]))
        except store.PartsError as exc:
            raise AnsibleActionFail("fleet_report: %s" % exc) from exc
        except OSError as exc:
            raise AnsibleActionFail("fleet_report: cannot merge the parts under %s: %s" % (out_dir, exc)) from exc
        return result
