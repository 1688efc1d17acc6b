# -*- coding: utf-8 -*-
# Copyright: gpufleet.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Stack fingerprints: what each stage role puts into the venv, as one hash per
role. A thin wrapper over plugin_utils/keys.py, where the hash is."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Documentation: stack_fingerprint.yml beside this file.

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.inference.plugins.plugin_utils import keys


def stack_fingerprint(inputs, values, roles=None, length=16, ignore_keys=("enabled",), unset=None):
    """{role: fingerprint of its declared inputs' values}, 'none' for a role not in roles; an input at its
    value in unset is hashed as if it were not declared."""
    try:
        return keys.stack_fingerprint(inputs, values, roles, length, ignore_keys, unset)
    except keys.KeyInputError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule(object):
    def filters(self):
        return {
            "stack_fingerprint": stack_fingerprint,
        }
