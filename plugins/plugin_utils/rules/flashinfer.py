# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The flashinfer role's value rules: what its argument spec's types cannot
express, as messages "<variable> must be <allowed> (got <value>)"; the last
one says that nothing was changed."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible_collections.gpufleet.inference.plugins.module_utils import flashinfer_aot
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.common import (
    extra_name_errors, index_errors, install_stage_errors, is_list, list_errors, nothing_changed, number, passes_type,
    type_name)


# a PEP 440 release, pre-release, post, dev and local part, as the indexes name the nightlies
_VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?(\+[a-z0-9.]+)?$")
_LOCAL_RE = re.compile(r"\+.*$")
_DIGITS_RE = re.compile(r"^[0-9]+$")
# flashinfer-python however it is spelled (the preflight puts the extras on the name it matches)
_PYTHON_RE = re.compile(r"^flashinfer[-_.]+python$", re.IGNORECASE)


def flashinfer_pins(values):
    """Package -> version, as the preflight's flashinfer_pins: flashinfer_version for each of
    flashinfer_packages, flashinfer_versions over it. None where the two are not a list of names and a
    dict (the list and type checks report them)."""
    packages = values.get("flashinfer_packages")
    versions = values.get("flashinfer_versions")
    if not (is_list(packages) and all(isinstance(p, str) for p in packages) and isinstance(versions, Mapping)):
        return None
    pins = dict.fromkeys(packages, values.get("flashinfer_version"))
    pins.update(versions)
    return pins


def url_list_errors(values):
    """The indexes, and lists (a list, not a string that the list type would split at commas)."""
    errors = index_errors(values, "flashinfer_index_urls", "flashinfer_default_index_url")
    return errors + list_errors({name: values.get(name) for name in (
        "flashinfer_packages", "flashinfer_index_urls", "flashinfer_guarded_packages", "flashinfer_extras")})


def extras_errors(values):
    """The extras of flashinfer-python: names an extra can have, on a flashinfer-python that is installed."""
    extras, packages = values.get("flashinfer_extras"), values.get("flashinfer_packages")
    if not (is_list(extras) and extras) or list_errors({"flashinfer_extras": extras}):
        return []  # none, or the list check reports it
    errors = extra_name_errors(extras, "flashinfer_extras", "flashinfer-python", "cu13")
    if is_list(packages) and not any(_PYTHON_RE.match(str(name)) for name in packages):
        errors.append("flashinfer_extras must be [] unless flashinfer_packages lists flashinfer-python, whose "
                      "extras they are (got %s)" % ", ".join(str(extra) for extra in extras))
    return errors


def flashinfer_main(values):
    """The flashinfer role's inputs, and the other roles' results it needs (uv_venv_*,
    torch_nightly_constraints_file, uv_venv_remote_wheelhouse_dir: None where not set)."""
    errors = url_list_errors(values) + install_stage_errors(values, "flashinfer", "flashinfer_wheelhouse")
    pins = flashinfer_pins(values)
    if pins is not None:
        bad = dict((name, version) for name, version in pins.items() if not _VERSION_RE.match(str(version)))
        if bad:
            errors.append("flashinfer_version / flashinfer_versions must be versions like 0.6.5.dev20260307 "
                          "(got %s)" % bad)
        # one public version (the +cuXYZ local tag aside), compared as the unique filter does, ignoring case
        if len(set(_LOCAL_RE.sub("", str(version)).lower() for version in pins.values())) != 1:
            errors.append("flashinfer_version / flashinfer_versions must give the flashinfer packages one version "
                          "(a mismatched jit-cache fails at import); got %s" % pins)
    errors += extras_errors(values)
    timeout = values.get("flashinfer_jit_warm_timeout")
    if passes_type(timeout, "int") and not (_DIGITS_RE.match(str(timeout)) and number(timeout, 0, int) > 0):
        errors.append("flashinfer_jit_warm_timeout must be a number of seconds > 0 (got %s)" % str(timeout))
    environment = values.get("flashinfer_jit_environment")
    if passes_type(environment, "dict") and not isinstance(environment, Mapping):
        errors.append("flashinfer_jit_environment must be a dict of environment variables (got %s)"
                      % type_name(environment))
    errors += aot_errors(values)
    return nothing_changed(errors)


def aot_errors(values):
    """The prebuilt modules: known names, once each; with any module, targets flashinfer takes and a
    build timeout in seconds."""
    modules = values.get("flashinfer_aot_modules")
    if not is_list(modules):
        return []  # the type check reports it
    errors = flashinfer_aot.module_errors(modules)
    if modules:
        errors += flashinfer_aot.arch_errors(values.get("flashinfer_aot_arch_list"))
    timeout = values.get("flashinfer_aot_build_timeout")
    if passes_type(timeout, "int") and not (_DIGITS_RE.match(str(timeout)) and number(timeout, 0, int) > 0):
        errors.append("flashinfer_aot_build_timeout must be a number of seconds > 0 (got %s)" % str(timeout))
    return errors


# entry point -> rules(values) -> [message]: main, the one entry point with a spec
ENTRY_POINTS = {"main": flashinfer_main}
