# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One license for the whole collection: GPL-3.0-or-later.

- LICENSE at the root is the GNU GPL version 3 text, verbatim (its title lines
  and the sha256 of the FSF's gpl-3.0.txt).
- galaxy.yml's license is exactly [GPL-3.0-or-later]; every role's
  meta/main.yml says the same.
- Every .py under plugins/ carries the two license lines in its top comment
  block (after a shebang or coding line): the GPLv3+ line ansible-test sanity
  looks for, and the SPDX identifier.
- No file of the tree (tracked or new; LICENSE, this file and evidence/
  aside) names Apache as a license.

Each scanner is a plain function; each has a self-test that plants a bad input
and expects it to be caught.
"""
import glob
import hashlib
import os
import re

import pytest
import yaml

# tracked and new (not ignored) files of the checkout
from ansible_collections.gpufleet.inference.tests.unit.test_hardening_static import tree_files

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SPDX_ID = "GPL-3.0-or-later"
GPL_LINE = "# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)"
SPDX_LINE = "# SPDX-License-Identifier: " + SPDX_ID
# sha256 of https://www.gnu.org/licenses/gpl-3.0.txt (Debian's
# /usr/share/common-licenses/GPL-3 is the same bytes).
GPL3_SHA256 = "3972dc9744f6499f0f9b2dbf76696f2ae7ad8af9b23dde66d6af86c9dfb36986"
# Not scanned for a foreign license: the license text itself, this file (its
# self-tests plant Apache lines), and the evidence files (third-party logs and
# scripts kept as they were captured).
SCAN_EXCLUDE_FILES = {"LICENSE", "tests/unit/test_license.py"}
SCAN_EXCLUDE_DIRS = ("evidence/",)
# "Apache" as a license: Apache License, Apache-2.0, Apache 2, Apache v2,
# ASL 2.0. Not a package name that merely starts with apache (apache-tvm-ffi).
APACHE_LICENSE = re.compile(
    r"\bapache(?:[\s_-]*(?:software[\s_-]+)?licen[sc]e|[\s_-]*v?2(?:\.0)?\b)|\basl[\s_-]?2(?:\.0)?\b",
    re.IGNORECASE)


# ---------------------------------------------------------------- loading


def read_text(path):
    """The file's text, or None for a binary file."""
    with open(os.path.join(ROOT, path), "rb") as fh:
        data = fh.read()
    if b"\0" in data:
        return None
    return data.decode("utf-8", errors="replace")


def load_yaml(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


# ---------------------------------------------------------------- scanners

def license_text_problems(text):
    """Why ``text`` is not the GNU GPL version 3 verbatim ([] when it is)."""
    problems = []
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines[:2] != ["GNU GENERAL PUBLIC LICENSE", "Version 3, 29 June 2007"]:
        problems.append("does not open with 'GNU GENERAL PUBLIC LICENSE' / "
                        "'Version 3, 29 June 2007' (got %r)" % (lines[:2],))
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    if digest != GPL3_SHA256:
        problems.append("is not the GPL v3 text verbatim (sha256 %s, want %s)" % (digest, GPL3_SHA256))
    return problems


def galaxy_license_problems(galaxy):
    problems = []
    if galaxy.get("license") != [SPDX_ID]:
        problems.append("galaxy.yml license must be [%s] (got %r)" % (SPDX_ID, galaxy.get("license")))
    if galaxy.get("license_file"):
        problems.append("galaxy.yml has license_file %r next to license" % galaxy["license_file"])
    return problems


def role_license_problem(meta):
    """The problem of one role's meta/main.yml, or None."""
    got = ((meta or {}).get("galaxy_info") or {}).get("license")
    if got != SPDX_ID:
        return "galaxy_info.license must be %s (got %r)" % (SPDX_ID, got)
    return None


def header_lines(text):
    """The leading comment block of a Python file (shebang and coding line included)."""
    block = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        block.append(line.rstrip())
    return block


def python_header_problems(text):
    header = header_lines(text)
    return ["lacks %r in its top comment block" % line for line in (GPL_LINE, SPDX_LINE)
            if line not in header]


def apache_mentions(text):
    """(line number, line) of each place ``text`` names Apache as a license."""
    return [(n, line.strip()) for n, line in enumerate(text.splitlines(), 1)
            if APACHE_LICENSE.search(line)]


# ---------------------------------------------------------------- the tree

def test_license_file_is_gpl3():
    path = os.path.join(ROOT, "LICENSE")
    assert os.path.isfile(path), "LICENSE is missing at the repository root"
    with open(path, encoding="utf-8") as fh:
        problems = license_text_problems(fh.read())
    assert problems == [], "LICENSE " + "; ".join(problems)


def test_galaxy_license():
    assert galaxy_license_problems(load_yaml("galaxy.yml")) == []


def test_roles_meta_license():
    metas = sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "main.yml")))
    roles = sorted(d for d in glob.glob(os.path.join(ROOT, "roles", "*")) if os.path.isdir(d))
    assert roles, "no roles found"
    missing = [os.path.relpath(r, ROOT) for r in roles
               if not os.path.isfile(os.path.join(r, "meta", "main.yml"))]
    assert missing == [], "roles without meta/main.yml: %s" % missing
    bad = {}
    for meta in metas:
        problem = role_license_problem(load_yaml(meta))
        if problem:
            bad[os.path.relpath(meta, ROOT)] = problem
    assert bad == {}


def test_plugins_python_headers():
    files = [p for p in tree_files() if p.startswith("plugins/") and p.endswith(".py")]
    assert files, "no .py under plugins/"
    bad = {}
    for path in files:
        problems = python_header_problems(read_text(path) or "")
        if problems:
            bad[path] = problems
    assert bad == {}


def test_no_apache_license_anywhere():
    bad = {}
    for path in tree_files():
        if path in SCAN_EXCLUDE_FILES or path.startswith(SCAN_EXCLUDE_DIRS):
            continue
        text = read_text(path)
        if text is None:
            continue
        hits = apache_mentions(text)
        if hits:
            bad[path] = hits
    assert bad == {}, "files naming Apache as their license (the collection is %s): %s" % (SPDX_ID, bad)


# ---------------------------------------------------------------- self-tests

def test_self_license_text():
    with open(os.path.join(ROOT, "LICENSE"), encoding="utf-8") as fh:
        good = fh.read()
    assert license_text_problems(good) == []
    # GPL version 2's title, an edited text, an empty file.
    v2 = good.replace("Version 3, 29 June 2007", "Version 2, June 1991", 1)
    assert len(license_text_problems(v2)) == 2
    edited = good.replace("the GNU General Public License", "the GNU General Public Licence", 1)
    assert len(license_text_problems(edited)) == 1
    assert license_text_problems("") != []


@pytest.mark.parametrize("galaxy, n", [
    ({"license": ["GPL-3.0-or-later"]}, 0),
    ({"license": ["Apache-2.0"]}, 1),
    ({"license": "GPL-3.0-or-later"}, 1),
    ({"license": ["GPL-3.0-or-later", "MIT"]}, 1),
    ({"license": ["GPL-3.0-only"]}, 1),
    ({}, 1),
    ({"license": ["GPL-3.0-or-later"], "license_file": "COPYING"}, 1),
])
def test_self_galaxy(galaxy, n):
    assert len(galaxy_license_problems(galaxy)) == n


@pytest.mark.parametrize("meta, ok", [
    ({"galaxy_info": {"license": "GPL-3.0-or-later"}}, True),
    ({"galaxy_info": {"license": "Apache-2.0"}}, False),
    ({"galaxy_info": {"license": "GPLv3"}}, False),
    ({"galaxy_info": {}}, False),
    ({}, False),
    (None, False),
])
def test_self_role_meta(meta, ok):
    assert (role_license_problem(meta) is None) == ok


def test_self_python_header():
    good = "#!/usr/bin/python\n# -*- coding: utf-8 -*-\n# Copyright: x\n%s\n%s\n\nimport os\n" % (
        GPL_LINE, SPDX_LINE)
    assert python_header_problems(good) == []
    assert len(python_header_problems(good.replace(SPDX_LINE + "\n", ""))) == 1
    assert len(python_header_problems(good.replace(GPL_LINE + "\n", ""))) == 1
    # The lines below the header (in a docstring, after code) do not count.
    late = '"""Doc."""\n%s\n%s\n' % (GPL_LINE, SPDX_LINE)
    assert len(python_header_problems(late)) == 2
    assert len(python_header_problems("")) == 2


@pytest.mark.parametrize("line, hit", [
    ("# Apache License 2.0 (see galaxy.yml)", True),
    ("  license: Apache-2.0", True),
    ("Licensed under the Apache License, Version 2.0", True),
    ("# SPDX-License-Identifier: Apache-2.0", True),
    ("released under apache 2", True),
    ("ASL 2.0", True),
    ("Apache Software License", True),
    ('    "apache-tvm-ffi": "0.1.15.post2",', False),
    ("served behind apache httpd", False),
    ("# SPDX-License-Identifier: GPL-3.0-or-later", False),
])
def test_self_apache(line, hit):
    assert bool(apache_mentions(line)) == hit
