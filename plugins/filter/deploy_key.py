# -*- coding: utf-8 -*-
# Copyright: gpufleet.inference contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deploy key: what a deploy.yml run would build on a host, as one hash."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Documentation: deploy_key.yml beside this file.

import hashlib
import json
import os
import re

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_bytes, to_text

from ansible_collections.gpufleet.inference.plugins.filter.abi import _plain

# The variables a deploy takes from the inventory and the command line.
INPUT_NAMES = re.compile(r"^(gpufleet|uv_venv|torch_nightly|flashinfer|sgl_kernel|cuda_toolkit|verify)_")
# Run control and the facts a run sets for itself: not inputs of the stack.
RUN_NAMES = re.compile(
    r"^gpufleet_(result|stage|reach|lock\w*|preflight\w*|fast\w*|deploy_key\w*|stamp\w*|report_dir|serial"
    r"|max_fail_percentage|hosts|full_run|play_\w+|host_lock\w*)$")
# The collection's code that decides what lands on a host.
CODE_DIRS = ("roles", "playbooks", "plugins")

_TREE_CACHE = {}


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


def deploy_inputs(hostvars):
    """The deploy's input variables among a host's variables, as plain data."""
    try:
        facts = set(hostvars.get("ansible_facts", {}) or {})
        names = list(hostvars.keys())
    except AttributeError:
        raise AnsibleFilterError("deploy_inputs: expected a host's variables (hostvars[inventory_hostname])")
    inputs = {}
    for name in sorted(names):
        name = to_text(name)
        if not INPUT_NAMES.match(name) or RUN_NAMES.match(name) or name in facts:
            continue
        try:
            inputs[name] = _plain(hostvars[name])
        except Exception as exc:  # pylint: disable=broad-except
            # A value that does not template is an input too (and a run with it fails in preflight).
            inputs[name] = "<%s>" % type(exc).__name__
    return inputs


def deploy_key(hostvars, root, length=24):
    """sha256 of the collection code and the host's deploy inputs."""
    data = {"code": code_digest(root), "inputs": deploy_inputs(hostvars)}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:int(length)]


class FilterModule(object):
    def filters(self):
        return {
            "deploy_key": deploy_key,
        }
