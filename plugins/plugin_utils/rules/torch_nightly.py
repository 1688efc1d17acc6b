# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The torch_nightly role's value rules: what its argument spec's types cannot
express, as messages "<variable> must be <allowed> (got <value>)".

The role's preflight (tasks/preflight.yml) checks them with the types in one
task (gpufleet.inference.check_vars, rules: torch_nightly.main). The rules
also read uv_venv's results, which the preflight passes as context, None
where uv_venv did not set them: uv_venv_dir, uv_venv_python, uv_venv_bin and
uv_venv_remote_wheelhouse_dir. The pins are computed from the inputs here as
the preflight then computes them (plugin_utils/nightly.py, the filter
nightly_pins), and must be one nightly stack; with torch_nightly_channel
release, the full versions of torch_nightly_versions alone, released
versions, and torch_nightly_date and torch_nightly_version_base are neither
read nor checked (the role's defaults always give a date, which a release
stack does not use).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible_collections.gpufleet.inference.plugins.plugin_utils.nightly import (
    NightlyInputError, nightly_date_valid, nightly_pin_errors, nightly_pins, release_pin_errors)
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.common import (
    is_list, list_errors, nothing_changed, text, url_errors)

PACKAGES = ("torch", "torchvision", "torchaudio")
_INDEX_RE = re.compile(r"^(https?|file)://")
_LISTS = ("torch_nightly_packages", "torch_nightly_extra_index_urls", "torch_nightly_cuda_variants_allowed")


def uv_venv_errors(values):
    """uv_venv ran first: its facts are set (None where they are not)."""
    venv = values.get("uv_venv_dir")
    if isinstance(venv, str) and venv.startswith("/") and values.get("uv_venv_python") is not None \
            and values.get("uv_venv_bin") is not None:
        return []
    return ["uv_venv_dir / uv_venv_python / uv_venv_bin are not set: run gpufleet.inference.uv_venv before "
            "torch_nightly"]


def url_list_errors(values):
    """The index URLs (a scheme and a host), checked even with a wheelhouse,
    where they are not used, and the lists (not a string that the list type
    would split at commas)."""
    errors = []
    if "torch_nightly_index_url" in values:
        errors += url_errors(values["torch_nightly_index_url"], "torch_nightly_index_url")
    if is_list(values.get("torch_nightly_extra_index_urls")):
        errors += url_errors(values["torch_nightly_extra_index_urls"], "torch_nightly_extra_index_urls")
    errors += list_errors({name: values.get(name) for name in _LISTS})
    return errors


def unversioned(packages, versions, bases):
    """The packages that neither torch_nightly_versions nor torch_nightly_version_base gives a version."""
    given = [name for name, version in list(versions.items()) + list(bases.items()) if version]
    return [str(name) for name in packages if name not in given]


def _lists(values, urls):
    """The list variables that are lists, by name: those the URL and list
    messages named are left out, so that a variable gets one message."""
    return {name: values.get(name) for name in _LISTS
            if is_list(values.get(name)) and not any(message.startswith(name) for message in urls)}


def stack_errors(packages, date, bases, variant, versions):
    """The pins the preflight computes (torch_nightly_pins, the filter nightly_pins) are one nightly stack:
    one date and the CUDA variant for every package (nightly torch, torchvision and torchaudio only work
    together when built the same day)."""
    try:
        pins = nightly_pins(packages, date, bases, variant, versions)
    except NightlyInputError as exc:
        reasons = [str(exc)]
    else:
        reasons = nightly_pin_errors(pins, variant)
    if not reasons:
        return []
    return ["torch_nightly_versions / torch_nightly_date / torch_nightly_version_base must pin one nightly stack "
            "(versions, one date and the CUDA variant %s for every package): %s" % (variant, "; ".join(reasons))]


def release_errors(packages, variant, versions):
    """A release stack: every package a full version in torch_nightly_versions (there is no date to build one
    from), each a released version with the CUDA variant as its local tag where it has one."""
    missing = [str(name) for name in packages if not versions.get(name)]
    if missing:
        return ["torch_nightly_versions must give every package of torch_nightly_packages a full release version "
                "when torch_nightly_channel is release (got none for %s)" % ", ".join(missing)]
    reasons = release_pin_errors(nightly_pins(packages, "", {}, variant, versions), variant)
    if not reasons:
        return []
    return ["torch_nightly_versions must pin released versions when torch_nightly_channel is release (X.Y.Z, or "
            "X.Y.Z+%s as the variant's release index names them): %s" % (variant, "; ".join(reasons))]


def torch_nightly_main(values):
    """The torch_nightly role's inputs (the preflight entry point shares them)."""
    urls = url_list_errors(values)
    lists = _lists(values, urls)
    errors = uv_venv_errors(values)
    # as the role's tasks read it: release, or else nightly (the argument spec's choices refuse other values)
    release = values.get("torch_nightly_channel") == "release"
    date = None if release else text(values, "torch_nightly_date")
    if date is not None and not nightly_date_valid(date):
        errors.append("torch_nightly_date must be a real date written YYYYMMDD (got '%s')" % date)
    variant = text(values, "torch_nightly_cuda_variant")
    allowed = lists.get("torch_nightly_cuda_variants_allowed")
    if variant is not None and allowed is not None and values["torch_nightly_cuda_variant"] not in allowed:
        errors.append("torch_nightly_cuda_variant must be one of %s (got '%s')"
                      % (", ".join(str(v) for v in allowed), variant))
    packages = lists.get("torch_nightly_packages")
    if packages is not None and not ("torch" in packages and all(p in PACKAGES for p in packages)):
        errors.append("torch_nightly_packages must list torch and only torch, torchvision, torchaudio (got %s)"
                      % ", ".join(str(p) for p in packages))
    versions, bases = values.get("torch_nightly_versions"), values.get("torch_nightly_version_base")
    if release and packages is not None and isinstance(versions, Mapping) and variant is not None:
        errors += release_errors(packages, variant, versions)
    elif not release and packages is not None and isinstance(versions, Mapping) and isinstance(bases, Mapping):
        missing = unversioned(packages, versions, bases)
        if missing:
            errors.append("torch_nightly_version_base / torch_nightly_versions must give every package of "
                          "torch_nightly_packages a base or a full version (got none for %s)" % ", ".join(missing))
        elif date is not None and nightly_date_valid(date) and variant is not None:
            errors += stack_errors(packages, date, bases, variant, versions)
    index = text(values, "torch_nightly_index_url")
    if index is not None and not text(values, "torch_nightly_wheelhouse") and not _INDEX_RE.match(index) \
            and not any(message.startswith("torch_nightly_index_url") for message in urls):
        errors.append("torch_nightly_index_url must be an http(s):// or file:// URL (got '%s')" % index)
    extra = lists.get("torch_nightly_extra_index_urls")
    if extra is not None and not all(_INDEX_RE.match(str(url)) for url in extra):
        errors.append("torch_nightly_extra_index_urls must be http(s):// or file:// URLs")
    if text(values, "torch_nightly_index_password") and not text(values, "torch_nightly_index_username"):
        errors.append("torch_nightly_index_username must be set when torch_nightly_index_password is")
    if text(values, "torch_nightly_wheelhouse") and values.get("uv_venv_remote_wheelhouse_dir") is None:
        errors.append("torch_nightly_wheelhouse must be '' unless gpufleet.inference.uv_venv pushed the wheelhouse "
                      "(uv_venv_remote_wheelhouse_dir)")
    return errors + nothing_changed(urls)


# entry point -> rules(values) -> [message]
ENTRY_POINTS = {"main": torch_nightly_main}
