# -*- coding: utf-8 -*-
# Copyright: gpufleet.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Stack fingerprints: what each stage role puts into the venv, as one hash per role."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Documentation: stack_fingerprint.yml beside this file.

import hashlib
import json

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.six import string_types

from ansible_collections.gpufleet.inference.plugins.filter.abi import _plain


def fingerprint(data, length=16):
    """sha256 of canonical JSON (sorted keys, no spaces), truncated to length hex digits."""
    text = json.dumps(_plain(data), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:int(length)]


def _without(value, keys):
    """A list of dicts (patch rules) without the keys that do not change what is built."""
    if isinstance(value, (list, tuple)):
        return [dict((k, v) for k, v in item.items() if k not in keys) if isinstance(item, dict) else item
                for item in value]
    return value


def stack_fingerprint(inputs, values, roles=None, length=16, ignore_keys=("enabled",)):
    """{role: fingerprint of its declared inputs' values}, 'none' for a role not in roles."""
    if not isinstance(inputs, dict) or not all(
            isinstance(names, (list, tuple)) and all(isinstance(n, string_types) for n in names)
            for names in inputs.values()):
        raise AnsibleFilterError("stack_fingerprint: expected {role: [variable names]}, got %r" % (inputs,))
    if not isinstance(values, dict):
        raise AnsibleFilterError("stack_fingerprint: values must be {variable: value}, got %s" % type(values).__name__)
    missing = sorted(set(n for names in inputs.values() for n in names) - set(values))
    if missing:
        raise AnsibleFilterError("stack_fingerprint: no value for %s" % ", ".join(missing))
    ignore = set(to_text(k) for k in (ignore_keys or ()))
    out = {}
    for role, names in inputs.items():
        if roles is not None and role not in roles:
            out[to_text(role)] = "none"
            continue
        out[to_text(role)] = fingerprint(dict((n, _without(_plain(values[n]), ignore)) for n in names), length)
    return out


class FilterModule(object):
    def filters(self):
        return {
            "stack_fingerprint": stack_fingerprint,
        }
