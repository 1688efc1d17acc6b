# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stable venv path, the venv it points at and its activation history.

Shared by gpufleet.inference.venv_link and torch_verify (link=...), so that a
fleet verification reads the link and verifies the venv in one module run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os


class LinkError(ValueError):
    """The stable path or the venv cannot be used; the message says why and that nothing changed."""


def _check_path(name, value):
    if not value or not (value.startswith('/') or value.startswith('~/')):
        raise LinkError('%s must be an absolute or ~/ path (got %r)' % (name, value))


def read_history(path):
    try:
        with open(path) as handle:
            return [line.strip() for line in handle if line.strip()]
    except (IOError, OSError):
        return []


def read_markers(venv, names):
    """{name: parsed JSON of <venv>/<name>, or None when missing or unreadable}."""
    markers = {}
    for name in names:
        if not name or os.path.isabs(name) or '..' in name.split('/'):
            raise LinkError('markers must be relative paths under the venv without ".." (got %r)' % name)
        try:
            with open(os.path.join(venv, name)) as handle:
                markers[name] = json.load(handle)
        except (IOError, OSError, ValueError):
            markers[name] = None
    return markers


def resolve(link, venv='', markers=()):
    """Read the stable path `link` and choose the venv to look at (`venv`, else the active one).

    Returns link_path, history_path, link_exists, active_venv (the link resolved
    to a real path, as ansible.builtin.stat's lnk_source), history (oldest
    first), target (no trailing slash) and target_python (<target>/bin/python
    exists), and markers: the JSON files named in `markers` read from the
    active venv ({} without one). Raises LinkError for a relative path or a
    stable path that is not a symlink.
    """
    _check_path('link', link)
    if venv:
        _check_path('venv', venv)
    link_dir = os.path.expanduser(os.path.dirname(link.rstrip('/'))).rstrip('/')
    base = os.path.basename(link.rstrip('/'))
    link_path = '%s/%s' % (link_dir, base)
    link_exists = os.path.lexists(link_path)
    if link_exists and not os.path.islink(link_path):
        raise LinkError(
            '%s exists and is not a symlink (a venv made by hand?). The collection manages the stable path '
            '(verify_venv_link / gpufleet_venv_link) as a link to a fingerprinted venv: move it aside '
            '(e.g. to %s-legacy) and re-run; nothing was changed.' % (link_path, link_path))
    active_venv = os.path.realpath(link_path) if link_exists else ''
    target = os.path.expanduser(venv).rstrip('/') if venv else active_venv
    history_path = '%s/.%s.history' % (link_dir, base)
    return dict(
        link_path=link_path,
        history_path=history_path,
        link_exists=link_exists,
        active_venv=active_venv,
        history=read_history(history_path),
        target=target,
        target_python=bool(target) and os.path.exists(os.path.join(target, 'bin', 'python')),
        markers=read_markers(active_venv, markers) if active_venv else {},
    )


def missing_target_message(state):
    """Why there is no interpreter to verify, or None when there is one."""
    if not state['target']:
        return ('nothing to verify: %s is not a symlink to a venv (no active venv; run deploy.yml first) '
                'and verify_venv is empty.' % state['link_path'])
    if not state['target_python']:
        return '%s/bin/python does not exist: %s is not a usable venv.' % (state['target'], state['target'])
    return None
