# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's one reader of freeze text: ``uv pip freeze``, ``pip freeze``
and the venv freezes written from them (gpufleet-freeze.txt, reports/freezes/).

Pure and stdlib only: the filter uv_freeze_parse and the fleet report
(plugin_utils report.freeze) both read freezes through parse_freeze, so that a
package is the same name with the same version in each.

A line gives a package when it pins one version:

- ``name==version`` and ``name===version`` (arbitrary equality), with spaces
  around the operator allowed and extras (``name[cuda]==1.0``) ignored;
- the version ends at white space: an environment marker
  (``; python_version > "3.8"``), pip's options (``--hash=...``) and a comment
  (``#`` at the start of the line or after white space) are left out.

Every other line is skipped:

- blank lines and comments;
- option lines (``-e``/``--editable`` editables, ``-i``, ``-r``, ``-c``, ``-f`` ...);
- direct references, ``name @ url`` (a local wheel, a VCS checkout): they
  carry no version to compare, and the roles' freezes (uv_freeze_apply) and
  torch_verify's package list leave them out too, so skipping them here keeps
  a freeze and a host's packages comparable (the sgl_kernel wheel built on the
  host is tracked by its ABI key instead);
- anything that is not one pinned version (``name>=1``, a bare name).

Names are PEP 503 normalised (``Flashinfer_Python`` -> ``flashinfer-python``);
when a name appears twice the last line wins.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# PEP 508 name, optional extras, then the operator; === before == so that
# arbitrary equality never leaves a "=" in front of the version.
_LINE_RE = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?:\[[^\]]*\])?\s*"
    r"(?P<op>===|==|@)\s*(?P<rest>.*)$"
)
# a comment: "#" at the start or after white space (a URL fragment is not one)
_COMMENT_RE = re.compile(r"(?:^|\s)#.*$")


def canonical_name(name):
    """PEP 503 normalised project name (``Flashinfer_Python`` -> ``flashinfer-python``)."""
    return re.sub(r"[-_.]+", "-", str(name)).lower()


def parse_freeze_line(line):
    """(canonical name, version) for a line that pins one version, else None."""
    line = _COMMENT_RE.sub("", str(line)).strip()
    if not line or line.startswith("-"):
        return None
    match = _LINE_RE.match(line)
    if not match or match.group("op") == "@":
        return None
    # the version ends at white space (pip's options, such as --hash, may follow) or a marker
    version = match.group("rest").split(";", 1)[0].split()
    if not version:
        return None
    return canonical_name(match.group("name")), version[0]


def parse_freeze(text):
    """Freeze text -> {canonical name: version} (see the module's docstring for the lines kept)."""
    result = {}
    for line in str(text or "").splitlines():
        pin = parse_freeze_line(line)
        if pin is not None:
            result[pin[0]] = pin[1]
    return result
