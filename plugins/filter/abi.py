# -*- coding: utf-8 -*-
# Copyright: gpufleet.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""ABI key of a compiled torch extension, and the choice of its builder: thin
wrappers over plugin_utils/keys.py, where the key and its canonical form are."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Documentation: abi_key.yml, abi_canonical.yml, abi_builder.yml beside this file.

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.inference.plugins.plugin_utils import keys


def abi_canonical(data):
    """The canonical JSON text that abi_key hashes (shown in reports and markers)."""
    try:
        return keys.abi_canonical(data)
    except keys.KeyInputError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def abi_key(data, length=16):
    """sha256 of abi_canonical(data), truncated to length (8 to 64) hex digits."""
    try:
        return keys.abi_key(data, length)
    except keys.KeyInputError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def abi_builder(host, hostvars, play_hosts, builders=None, key_var="sgl_kernel_abi_key",
                need_var="sgl_kernel_needs_wheel"):
    """Name the host that builds HOST's key (see keys.abi_builder)."""
    try:
        return keys.abi_builder(host, hostvars, play_hosts, builders, key_var, need_var)
    except keys.KeyInputError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule(object):
    def filters(self):
        return {
            "abi_key": abi_key,
            "abi_canonical": abi_canonical,
            "abi_builder": abi_builder,
        }
