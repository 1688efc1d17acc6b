# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The venv freezes, the drift check's baselines: where the deploy fetched
them (freeze_dirs: <report dir>/freezes/<host>/<venv>.freeze.txt, and the
folder of earlier versions), which one a host's row is compared with
(find_freeze), and the comparison itself (diff_versions over package names
normalised by normalise_packages). Freeze text is read by module_utils freeze,
the same reader as the filter uv_freeze_parse's. Imports no other report module.
"""

from __future__ import annotations

import os

from ansible_collections.gpufleet.inference.plugins.module_utils.freeze import canonical_name, parse_freeze

# The venv freezes (the drift check's baselines), per host, under the report
# directory unless the run names another folder.
FREEZE_DIRNAME = "freezes"
# Where versions before the freeze rename fetched them (<report dir>/locks/<host>/<venv>.lock.txt):
# read as well, so that a host not deployed again since keeps its baseline.
LEGACY_FREEZE_DIRNAME = "locks"
# The names a fetched freeze may have: <venv>.freeze.txt, and the names of earlier versions.
FREEZE_SUFFIXES = (".txt", ".lock")


def normalise_packages(packages):
    if not packages:
        return {}
    return {canonical_name(k): str(v) for k, v in packages.items()}


def diff_versions(old, new):
    """Sorted list of {name, old, new}; old/new None for added/removed packages."""
    old = old or {}
    new = new or {}
    out = []
    for name in sorted(set(old) | set(new)):
        a, b = old.get(name), new.get(name)
        if a != b:
            out.append({"name": name, "old": a, "new": b})
    return out


def freeze_dirs(out_dir, freeze_dir=None):
    """The folders the report reads the venv freezes from: freeze_dir (default
    ``<out_dir>/freezes``), then ``<out_dir>/locks``, where earlier versions fetched them."""
    dirs = [freeze_dir or os.path.join(out_dir, FREEZE_DIRNAME)]
    legacy = os.path.join(out_dir, LEGACY_FREEZE_DIRNAME)
    if os.path.abspath(legacy) != os.path.abspath(dirs[0]):
        dirs.append(legacy)
    return dirs


def find_freeze(freeze_dir, host, venv=None):
    """The freeze the deploy recorded for this host: {packages, path} or None.

    The deploy (uv_venv's freeze tasks) fetches ``<freeze_dir>/<host>/<venv>.freeze.txt``.
    freeze_dir is one folder or a list of them (freeze_dirs: the current one and
    the one of earlier versions, whose files are ``<venv>.lock.txt``), looked at
    together: the freeze named after the active venv wins, then the newest. The
    path is relative to the parent of the folder it was found in.
    """
    dirs = [freeze_dir] if isinstance(freeze_dir, str) else list(freeze_dir or [])
    files = []
    for top in dirs:
        d = os.path.join(top, host)
        if not os.path.isdir(d):
            continue
        for root, _dirs, names in os.walk(d):
            for n in names:
                if n.endswith(FREEZE_SUFFIXES):
                    files.append((os.path.join(root, n), top))
    if not files:
        return None
    chosen = None
    if venv:
        base = os.path.basename(str(venv).rstrip("/"))
        named = [f for f in files if base and base in os.path.basename(f[0])]
        if named:
            chosen = max(named, key=lambda f: os.path.getmtime(f[0]))
    if chosen is None:
        chosen = max(files, key=lambda f: os.path.getmtime(f[0]))
    path, top = chosen
    with open(path, encoding="utf-8", errors="replace") as fh:
        return {"path": os.path.relpath(path, os.path.dirname(top.rstrip("/")) or "."), "packages": parse_freeze(fh.read())}
