# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Checks of structured inputs as filters (docs: expect_errors.yml,
patch_rule_errors.yml, ...): thin wrappers over the roles' value rules
(plugin_utils/rules/common.py), for an operator's own preflight."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.common import (
    expect_errors, list_errors, patch_rule_errors, tolerance_errors, url_errors)


class FilterModule(object):
    def filters(self):
        return {
            "expect_errors": expect_errors,
            "patch_rule_errors": patch_rule_errors,
            "tolerance_errors": tolerance_errors,
            "url_errors": url_errors,
            "list_errors": list_errors,
        }
