# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The uv_venv role's value rules: what its argument spec's types cannot
express, as messages "<variable> must be <allowed> (got <value>)".

The role's preflight (tasks/preflight.yml) checks them with the types in one
task (gpufleet.inference.check_vars, rules: uv_venv.main), on the controller:
the wheelhouse is a folder there. What needs the host (the deploy user, its
Python, a folder it can write) is checked by the preflight's later tasks.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.common import list_errors, nothing_changed, number, text

_UV_VERSION_RE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
_PYTHON_RE = re.compile(r"^(3\.[0-9]+)?$")
# absolute or under ~/, no whitespace, not ending in /
_LINK_RE = re.compile(r"^(/|~/)[^\s]*[^/\s]$")
_REMOTE_RE = re.compile(r"^(/|~/)[^\s]+$")


def uv_venv_main(values):
    """The uv_venv role's inputs (the preflight entry point shares them)."""
    errors = []
    uv_version = text(values, "uv_venv_uv_version")
    if uv_version is not None and not _UV_VERSION_RE.match(uv_version):
        errors.append("uv_venv_uv_version must be an exact X.Y.Z version (got '%s')" % uv_version)
    prefix = text(values, "uv_venv_uv_prefix")
    if prefix is not None and not prefix.startswith("/"):
        errors.append("uv_venv_uv_prefix must be an absolute path (got '%s')" % prefix)
    python = text(values, "uv_venv_python_version")
    if python is not None and not _PYTHON_RE.match(python):
        errors.append("uv_venv_python_version must be '' (auto) or 3.X (got '%s')" % python)
    link = text(values, "uv_venv_link")
    if link is not None and not _LINK_RE.match(link):
        errors.append("uv_venv_link (gpufleet_venv_link) must be an absolute path or start with ~/ and not end with / "
                      "(got '%s')" % link)
    remote = text(values, "uv_venv_remote_wheelhouse")
    if remote is not None and not _REMOTE_RE.match(remote):
        errors.append("uv_venv_remote_wheelhouse must be an absolute path or start with ~/ (got '%s')" % remote)
    # a string the dict type would convert ("k=v", JSON) is refused too; other types are the type check's
    stack = values.get("uv_venv_stack")
    if isinstance(stack, str) or (isinstance(stack, Mapping) and not stack):
        errors.append("uv_venv_stack must be a non-empty dict of the pinned stack ({name: version}); it names the venv")
    # a value that is no integer is the type check's
    length = values.get("uv_venv_fingerprint_length")
    if number(length, None, int) is not None and not 8 <= number(length, 0, int) <= 64:
        errors.append("uv_venv_fingerprint_length must be between 8 and 64 (got %s)" % length)
    # a folder on the controller, where this runs
    wheelhouse = text(values, "uv_venv_wheelhouse")
    if wheelhouse and not os.path.isdir(wheelhouse):
        errors.append("uv_venv_wheelhouse (gpufleet_wheelhouse) must be '' (install from the indexes) or a folder of "
                      "wheels on the controller (got '%s', which is not a folder)" % wheelhouse)
    # a list, not a string that the list type would split at commas
    paths = values.get("uv_venv_python_search_paths")
    return errors + nothing_changed(list_errors({"uv_venv_python_search_paths": paths}))


# entry point -> rules(values) -> [message]
ENTRY_POINTS = {"main": uv_venv_main}
