# -*- coding: utf-8 -*-
"""What the rules tests read from a role: its defaults without the templated
values (those need a play to render; the tests give the rendered ones)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 5))


def template_free(value):
    """VALUE without the templated strings in it (and the dict keys and list items that hold them)."""
    def templated(item):
        return isinstance(item, str) and "{{" in item
    if isinstance(value, dict):
        return dict((k, template_free(v)) for k, v in value.items() if not templated(v))
    if isinstance(value, list):
        return [template_free(v) for v in value if not templated(v)]
    return value


def role_defaults(role):
    """roles/<role>/defaults/main.yml, template-free."""
    with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml"), encoding="utf-8") as handle:
        return template_free(yaml.safe_load(handle))
