# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's keys: short sha256 hashes of what a run builds, and the
canonical form of the data they hash. One module for all of them, so that
there is one canonical form.

- ABI key (abi_key, abi_canonical): what makes a compiled torch extension
  (sgl-kernel) valid for one environment only: the source ref, the patch
  rules, the torch and CUDA versions, the arch list, the Python tag and the
  build options. Two builds with one key are interchangeable; another key
  needs its own build. abi_builder names the host of the play that builds a
  key for the others.
- Stack fingerprint (stack_fingerprint): one hash per stage role of the
  inputs it declares as what it puts into the venv; uv_venv names the venv
  after it, so that another pin gets another venv.
- Deploy key (deploy_key): the collection's code (roles, playbooks, plugins)
  and every deploy input a host has; deploy.yml records it in the venv it
  activated, and a later run with the same key only verifies that venv.

Why the canonical form matters: each key is compared with one recorded on a
host by an earlier run, maybe from another controller (another Python,
another Ansible, the values templated or read from YAML in another order).
The same inputs must give the same key on every controller, byte for byte,
or every host is rebuilt and redeployed for nothing. So a value is first made
plain data (plain: Ansible's lazy and unsafe types become dicts, lists,
text, numbers, booleans and None) and then written as JSON with sorted keys
and no spaces (canonical), whatever order its dicts were built in. Changing
plain, canonical or what a key puts into them changes every host's keys:
the pinned values in tests/unit/plugins/plugin_utils/test_keys.py say so.

Used by the filters abi_key, abi_canonical, abi_builder, stack_fingerprint
and deploy_key (plugins/filter/, which only wrap these functions and turn
KeyInputError into a filter error) and by the action fleet_reach.
"""

from __future__ import annotations

import hashlib
import json
import os

import yaml

from ansible.module_utils.common.text.converters import to_bytes, to_text

ABI_FIELDS = ("source_ref", "patch_rules", "torch_version", "cuda_version", "arch_list", "python_tag")
# Optional: build switches that change the binary but are not patches (CMake
# options such as -DSGL_KERNEL_ENABLE_CUDA=OFF); absent and empty hash alike.
ABI_OPTIONAL = ("build_options",)

# What a deploy builds from, as the argument specs declare it: every option of
# the stage roles' specs, and the fleet role's options of its entry point
# "preflight" (its other entry points' own options are run control: the host
# pattern, the lock, the report). A variable no spec declares is no input.
STAGE_ROLES = ("cuda_toolkit", "uv_venv", "torch_nightly", "flashinfer", "sgl_kernel", "sglang", "verify", "activate")
FLEET_INPUT_ENTRY_POINTS = ("preflight",)
# The collection's code that decides what lands on a host.
CODE_DIRS = ("roles", "playbooks", "plugins")

_TREE_CACHE = {}
_SPEC_CACHE = {}
# libyaml's loader where PyYAML has it: the specs are read once per host
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class KeyInputError(ValueError):
    """Input a key cannot be made of; the message names the key and the field."""


# ---------------------------------------------------------------- canonical form


def plain(value):
    """Turn Ansible's lazy/templated containers into plain JSON-able data."""
    if isinstance(value, dict):
        return dict((to_text(k), plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    return to_text(value)


def canonical(data):
    """The canonical JSON text of data: plain data, sorted keys, no spaces."""
    return json.dumps(plain(data), sort_keys=True, separators=(",", ":"))


def _sha256(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fingerprint(data, length=16):
    """sha256 of canonical JSON (sorted keys, no spaces), truncated to length hex digits."""
    return _sha256(canonical(data))[:int(length)]


# ---------------------------------------------------------------- ABI key


def _arch_list(value):
    if value is None:
        return []
    if isinstance(value, str):
        value = value.replace(",", ";").replace(" ", ";").split(";")
    if not isinstance(value, (list, tuple)):
        raise KeyInputError("abi_key: arch_list must be a list or a ';' separated string, got %r" % (value,))
    return sorted(set(to_text(a).strip() for a in value if to_text(a).strip()))


def abi_canonical(data):
    """The canonical JSON text that abi_key hashes (shown in reports and markers)."""
    if not isinstance(data, dict):
        raise KeyInputError("abi_key: expected a dict with %s, got %s" % (", ".join(ABI_FIELDS), type(data).__name__))
    missing = [f for f in ABI_FIELDS if f not in data]
    extra = sorted(to_text(k) for k in data if k not in ABI_FIELDS + ABI_OPTIONAL)
    if missing or extra:
        raise KeyInputError("abi_key: missing fields %s, unknown fields %s (allowed: %s)"
                            % (missing, extra, ", ".join(ABI_FIELDS)))
    for field in ("source_ref", "torch_version", "cuda_version", "python_tag"):
        if not isinstance(data[field], str) or not data[field].strip():
            raise KeyInputError("abi_key: %s must be a non-empty string, got %r" % (field, data[field]))
    rules = data["patch_rules"]
    if rules is None:
        rules = []
    if not isinstance(rules, (list, tuple)):
        raise KeyInputError("abi_key: patch_rules must be a list, got %r" % (rules,))
    fields = {
        "source_ref": to_text(data["source_ref"]).strip(),
        "patch_rules": list(rules),
        "torch_version": to_text(data["torch_version"]).strip(),
        "cuda_version": to_text(data["cuda_version"]).strip(),
        "arch_list": _arch_list(data["arch_list"]),
        "python_tag": to_text(data["python_tag"]).strip(),
    }
    if data.get("build_options"):
        fields["build_options"] = data["build_options"]
    return canonical(fields)


def abi_key(data, length=16):
    """sha256 of abi_canonical(data), truncated to length (8 to 64) hex digits."""
    try:
        length = int(length)
    except (TypeError, ValueError):
        raise KeyInputError("abi_key: length must be an integer, got %r" % (length,)) from None
    if not 8 <= length <= 64:
        raise KeyInputError("abi_key: length must be between 8 and 64, got %d" % length)
    return _sha256(abi_canonical(data))[:length]


def abi_builder(host, hostvars, play_hosts, builders=None, key_var="sgl_kernel_abi_key",
                need_var="sgl_kernel_needs_wheel"):
    """Name the host that builds HOST's key.

    The first host of BUILDERS (group order) that is in the play and has the same
    key; else the first host of the play (play order) with that key that needs
    the wheel; else HOST itself.
    """
    def var(name, h):
        hv = hostvars[h]
        return hv[name] if name in hv else None

    key = var(key_var, host)
    if not key:
        raise KeyInputError("abi_builder: %s has no %s" % (host, key_var))
    in_play = list(play_hosts)
    for candidate in list(builders or []):
        if candidate in in_play and var(key_var, candidate) == key:
            return candidate
    for candidate in in_play:
        if var(key_var, candidate) == key and var(need_var, candidate):
            return candidate
    return host


# ---------------------------------------------------------------- stack fingerprint


def _without(value, keys):
    """A list of dicts (patch rules) without the keys that do not change what is built."""
    if isinstance(value, (list, tuple)):
        return [dict((k, v) for k, v in item.items() if k not in keys) if isinstance(item, dict) else item
                for item in value]
    return value


def stack_fingerprint(inputs, values, roles=None, length=16, ignore_keys=("enabled",), unset=None):
    """{role: fingerprint of its declared inputs' values}, 'none' for a role not in roles.

    unset ({variable: value}): an input whose value is the one given there is
    hashed as if it were not declared. An input declared after venvs were
    named after these hashes, at the value that installs what was installed
    before it existed, then leaves every such venv's name as it was."""
    if not isinstance(inputs, dict) or not all(
            isinstance(names, (list, tuple)) and all(isinstance(n, str) for n in names)
            for names in inputs.values()):
        raise KeyInputError("stack_fingerprint: expected {role: [variable names]}, got %r" % (inputs,))
    if not isinstance(values, dict):
        raise KeyInputError("stack_fingerprint: values must be {variable: value}, got %s" % type(values).__name__)
    missing = sorted(set(n for names in inputs.values() for n in names) - set(values))
    if missing:
        raise KeyInputError("stack_fingerprint: no value for %s" % ", ".join(missing))
    if unset is not None and not isinstance(unset, dict):
        raise KeyInputError("stack_fingerprint: unset must be {variable: value}, got %s" % type(unset).__name__)
    ignore = set(to_text(k) for k in (ignore_keys or ()))
    unset = dict((to_text(k), plain(v)) for k, v in (unset or {}).items())
    out = {}
    for role, names in inputs.items():
        if roles is not None and role not in roles:
            out[to_text(role)] = "none"
            continue
        hashed = [n for n in names if not (n in unset and plain(values[n]) == unset[n])]
        out[to_text(role)] = fingerprint(dict((n, _without(plain(values[n]), ignore)) for n in hashed), length)
    return out


# ---------------------------------------------------------------- deploy key


def code_digest(root):
    """sha256 over the collection's roles, playbooks and plugins (path and content)."""
    root = to_text(root)
    files = []
    for sub in CODE_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, sub)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            files.extend(os.path.join(dirpath, f) for f in filenames if not f.endswith((".pyc", ".pyo")))
    if not files:
        raise KeyInputError("deploy_key: no %s under %s (not the collection's root?)" % ("/".join(CODE_DIRS), root))
    files.sort()
    stamp = tuple((f, os.stat(f).st_mtime_ns, os.stat(f).st_size) for f in files)
    cached = _TREE_CACHE.get(root)
    if cached and cached[0] == stamp:
        return cached[1]
    digest = hashlib.sha256()
    for path in files:
        digest.update(to_bytes(os.path.relpath(path, root)) + b"\0")
        with open(path, "rb") as fh:
            digest.update(hashlib.sha256(fh.read()).digest())
    _TREE_CACHE[root] = (stamp, digest.hexdigest())
    return digest.hexdigest()


def input_names(root):
    """The deploy's input variables, from the roles' meta/argument_specs.yml."""
    root = to_text(root)
    paths = [os.path.join(root, "roles", role, "meta", "argument_specs.yml") for role in ("fleet",) + STAGE_ROLES]
    stamp = tuple((p, os.stat(p).st_mtime_ns) for p in paths if os.path.exists(p))
    cached = _SPEC_CACHE.get(root)
    if cached and cached[0] == stamp:
        return cached[1]
    names = set()
    for path in paths:
        if not os.path.exists(path):
            raise KeyInputError("deploy_key: %s is missing (not the collection's root?)" % path)
        with open(path, encoding="utf-8") as fh:
            specs = (yaml.load(fh, Loader=_LOADER) or {}).get("argument_specs") or {}
        fleet = os.path.basename(os.path.dirname(os.path.dirname(path))) == "fleet"
        for entry, spec in specs.items():
            if fleet and entry not in FLEET_INPUT_ENTRY_POINTS:
                continue
            names.update((spec or {}).get("options") or {})
    names = frozenset(names)
    _SPEC_CACHE[root] = (stamp, names)
    return names


def deploy_inputs(hostvars, root):
    """The deploy's input variables among a host's variables, as plain data."""
    try:
        facts = set(hostvars.get("ansible_facts", {}) or {})
        names = list(hostvars.keys())
    except AttributeError:
        raise KeyInputError("deploy_inputs: expected a host's variables (hostvars[inventory_hostname])") from None
    declared = input_names(root)
    inputs = {}
    for name in sorted(names):
        name = to_text(name)
        if name not in declared or name in facts:
            continue
        try:
            inputs[name] = plain(hostvars[name])
        except Exception as exc:  # pylint: disable=broad-except
            # A value that does not template is an input too (and a run with it fails in preflight).
            inputs[name] = "<%s>" % type(exc).__name__
    return inputs


def deploy_key(hostvars, root, length=24):
    """sha256 of the collection code and the host's deploy inputs."""
    data = {"code": code_digest(root), "inputs": deploy_inputs(hostvars, root)}
    return fingerprint(data, length)
