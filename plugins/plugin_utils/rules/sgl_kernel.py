# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sgl_kernel role's value rules: what its argument spec's types cannot
express, as messages "<variable> must be <allowed> (got <value>)".

sgl_kernel_source's choices are the argument spec's. What needs the host or
the controller's copy of the source (nvcc at sgl_kernel_cuda_home and the
targets it compiles, a source that can be fetched) is checked by the
preflight's later tasks, after this."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gpufleet.inference.plugins.module_utils.arch_audit import scope_errors
from ansible_collections.gpufleet.inference.plugins.module_utils.cuda_arch import arch_target_errors
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.common import (
    is_bool, is_list, list_errors, nothing_changed, number, passes_type, patch_rule_errors, show, type_name, url_errors)

# a local repository's absolute path, or scp-like git@host:path, as git takes them
_REPO_PATH_RE = re.compile(r"^(/|[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^/])")
_REPO_SCHEMES = ("https", "http", "ssh", "git", "file")
_SHA256_RE = re.compile(r"^[0-9a-fA-F]{64}$")
_ARCH_RE = re.compile(r"^[0-9]+\.[0-9]+[af]?(\+PTX)?$")
_DEFAULT_GROUP = "sgl_kernel_builders"

# variable, type, the bound a value must pass, what the message says it must be
_NUMBERS = (
    ("sgl_kernel_gb_per_job", "float", lambda n: n > 0, "a number of GB > 0"),
    ("sgl_kernel_reserve_gb", "float", lambda n: n >= 0, "a number of GB >= 0"),
    ("sgl_kernel_compile_threads", "int", lambda n: n >= 1, "an integer >= 1"),
    ("sgl_kernel_max_jobs", "int", lambda n: n >= 0, "an integer >= 0, 0 sizing the jobs from memory and cores"),
    ("sgl_kernel_build_timeout", "int", lambda n: n > 0, "a number of seconds > 0"),
    ("sgl_kernel_poll_interval", "int", lambda n: n > 0, "a number of seconds > 0"),
    ("sgl_kernel_abi_check_timeout", "int", lambda n: n > 0, "a number of seconds > 0"),
    ("sgl_kernel_log_tail_lines", "int", lambda n: n > 0, "an integer > 0"),
)


def _length(value):
    """Jinja's length of a string or a list; a missing value is empty."""
    return len(value) if isinstance(value, (str, list, tuple, Mapping)) else len(show(value))


def _lower(text):
    return text.lower()


def arch_entries(arch_list):
    """sgl_kernel_arch_list as the preflight normalises it (_sgl_kernel_arch_list): a ';', ',' or ' '
    separated string or a list, each entry as text, trimmed, empty ones dropped, the first of entries
    equal but for case kept, sorted ignoring case (Jinja's unique and sort)."""
    if isinstance(arch_list, str):
        raw = arch_list.replace(",", ";").replace(" ", ";").split(";")
    elif is_list(arch_list):
        raw = arch_list
    else:
        raw = [] if arch_list is None else [arch_list]
    entries, seen = [], set()
    for entry in (str(e).strip() for e in raw):
        if entry and entry.lower() not in seen:
            seen.add(entry.lower())
            entries.append(entry)
    return sorted(entries, key=_lower)


def url_list_errors(values):
    """URLs and lists, checked whatever sgl_kernel_source is; the archive URL is recorded in the build record,
    so it may not carry credentials."""
    repo = values.get("sgl_kernel_repo")
    errors = [] if isinstance(repo, str) and _REPO_PATH_RE.match(repo) else url_errors(
        repo, "sgl_kernel_repo", schemes=_REPO_SCHEMES)
    errors += url_errors(values.get("sgl_kernel_archive_url"), "sgl_kernel_archive_url", credentials=False,
                         empty=True)
    return errors + list_errors({name: values.get(name) for name in (
        "sgl_kernel_cmake_args", "sgl_kernel_build_requirements", "sgl_kernel_system_packages",
        "sgl_kernel_pip_args")})


def source_errors(values):
    """What each source needs (sgl_kernel_source's choices are the type check's)."""
    errors = []
    source = values.get("sgl_kernel_source")
    ref = values.get("sgl_kernel_ref")
    if source == "git" and not (_length(values.get("sgl_kernel_repo")) > 0 and _length(ref) > 0):
        errors.append("sgl_kernel_repo and sgl_kernel_ref must be set when sgl_kernel_source is git")
    if source == "archive" and not _length(values.get("sgl_kernel_archive_url")) > 0:
        errors.append("sgl_kernel_archive_url must be set when sgl_kernel_source is archive")
    sha256 = values.get("sgl_kernel_archive_sha256")
    if source == "archive" and not _SHA256_RE.match(str(sha256)):
        errors.append("sgl_kernel_archive_sha256 must be 64 hex digits when sgl_kernel_source is archive (got '%s')"
                      % show(sha256))
    if source == "local" and not (_length(values.get("sgl_kernel_local_dir")) > 0 and _length(ref) > 0):
        errors.append("sgl_kernel_local_dir and sgl_kernel_ref (a label for the key) must be set when "
                      "sgl_kernel_source is local")
    if source in ("wheel", "auto"):
        errors += wheel_errors(values)
    if source == "auto" and not (_length(values.get("sgl_kernel_repo")) > 0 and _length(ref) > 0):
        errors.append("sgl_kernel_repo and sgl_kernel_ref must be set when sgl_kernel_source is auto (its source "
                      "build when the wheel does not fit)")
    subdir = values.get("sgl_kernel_subdir")
    if str(subdir).startswith("/") or ".." in str(subdir).split("/"):
        errors.append("sgl_kernel_subdir must be a relative path without '..' (got '%s')" % show(subdir))
    return errors


def wheel_errors(values):
    """The published wheel (sgl_kernel_source wheel or auto): pinned by version and sha256, from the index
    or a URL / controller path, with a well-formed arch scope."""
    errors = []
    sha256 = values.get("sgl_kernel_wheel_sha256")
    if not _SHA256_RE.match(str(sha256)):
        errors.append("sgl_kernel_wheel_sha256 must be 64 hex digits when sgl_kernel_source is %s (got '%s')"
                      % (values.get("sgl_kernel_source"), show(sha256)))
    url = values.get("sgl_kernel_wheel_url")
    if _length(url) > 0:
        if not (isinstance(url, str) and url.startswith("/")):
            errors += url_errors(url, "sgl_kernel_wheel_url", credentials=False)
        if isinstance(url, str) and not url.split("?")[0].endswith(".whl"):
            errors.append("sgl_kernel_wheel_url must name a wheel file (*.whl) (got '%s')" % show(url))
    else:
        errors += url_errors(values.get("sgl_kernel_wheel_index_url"), "sgl_kernel_wheel_index_url")
        for name, pattern, allowed in (
                ("sgl_kernel_wheel_package", r"^[A-Za-z0-9][A-Za-z0-9._-]*$", "a package name like sgl-kernel"),
                ("sgl_kernel_wheel_version", r"^[0-9][0-9A-Za-z.+!-]*$", "a pinned version like 0.3.21")):
            if not re.match(pattern, str(values.get(name) or "")):
                errors.append("%s must be %s (got '%s')" % (name, allowed, show(values.get(name))))
    scope = values.get("sgl_kernel_wheel_arch_scope")
    if is_list(scope):
        errors += ["sgl_kernel_wheel_arch_scope %s" % e for e in scope_errors(list(scope))]
    cuobjdump_sha = values.get("sgl_kernel_cuobjdump_wheel_sha256")
    if not _SHA256_RE.match(str(cuobjdump_sha)):
        errors.append("sgl_kernel_cuobjdump_wheel_sha256 must be 64 hex digits (got '%s')" % show(cuobjdump_sha))
    return errors


def build_errors(values):
    """The arch list, the build's sizes and times, its environment, the builders' group. VALUES' groups:
    the inventory's groups (names, or the groups dict)."""
    errors = []
    cuda_value = values.get("sgl_kernel_cuda")
    cuda = is_bool(cuda_value) and boolean(cuda_value, strict=False)
    entries = arch_entries(values.get("sgl_kernel_arch_list"))
    bad = [entry for entry in entries if not _ARCH_RE.match(entry)]
    if cuda and not entries:
        errors.append("sgl_kernel_arch_list must name at least one architecture like 9.0a or 12.0a when "
                      "sgl_kernel_cuda is true (got none: the default comes from gpu_facts, so a host without GPU "
                      "needs it set or sgl_kernel_cuda false)")
    if bad:
        errors.append("sgl_kernel_arch_list entries must be MAJOR.MINOR with an optional a or f suffix and +PTX, "
                      "like 9.0a, 12.0a or 8.9 (got %s)" % ", ".join(bad))
    for name, kind, passes, allowed in _NUMBERS:
        value = values.get(name)
        if passes_type(value, kind) and not passes(number(value, 0, int if kind == "int" else float)):
            errors.append("%s must be %s (got %s)" % (name, allowed, show(value)))
    environment = values.get("sgl_kernel_build_env")
    if passes_type(environment, "dict") and not isinstance(environment, Mapping):
        errors.append("sgl_kernel_build_env must be a dict of environment variables (got %s)"
                      % type_name(environment))
    # The default group may be absent (any host of the play then builds);
    # another name that is not in the inventory is a typo that would do the same.
    group = values.get("sgl_kernel_builders_group")
    groups = list(values.get("groups") or [])
    if group != _DEFAULT_GROUP and group not in groups:
        names = sorted((str(g) for g in groups if g not in ("all", "ungrouped")), key=_lower)
        errors.append("sgl_kernel_builders_group must name a group of the inventory, one of %s (got '%s')"
                      % (", ".join(names) or "none", show(group)))
    if cuda and not bad:
        errors += arch_target_errors(entries)
    return errors


def sgl_kernel_main(values):
    """The sgl_kernel role's inputs, and the inventory's groups (VALUES' groups)."""
    errors = url_list_errors(values) + source_errors(values) + build_errors(values)
    for name in ("sgl_kernel_patch_rules", "sgl_kernel_patch_rules_extra"):
        # not a list: the type check (a list of dicts) reports it
        if is_list(values.get(name)):
            errors += patch_rule_errors(values.get(name), name)
    return nothing_changed(errors)


# entry point -> rules(values) -> [message]: main, the one entry point with a spec
ENTRY_POINTS = {"main": sgl_kernel_main}
