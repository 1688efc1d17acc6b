# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin gpufleet.inference.host_lock: this run's holder record, made on
the controller, and the module of the same name run on the host once.

The run id names the ansible-playbook process this worker is a fork of (the
controller's machine id, boot id, pid namespace, that process's pid and start
time): every host's worker of one run computes the same id, a later run or
another controller a different one, with nothing shared between the forks.
"""

from __future__ import annotations

import os

from ansible import constants as C
from ansible import context
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.inference.plugins.module_utils.host_lock import this_run, whoami

MODULE = "gpufleet.inference.host_lock"
ARGUMENT_SPEC = {
    "path": {"type": "str", "required": True},
    "state": {"type": "str", "choices": ["acquire", "release"], "default": "acquire"},
    "run_id": {"type": "str"},
    "playbook": {"type": "str"},
    "stale_after": {"type": "int", "default": 43200},
    "wait": {"type": "int", "default": 0},
    "force": {"type": "bool", "default": False},
}
ACQUIRE_ONLY = ("playbook", "stale_after", "wait", "force")


def worker_pid():
    """This process: a worker fork of ansible-playbook, whose run it names."""
    return os.getpid()


def run_salt():
    """Where /proc gives no start time, what tells two runs of one pid apart:
    the local temporary directory ansible-playbook made at its start (random,
    inherited by every worker fork)."""
    return str(getattr(C, "DEFAULT_LOCAL_TMP", "") or "")


def default_playbook():
    """The playbook files given to ansible-playbook, by name ('' when there are none)."""
    try:
        args = context.CLIARGS.get("args") or ()
    except AttributeError:
        args = ()
    return ", ".join(os.path.basename(str(a)) for a in args)


class ActionModule(ActionBase):
    """Build the holder record (acquire) or the run id (release), then run the module once."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        if args["state"] == "release":
            extra = sorted(k for k in ACQUIRE_ONLY if k in self._task.args)
            if extra:
                raise AnsibleActionFail("host_lock: %s only with state=acquire" % ", ".join(extra))
            run_id = args["run_id"] or this_run(worker_pid(), run_salt())[3]
            module_args = {"path": args["path"], "state": "release", "run_id": run_id}
        else:
            if args["run_id"]:
                raise AnsibleActionFail("host_lock: run_id only with state=release; "
                                        "state=acquire takes the lock for this run's own id")
            playbook = default_playbook() if args["playbook"] is None else args["playbook"]
            me = whoami(playbook, worker_pid(), salt=run_salt())
            run_id = me["holder"]["run_id"]
            module_args = {"path": args["path"], "state": "acquire", "holder": me["holder"], "live": me["live"],
                           "stale_after": args["stale_after"], "wait": args["wait"], "force": args["force"]}
        result.update(self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars))
        result["run_id"] = run_id
        return result
