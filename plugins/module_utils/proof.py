# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The host's record of its last numeric pass per GPU, and how old it is.

A verification that ran the numeric checks (smoke GEMMs, kernel checks) on a
GPU and saw none of them fail there has proven that GPU's kernels under the
stack it ran: the venv (named by its stack fingerprint), torch, the driver and
the sgl_kernel build. The record keeps, per stack and per GPU (by UUID; "cpu"
where the checks ran on the CPU), when that was and which checks ran. A run
that leaves a GPU's numeric checks out (busy, or an in_service run) reads the
record and says how old the proof is, or that there is none under this stack.

The record lives beside the stable path (``~/.ml-env.proof.json`` for
``~/ml-env``): it is the verification's own log, written atomically, never in
check mode; it is not a change of the host's stack.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

from ansible_collections.gpufleet.inference.plugins.module_utils import atomic_file

VERSION = 1
KEEP_STACKS = 4


def record_path(link_path):
    """~/ml-env -> ~/.ml-env.proof.json (beside the activation history)."""
    link_path = link_path.rstrip('/')
    return os.path.join(os.path.dirname(link_path), '.%s.proof.json' % os.path.basename(link_path))


def stack_of(venv, torch_facts, driver_version):
    """What a proof holds for: the venv, torch, the driver and the sgl_kernel build."""
    markers = (torch_facts or {}).get('markers') or {}
    sgl = markers.get('gpufleet-sgl_kernel.json') or {}
    return {
        'venv': venv or '',
        'torch': (torch_facts or {}).get('torch_version') or '',
        'driver': driver_version or (torch_facts or {}).get('driver_version') or '',
        'sgl_kernel': sgl.get('abi_key') or '',
    }


def stack_key(stack):
    return '|'.join('%s=%s' % (name, stack.get(name) or '') for name in ('venv', 'torch', 'driver', 'sgl_kernel'))


def load(path):
    """(record, error): an absent file is an empty record; an unreadable one too, with the reason."""
    try:
        with open(path) as handle:
            record = json.load(handle)
    except (IOError, OSError) as exc:
        if getattr(exc, 'errno', None) == 2:
            return {'version': VERSION, 'stacks': {}}, None
        return {'version': VERSION, 'stacks': {}}, 'proof record %s not read: %s' % (path, exc)
    except ValueError as exc:
        return {'version': VERSION, 'stacks': {}}, 'proof record %s not read: %s' % (path, exc)
    if not isinstance(record, dict) or not isinstance(record.get('stacks'), dict):
        return {'version': VERSION, 'stacks': {}}, 'proof record %s not read: not a proof record' % path
    return record, None


def replaceable(path):
    """Whether a record that could not be used may be written over: it is absent, or readable but not a record
    (a cut or hand-edited file); not one the module cannot read (its permissions are the operator's)."""
    return not os.path.exists(path) or os.access(path, os.R_OK)


def proven(facts, device_key, smoke_tolerance=None):
    """{device key: {'index', 'checks'}} for every device whose numeric checks ran and none failed (a smoke
    result over smoke_tolerance fails as torch_verify fails it).

    device_key(torch_device) -> (key, nvidia-smi index or 'cpu'), or None to leave it out."""
    ran, failed = {}, set()
    for entry in facts.get('smoke') or []:
        found = device_key(entry.get('device'))
        if found is None:
            continue
        error = entry.get('relative_error')
        if entry.get('nonfinite') or error is None or (smoke_tolerance is not None and error > smoke_tolerance):
            failed.add(found[0])
        else:
            ran.setdefault(found, []).append('smoke.%s' % entry.get('dtype'))
    for entry in facts.get('kernels') or []:
        found = device_key(entry.get('device'))
        if found is None:
            continue
        if entry.get('status') == 'failed':
            failed.add(found[0])
        elif entry.get('status') == 'ok':
            ran.setdefault(found, []).append(entry.get('check'))
    collectives = facts.get('collectives') or {}
    out = {}
    for (key, index), checks in ran.items():
        if key in failed:
            continue
        if collectives.get('status') == 'ok':
            checks = checks + ['collectives.allreduce']
        out[key] = {'index': index, 'checks': sorted(set(checks))}
    if collectives.get('status') == 'failed':
        return {}
    return out


def update(record, stack, devices, now=None, mode=''):
    """The record with the proofs of this run added (the current stack first, at most KEEP_STACKS kept)."""
    now = time.time() if now is None else now
    key = stack_key(stack)
    stacks = dict(record.get('stacks') or {})
    entry = dict(stacks.get(key) or {'stack': stack, 'devices': {}})
    entry['devices'] = dict(entry.get('devices') or {})
    for device, found in devices.items():
        entry['devices'][device] = dict(found, time=round(now, 3), mode=mode)
    entry['updated'] = round(now, 3)
    stacks[key] = entry
    keep = sorted(stacks, key=lambda name: stacks[name].get('updated') or 0, reverse=True)[:KEEP_STACKS]
    return {'version': VERSION, 'stacks': dict((name, stacks[name]) for name in keep)}


def write(path, record):
    """Atomically (a temporary file in the same directory, then a rename)."""
    atomic_file.write_text(path, json.dumps(record, indent=1, sort_keys=True) + '\n', mode=None, prefix='.proof-')


def format_age(seconds):
    """3 min, 3.2 h, 30 h, 4 d."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return '%d s' % int(seconds + 0.5)
    if int(seconds / 60.0 + 0.5) < 60:
        return '%d min' % int(seconds / 60.0 + 0.5)
    hours = seconds / 3600.0
    if hours < 10:
        return '%.1f h' % hours
    if hours < 48:
        return '%d h' % int(hours + 0.5)
    return '%d d' % int(hours / 24.0 + 0.5)


def freshness(record, stack, expected, now=None, proven_now=()):
    """How old the proof of each expected device is under this stack.

    expected: [(key, label)] (label: 'GPU 3', 'cpu'). Returns a dict: stack,
    devices ([{key, label, proven_at, age_hours, checks}], age_hours None for
    never), oldest_age_hours (None when any device was never proven), never
    (labels) and summary (one sentence)."""
    now = time.time() if now is None else now
    entry = (record.get('stacks') or {}).get(stack_key(stack)) or {}
    found = entry.get('devices') or {}
    devices, never = [], []
    for key, label in expected:
        item = found.get(key)
        if not item or not isinstance(item.get('time'), (int, float)):
            devices.append(dict(key=key, label=label, proven_at=None, age_hours=None, checks=[]))
            never.append(label)
            continue
        age = max(0.0, now - item['time'])
        devices.append(dict(key=key, label=label, proven_at=time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(item['time'])),
                            age_hours=round(age / 3600.0, 3), checks=item.get('checks') or []))
    ages = [device['age_hours'] for device in devices if device['age_hours'] is not None]
    oldest = max(ages) if ages and not never else None
    if not expected:
        summary = 'no device to prove kernels on'
    elif never:
        summary = 'never proven under this stack on %s' % ', '.join(never)
        if ages:
            summary += '; the others last proven %s ago' % format_age(max(ages) * 3600)
    elif all(device['key'] in proven_now for device in devices):
        summary = 'kernels proven in this run'
    else:
        summary = 'kernels last proven %s ago under this stack' % format_age(oldest * 3600)
    return dict(stack=stack, devices=devices, oldest_age_hours=oldest, never=never, summary=summary)


def age_failure(fresh, max_hours):
    """'max_kernel_proof_age_hours: expected ..., found ...' or None."""
    if max_hours is None:
        return None
    wanted = 'kernels proven under this stack within %s h on every GPU' % max_hours
    if fresh['never']:
        return 'max_kernel_proof_age_hours: expected %s, found no proof on %s' % (wanted, ', '.join(fresh['never']))
    stale = [device for device in fresh['devices'] if device['age_hours'] is not None and device['age_hours'] > max_hours]
    if stale:
        return 'max_kernel_proof_age_hours: expected %s, found %s' % (wanted, ', '.join(
            '%s last proven %s ago' % (device['label'], format_age(device['age_hours'] * 3600)) for device in stale))
    return None
