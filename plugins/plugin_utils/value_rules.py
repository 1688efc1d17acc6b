# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Where every role's value rules are found: one module per role under
plugin_utils/rules/, each with ENTRY_POINTS (entry point -> rules).

Inputs are checked one way. The types, choices and defaults are the role's
meta/argument_specs.yml; the rules those cannot express (a range, a URL or
path shape, a rule across variables) are Python, in rules/<role>.py. Both are
checked on the controller in one task, gpufleet.inference.check_vars, by
each role's preflight (and by gpufleet.inference.verify_host in fleet
verification's one task per host), before anything changes. A rule passes a
value of the wrong type: the type check, made first with the same values,
reports it.

They were Jinja templates in the roles' tasks: each was compiled again in the
worker of every host (a worker is a fork that keeps no template cache).
"""

from __future__ import annotations

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules import (
    activate, cuda_toolkit, flashinfer, fleet, sgl_kernel, sglang, torch_nightly, uv_venv, verify)

# by role and entry point, as check_vars names them ("<role>.<entry point>")
RULES = {
    (module.__name__.rsplit(".", 1)[1], entry_point): rules
    for module in (activate, cuda_toolkit, flashinfer, fleet, sgl_kernel, sglang, torch_nightly, uv_venv, verify)
    for entry_point, rules in module.ENTRY_POINTS.items()
}


def rule_errors(role, entry_point, values):
    """The messages of the value rules of a role's entry point ([] where it has none).

    VALUES holds the entry point's variables and any other the rules read
    (check_vars' context: another role's results, such as uv_venv_dir)."""
    rules = RULES.get((role, entry_point))
    return rules(values) if rules else []
