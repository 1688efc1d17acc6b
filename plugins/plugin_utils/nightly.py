# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pinned PyTorch stacks and uv's package plans, on the controller.

Pure functions, no I/O: the roles give them strings that uv printed or that
the inventory gave (through the filters of the same names,
plugins/filter/nightly.py, which only wrap these), and the value rules of
torch_nightly and flashinfer (plugin_utils/rules/) judge the inputs with them
before anything is changed.

A stack comes from one of two channels (torch_nightly_channel): "nightly",
builds of one date from the nightly index, or "release", released versions
from a release index. A release stack has no date: its pins are the full
versions the inventory gives.
"""

from __future__ import annotations

import datetime
import re

from ansible_collections.gpufleet.inference.plugins.module_utils.freeze import canonical_name, parse_freeze


class NightlyInputError(ValueError):
    """A version or a pin that cannot be read; the filters turn it into a filter error."""


# PEP 440 public version (the subset wheels use) with an optional local tag.
_VERSION_RE = re.compile(
    r"^(?P<base>\d+(?:\.\d+)*)"
    r"(?P<pre>(?:a|b|rc)\d+)?"
    r"(?P<post>\.post\d+)?"
    r"(?:\.dev(?P<dev>\d+))?"
    r"(?:\+(?P<local>[a-z0-9]+(?:[._][a-z0-9]+)*))?$",
    re.IGNORECASE,
)
_DATE_RE = re.compile(r"^\d{8}$")
# " + name==version" / " - name==version" lines of `uv pip install --dry-run`.
_PLAN_RE = re.compile(r"^\s*([+-])\s+([A-Za-z0-9._-]+)==(\S+)\s*$")
# uv's resolver explanation: "... NAME[spec] depends on torch==X ...".
_CONFLICT_RE = re.compile(
    r"(?<![\w.+-])(?P<pkg>[A-Za-z0-9][A-Za-z0-9._-]*?)(?P<spec>(?:[<>=!~]=?)[^\s,]*)?"
    r" depends? on (?P<dep>[A-Za-z0-9][A-Za-z0-9._-]*?)(?P<want>(?:[<>=!~]=?)[^\s,]*)?(?=[\s,.]|$)"
)


def nightly_date_valid(value):
    """True when value is a real calendar date written YYYYMMDD."""
    value = str(value)
    if not _DATE_RE.match(value):
        return False
    try:
        datetime.datetime.strptime(value, "%Y%m%d")
    except ValueError:
        return False
    return True


def nightly_version_parse(version):
    """Split a wheel version: base, nightly date, local tag, public version."""
    text = str(version).strip()
    match = _VERSION_RE.match(text)
    if not match:
        raise NightlyInputError("not a PEP 440 version: %r" % (text,))
    public = text.split("+", 1)[0]
    dev = match.group("dev")
    date = dev if dev and nightly_date_valid(dev) else ""
    return {
        "version": text,
        "public": public,
        "base": match.group("base"),
        "dev": dev or "",
        "date": date,
        "nightly": bool(date),
        "local": (match.group("local") or "").lower(),
    }


def nightly_version(base, date, cuda_variant):
    """A nightly wheel's version: BASE.devDATE, with +VARIANT where there is one."""
    return "%s.dev%s%s" % (base, date, "+%s" % cuda_variant if cuda_variant else "")


def nightly_pins(packages, date, bases, cuda_variant, versions=None):
    """Full pin per package: an explicit version wins, else BASE.devDATE+VARIANT."""
    versions = versions or {}
    bases = bases or {}
    pins = {}
    for name in packages:
        if versions.get(name):
            pins[name] = str(versions[name])
        elif bases.get(name):
            pins[name] = nightly_version(bases[name], date, cuda_variant)
        else:
            raise NightlyInputError(
                "no version for %s: give torch_nightly_versions.%s or torch_nightly_version_base.%s"
                % (name, name, name))
    return pins


def torch_pin(version, base, date, cuda_variant):
    """The torch an inventory pins, or "" where it pins none (nothing is
    expected then): its full version (torch_nightly_versions.torch) where
    it gives one, as it is; else BASE.devDATE[+VARIANT] from the base
    version (torch_nightly_version_base.torch) and the nightly date where it
    gives both. Unlike nightly_pins, a missing version is no error: the
    verification expects only what the inventory pins."""
    if version:
        return version
    if not (base and date):
        return ""
    return nightly_version(base, date, cuda_variant)


def _parsed_pins(pins, cuda_variant, errors):
    """(name, parsed version) of each pin, in name order, for the checks of
    one channel; what both channels refuse goes to ERRORS: a pin that is no
    version, and after the channel's reasons for a pin, a local tag other
    than the CUDA variant."""
    for name in sorted(pins):
        try:
            parsed = nightly_version_parse(pins[name])
        except NightlyInputError as exc:
            errors.append("%s: %s" % (name, exc))
            continue
        yield name, parsed
        if cuda_variant and parsed["local"] and parsed["local"] != cuda_variant:
            errors.append("%s==%s: local tag +%s is not the CUDA variant %s"
                          % (name, pins[name], parsed["local"], cuda_variant))


def nightly_pin_errors(pins, cuda_variant=None):
    """Reasons a set of pins is not one coherent nightly stack ([] when fine).

    Nightly torch, torchvision and torchaudio only work together when built the
    same day, so every nightly pin must carry the same date; every pin with a
    local tag must carry the requested CUDA variant.
    """
    errors = []
    dates = {}
    for name, parsed in _parsed_pins(pins, cuda_variant, errors):
        if parsed["dev"] and not parsed["date"]:
            errors.append("%s==%s: dev number %s is not a YYYYMMDD date"
                          % (name, pins[name], parsed["dev"]))
        if parsed["date"]:
            dates.setdefault(parsed["date"], []).append(name)
    if len(dates) > 1:
        errors.append("nightly pins from different dates: %s" % "; ".join(
            "%s: %s" % (date, ", ".join(names)) for date, names in sorted(dates.items())))
    elif dates and len(dates[list(dates)[0]]) != len(pins):
        undated = sorted(set(pins) - set(dates[list(dates)[0]]))
        errors.append("mixing nightly and release pins: %s not nightly" % ", ".join(undated))
    return errors


def release_pin_errors(pins, cuda_variant=None):
    """Reasons a set of pins is not a release stack ([] when fine): every
    pin a released version (a pre-release is one, a .dev build is not),
    and a local tag, where a pin has one, the requested CUDA variant (the
    release index of a variant names its wheels X.Y.Z+<variant>; PyPI
    names its default build X.Y.Z)."""
    errors = []
    for name, parsed in _parsed_pins(pins, cuda_variant, errors):
        if parsed["dev"]:
            errors.append("%s==%s: .dev%s is a nightly or development build, not a release"
                          % (name, pins[name], parsed["dev"]))
    return errors


def pins_unmet(installed, pins, local_optional=False):
    """{name: installed version} for each package whose installed version
    is not its pin, None where it is not installed; a package installed
    but not pinned counts too. {} when the venv holds exactly the pins.

    Nightly pins are met only by the same text. A release pin is read as
    uv reads ==VERSION (local_optional): a pin without a local tag is met by
    the same version with any tag, as 2.14.1 by 2.14.1+cu130, the name the
    variant's release index gives the build that PyPI calls 2.14.1."""
    installed, pins = dict(installed or {}), dict(pins or {})
    unmet = {}
    for name in sorted(set(installed) | set(pins)):
        have, want = installed.get(name), pins.get(name)
        if have is not None and want is not None:
            have, want = str(have), str(want)
            if have == want or (local_optional and "+" not in want and have.split("+", 1)[0] == want):
                continue
        unmet[name] = have
    return unmet


def uv_freeze_parse(text):
    """`uv pip freeze` output -> {canonical name: version}: module_utils freeze's
    parse_freeze (name==version and name===version; editables, direct references
    name @ url, options and comments skipped)."""
    return parse_freeze(text)


def uv_dry_run_changes(text):
    """`uv pip install --dry-run` output -> {install: {...}, remove: {...}}."""
    install, remove = {}, {}
    for line in str(text or "").splitlines():
        match = _PLAN_RE.match(line)
        if not match:
            continue
        target = install if match.group(1) == "+" else remove
        target[canonical_name(match.group(2))] = match.group(3)
    return {"install": install, "remove": remove,
            "pending": bool(install or remove)}


def uv_freeze_apply(current, changes):
    """Freeze text (sorted name==version lines) after applying a dry-run plan."""
    if not isinstance(current, dict):
        current = uv_freeze_parse(current)
    state = dict(current)
    for name in changes.get("remove", {}):
        state.pop(canonical_name(name), None)
    for name, version in changes.get("install", {}).items():
        state[canonical_name(name)] = version
    return "".join("%s==%s\n" % (name, state[name]) for name in sorted(state))


def uv_requirement_conflicts(text, guarded=("torch", "torchvision", "torchaudio")):
    """Who asked for another torch: [{package, wants}] from uv's resolver error."""
    guarded = set(canonical_name(name) for name in guarded)
    found = []
    for match in _CONFLICT_RE.finditer(str(text or "")):
        dep = canonical_name(match.group("dep"))
        pkg = canonical_name(match.group("pkg"))
        if dep in guarded and pkg not in guarded:
            item = {"package": pkg, "wants": dep + (match.group("want") or "").rstrip(".")}
            if item not in found:
                found.append(item)
    return found
