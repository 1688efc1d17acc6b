# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sglang role's value rules: what its argument spec's types cannot
express, as messages "<variable> must be <allowed> (got <value>)"; the last
one says that nothing was changed.

What needs sglang's own metadata (its requirements against the stack's pins,
the extras it declares) is judged after these, by the preflight's
gpufleet.inference.sglang_requirements, on the controller.
"""

from __future__ import annotations

import re

from ansible.module_utils.parsing.convert_bool import BOOLEANS_TRUE

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.common import (
    extra_name_errors, index_errors, install_stage_errors, is_list, list_errors, nothing_changed, number, show)

# a release as sglang publishes them (0.5.23, 0.5.6.post2, 0.5.0rc1)
_VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?$")
_SHA256_RE = re.compile(r"^([0-9a-fA-F]{64})?$")


def url_list_errors(values):
    """The indexes, and lists (a list, not a string that the list type would split at commas)."""
    errors = index_errors(values, "sglang_index_urls", "sglang_default_index_url")
    return errors + list_errors({name: values.get(name) for name in (
        "sglang_extras", "sglang_index_urls", "sglang_guarded_packages")})


def extras_errors(values):
    """Names an extra can have, each once (whether sglang declares them is read from its metadata)."""
    extras = values.get("sglang_extras")
    if not (is_list(extras) and extras) or list_errors({"sglang_extras": extras}):
        return []  # none, or the list check reports it
    errors = extra_name_errors(extras, "sglang_extras", "sglang", "tracing")
    # PEP 685: extras compare as normalized names
    seen = [re.sub(r"[-_.]+", "-", str(extra)).lower() for extra in extras]
    twice = sorted(set(extra for extra in seen if seen.count(extra) > 1))
    if twice:
        errors.append("sglang_extras must name each extra once (got %s more than once)" % ", ".join(twice))
    return errors


def sglang_main(values):
    """The sglang role's inputs, and the other roles' results it needs (uv_venv_*,
    torch_nightly_constraints_file, uv_venv_remote_wheelhouse_dir: None where not set)."""
    errors = url_list_errors(values) + install_stage_errors(values, "sglang", "sglang_wheelhouse")
    version = show(values.get("sglang_version"))
    if not _VERSION_RE.match(version):
        errors.append("sglang_version must be a release of sglang such as 0.5.23 (got '%s')" % version)
    errors += extras_errors(values)
    digest = show(values.get("sglang_wheel_sha256"))
    if not _SHA256_RE.match(digest):
        errors.append("sglang_wheel_sha256 must be '' or the 64 hex digits of a sha256 (got '%s')" % digest)
    guarded = values.get("sglang_guarded_packages")
    if is_list(guarded) and not guarded:
        errors.append("sglang_guarded_packages must name the packages the install may not move (got [])")
    errors += unit_errors(values)
    return nothing_changed(errors)


# What goes into the unit file: names, paths and an address without anything
# systemd would interpret (spaces, quotes, $, %), each checked by its pattern.
_UNIT_PATTERNS = {
    "name": re.compile(r"^[A-Za-z0-9][A-Za-z0-9@_.-]*$"),
    "user": re.compile(r"^[a-z_][a-z0-9_.-]*[$]?$"),
    "host": re.compile(r"^[A-Za-z0-9.:-]+$"),
    "path": re.compile(r"^/[A-Za-z0-9_./@+-]*[^/]$"),
    "link": re.compile(r"^(/|~/)[A-Za-z0-9_./@+-]*[^/]$"),
    "file": re.compile(r"^[A-Za-z0-9_.@+-]+$"),
}


def unit_errors(values):
    """The serving unit's inputs, where it is asked for (sglang_unit_enabled)."""
    enabled = values.get("sglang_unit_enabled")
    if (enabled.lower() if isinstance(enabled, str) else enabled) not in BOOLEANS_TRUE:
        return []
    errors = []
    if not _UNIT_PATTERNS["name"].match(show(values.get("sglang_unit_name"))):
        errors.append("sglang_unit_name must be a unit name (letters, digits, @ _ . -; got '%s')"
                      % show(values.get("sglang_unit_name")))
    if not _UNIT_PATTERNS["user"].match(show(values.get("sglang_unit_user"))):
        errors.append("sglang_unit_user (gpufleet_serving_user) must name the user the server runs as (got '%s')"
                      % show(values.get("sglang_unit_user")))
    if not _UNIT_PATTERNS["path"].match(show(values.get("sglang_unit_model_path"))):
        errors.append("sglang_unit_model_path (gpufleet_serving_model_path) must be the absolute path of the model's "
                      "folder on the host, without spaces (got '%s')" % show(values.get("sglang_unit_model_path")))
    if not _UNIT_PATTERNS["link"].match(show(values.get("sglang_unit_venv_link"))):
        errors.append("sglang_unit_venv_link (gpufleet_venv_link) must be an absolute or ~/ path without spaces, "
                      "not ending in / (got '%s')" % show(values.get("sglang_unit_venv_link")))
    if not _UNIT_PATTERNS["file"].match(show(values.get("sglang_unit_env_file"))):
        errors.append("sglang_unit_env_file must be a file name without / (got '%s')" % show(values.get("sglang_unit_env_file")))
    if not _UNIT_PATTERNS["host"].match(show(values.get("sglang_unit_host"))):
        errors.append("sglang_unit_host (gpufleet_serving_host) must be an address or a host name (got '%s')"
                      % show(values.get("sglang_unit_host")))
    port = number(values.get("sglang_unit_port"), 0, int)
    if not 1 <= port <= 65535:
        errors.append("sglang_unit_port (gpufleet_serving_port) must be a port, 1 to 65535 (got %s)"
                      % show(values.get("sglang_unit_port")))
    if number(values.get("sglang_unit_tp"), 0, int) < 1:
        errors.append("sglang_unit_tp (gpufleet_tp_size) must be a positive integer (got %s)"
                      % show(values.get("sglang_unit_tp")))
    return errors


# entry point -> rules(values) -> [message]: main, the one entry point with a spec
ENTRY_POINTS = {"main": sglang_main}
