# Copyright: gpufleet.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters for pinned PyTorch stacks (nightly or release) and uv's package
plans: thin wrappers over plugin_utils/nightly.py, where the logic is."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.inference.plugins.plugin_utils import nightly
from ansible_collections.gpufleet.inference.plugins.plugin_utils.nightly import (
    nightly_date_valid, nightly_pin_errors, pins_unmet, torch_pin, uv_dry_run_changes, uv_freeze_apply,
    uv_freeze_parse, uv_requirement_conflicts)


def nightly_version_parse(version):
    """Split a wheel version: base, nightly date, local tag, public version."""
    try:
        return nightly.nightly_version_parse(version)
    except nightly.NightlyInputError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def nightly_pins(packages, date, bases, cuda_variant, versions=None):
    """Full pin per package: an explicit version wins, else BASE.devDATE+VARIANT."""
    try:
        return nightly.nightly_pins(packages, date, bases, cuda_variant, versions)
    except nightly.NightlyInputError as exc:
        raise AnsibleFilterError(str(exc)) from exc


class FilterModule(object):
    """Torch version parsing, pins and uv plan filters."""

    def filters(self):
        return {
            "nightly_date_valid": nightly_date_valid,
            "nightly_version_parse": nightly_version_parse,
            "nightly_pins": nightly_pins,
            "nightly_pin_errors": nightly_pin_errors,
            "pins_unmet": pins_unmet,
            "nightly_torch_pin": torch_pin,
            "uv_freeze_parse": uv_freeze_parse,
            "uv_dry_run_changes": uv_dry_run_changes,
            "uv_freeze_apply": uv_freeze_apply,
            "uv_requirement_conflicts": uv_requirement_conflicts,
        }
