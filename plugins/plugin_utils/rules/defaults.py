# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The roles' defaults as the value rules read them.

A default is written once, in roles/<role>/defaults/main.yml; the argument
spec's ``default:`` and the copies a role's chained default or a module keeps
are held equal to it by tests/unit/test_role_defaults.py. A rule that needs a
variable's default (the value was not given: a rule called with part of the
variables) reads it here instead of repeating it.

The file is read only then, and once per process: check_vars and verify_host
always pass the role's variables, so a play's run reads nothing here.
"""

from __future__ import annotations

import ast
import functools
import os
import re

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# a default that falls back on a playbook input: {{ gpufleet_x | default(V) }}
FALLBACK_RE = re.compile(r"^\{\{\s*(?P<name>[a-z0-9_]+)\s*\|\s*default\((?P<value>.*)\)\s*\}\}$")


def effective(value):
    """The value a default gives when its role runs on its own (a fallback on a playbook input gives its V)."""
    if isinstance(value, dict):
        return {k: effective(v) for k, v in value.items()}
    if isinstance(value, list):
        return [effective(v) for v in value]
    if isinstance(value, str):
        m = FALLBACK_RE.match(value.strip())
        if m:
            text = m.group("value").replace("true", "True").replace("false", "False")
            try:
                return ast.literal_eval(text)
            except (ValueError, SyntaxError):
                return value
    return value


@functools.lru_cache(maxsize=None)
def role_defaults(role):
    """roles/<role>/defaults/main.yml as written (templates unrendered)."""
    with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


def role_default(role, name):
    """The default of a role's variable, as the role has it when it runs on its own."""
    return effective(role_defaults(role)[name])


def given(values, role, name):
    """The variable's value in VALUES, else its role's default."""
    return values[name] if name in values else role_default(role, name)
