# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The cuda_toolkit role's value rules: what its argument spec's types cannot
express, as messages "<variable> must be <allowed> (got <value>)".

The method's choices are the argument spec's (its type check names them). The
messages start with "cuda_toolkit: " as the role's assertions wrote them,
except the URL and list messages, which end with "; nothing was changed."
as theirs did. The role's preflight (tasks/preflight.yml) checks them with the
types in one task (gpufleet.inference.check_vars, rules: cuda_toolkit.main);
it passes the role's driver table (vars/main.yml) as context.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.common import (
    is_list, list_errors, nothing_changed, text, url_errors)

_VERSION_RE = re.compile(r"^[0-9]+\.[0-9]+$")
_RELEASE_RE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
# absolute, no trailing slash
_DIR_RE = re.compile(r"^/.+[^/]$")
_FINGERPRINT_RE = re.compile(r"^[0-9A-Fa-f]{40}$")
_LDCONFIG_RE = re.compile(r"^/etc/ld\.so\.conf\.d/[^/]+\.conf$")
_PROFILE_RE = re.compile(r"^/etc/profile\.d/[^/]+\.sh$")
# a pip pin of cuda_toolkit_pip_packages / cuda_toolkit_pip_extra_packages
_PIN_RES = {"name": re.compile(r"^[A-Za-z0-9._-]+$"), "version": re.compile(r"^[0-9][0-9A-Za-z.+!-]*$"),
            "sha256": re.compile(r"^[0-9a-f]{64}$")}
_PIP_LISTS = ("cuda_toolkit_pip_packages", "cuda_toolkit_pip_extra_packages")


def url_list_errors(values):
    """The URLs (a scheme and a host; the apt URLs end up in a world-readable
    sources file, so no credentials) and the pip lists (lists of dicts, not a
    string that the list type would split at commas)."""
    errors = []
    for name in ("cuda_toolkit_apt_repo_url", "cuda_toolkit_apt_key_url"):
        if name in values:
            errors += url_errors(values[name], name, credentials=False, empty=True)
    if "cuda_toolkit_pip_index_url" in values:
        errors += url_errors(values["cuda_toolkit_pip_index_url"], "cuda_toolkit_pip_index_url",
                             schemes=("http", "https"), empty=True)
    errors += list_errors({name: values.get(name) for name in _PIP_LISTS}, "dict")
    return nothing_changed(errors)


def _pin_ok(pin):
    return isinstance(pin, Mapping) and all(
        regex.match(str(pin.get(key, ""))) for key, regex in _PIN_RES.items())


def pin_errors(values):
    """With the pip method: every wheel pinned by name, version and sha256 (a
    list that is not a list of dicts has its own message)."""
    if values.get("cuda_toolkit_method") != "pip":
        return []
    pins = []
    for name in _PIP_LISTS:
        value = values.get(name)
        if is_list(value) and not list_errors({name: value}, "dict"):
            pins += value
    bad = "".join(" " + json.dumps(pin) for pin in pins if not _pin_ok(pin))
    if not bad:
        return []
    return ["cuda_toolkit: entries of cuda_toolkit_pip_packages / cuda_toolkit_pip_extra_packages must have "
            "a name, a version and a sha256 of 64 lower-case hex digits (got%s)" % bad]


def driver_errors(version, minimums):
    """The role's driver table (cuda_toolkit_driver_minimums) has a release of cuda_toolkit_version."""
    if not is_list(minimums):
        return []
    if any(isinstance(row, Mapping) and str(row.get("release", "")).startswith(version + ".") for row in minimums):
        return []
    return ["cuda_toolkit: no minimum driver is known for CUDA %s (cuda_toolkit_version); add its releases to "
            "cuda_toolkit_driver_minimums in the role's vars." % version]


def cuda_toolkit_main(values):
    """The cuda_toolkit role's inputs (the preflight entry point shares them)."""
    errors = []
    version = text(values, "cuda_toolkit_version")
    version_ok = version is None or _VERSION_RE.match(version)
    if not version_ok:
        errors.append("cuda_toolkit_version must be major.minor like 13.0 (got '%s')" % version)
    release = text(values, "cuda_toolkit_release")
    if release is not None and version is not None and not (
            _RELEASE_RE.match(release) and (release + ".").startswith(version + ".")):
        errors.append("cuda_toolkit_release must be major.minor.update within cuda_toolkit_version %s, like %s.2 "
                      "(got '%s')" % (version, version, release))
    prefix = text(values, "cuda_toolkit_prefix")
    if prefix is not None and not _DIR_RE.match(prefix):
        errors.append("cuda_toolkit_prefix must be an absolute path without a trailing slash (got '%s')" % prefix)
    link = text(values, "cuda_toolkit_symlink_path")
    if link is not None and not (_DIR_RE.match(link) and link != prefix):
        errors.append("cuda_toolkit_symlink_path must be an absolute path without a trailing slash, other than "
                      "cuda_toolkit_prefix (got '%s')" % link)
    # a string the dict type would convert ("k=v", JSON) is refused here; other types are the type check's
    facts = values.get("cuda_toolkit_gpu_facts")
    if isinstance(facts, str):
        errors.append("cuda_toolkit_gpu_facts must be a dict in the gpu_facts shape (got str)")
    fingerprint = text(values, "cuda_toolkit_apt_key_fingerprint")
    if fingerprint is not None and not _FINGERPRINT_RE.match(fingerprint.replace(" ", "")):
        errors.append("cuda_toolkit_apt_key_fingerprint must be 40 hex digits (got '%s')" % fingerprint)
    keyring = text(values, "cuda_toolkit_apt_keyring")
    if keyring is not None and not keyring.startswith("/"):
        errors.append("cuda_toolkit_apt_keyring must be an absolute path (got '%s')" % keyring)
    ldconfig = text(values, "cuda_toolkit_ldconfig_file")
    if ldconfig is not None and not _LDCONFIG_RE.match(ldconfig):
        errors.append("cuda_toolkit_ldconfig_file must be /etc/ld.so.conf.d/*.conf (got '%s')" % ldconfig)
    profile = text(values, "cuda_toolkit_profile_file")
    if profile is not None and not _PROFILE_RE.match(profile):
        errors.append("cuda_toolkit_profile_file must be /etc/profile.d/*.sh (got '%s')" % profile)
    errors = ["cuda_toolkit: " + message for message in errors]
    # of a version that is major.minor (another has its message above)
    if version is not None and version_ok:
        errors += driver_errors(version, values.get("cuda_toolkit_driver_minimums"))
    return errors + pin_errors(values) + url_list_errors(values)


# entry point -> rules(values) -> [message]
ENTRY_POINTS = {"main": cuda_toolkit_main}
