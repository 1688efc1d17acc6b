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
3. where the Xid errors are read as root (verify_xid: become), the answer
   of the verify role's task before this one (gpufleet.inference.gpu_facts
   with become, registered as verify_xid_root: xid_root) handed to the
   verification (a become that failed is an answer that says why, never a
   lost host);
4. gpufleet.inference.torch_verify, once (with a model whose backends
   qualified, it also writes the serving flags inside the venv: the only
   write, and the only reason this task reports changed);
5. the summary every later step reads (passed, the link and its history, the
   GPU and torch facts, the sgl_kernel marker...), returned in the result.

A host lost during the verification is not dropped: the summary says
unreachable, and the task itself is ok, so that the caller records it.
A verification that did not pass never fails this task either (the summary's
``passed`` is false, with ``fail_message``); the caller decides.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Mapping

from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure, AnsibleError, AnsibleUndefinedVariable
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.inference.plugins.plugin_utils.nightly import torch_pin
from ansible_collections.gpufleet.inference.plugins.plugin_utils.value_rules import rule_errors

try:
    from ansible.template import is_trusted_as_template
except ImportError:  # ansible-core < 2.19: a string is a template unless marked unsafe
    from ansible.utils.unsafe_proxy import AnsibleUnsafe

    def is_trusted_as_template(value):
        return isinstance(value, str) and not isinstance(value, AnsibleUnsafe)

try:
    import yaml
    _Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
except ImportError:  # pragma: no cover - ansible-core requires PyYAML
    yaml = None

MODULE = "gpufleet.inference.torch_verify"
# what the verify role's Xid read as root (verify_xid: become) registers
XID_ROOT = "verify_xid_root"
_SPECS = {}
# the roles whose specs verify.yml's and deploy.yml's verifications check
PRELOAD_ROLES = ("verify", "fleet")
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
        # read (as the connecting user), become (as root, in the role's task before this one), off
        ("xid", "verify_xid", str),
        # the serving flags' file names inside the venv
        ("serving_name", "verify_serving_name", str),
        # a request served by sglang with the selected flags: auto, off
        ("served_check", "verify_served_check", str),
        ("served_timeout", "verify_served_timeout", int),
    ),
}


# "{{ name | default(literal) }}": how most of the verify role's defaults
# take a fleet-wide variable. Compiling a template is most of what a
# verification costs the controller (each host's task is a fresh fork: what
# one compiles, the next compiles again), so _value renders this one form
# itself, with Jinja's result: the variable's own value where it is defined,
# else the literal. Anything else goes to the templar.
_DEFAULT_OF = re.compile(r"\{\{-?\s*([A-Za-z_][A-Za-z0-9_]*)\s*\|\s*default\(\s*(.*?)\s*\)\s*-?\}\}", re.S)
# "{{ name }}": a variable's own value
_NAME_ONLY = re.compile(r"\{\{-?\s*([A-Za-z_][A-Za-z0-9_]*)\s*-?\}\}")
_JINJA_CONSTANTS = re.compile(r"\b(true|false|none)\b")
_LITERAL_TYPES = (str, int, float, bool, type(None), list, dict)


def default_of(raw):
    """(name, literal) where raw is exactly "{{ name | default(literal) }}"
    with a literal Python reads the same (a quoted string without quotes
    inside, a number, true/false/none, a list or dict of those), else None."""
    if not isinstance(raw, str) or not is_trusted_as_template(raw):
        return None
    match = _DEFAULT_OF.fullmatch(raw.strip())
    if match is None:
        return None
    text = match.group(2)
    if text[:1] in ("'", '"'):
        # one plain string, nothing after it
        if len(text) < 2 or text[-1] != text[0] or text[0] in text[1:-1] or "\\" in text:
            return None
        return match.group(1), text[1:-1]
    if "'" in text or '"' in text:
        return None
    try:
        literal = ast.literal_eval(_JINJA_CONSTANTS.sub(lambda m: m.group(1).capitalize(), text))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(literal, _LITERAL_TYPES):
        return None
    return match.group(1), literal


class _Templar(Exception):
    """A value the fast paths leave to the templar."""


# The verify role's two computed defaults, verify_torch_pin and verify_expect:
# each host's verification rendered both with Jinja (two compiles a host,
# the largest part of the checks' cost), though only inventory values go into
# them. Where a host's variable is still the role's own default (the same
# text), it is computed here instead, the way the templates compute it, from
# the values of the variables they read (the pin by the function the
# template's filter is, plugin_utils/nightly.py's torch_pin); any value these
# do not take as plainly as Jinja does (a pin that is not a string, a mapping
# that is not a dict, a variable that renders undefined) is the templar's.
COMPUTED_DEFAULTS = ("verify_torch_pin", "verify_expect")
_UNDEFINED = object()


def role_defaults(role, names):
    """The raw text of some of a role's defaults (defaults/main.yml)."""
    path = os.path.join(ROOT, "roles", role, "defaults", "main.yml")
    try:
        with open(path, "rb") as f:
            found = yaml.load(f, Loader=_Loader) or {}
    except (OSError, yaml.YAMLError, AttributeError):  # pragma: no cover - the templar renders them then
        return {}
    return dict((name, found[name]) for name in names if isinstance(found.get(name), str))


_ROLE_DEFAULTS = role_defaults("verify", COMPUTED_DEFAULTS)


def _plain(value):
    """value, where it is one that the template hands nightly_torch_pin as
    it is here (a string, a number that is not a bool, or nothing)."""
    if value and (isinstance(value, bool) or not isinstance(value, (str, int))):
        raise _Templar()
    return value


def _item(mapping, key):
    """Jinja's mapping.key, or _UNDEFINED; only for a dict."""
    if not isinstance(mapping, dict):
        raise _Templar()
    return mapping.get(key, _UNDEFINED)


def _or_default(value, default):
    """Jinja's value | default(default, true)."""
    return default if value is _UNDEFINED or not value else value


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


def load_specs(path):
    """A role's meta/argument_specs.yml, parsed once per file and process."""
    key = (path, os.path.getmtime(path))
    if key not in _SPECS:
        with open(path, "rb") as f:
            _SPECS[key] = (yaml.load(f, Loader=_Loader) or {}).get("argument_specs") or {}
    return _SPECS[key]


def load_options(path, entry_point):
    """The options of one entry point of a role's meta/argument_specs.yml."""
    specs = load_specs(path)
    if entry_point not in specs:
        raise AnsibleActionFail("verify_host: %s has no entry point %r" % (path, entry_point))
    return specs[entry_point].get("options") or {}


# The specs a verification checks, parsed when this module is imported.
# ansible-playbook imports a task's action plugin in its own process (the
# strategy looks the action up) before it forks a worker per host, and each
# worker finds the module already imported: the workers share these instead
# of each parsing two YAML files again (2-3 ms of CPU a host).
for _role in PRELOAD_ROLES:
    try:
        load_specs(role_spec(_role))
    except (OSError, yaml.YAMLError, AttributeError):  # pragma: no cover - read again, and said, when checked
        pass


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


def xid_answer(res):
    """The Xid answer of a gpu_facts read made as root (the task's registered
    result), for torch_verify's xid_answer: None on a host without GPUs
    (there is nothing to read), else the read's own answer, or one that says
    why the log was not read."""
    gpu = (res.get("ansible_facts") or {}).get("gpufleet_gpu")
    if gpu is not None and gpu.get("present") is False:
        return None
    found = (gpu or {}).get("xid")
    if isinstance(found, dict):
        return found
    msg = res.get("msg")
    if (res.get("unreachable") or "exception" in res) and isinstance(msg, str) and msg.strip():
        # an error raised on the way (the become, the connection): its first
        # line, not the context ansible-core adds below it
        msg = msg.strip().splitlines()[0]
    return {"source": None, "events": [], "count": 0, "cursor": None,
            "error": "the kernel log was not read as root: %s" % (msg or "no answer")}


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
    _VALID_ARGS = frozenset(("checks", "writable_dirs", "verify", "deploy_key", "from_role", "role_inputs", "xid_root"))
    # this task's templated variables (an action object serves one host's task)
    _values = None
    _rendering = frozenset()

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

    def _var(self, name, task_vars, default, falsy=False):
        """Jinja's ``name | default(default[, true])`` for a computed default."""
        if name not in task_vars:
            return default
        try:
            value = self._value(name, task_vars)
        except AnsibleUndefinedVariable:
            raise _Templar()
        return default if falsy and not value else value

    def _torch_pin(self, task_vars):
        """verify_torch_pin's default: nightly's torch_pin over the values its
        template hands the filter nightly_torch_pin (torch_nightly_versions.torch,
        torch_nightly_version_base.torch, torch_nightly_date,
        torch_nightly_cuda_variant), each as the template takes it."""
        version = _or_default(_item(self._var("torch_nightly_versions", task_vars, {}, True), "torch"), "")
        base = _or_default(_item(self._var("torch_nightly_version_base", task_vars, {}, True), "torch"), "")
        date = self._var("torch_nightly_date", task_vars, "", True)
        variant = self._var("torch_nightly_cuda_variant", task_vars, "", True)
        if version and not isinstance(version, str):
            raise _Templar()
        return torch_pin(version, _plain(base), _plain(date), _plain(variant))

    def _expect(self, task_vars):
        """verify_expect's default: consistent, the pinned torch, then gpufleet_expect over them."""
        expect = self._var("gpufleet_expect", task_vars, {})
        if not isinstance(expect, dict):
            if isinstance(expect, Mapping):
                raise _Templar()
            return expect
        if "verify_torch_pin" not in task_vars:
            raise _Templar()
        pin = self._value("verify_torch_pin", task_vars)
        if not isinstance(pin, str):
            raise _Templar()
        out = {"consistent": True}
        if pin:
            out["torch_version"] = pin
        out.update(expect)
        return out

    def _computed(self, name, raw, task_vars):
        """(True, value) where a computed default is computed here, else (False, None)."""
        if name not in _ROLE_DEFAULTS or not isinstance(raw, str) or raw != _ROLE_DEFAULTS[name] \
                or not is_trusted_as_template(raw):
            return False, None
        try:
            return True, (self._torch_pin if name == "verify_torch_pin" else self._expect)(task_vars)
        except _Templar:
            return False, None

    def _names_dict(self, raw, task_vars):
        """(True, value) for a dict whose values are each plain text or
        exactly "{{ name }}" of a variable that is set (verify.yml's
        verify_writable_dirs), rendered without Jinja; else (False, None)."""
        if not isinstance(raw, dict) or not raw:
            return False, None
        out = {}
        for key, text in raw.items():
            if not isinstance(key, str) or not isinstance(text, str):
                return False, None
            if "{" not in text and "%" not in text:
                out[key] = text
                continue
            match = _NAME_ONLY.fullmatch(text.strip()) if is_trusted_as_template(text) else None
            if match is None or match.group(1) not in task_vars or match.group(1) in self._rendering:
                return False, None
            try:
                out[key] = self._value(match.group(1), task_vars)
            except AnsibleUndefinedVariable:
                return False, None
        return True, out

    def _value(self, name, task_vars):
        """A task variable, templated once per task (the checks and the module read the same)."""
        if self._values is None:
            self._values, self._rendering = {}, set()
        if name not in self._values:
            raw = task_vars[name]
            if name not in self._rendering:
                self._rendering.add(name)
                try:
                    done, value = self._computed(name, raw, task_vars)
                finally:
                    self._rendering.discard(name)
                if done:
                    self._values[name] = value
                    return value
            done, value = self._names_dict(raw, task_vars)
            if done:
                self._values[name] = value
                return value
            simple = default_of(raw)
            value = None
            if simple is not None and simple[0] not in self._rendering:
                self._rendering.add(name)
                try:
                    value = self._value(simple[0], task_vars) if simple[0] in task_vars else simple[1]
                except AnsibleUndefinedVariable:
                    # defined, but undefined once rendered: the templar says what Jinja makes of it
                    simple = None
                finally:
                    self._rendering.discard(name)
            else:
                simple = None
            self._values[name] = value if simple is not None else self._templar.template(raw)
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

    def _role_inputs(self, role, task_vars):
        """checks, writable_dirs, deploy_key and xid_root from the verify
        role's variables: its own check group unless deploy.yml's preflight
        made it (fleet_preflight_done), then verify_checks;
        verify_writable_dirs; verify_deploy_key; the Xid read as root that the
        role's task before this one registered (verify_xid_root)."""
        if role != "verify":
            return {}
        out = {}
        checks = self._value("verify_checks", task_vars) if "verify_checks" in task_vars else []
        if not isinstance(checks, list):
            raise AnsibleActionFail("verify_host: verify_checks must be a list of check groups (got %r)" % (checks,))
        try:
            # fleet_preflight_done | default(false)
            done = self._var("fleet_preflight_done", task_vars, False)
        except _Templar:
            done = False
        out["checks"] = ([] if done else [{"role": "verify"}]) + list(checks)
        if "verify_writable_dirs" in task_vars:
            out["writable_dirs"] = self._value("verify_writable_dirs", task_vars)
        if "verify_deploy_key" in task_vars:
            out["deploy_key"] = self._value("verify_deploy_key", task_vars)
        if XID_ROOT in task_vars:
            # a registered result: data, nothing to template
            out["xid_root"] = task_vars[XID_ROOT]
        return out

    def _any_set(self, args, task_vars):
        """True where a variable the role's verify_any_set names is set and not
        empty (as ``name | default([], true) | length > 0`` says)."""
        if not args.get("from_role") or "verify_any_set" not in task_vars:
            return False
        names = self._value("verify_any_set", task_vars)
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise AnsibleActionFail("verify_host: verify_any_set must be a list of variable names (got %r)" % (names,))
        for name in names:
            if name not in task_vars:
                continue
            try:
                value = self._value(name, task_vars)
            except AnsibleUndefinedVariable:
                continue
            if value and (not hasattr(value, "__len__") or len(value) > 0):
                return True
        return False

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
        if args.get("from_role") and args.get("role_inputs"):
            # the checks, the writable directories and the deploy key a caller
            # did not give are the role's (templated here, in the one pass
            # every variable gets, not as the task's arguments)
            args = dict(self._role_inputs(args["from_role"], task_vars), **args)
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
            if verify.get("xid") == "become":
                verify["xid"] = "off"
                read = args.get("xid_root")
                verify["xid_answer"] = xid_answer(read if isinstance(read, Mapping) else {})
            res = self._execute_module(module_name=MODULE, module_args=verify, task_vars=task_vars)
        except AnsibleConnectionFailure as e:
            res = {"unreachable": True, "msg": str(e)}
        except AnsibleError:
            raise
        res.pop("invocation", None)
        res.pop("_ansible_parsed", None)
        summary = summarize(res, verify["link"])
        # The module's own result stays beside the summary, but for its
        # gpufleet_torch fact: the summary carries all of it (torch,
        # packages, gpu_use, proof, the markers' fields). As a host fact it
        # was copied whole (and written to a fact cache) for every task of
        # the host after this one; on a GPU host it lists every check of
        # every GPU. gpufleet_gpu stays a host fact: the roles after a
        # deploy's verification read it.
        facts = res.get("ansible_facts")
        if isinstance(facts, dict) and "gpufleet_torch" in facts:
            res["ansible_facts"] = {k: v for k, v in facts.items() if k != "gpufleet_torch"}
            if not res["ansible_facts"]:
                del res["ansible_facts"]
        key = args.get("deploy_key") or ""
        if key and summary["passed"]:
            expect_deploy_key(summary, key, task_vars.get("inventory_hostname") or "the host")
        failed = bool(res.pop("failed", False))
        res.pop("unreachable", None)
        result.update(res)
        result.update(summary)
        result["verify_failed"] = failed
        # whether the caller has more to do for this host (verify.yml: its
        # operator's hooks), decided here rather than by a condition that
        # ansible-playbook would compile again for every host
        result["any_set"] = not summary["host_unreachable"] and self._any_set(args, task_vars)
        # the serving flags written (or that would be, under check mode)
        result["changed"] = bool(res.get("changed"))
        return result
