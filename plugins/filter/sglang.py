# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters of the sglang install's plan: thin wrappers over
plugin_utils/sglang_plan.py, where the logic is."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.inference.plugins.plugin_utils.sglang_plan import sglang_plan_errors, uv_list_parse


class FilterModule(object):
    """uv's package list and the sglang install's plan."""

    def filters(self):
        return {
            "uv_list_parse": uv_list_parse,
            "sglang_plan_errors": sglang_plan_errors,
        }
