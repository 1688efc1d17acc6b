# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The play keywords of the run skeleton (playbooks/run.yml) as filters: thin
wrappers over the fleet role's value rules (plugin_utils/rules/fleet.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.fleet import play_max_fail, play_serial


class FilterModule(object):
    def filters(self):
        return {"play_serial": play_serial, "play_max_fail": play_max_fail}
