# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Stdout callback gpufleet.inference.fleet: ansible.builtin.default's output, with a host the fleet
playbooks could not reach, and each host the finish fails, in one line; the report step's tasks said as the
controller's."""

from __future__ import annotations

DOCUMENTATION = r"""
name: fleet
type: stdout
short_description: The default output, a host that was not reached in one line
description:
  - The output of C(ansible.builtin.default), with its options, but for two steps of the fleet playbooks
    (C(deploy.yml), C(verify.yml), C(rollback.yml)).
  - "The reach step (C(gpufleet.inference.fleet_reach)) and the verification (C(gpufleet.inference.verify_host))
    say a host they could not reach in one line,
    C(unreachable: [host]: why), instead of C(ok:) (the run goes on without it and records it)."
  - "The finish step (C(gpufleet.inference.fleet_finish)) fails each host that did not pass in one line,
    C(failed: [host]: the report's words), without the task's source; a host already said unreachable is not
    said again."
  - "The report step's tasks (C(gpufleet.inference.fleet_report) and the line that says where the report is) run
    once, on the controller, under the first host's name: they are said as C(localhost)'s, not as a host's that
    may not have been reached."
extends_documentation_fragment:
  - ansible.builtin.default_callback
  - ansible.builtin.result_format_callback
requirements:
  - set as the stdout callback (C(stdout_callback = gpufleet.inference.fleet) in ansible.cfg)
"""

from ansible import constants as C
from ansible.plugins.callback.default import CallbackModule as DefaultCallback

# the steps that find a host unreachable, record it and go on (result host_unreachable)
REACHING = ("fleet_reach", "verify_host")
FINISH = "fleet_finish"
# the report step: its tasks run once, on the controller (run_once), under the first host's name
REPORT_FILE = "/roles/fleet/tasks/report.yml"
CONTROLLER = "localhost"


def _parts(result):
    """(task, host name, result dict) of a task result, for ansible-core before and after 2.19."""
    task = getattr(result, "task", None) or result._task
    host = getattr(result, "host", None) or result._host
    res = getattr(result, "result", None)
    return task, host.get_name(), res if res is not None else result._result


def _action(task):
    return str(task.action or "").rsplit(".", 1)[-1]


def _on_controller(task):
    """Whether the task is one of the report step's, run once on the controller."""
    return bool(task.run_once) and (task.get_path() or "").rsplit(":", 1)[0].endswith(REPORT_FILE)


class CallbackModule(DefaultCallback):
    """ansible.builtin.default, a host that was not reached and a host the finish fails in one line each."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "gpufleet.inference.fleet"

    def __init__(self):
        super().__init__()
        self._said_unreachable = set()

    def host_label(self, result):
        """The controller's name for the report step's tasks, the host's (and its delegate) for the others."""
        if _on_controller(_parts(result)[0]):
            return CONTROLLER
        return DefaultCallback.host_label(result)

    def _one_line(self, task, word, host, message, color):
        if self._last_task_banner != task._uuid:
            self._print_task_banner(task)
        self._display.display("%s: [%s]: %s" % (word, host, " ".join(str(message).split())), color=color)

    def v2_runner_on_ok(self, result):
        task, host, res = _parts(result)
        if _action(task) in REACHING and res.get("host_unreachable"):
            self._said_unreachable.add(host)
            message = (res.get("record") or {}).get("message") or res.get("msg") or "unreachable"
            self._one_line(task, "unreachable", host, message, C.COLOR_UNREACHABLE)
            return
        super().v2_runner_on_ok(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        task, host, res = _parts(result)
        if _action(task) == FINISH and not ignore_errors:
            self._handle_warnings(res)
            if host not in self._said_unreachable:
                self._one_line(task, "failed", host, res.get("msg") or "failed", C.COLOR_ERROR)
            return
        super().v2_runner_on_failed(result, ignore_errors)
