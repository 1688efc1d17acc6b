# -*- coding: utf-8 -*-
# Copyright: gpufleet.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""ABI key of a compiled torch extension, and the choice of its builder."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Documentation: abi_key.yml, abi_canonical.yml, abi_builder.yml beside this file.

import hashlib
import json

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.six import string_types

ABI_FIELDS = ("source_ref", "patch_rules", "torch_version", "cuda_version", "arch_list", "python_tag")
# Optional: build switches that change the binary but are not patches (CMake
# options such as -DSGL_KERNEL_ENABLE_CUDA=OFF); absent and empty hash alike.
ABI_OPTIONAL = ("build_options",)


def _arch_list(value):
    if value is None:
        return []
    if isinstance(value, string_types):
        value = value.replace(",", ";").replace(" ", ";").split(";")
    if not isinstance(value, (list, tuple)):
        raise AnsibleFilterError("abi_key: arch_list must be a list or a ';' separated string, got %r" % (value,))
    return sorted(set(to_text(a).strip() for a in value if to_text(a).strip()))


def _plain(value):
    """Turn Ansible's lazy/templated containers into plain JSON-able data."""
    if isinstance(value, dict):
        return dict((to_text(k), _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    return to_text(value)


def abi_canonical(data):
    """The canonical JSON text that abi_key hashes (shown in reports and markers)."""
    if not isinstance(data, dict):
        raise AnsibleFilterError("abi_key: expected a dict with %s, got %s" % (", ".join(ABI_FIELDS), type(data).__name__))
    missing = [f for f in ABI_FIELDS if f not in data]
    extra = sorted(to_text(k) for k in data if k not in ABI_FIELDS + ABI_OPTIONAL)
    if missing or extra:
        raise AnsibleFilterError("abi_key: missing fields %s, unknown fields %s (allowed: %s)"
                                 % (missing, extra, ", ".join(ABI_FIELDS)))
    for field in ("source_ref", "torch_version", "cuda_version", "python_tag"):
        if not isinstance(data[field], string_types) or not data[field].strip():
            raise AnsibleFilterError("abi_key: %s must be a non-empty string, got %r" % (field, data[field]))
    rules = data["patch_rules"]
    if rules is None:
        rules = []
    if not isinstance(rules, (list, tuple)):
        raise AnsibleFilterError("abi_key: patch_rules must be a list, got %r" % (rules,))
    canonical = {
        "source_ref": to_text(data["source_ref"]).strip(),
        "patch_rules": _plain(list(rules)),
        "torch_version": to_text(data["torch_version"]).strip(),
        "cuda_version": to_text(data["cuda_version"]).strip(),
        "arch_list": _arch_list(data["arch_list"]),
        "python_tag": to_text(data["python_tag"]).strip(),
    }
    if data.get("build_options"):
        canonical["build_options"] = _plain(data["build_options"])
    return json.dumps(canonical, sort_keys=True, separators=(",", ":"))


def abi_key(data, length=16):
    try:
        length = int(length)
    except (TypeError, ValueError):
        raise AnsibleFilterError("abi_key: length must be an integer, got %r" % (length,))
    if not 8 <= length <= 64:
        raise AnsibleFilterError("abi_key: length must be between 8 and 64, got %d" % length)
    digest = hashlib.sha256(abi_canonical(data).encode("utf-8")).hexdigest()
    return digest[:length]


def abi_builder(host, hostvars, play_hosts, builders=None, key_var="sgl_kernel_abi_key", need_var="sgl_kernel_needs_wheel"):
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
        raise AnsibleFilterError("abi_builder: %s has no %s" % (host, key_var))
    in_play = list(play_hosts)
    for candidate in list(builders or []):
        if candidate in in_play and var(key_var, candidate) == key:
            return candidate
    for candidate in in_play:
        if var(key_var, candidate) == key and var(need_var, candidate):
            return candidate
    return host


class FilterModule(object):
    def filters(self):
        return {
            "abi_key": abi_key,
            "abi_canonical": abi_canonical,
            "abi_builder": abi_builder,
        }
