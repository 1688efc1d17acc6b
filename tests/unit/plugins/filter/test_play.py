# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The run skeleton's play keywords: a valid value is kept, anything else
falls back to the default, and the fallback agrees with the value rule that
names the bad value (play_keyword_errors)."""

import pytest

from ansible_collections.gpufleet.inference.plugins.filter.play import FilterModule
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.fleet import play_keyword_errors

FILTERS = FilterModule().filters()


@pytest.mark.parametrize("serial, expected", [
    ("100%", "100%"), (3, 3), ("3", "3"), ("25%", "25%"), ([1, "50%"], [1, "50%"]),
    (0, "100%"), ("0%", "100%"), ("101%", "100%"), ([], "100%"), ([1, 0], "100%"), (True, "100%"), ("x", "100%"),
])
def test_play_serial(serial, expected):
    assert FILTERS["play_serial"](serial) == expected
    assert (expected == serial) == (not any("gpufleet_serial" in e for e in play_keyword_errors(serial, 100)))


@pytest.mark.parametrize("max_fail, expected", [
    (100, 100), (0, 0), ("25", 25), (101, 100), (-1, 100), ("x", 100), (True, 100), (12.5, 100),
])
def test_play_max_fail(max_fail, expected):
    assert FILTERS["play_max_fail"](max_fail) == expected
    valid = not any("max_fail" in e for e in play_keyword_errors("100%", max_fail))
    assert valid == (max_fail in (100, 0, "25"))
