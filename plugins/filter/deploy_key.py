# -*- coding: utf-8 -*-
# Copyright: gpufleet.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Deploy key: what a deploy.yml run would build on a host, as one hash. A thin
wrapper over plugin_utils/keys.py, where the key is (the action fleet_reach
uses the same function)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Documentation: deploy_key.yml beside this file.

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.inference.plugins.plugin_utils import keys


def deploy_key(hostvars, root, length=24):
    """sha256 of the collection code and the host's deploy inputs."""
    try:
        return keys.deploy_key(hostvars, root, length)
    except keys.KeyInputError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule(object):
    def filters(self):
        return {
            "deploy_key": deploy_key,
        }
