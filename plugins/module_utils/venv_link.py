# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The stable venv path, the venv it points at and its activation history.

Shared by gpufleet.inference.venv_link_info and torch_verify (link=...), so that a
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


def expand_path(name, value):
    """`value` checked as an absolute or ~/ path, with ~ expanded and no trailing slash."""
    _check_path(name, value)
    return os.path.expanduser(value).rstrip('/')


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


def venv_problems(path):
    """What keeps `path` from being a Python venv: a list of findings, empty
    for a venv directory (pyvenv.cfg and bin/python present)."""
    if not os.path.isdir(path):
        return ['not a directory']
    problems = []
    if not os.path.isfile(os.path.join(path, 'pyvenv.cfg')):
        problems.append('no pyvenv.cfg')
    if not os.path.exists(os.path.join(path, 'bin', 'python')):
        problems.append('no bin/python')
    if problems:
        try:
            entries = sorted(os.listdir(path))
        except OSError as exc:
            entries = ['(unreadable: %s)' % exc.strerror]
        problems.append('it holds %s' % (', '.join(entries[:8]) + (', ...' if len(entries) > 8 else '')
                                         if entries else 'nothing'))
    return problems


def require_venv(path, consequence):
    """Raise LinkError naming what `path` holds unless it is a venv directory."""
    problems = venv_problems(path)
    if problems:
        raise LinkError('%s is not a Python venv (%s): %s; nothing was changed.' % (path, '; '.join(problems), consequence))


def adopted_path(link_path, day):
    """Where a hand-built venv at the stable path is moved to: <link>-adopted-<YYYYMMDD>."""
    return '%s-adopted-%s' % (link_path, day)


def resolve(link, venv='', markers=(), adopt=False):
    """Read the stable path `link` and choose the venv to look at (`venv`, else the active one).

    Returns link_path, history_path, link_exists, link_is_directory, active_venv
    (the link resolved to a real path, as ansible.builtin.stat's lnk_source; the
    directory itself when a hand-built venv is to be adopted), history (oldest
    first), target (no trailing slash) and target_python (<target>/bin/python
    exists), and markers: the JSON files named in `markers` read from the
    active venv ({} without one). Raises LinkError for a relative path, and for
    a stable path that is not a symlink unless `adopt` is true and it is a venv.
    """
    _check_path('link', link)
    if venv:
        _check_path('venv', venv)
    link_dir = os.path.expanduser(os.path.dirname(link.rstrip('/'))).rstrip('/')
    base = os.path.basename(link.rstrip('/'))
    link_path = '%s/%s' % (link_dir, base)
    link_exists = os.path.lexists(link_path)
    is_directory = link_exists and not os.path.islink(link_path)
    if is_directory and not adopt:
        raise LinkError(
            '%s exists and is not a symlink (a venv made by hand?). The collection manages the stable path '
            '(verify_venv_link / gpufleet_venv_link) as a link to a fingerprinted venv: set '
            'gpufleet_adopt_existing_venv=true to move it aside (renamed, never copied or deleted) and keep it '
            'for rollback, or move it yourself (e.g. to %s-legacy) and re-run; nothing was changed.'
            % (link_path, link_path))
    if is_directory:
        require_venv(link_path, 'gpufleet_adopt_existing_venv adopts only a venv (pyvenv.cfg and bin/python)')
        active_venv = link_path
    else:
        active_venv = os.path.realpath(link_path) if link_exists else ''
    target = os.path.expanduser(venv).rstrip('/') if venv else active_venv
    history_path = '%s/.%s.history' % (link_dir, base)
    return dict(
        link_path=link_path,
        history_path=history_path,
        link_exists=link_exists,
        link_is_directory=is_directory,
        active_venv=active_venv,
        history=read_history(history_path),
        target=target,
        target_python=bool(target) and os.path.exists(os.path.join(target, 'bin', 'python')),
        markers=read_markers(active_venv, markers) if active_venv else {},
    )


def adopt(link_path, target, destination, check_mode=False):
    """Move the hand-built venv at `link_path` to `destination` and make
    `link_path` a symlink to `target`.

    Renames only (the same folder, so the same filesystem): the venv is never
    copied or deleted. The new link is made beside the stable path first, so
    the stable path is missing only between two rename(2) calls. Returns
    {'changed', 'moved_from', 'moved_to', 'link_to'}; a stable path that is a
    symlink already is no change. Raises LinkError, changing nothing, for a
    directory that is not a venv, a destination that exists or (not in check
    mode) a target without an interpreter."""
    result = dict(changed=False, moved_from='', moved_to='', link_to=target)
    if os.path.islink(link_path) or not os.path.lexists(link_path):
        return result
    if os.path.dirname(destination.rstrip('/')) != os.path.dirname(link_path.rstrip('/')):
        raise LinkError('the adopted venv must stay beside %s (got %s)' % (link_path, destination))
    require_venv(link_path, 'it is not adopted')
    if os.path.lexists(destination):
        raise LinkError('%s already exists: %s is not moved onto it; nothing was changed.' % (destination, link_path))
    # (in check mode the new venv may not be built yet)
    if not check_mode and not os.path.exists(os.path.join(target, 'bin', 'python')):
        raise LinkError('%s/bin/python does not exist: the stable path is not pointed at it; nothing was changed.'
                        % target)
    result.update(changed=True, moved_from=link_path, moved_to=destination)
    if check_mode:
        return result
    staged = '%s.gpufleet-link' % link_path
    if os.path.lexists(staged):
        os.unlink(staged)
    os.symlink(target, staged)
    try:
        os.rename(link_path, destination)
    except OSError as exc:
        os.unlink(staged)
        raise LinkError('moving %s to %s failed (%s); nothing was changed.' % (link_path, destination, exc.strerror))
    os.rename(staged, link_path)
    return result


def missing_target_message(state):
    """Why there is no interpreter to verify, or None when there is one."""
    if not state['target']:
        return ('nothing to verify: %s is not a symlink to a venv (no active venv; run deploy.yml first) '
                'and verify_venv is empty.' % state['link_path'])
    if not state['target_python']:
        return '%s/bin/python does not exist: %s is not a usable venv.' % (state['target'], state['target'])
    return None
