# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The building blocks of the roles' value rules: checks of structured inputs
(expectations, kernel tolerances, patch rules, URLs, lists) and the small
readers every rule shares. Each check returns a list of messages, empty when
the input is fine, of the form "<variable> must be <allowed> (got <value>)",
so that a preflight fails before any change with the variable named.

Read by the per-role rules beside this file and by the filters of the same
names (plugins/filter/inputs.py), which only wrap these functions.
"""

from __future__ import annotations

import json
import math
import re

from collections.abc import Mapping

try:
    from urllib.parse import urlsplit
except ImportError:  # pragma: no cover - Python 2 controllers are not supported
    from urlparse import urlsplit

from ansible.module_utils.common.parameters import DEFAULT_TYPE_VALIDATORS
from ansible.module_utils.parsing.convert_bool import BOOLEANS, boolean

from ansible_collections.gpufleet.inference.plugins.module_utils.kernel_checks import check_names
from ansible_collections.gpufleet.inference.plugins.module_utils.model_checks import check_names as model_check_names
from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import EXPECT_SPEC

PATCH_ACTIONS = ("replacement", "insert_after", "insert_before")
PATCH_REQUIRED = ("name", "file", "reason", "pattern")
_CAPABILITY_RE = re.compile(r"^[0-9]+\.[0-9]+$")
_INT_RE = re.compile(r"^[0-9]+$")
_VERSION_RE = re.compile(r"^[0-9]+(\.[0-9]+)*$")


def is_bool(value):
    if isinstance(value, str):
        value = value.lower()
    try:
        return value in BOOLEANS
    except TypeError:  # unhashable: a list or a dict
        return False


def is_number(value):
    if isinstance(value, bool):
        return False
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def yaml_kind(value):
    """A value's kind in the words of YAML, not of the Python class that carries it."""
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if is_number(value):
        return "number"
    if isinstance(value, (list, tuple)):
        return "list"
    return type(value).__name__


def _is_scalar(value):
    return isinstance(value, str) or is_number(value)


# Health thresholds with a range: key -> (allowed values, what the message says).
_INT_CHOICES = {
    "min_pcie_gen": (range(1, 7), "a PCIe generation 1-6"),
    "min_pcie_width": ((1, 2, 4, 8, 12, 16, 32), "a PCIe link width among 1, 2, 4, 8, 12, 16, 32"),
}


def _expect_value_error(key, value):
    """What is wrong with one expectation's value, as 'must be ...' text, or ''."""
    kind = EXPECT_SPEC[key]["type"]
    if kind == "int":
        ok = (isinstance(value, int) and not isinstance(value, bool) and value >= 0) or \
            (isinstance(value, str) and _INT_RE.match(value.strip()))
        if ok and key in _INT_CHOICES:
            allowed, text = _INT_CHOICES[key]
            return "" if int(value) in allowed else text
        return "" if ok else "an integer >= 0"
    if kind == "float":
        return "" if is_number(value) and math.isfinite(float(value)) and float(value) >= 0 else "a number >= 0"
    if kind == "bool":
        return "" if is_bool(value) else "true or false"
    if EXPECT_SPEC[key].get("elements") == "int":
        ok = isinstance(value, (list, tuple)) and all(
            (isinstance(v, int) and not isinstance(v, bool) and v >= 0) or (isinstance(v, str) and _INT_RE.match(v.strip()))
            for v in value)
        return "" if ok else "a list of integers >= 0 (Xid codes)"
    if key == "kernels":
        if not isinstance(value, (list, tuple)):
            return "a list of kernel check names"
        unknown = [v for v in value if v not in check_names()]
        return "a list of kernel checks among %s; unknown: %s" % (
            ", ".join(check_names()), ", ".join(repr(v) for v in unknown)) if unknown else ""
    if kind == "list":
        ok = isinstance(value, str) or (
            isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value))
        return "" if ok else "a list of module names"
    if not _is_scalar(value):
        return "a string"
    if key == "compute_capability" and not _CAPABILITY_RE.match(str(value)):
        return "MAJOR.MINOR like 9.0 or 12.0"
    if key in ("min_driver_version", "min_cudnn_version") and not _VERSION_RE.match(str(value)):
        return "a version of dot-separated numbers like 580.65 or 9.10"
    if key == "device_name":
        try:
            re.compile(str(value))
        except re.error as exc:
            return "a regular expression (%s)" % exc
    return ""


def expect_errors(expect, name="gpufleet_expect"):
    """Why EXPECT is not a valid torch_verify expectation dict ([] when it is).

    NAME is the variable the messages name.
    """
    keys = ", ".join(sorted(EXPECT_SPEC))
    if expect is None:
        return []
    if not isinstance(expect, Mapping):
        return ["%s must be a dict of expectations with keys among %s (got %s %r)"
                % (name, keys, yaml_kind(expect), expect)]
    errors = []
    for key in sorted(expect, key=str):
        value = expect[key]
        if key not in EXPECT_SPEC:
            errors.append("%s keys must be among %s (got %r)" % (name, keys, key))
        elif value is not None:
            allowed = _expect_value_error(key, value)
            if allowed:
                errors.append("%s.%s must be %s (got %r)" % (name, key, allowed, value))
    return errors


def tolerance_errors(tolerances, name="gpufleet_kernel_tolerances"):
    """Why TOLERANCES is not a dict of kernel check name -> positive number ([] when it is)."""
    if tolerances is None:
        return []
    if not isinstance(tolerances, Mapping):
        return ["%s must be a dict of kernel check name -> positive number (got %s %r)"
                % (name, yaml_kind(tolerances), tolerances)]
    errors = []
    known = check_names() + model_check_names()
    for key in sorted(tolerances, key=str):
        value = tolerances[key]
        if key not in known:
            errors.append("%s keys must be kernel checks among %s (got %r)" % (name, ", ".join(known), key))
        elif not is_number(value) or float(value) <= 0:
            errors.append("%s.%s must be a positive number (got %r)" % (name, key, value))
    return errors


def _rule_errors(rule, label):
    if not isinstance(rule, Mapping):
        return ["%s must be a dict with %s and one of %s (got %r)"
                % (label, ", ".join(PATCH_REQUIRED), ", ".join(PATCH_ACTIONS), rule)]
    errors = []
    missing = [k for k in PATCH_REQUIRED if not isinstance(rule.get(k), str) or not rule.get(k)]
    if missing:
        errors.append("%s must have %s as non-empty strings (missing or empty: %s)"
                      % (label, ", ".join(PATCH_REQUIRED), ", ".join(missing)))
    actions = [k for k in PATCH_ACTIONS if rule.get(k) is not None]
    if len(actions) != 1:
        errors.append("%s must have exactly one of %s (got %s)"
                      % (label, ", ".join(PATCH_ACTIONS), ", ".join(actions) or "none"))
    for flag in ("regex", "enabled"):
        if flag in rule and not is_bool(rule[flag]):
            errors.append("%s.%s must be true or false (got %r)" % (label, flag, rule[flag]))
    path = rule.get("file")
    if isinstance(path, str) and (path.startswith("/") or ".." in path.split("/")):
        errors.append("%s.file must be a path relative to the source folder, without .. (got %r)" % (label, path))
    refs = rule.get("refs", ["*"])
    if not isinstance(refs, (list, tuple)) or not all(isinstance(r, str) for r in refs):
        errors.append("%s.refs must be a list of ref globs (got %r)" % (label, refs))
    if is_bool(rule.get("regex", False)) and boolean(rule.get("regex", False)) and isinstance(rule.get("pattern"), str):
        try:
            re.compile(rule["pattern"], re.MULTILINE)
        except re.error as exc:
            errors.append("%s.pattern must be a valid Python regular expression when regex is true (got %r: %s)"
                          % (label, rule["pattern"], exc))
    return errors


def patch_rule_errors(rules, name="sgl_kernel_patch_rules"):
    """Why RULES is not a valid list of gpufleet.inference.patch_rules rules ([] when it is)."""
    if rules is None:
        return []
    if not isinstance(rules, (list, tuple)):
        return ["%s must be a list of patch rules (got %s %r)" % (name, yaml_kind(rules), rules)]
    errors = []
    for index, rule in enumerate(rules):
        rule_name = rule.get("name") if isinstance(rule, Mapping) else None
        label = "%s[%d]%s" % (name, index, " (%s)" % rule_name if rule_name else "")
        errors.extend(_rule_errors(rule, label))
    return errors


def _masked(url):
    """URL with any user:password@ part replaced by ***@, for messages."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@", r"\1***@", url)


def url_errors(value, name, schemes=("http", "https", "file"), credentials=True, empty=False):
    """Why VALUE (a URL, or a list of them) is not a usable URL ([] when it is).

    Each URL needs one of SCHEMES and a host (file:// URLs an absolute path
    and no host);
    with CREDENTIALS false a user:password@ part is refused (the variable is
    written where others can read it). EMPTY allows ''. The messages name
    NAME and never show a credential."""
    values = value if isinstance(value, (list, tuple)) else [value]
    label = (lambda i: "%s[%d]" % (name, i)) if isinstance(value, (list, tuple)) else (lambda i: name)
    allowed = ", ".join("%s://" % s for s in schemes)
    errors = []
    for index, url in enumerate(values):
        if not isinstance(url, str):
            errors.append("%s must be a URL (%s) (got %s %r)" % (label(index), allowed, yaml_kind(url), url))
            continue
        if url == "" and empty:
            continue
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        if url != url.strip() or any(c.isspace() for c in url):
            errors.append("%s must be a URL without spaces (got %r)" % (label(index), _masked(url)))
        elif scheme not in schemes:
            errors.append("%s must be a URL starting with one of %s (got %r)" % (label(index), allowed, _masked(url)))
        elif scheme == "file" and (parts.netloc not in ("", "localhost") or not parts.path.startswith("/")):
            errors.append("%s must be a file:// URL with an absolute path, file:///like/this (got %r)"
                          % (label(index), url))
        elif scheme != "file" and not parts.hostname:
            errors.append("%s must be a URL with a host after %s:// (got %r)" % (label(index), scheme, _masked(url)))
        elif not credentials and "@" in parts.netloc:
            errors.append("%s must not carry credentials (user:password@): it is written where others can read it "
                          "(got %r)" % (label(index), _masked(url)))
    return errors


def list_errors(values, elements="str"):
    """Why the variables in VALUES (name -> value) are not lists ([] when
    they are). A string is refused: an argument spec's list type would split
    it at commas instead of failing. ELEMENTS "str" also wants string items,
    "dict" dicts, "any" anything."""
    kinds = {"str": (str,), "dict": (Mapping,), "any": (object,)}
    errors = []
    for name in sorted(values):
        value = values[name]
        if value is None:
            continue
        if not isinstance(value, (list, tuple)):
            errors.append("%s must be a list (got %s %r)" % (name, yaml_kind(value), value))
        elif not all(isinstance(v, kinds[elements]) for v in value):
            bad = [v for v in value if not isinstance(v, kinds[elements])]
            errors.append("%s must be a list of %ss (got %s %r)" % (name, {"str": "string", "dict": "dict"}.get(
                elements, elements), yaml_kind(bad[0]), bad[0]))
    return errors


def show(value):
    """A value as a message shows it (as Jinja rendered it into text: None as nothing)."""
    return "" if value is None else str(value)


def quoted(value):
    """A value as '(got ...)' shows a value of the wrong kind: a string in quotes, anything else with its
    YAML kind ("list [1]"), never the Python class that carries it."""
    if isinstance(value, str):
        return "'%s'" % value
    return "%s %s" % ("dict" if isinstance(value, Mapping) else yaml_kind(value), json.dumps(value, default=str))


def number(value, default, kind=float):
    """int or float of value, default where it is none (as Jinja's int and float filters)."""
    if isinstance(value, bool):
        return kind(value)
    try:
        return kind(value)
    except (TypeError, ValueError):
        pass
    if kind is int:
        try:
            return int(float(value))
        except (TypeError, ValueError):
            pass
    return default


def is_list(value):
    """A list as YAML gives one (a list or a tuple)."""
    return isinstance(value, (list, tuple))


def type_name(value):
    """The Python type name of a YAML value, bool before int."""
    for kind in (bool, str, int, float, dict, list):
        if isinstance(value, kind):
            return kind.__name__
    return type(value).__name__


def text(values, name):
    """The text a string variable is judged as: the value as a message shows it
    (the str type takes numbers, lists and None as text), None where the
    variable is not given (its default applies)."""
    return show(values[name]) if name in values else None


def nothing_changed(errors):
    """ERRORS, the last one ending in '; nothing was changed.': joined with '; '
    as check_vars joins them, the whole failure says that nothing was changed."""
    if errors:
        errors = list(errors)
        errors[-1] += "; nothing was changed."
    return errors


def passes_type(value, kind):
    """Whether an argument spec's type KIND ("int", "float", "dict", ...) takes VALUE, converting it as
    check_vars' type check (ansible.builtin.validate_argument_spec) does: a rule leaves a value of the
    wrong type to that check, so that it is reported once."""
    try:
        DEFAULT_TYPE_VALIDATORS[kind](value)
    except (TypeError, ValueError):
        return False
    return True


_PART_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def part_name_error(name, value):
    """'' or why value is not a sliced run's id or part name (a folder or file name on the controller)."""
    if isinstance(value, str) and _PART_NAME_RE.match(value):
        return ""
    return ("%s must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit (got %r)"
            % (name, value))


# The rules of the stage roles that install into the venv under torch's
# constraints (flashinfer, sglang): their index URLs, extras, the roles they
# run after and their wheelhouse, said in each role's own variable names.
_INDEX_SCHEME_RE = re.compile(r"^(https?|file)://")
_EXTRA_NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
_EARLIER_ROLES = ("uv_venv_dir", "uv_venv_python", "uv_venv_bin", "torch_nightly_constraints_file")


def index_errors(values, urls_name, default_name):
    """The extra indexes URLS_NAME and the default one DEFAULT_NAME: URLs with a scheme and a host (the
    default index is checked even with a wheelhouse, where it is not used), the extra ones http(s):// or
    file:// as uv wants the scheme written."""
    urls = values.get(urls_name)
    errors = url_errors(urls, urls_name) if is_list(urls) else []
    errors += url_errors(values.get(default_name), default_name)
    if is_list(urls) and not url_errors(urls, urls_name):
        # a scheme written in capitals, or file:/path
        bad = [str(url) for url in urls if not _INDEX_SCHEME_RE.match(str(url))]
        if bad:
            errors.append("%s must be http(s):// or file:// URLs (got %s)" % (urls_name, ", ".join(bad)))
    return errors


def extra_name_errors(extras, name, package, example):
    """Names an extra can have (PEP 508), for the list NAME of PACKAGE's extras; none or a bad list: []
    (the list check reports it)."""
    if not (is_list(extras) and extras) or list_errors({name: extras}):
        return []
    bad = [str(extra) for extra in extras if not _EXTRA_NAME_RE.match(str(extra))]
    if not bad:
        return []
    return ["%s must be extra names of %s (letters, digits and . _ - inside, as %s; got %s)"
            % (name, package, example, ", ".join(bad))]


def install_stage_errors(values, role, wheelhouse_name):
    """What ROLE's install stage needs of the roles before it (uv_venv_*, torch_nightly_constraints_file:
    None where not set) and of its wheelhouse WHEELHOUSE_NAME (only where uv_venv pushed one)."""
    errors = []
    if any(values.get(name) is None for name in _EARLIER_ROLES):
        errors.append("uv_venv_* / torch_nightly_constraints_file are not set: run gpufleet.inference.uv_venv and "
                      "torch_nightly before %s" % role)
    if show(values.get(wheelhouse_name)) and values.get("uv_venv_remote_wheelhouse_dir") is None:
        errors.append("%s must be '' unless gpufleet.inference.uv_venv pushed the wheelhouse "
                      "(uv_venv_remote_wheelhouse_dir)" % wheelhouse_name)
    return errors
