# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The activate role's value rules: what its argument spec's types cannot
express, as messages "<variable> must be <allowed> (got <value>)".

Also passes_type, which the flashinfer and sgl_kernel rules share: a rule
judges only a value that its variable's type takes, and leaves any other to
the type check, made in the same task (check_vars), so that a value is not
reported twice."""

from __future__ import annotations

import re

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.common import passes_type
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.fleet import LINK_RE

_DIGITS_RE = re.compile(r"^[0-9]+$")


def activate_main(values):
    """The activate role's inputs (the entry points main and rollback, and the preflight, share them)."""
    errors = []
    link = values.get("activate_venv_link")
    if not (isinstance(link, str) and LINK_RE.match(link)):
        errors.append("activate_venv_link (gpufleet_venv_link) must be an absolute or ~/ path without spaces, "
                      "not ending in / (got '%s')" % str(link))
    keep = values.get("activate_keep_previous")
    if passes_type(keep, "int") and not _DIGITS_RE.match(str(keep)):
        errors.append("activate_keep_previous (gpufleet_keep_previous_venvs) must be an integer >= 0 (got %s)"
                      % str(keep))
    return errors


# entry point -> rules(values) -> [message]: main, the one entry point with a spec
ENTRY_POINTS = {"main": activate_main}
