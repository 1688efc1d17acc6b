# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin gpufleet.inference.fleet_reach: the first task of deploy.yml
and rollback.yml on each host, in one task.

1. gpufleet.inference.venv_link_info on the host (read-only, the connection
   is made here): the stable path, the active venv and the deploy key
   recorded in it. A host that cannot be reached is recorded as unreachable
   (stage connect) instead of failing the task, so that the report and the
   final failure still cover it. The module's own failure (a stable path that
   is not a symlink, a bad gpufleet_venv_link) does not fail the task either:
   it is left to the validation and the stages, which name the variable.
2. On the controller, deploy.yml's choice between the fast path and the full
   chain: the deploy key (filter gpufleet.inference.deploy_key: the
   collection's code and every deploy input the host has) against the one
   recorded in the active venv. Only a run of the whole chain (no --tags, and
   no --skip-tags that names a tag of the chain: see whole_run) without
   full_run may take the fast path.
3. Whether this run takes the host lock (``take_lock``): always, except on
   deploy.yml's fast path of a host where no lock is there (``lock_path``,
   whose existence the same module run reads). The fast path only reads
   (verifies) the host, as verify.yml does, which takes no lock; a host where
   a lock is there takes the lock step as before: it waits for a live holder,
   refuses it, or breaks a stale one. Two round trips per host (this one and
   the verification) instead of four.

The result (registered by the playbook) carries the host's first record
(``record``: running, or unreachable), the ``stage`` a failure from here on is
recorded at, ``deploy_key``, ``fast`` and ``whole_run``. It was a module task
and a set_fact: two workers per host, now one.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.inference.plugins.plugin_utils.keys import KeyInputError, deploy_key

MODULE = "gpufleet.inference.venv_link_info"
# The tags of deploy.yml's chain: its stages, the roles' own <role>_<phase>
# tags, and the special ones. A skipped tag outside these (molecule's
# notest, a site playbook's own tags) leaves nothing of the chain out.
STAGE_TAGS = frozenset(("preflight", "cuda", "venv", "torch", "flashinfer", "sgl_kernel", "sglang", "verify",
                        "activate"))
ROLE_TAG_PREFIXES = ("cuda_toolkit_", "uv_venv_", "torch_nightly_", "flashinfer_", "sgl_kernel_", "sglang_", "verify_",
                     "activate_", "fleet_")
SPECIAL_TAGS = frozenset(("all", "always", "tagged", "untagged"))
MARKER = "gpufleet-deployed.json"
ARGUMENT_SPEC = {
    "link": {"type": "raw", "required": True},
    "adopt": {"type": "raw", "default": False},
    "mode": {"type": "str", "required": True, "choices": ["deploy", "rollback"]},
    "full_run": {"type": "raw", "default": False},
    "first_stage": {"type": "str", "default": "connect"},
    "root": {"type": "path", "required": True},
    "lock_path": {"type": "str", "default": ""},
}


def _flag(value):
    """A boolean input, leniently (a bad value is the validation's to name, later)."""
    try:
        return boolean(value, strict=False)
    except TypeError:
        return False


def choose(res, mode, key, recorded_ok, first_stage):
    """(record, stage, fast) from the module's result and the deploy key."""
    if res.get("unreachable"):
        return ({"status": "unreachable", "stage": "connect", "message": res.get("msg") or "unreachable"},
                "connect", False)
    recorded = ((res.get("markers") or {}).get(MARKER) or {}) if recorded_ok else {}
    fast = mode == "deploy" and bool(key) and isinstance(recorded, dict) and recorded.get("key") == key
    return {"status": "running"}, "verify" if fast else first_stage, fast


def take_lock(res, mode, fast, lock_path):
    """Whether the run takes the host lock: not on the fast path of a host where
    the lock directory is known not to be there."""
    absent = (res.get("exists") or {}).get(lock_path) is False  # not read: None
    return not (mode == "deploy" and fast and absent)


def chain_tag(tag):
    """A tag that deploy.yml's chain uses (or a special tag that selects by tagging)."""
    return tag in STAGE_TAGS or tag in SPECIAL_TAGS or tag.startswith(ROLE_TAG_PREFIXES)


def whole_run(run_tags, skip_tags):
    """The run walks the whole chain: no --tags, and no --skip-tags that names a tag of it."""
    if list(run_tags or ["all"]) != ["all"]:
        return False
    return not any(chain_tag(str(tag)) for tag in skip_tags or [])


class ActionModule(ActionBase):
    """Reach the host, read its stable path and deploy key, choose the path."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        module_args = {"link": args["link"], "markers": [MARKER], "adopt": _flag(args["adopt"])}
        # a lock path that is not absolute is the lock step's to refuse, naming it
        lock_path = args["lock_path"] if str(args["lock_path"]).startswith("/") else ""
        if args["mode"] == "deploy" and lock_path:
            module_args["exists"] = [lock_path]
        try:
            res = self._execute_module(module_name=MODULE, module_args=module_args, task_vars=task_vars)
        except AnsibleConnectionFailure as exc:
            res = {"unreachable": True, "msg": str(exc)}
        res.pop("invocation", None)
        res.pop("_ansible_parsed", None)
        lost = bool(res.pop("unreachable", False))
        link_failed = bool(res.pop("failed", False))
        mode = args["mode"]
        key = ""
        if mode == "deploy" and not lost:
            host = task_vars.get("inventory_hostname")
            try:
                key = deploy_key(task_vars["hostvars"][host], args["root"])
            except KeyInputError as exc:
                raise AnsibleActionFail(str(exc)) from exc
        whole = whole_run(task_vars.get("ansible_run_tags"), task_vars.get("ansible_skip_tags"))
        record, stage, fast = choose(dict(res, unreachable=lost), mode, key,
                                     whole and not _flag(args["full_run"]), args["first_stage"])
        result.update(res)
        result.update({
            "changed": False,
            # not "unreachable" or "failed": either would end the host here
            "host_unreachable": lost,
            "link_failed": link_failed,
            "record": record,
            "stage": stage,
            "deploy_key": key,
            "whole_run": whole,
            "fast": fast,
            "take_lock": take_lock(res, mode, fast, lock_path),
        })
        return result
