# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin gpufleet.inference.verify_host: the verify role's checks, the
verification and its summary in one task.

A fleet verification used to cost the controller six tasks per host (the
playbook's checks, the role's checks, the module, two set_facts, textfile
stats); every task is a worker fork and a round of templating per host. Here:

1. the caller's check groups (the role's preflight, a playbook's own inputs):
   the types of an entry point of an argument spec, read from its file once
   per worker, and the value rules the caller rendered into messages. A bad
   value fails the task before anything is read on the host, with the same
   wording as gpufleet.inference.check_vars;
2. where asked, directories that must exist and be writable on the host (one
   stat each, only for a non-empty path);
3. gpufleet.inference.torch_verify, once;
4. the summary every later step reads (passed, the link and its history, the
   GPU and torch facts, the sgl_kernel marker...), returned in the result.

A host lost during the verification is not dropped: the summary says
unreachable, and the task itself is ok, so that the caller records it.
A verification that did not pass never fails this task either (the summary's
``passed`` is false, with ``fail_message``); the caller decides.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure, AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.inference.plugins.plugin_utils.value_rules import rule_errors

try:
    import yaml
    _Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
except ImportError:  # pragma: no cover - ansible-core requires PyYAML
    yaml = None

MODULE = "gpufleet.inference.torch_verify"
_SPECS = {}
# the collection's root: a check group that names a role reads its spec there
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# torch_verify's options taken from the verify role's variables (from_role:
# verify): (option, variable, conversion). Each variable is templated once per
# task, for its type check and for the module alike.
ROLE_OPTIONS = {
    "verify": (
        ("link", "verify_venv_link", str),
        ("venv", "verify_venv", str),
        # a hand-built venv directory at the stable path counts as the active one
        ("adopt", "verify_adopt_existing_venv", bool),
        ("imports", "verify_imports", None),
        ("smoke", "verify_smoke", bool),
        ("kernels", "verify_kernels", bool),
        ("kernel_tolerances", "verify_kernel_tolerances", None),
        ("expect", "verify_expect", None),
        ("timeout", "verify_timeout", int),
        ("collectives", "verify_collectives", bool),
        ("collectives_sizes_mib", "verify_collectives_sizes_mib", None),
        # as `uv pip freeze` lists them
        ("packages", "verify_record_packages", bool),
        ("gpu_required", "verify_gpu_required", bool),
        # how deep: auto, in_service, full (a busy GPU is never disturbed)
        ("mode", "verify_mode", str),
        ("busy_memory_mib", "verify_busy_memory_mib", int),
        ("proof", "verify_proof", bool),
        # the served model and its serving backends
        ("model", "verify_model", str),
        ("model_config", "verify_model_config", None),
        ("model_quant_config", "verify_model_quant_config", None),
        ("backend_families", "verify_backend_families", None),
        ("tp_size", "verify_tp_size", int),
        ("backend_preference", "verify_backend_preference", None),
        ("backend_required", "verify_backend_required", None),
        ("sglang_version", "verify_sglang_version", str),
        ("model_jit", "verify_model_jit", str),
    ),
}


def _convert(value, kind):
    if kind is bool:
        return boolean(value, strict=False)
    if kind is int:
        return int(value)
    if kind is str:
        return "" if value is None else str(value)
    return value


def role_spec(role):
    """The path of a role's argument spec in this collection."""
    return os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml")


def load_options(path, entry_point):
    """The options of one entry point of a role's meta/argument_specs.yml
    (parsed once per file and process: a worker verifies one host, but the
    specs of a role are read by every task of every host)."""
    key = (path, os.path.getmtime(path))
    if key not in _SPECS:
        with open(path, "rb") as f:
            _SPECS[key] = (yaml.load(f, Loader=_Loader) or {}).get("argument_specs") or {}
    specs = _SPECS[key]
    if entry_point not in specs:
        raise AnsibleActionFail("verify_host: %s has no entry point %r" % (path, entry_point))
    return specs[entry_point].get("options") or {}


def summarize(res, link_default):
    """What the verification says, from torch_verify's result (or a stand-in
    for an unreachable host): the values the roles and the report read."""
    link = res.get("link") or {}
    unreachable = bool(res.get("unreachable"))
    failed = bool(res.get("failed")) or unreachable
    facts = res.get("ansible_facts") or {}
    torch = facts.get("gpufleet_torch") or {}
    markers = torch.get("markers") or {}
    sgl = markers.get("gpufleet-sgl_kernel.json") or {}
    history = link.get("history") or []
    active = link.get("active_venv") or ""
    msg = res.get("msg") or "failed"
    target = link.get("target") or ""
    if not failed:
        fail_message = ""
    elif unreachable:
        fail_message = "host unreachable while verifying: " + msg
    else:
        fail_message = "verification of %s failed: %s" % (target or link_default, msg)
    return {
        "link_path": link.get("link_path") or link_default,
        "history_path": link.get("history_path") or "",
        "active_venv": active,
        "history": history,
        "link_is_directory": bool(link.get("link_is_directory")),
        "target": target,
        # the venv before the active one in the history (activation recomputes it)
        "previous_venv": history[-2] if len(history) > 1 and history[-1] == active else "",
        # not "unreachable": that key would make the task itself unreachable
        "host_unreachable": unreachable,
        "gpu": facts.get("gpufleet_gpu") or {},
        # packages and markers are kept once, below, not twice in the report
        "torch": {k: v for k, v in torch.items() if k not in ("packages", "markers", "gpu_use", "proof")},
        "packages": torch.get("packages") or {},
        "mismatches": res.get("mismatches") or [],
        "sgl_kernel_abi_key": sgl.get("abi_key") or "",
        # the GPU targets the installed sgl_kernel wheel carries (its arch audit)
        "sgl_kernel_targets": sgl.get("compiled_targets") or [],
        # the published wheel or a source build, and why (its marker's choice)
        "sgl_kernel_choice": sgl.get("choice") or {},
        # what each GPU was doing and what the run left out (mode, busy GPUs, skips)
        "gpu_use": torch.get("gpu_use") or {},
        # full verification refused before any CUDA work: a GPU is busy
        "busy_refused": bool(res.get("busy_refused")),
        # the age of the last numeric pass per GPU under this stack
        "proof": torch.get("proof") or {},
        # deploy.yml's record in the verified venv (its fast path checks it)
        "deploy_stamp": markers.get("gpufleet-deployed.json") or {},
        # none: check mode, for a venv only a real run would create (neither verified nor failed)
        "passed": None if not failed and not res.get("probed", True) else not failed,
        "message": msg if failed else "",
        "fail_message": fail_message,
    }


def expect_deploy_key(summary, key, host):
    """deploy.yml's fast path: the verified venv must still carry the deploy
    key the run chose it for (another run may have switched the stable path
    while this one waited for the host lock). A venv without it did not pass,
    and nothing was changed; one with it says so in ``msg``."""
    found = (summary.get("deploy_stamp") or {}).get("key") or ""
    if found == key:
        summary["msg"] = ("deploy key %s is already active (%s): verified it, nothing else to do; "
                          "gpufleet_full_run=true walks the whole chain" % (key, summary["target"]))
        return
    summary["passed"] = False
    summary["fail_message"] = summary["message"] = (
        "the active venv changed after %s was reached (another run?): %s does not carry deploy key %s; "
        "nothing was changed, re-run." % (host, summary["target"] or summary["link_path"], key))


class ActionModule(ActionBase):
    """Check the inputs, verify once, summarize."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("checks", "writable_dirs", "verify", "deploy_key", "from_role"))
    # this task's templated variables (an action object serves one host's task)
    _values = None

    def _check(self, checks, task_vars):
        """Every error of every check group, types first (check_vars' wording)."""
        type_errors, errors = [], []
        for group in checks or []:
            if not isinstance(group, dict) or not ("spec" in group or "role" in group):
                raise AnsibleActionFail("verify_host: each of checks must be a dict with role or spec (got %r)"
                                        % (group,))
            entry_point = group.get("entry_point", "main")
            options = load_options(group.get("spec") or role_spec(group["role"]), entry_point)
            provided = {}
            for name in options:
                if name in task_vars:
                    provided[name] = self._value(name, task_vars)
            validated = ArgumentSpecValidator(options).validate(provided)
            type_errors.extend(str(e) for e in validated.errors.messages)
            listed = group.get("errors") or []
            if not isinstance(listed, list) or not all(isinstance(e, str) for e in listed):
                raise AnsibleActionFail("verify_host: the errors of a check group must be a list of messages")
            if group.get("role"):
                # the role's value rules (plugin_utils/rules/<role>.py), on the values just checked
                errors.extend(rule_errors(group["role"], entry_point, provided))
            errors.extend(e.strip() for e in listed if e.strip())
        if type_errors:
            return "Validation of arguments failed:\n%s" % "\n".join(type_errors + errors), type_errors + errors
        if errors:
            return "; ".join(errors), errors
        return None, []

    def _value(self, name, task_vars):
        """A task variable, templated once per task (the checks and the module read the same)."""
        if self._values is None:
            self._values = {}
        if name not in self._values:
            self._values[name] = self._templar.template(task_vars[name])
        return self._values[name]

    def _role_options(self, role, task_vars):
        """torch_verify's options from a role's variables (ROLE_OPTIONS)."""
        if role not in ROLE_OPTIONS:
            raise AnsibleActionFail("verify_host: from_role must be one of %s (got %r)" % (", ".join(ROLE_OPTIONS), role))
        options = {}
        for option, name, kind in ROLE_OPTIONS[role]:
            if name not in task_vars:
                continue
            value = self._value(name, task_vars)
            try:
                options[option] = _convert(value, kind)
            except (TypeError, ValueError) as exc:
                words = {bool: "true or false", int: "an integer", str: "a string"}[kind]
                raise AnsibleActionFail("verify_host: %s must be %s (got %r): %s" % (name, words, value, exc))
        return options

    def _writable(self, dirs, task_vars):
        """The message for each directory that is not there or not writable."""
        out = []
        user = task_vars.get("ansible_user") or "the connecting user"
        for name, path in sorted((dirs or {}).items()):
            if not path:
                continue
            st = self._execute_module(module_name="ansible.builtin.stat",
                                      module_args={"path": path, "get_checksum": False},
                                      task_vars=task_vars).get("stat") or {}
            if st.get("isdir") and st.get("writeable"):
                continue
            why = ("does not exist" if not st.get("exists") else "not a directory" if not st.get("isdir")
                   else "not writable")
            out.append("%s must be an existing directory that %s can write (got '%s': %s)" % (name, user, path, why))
        return out

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        task_vars = task_vars or {}
        args = self._task.args
        verify = dict(args.get("verify") or {})
        if not verify.get("link") and not args.get("from_role"):
            raise AnsibleActionFail("verify_host: verify.link (the stable path) is required")
        msg, errors = self._check(args.get("checks"), task_vars)
        if msg:
            result.update(failed=True, msg=msg, argument_errors=errors)
            return result
        if args.get("from_role"):
            verify = dict(self._role_options(args["from_role"], task_vars), **verify)
            if not verify.get("link"):
                raise AnsibleActionFail("verify_host: the stable path (verify_venv_link) is required")
        try:
            errors = self._writable(args.get("writable_dirs"), task_vars)
            if errors:
                result.update(failed=True, msg="; ".join(errors), argument_errors=errors)
                return result
            res = self._execute_module(module_name=MODULE, module_args=verify, task_vars=task_vars)
        except AnsibleConnectionFailure as e:
            res = {"unreachable": True, "msg": str(e)}
        except AnsibleError:
            raise
        # the module's own result (its facts included) stays as it was; the
        # summary is beside it
        res.pop("invocation", None)
        res.pop("_ansible_parsed", None)
        summary = summarize(res, verify["link"])
        key = args.get("deploy_key") or ""
        if key and summary["passed"]:
            expect_deploy_key(summary, key, task_vars.get("inventory_hostname") or "the host")
        failed = bool(res.pop("failed", False))
        res.pop("unreachable", None)
        result.update(res)
        result.update(summary)
        result["verify_failed"] = failed
        result["changed"] = False
        return result
