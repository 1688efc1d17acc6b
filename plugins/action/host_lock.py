# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin gpufleet.inference.host_lock: this run's holder record, made on
the controller, and the module of the same name run on the host once. A lock
another live run holds fails the task, naming the holder (with the caller's
refuse_hint after it); a stale lock broken, a wait, or a release that found
the lock was not this run's any more are said as warnings: one task for each
of taking and releasing.

The run id names the ansible-playbook process this worker is a fork of (the
controller's machine id, boot id, pid namespace, that process's pid and start
time): every host's worker of one run computes the same id, a later run or
another controller a different one, with nothing shared between the forks.
"""

from __future__ import annotations

import json
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
    "refuse_hint": {"type": "str", "default": ""},
    # the variable the path came from, for the message that refuses a bad one
    "path_name": {"type": "str", "default": "path"},
}
ACQUIRE_ONLY = ("playbook", "stale_after", "wait", "force", "refuse_hint")


def refusal(host, path, res, check_mode, hint=""):
    """The message that refuses the run while another live run holds the lock
    (None when this run may go on): a lock taken, none there, or, in check
    mode, a stale one that a real run would break."""
    if res.get("acquired") or not res.get("held") or (check_mode and res.get("stale")):
        return None
    text = "another gpufleet run holds the lock on %s %s: %s (lock %s, held for %s s, waited %s s)." % (
        host, res.get("holder_text") or "", res.get("reason") or "held", path, res.get("age"), res.get("waited", 0))
    return text + (" " + hint.strip() if hint.strip() else "")


def notice(host, res):
    """What to say about a lock taken in an unusual way (a stale lock broken, a
    wait, a stale lock that check mode leaves), or None."""
    if res.get("broke") is not None or res.get("waited", 0) > 0 or (res.get("held") and res.get("stale")):
        return "%s: %s" % (host, res.get("message") or "")
    return None


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
        path = args["path"]
        if not path.startswith("/") or any(c.isspace() for c in path) or path.rstrip("/") == "":
            raise AnsibleActionFail("%s must be an absolute path without spaces, not / itself (got %r); "
                                    "the lock directory is made there as root (default /var/lock/gpufleet, "
                                    "on tmpfs). Nothing was changed." % (args["path_name"], path))
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
        host = task_vars.get("inventory_hostname") or "the host"
        res = self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)
        result.update(res)
        result["run_id"] = run_id
        if res.get("failed"):
            return result
        if args["state"] == "release":
            if not res.get("released"):
                result.setdefault("warnings", []).append(
                    "%s: the host lock %s was not this run's any more (broken by another run?): %s"
                    % (host, args["path"], json.dumps(res.get("holder") or {}, sort_keys=True)))
            return result
        refused = refusal(host, args["path"], res, self._task.check_mode, args["refuse_hint"])
        result["refused"] = refused is not None
        if refused:
            result.update(failed=True, msg=refused)
            return result
        said = notice(host, res)
        if said:
            result.setdefault("warnings", []).append(said)
        return result
