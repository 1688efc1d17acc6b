# -*- coding: utf-8 -*-
# Copyright: gpufleet.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet role's record of one host for the report."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Documentation: fleet_record.yml beside this file.

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.inference.plugins.plugin_utils.fleet_record import fleet_record


def _fleet_record(hostvars, status="ok", message=None, stage=""):
    try:
        return fleet_record(hostvars, status, message, stage)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule(object):
    def filters(self):
        return {"fleet_record": _fleet_record}
