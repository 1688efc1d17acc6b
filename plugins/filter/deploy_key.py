# -*- coding: utf-8 -*-
# Copyright: gpufleet.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Deploy key: what a deploy.yml run would build on a host, as one hash."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Documentation: deploy_key.yml beside this file.

import hashlib
import os

import yaml

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_bytes, to_text

from ansible_collections.gpufleet.inference.plugins.filter.abi import _plain
from ansible_collections.gpufleet.inference.plugins.filter.fingerprint import fingerprint

# What a deploy builds from, as the argument specs declare it: every option of
# the stage roles' specs, and the fleet role's options of its entry point
# "preflight" (its other entry points' own options are run control: the host
# pattern, the lock, the report). A variable no spec declares is no input.
STAGE_ROLES = ("cuda_toolkit", "uv_venv", "torch_nightly", "flashinfer", "sgl_kernel", "verify", "activate")
FLEET_INPUT_ENTRY_POINTS = ("preflight",)
# The collection's code that decides what lands on a host.
CODE_DIRS = ("roles", "playbooks", "plugins")

_TREE_CACHE = {}
_SPEC_CACHE = {}
# libyaml's loader where PyYAML has it: the specs are read once per host
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def code_digest(root):
    """sha256 over the collection's roles, playbooks and plugins (path and content)."""
    root = to_text(root)
    files = []
    for sub in CODE_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, sub)):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            files.extend(os.path.join(dirpath, f) for f in filenames if not f.endswith((".pyc", ".pyo")))
    if not files:
        raise AnsibleFilterError("deploy_key: no %s under %s (not the collection's root?)" % ("/".join(CODE_DIRS), root))
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
            raise AnsibleFilterError("deploy_key: %s is missing (not the collection's root?)" % path)
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
        raise AnsibleFilterError("deploy_inputs: expected a host's variables (hostvars[inventory_hostname])")
    declared = input_names(root)
    inputs = {}
    for name in sorted(names):
        name = to_text(name)
        if name not in declared or name in facts:
            continue
        try:
            inputs[name] = _plain(hostvars[name])
        except Exception as exc:  # pylint: disable=broad-except
            # A value that does not template is an input too (and a run with it fails in preflight).
            inputs[name] = "<%s>" % type(exc).__name__
    return inputs


def deploy_key(hostvars, root, length=24):
    """sha256 of the collection code and the host's deploy inputs."""
    data = {"code": code_digest(root), "inputs": deploy_inputs(hostvars, root)}
    return fingerprint(data, length)


class FilterModule(object):
    def filters(self):
        return {
            "deploy_key": deploy_key,
        }
