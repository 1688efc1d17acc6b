# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Xid errors, the NVIDIA driver's own record of GPU faults, from the kernel log.

The driver writes one kernel log line per event::

    NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.

read here from journald (``journalctl -k``, the current boot) where the host
has it, else from the kernel ring buffer (``dmesg``). Each event carries the
boot it happened in and its time since boot (microseconds), which together
order the events of a host: the fleet report keeps the last one it saw as the
host's cursor and counts what came after it as "since the last run". The PCI
address the driver names (domain:bus:device) is matched to the GPU nvidia-smi
lists at that address.

Read-only: nothing is written on the host. A kernel log the user cannot read
(dmesg_restrict, no systemd-journal group) is an answer with its reason, never
an empty list.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
import time

# The common codes, by what an operator does next: application faults (the
# job, not the GPU), memory (ECC, row remapping), the bus, the GPU's firmware.
MEANINGS = {
    8: 'GPU stopped processing (timeout)',
    13: 'graphics engine exception (application fault)',
    31: 'GPU memory page fault (application fault)',
    32: 'invalid or corrupted push buffer stream',
    43: 'GPU stopped processing (application fault)',
    45: 'preemptive cleanup after earlier errors',
    48: 'double-bit ECC error',
    61: 'internal micro-controller breakpoint/warning',
    62: 'internal micro-controller halt',
    63: 'ECC page retirement or row remapping recorded',
    64: 'ECC page retirement or row remapping recording failed',
    68: 'video processor exception',
    74: 'NVLink error',
    79: 'GPU has fallen off the bus',
    92: 'high single-bit ECC error rate',
    94: 'contained ECC error',
    95: 'uncontained ECC error',
    109: 'context switch timeout',
    119: 'GSP RPC timeout',
    120: 'GSP error',
}
# At most this many events travel back per host (the latest ones); the count says how many there were.
MAX_EVENTS = 200

_XID_RE = re.compile(r'NVRM: Xid \(PCI:(?P<pci>[0-9a-fA-F]{1,8}:[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2})(?:\.[0-7])?\):\s*'
                     r'(?P<code>\d+)\s*,?\s*(?P<rest>.*)$')
_DMESG_RE = re.compile(r'^\s*(?:<\d+>)?\[\s*(?P<seconds>\d+)\.(?P<frac>\d+)\]\s?(?P<message>.*)$')
_PID_RE = re.compile(r"^pid=(?P<pid>'[^']*'|[^,\s]*)\s*,\s*")
_NAME_RE = re.compile(r"^name=(?P<name>'[^']*'|[^,\s]*)\s*,\s*")


def meaning(code):
    return MEANINGS.get(code, 'see NVIDIA\'s Xid catalog')


def pci_key(address):
    """(domain, bus, device) as integers from nvidia-smi's 00000000:3B:00.0 or
    the driver's 0000:3b:00; None for anything else."""
    parts = str(address or '').split('.', 1)[0].split(':')
    if len(parts) != 3:
        return None
    try:
        return tuple(int(part, 16) for part in parts)
    except ValueError:
        return None


def parse_message(message):
    """One kernel log message -> {code, pci, pid, process, text} or None when it is not an Xid line."""
    found = _XID_RE.search(message or '')
    if not found:
        return None
    rest = found.group('rest').strip()
    event = {'code': int(found.group('code')), 'pci': found.group('pci').lower(), 'pid': None, 'process': None}
    pid = _PID_RE.match(rest)
    if pid:
        value = pid.group('pid').strip("'")
        event['pid'] = int(value) if value.isdigit() else None
        rest = rest[pid.end():]
    name = _NAME_RE.match(rest)
    if name:
        value = name.group('name').strip("'")
        event['process'] = None if value in ('', '<unknown>') else value
        rest = rest[name.end():]
    event['text'] = rest.strip()[:240]
    return event


def parse_dmesg(text):
    """dmesg's output (``[seconds.micros] message`` lines) -> events with their time since boot."""
    events = []
    for line in (text or '').splitlines():
        found = _DMESG_RE.match(line)
        if not found:
            continue
        event = parse_message(found.group('message'))
        if event is not None:
            frac = (found.group('frac') + '000000')[:6]
            event['monotonic_us'] = int(found.group('seconds')) * 1000000 + int(frac)
            events.append(event)
    return events


def parse_journal(text):
    """``journalctl -o json`` lines -> events with their time since boot and wall time."""
    events = []
    for line in (text or '').splitlines():
        line = line.strip()
        if not line.startswith('{'):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get('MESSAGE')
        if isinstance(message, list):  # journald keeps a message that is not UTF-8 as its bytes
            message = bytes(b & 0xff for b in message if isinstance(b, int)).decode('utf-8', 'replace')
        event = parse_message(message if isinstance(message, str) else '')
        if event is None:
            continue
        mono = entry.get('_SOURCE_MONOTONIC_TIMESTAMP') or entry.get('__MONOTONIC_TIMESTAMP')
        real = entry.get('__REALTIME_TIMESTAMP')
        event['monotonic_us'] = int(mono) if str(mono or '').isdigit() else None
        event['time'] = int(real) / 1e6 if str(real or '').isdigit() else None
        events.append(event)
    return events


def attach(events, gpus, boot_id, boot_time):
    """Each event's GPU (index, uuid) by its PCI address, its meaning, its boot
    and its wall time where only the time since boot is known."""
    by_pci = dict((pci_key(gpu.get('pci_bus_id')), gpu) for gpu in gpus or [] if pci_key(gpu.get('pci_bus_id')))
    for event in events:
        gpu = by_pci.get(pci_key(event['pci']))
        event['gpu'] = gpu.get('index') if gpu else None
        event['uuid'] = gpu.get('uuid') if gpu else None
        event['meaning'] = meaning(event['code'])
        event['boot_id'] = boot_id
        if event.get('time') is None and event.get('monotonic_us') is not None and boot_time is not None:
            event['time'] = round(boot_time + event['monotonic_us'] / 1e6, 3)
        event.setdefault('time', None)
    return events


def after(events, cursor):
    """The events that came after cursor ({boot_id, monotonic_us}, or None: all)."""
    if not cursor or not cursor.get('boot_id'):
        return list(events)
    last = cursor.get('monotonic_us') or 0
    return [e for e in events if e.get('boot_id') != cursor['boot_id'] or (e.get('monotonic_us') or 0) > last]


def cursor_of(answer, previous=None):
    """Where the next run starts counting: the last event read, else the boot
    and the time the log was read up to; previous where the log was not read."""
    if not answer or answer.get('error') or not answer.get('boot_id'):
        return previous
    last = max([e.get('monotonic_us') or 0 for e in answer.get('events') or []] + [answer.get('read_monotonic_us') or 0])
    return {'boot_id': answer['boot_id'], 'monotonic_us': last}


def _unreadable(text):
    lowered = (text or '').lower()
    return any(word in lowered for word in ('operation not permitted', 'permission denied', 'insufficient permissions',
                                            'not seeing messages', 'no journal files were opened'))


def _first_line(text):
    lines = (text or '').strip().splitlines()
    return lines[0].strip() if lines else 'no output'


def _read_file(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def read(module, gpus, timeout=30):
    """Read the Xid events of the current boot. Returns {source, error, boot_id,
    read_monotonic_us, count, events (the latest MAX_EVENTS)}; error says why
    the kernel log could not be read (source is then what was tried)."""
    boot_id = _read_file('/proc/sys/kernel/random/boot_id')
    uptime = _read_file('/proc/uptime')
    try:
        now_mono = float(uptime.split()[0]) if uptime else None
    except ValueError:
        now_mono = None
    boot_time = time.time() - now_mono if now_mono is not None else None
    answer = {'source': None, 'error': None, 'boot_id': boot_id,
              'read_monotonic_us': int(now_mono * 1e6) if now_mono is not None else None, 'count': 0, 'events': []}
    timeout_bin = module.get_bin_path('timeout') if timeout else None

    def call(argv):
        argv = ([timeout_bin, '--kill-after=5', str(timeout)] + argv) if timeout_bin else argv
        return module.run_command(argv, errors='replace')

    errors = []
    events = None
    journalctl = module.get_bin_path('journalctl')
    if journalctl:
        answer['source'] = 'journald'
        argv = [journalctl, '-k', '-b', '0', '-o', 'json', '--no-pager', '-q',
                '--output-fields=MESSAGE,_SOURCE_MONOTONIC_TIMESTAMP,__REALTIME_TIMESTAMP']
        rc, out, err = call(argv + ['--grep=NVRM: Xid'])
        if rc not in (0, 1) or 'pattern matching' in err.lower() or 'unrecognized option' in err.lower():
            rc, out, err = call(argv)  # a journalctl built without pattern matching
        if rc not in (0, 1) or _unreadable(err):
            errors.append('journalctl -k: %s' % _first_line(err or out))
        elif out.strip():
            events = parse_journal(out)
        else:
            # No Xid: an answer only where the journal holds this boot's kernel
            # messages at all (journald may run without them, or not at all)
            rc, out, err = call([journalctl, '-k', '-b', '0', '-n', '1', '-o', 'json', '--no-pager', '-q',
                                 '--output-fields=MESSAGE'])
            if rc == 0 and out.strip() and not _unreadable(err):
                events = []
            else:
                errors.append('journalctl -k: no kernel message of this boot in the journal')
    if events is None:
        dmesg = module.get_bin_path('dmesg')
        if dmesg:
            answer['source'] = 'dmesg'
            rc, out, err = call([dmesg])
            if rc != 0 or _unreadable(err):
                line = _first_line(err or out)
                errors.append(line if line.startswith('dmesg:') else 'dmesg: %s' % line)
            else:
                events = parse_dmesg(out)
        elif not journalctl:
            errors.append('neither journalctl nor dmesg found')
    if events is None:
        answer['error'] = '; '.join(errors) + (
            ' (the kernel log is not readable by this user: add it to the systemd-journal or adm group, '
            'allow dmesg (kernel.dmesg_restrict=0), or read it as root: gpufleet_xid: become)'
            if any(_unreadable(e) for e in errors) else '')
        answer['cursor'] = None
        return answer
    attach(events, gpus, boot_id, boot_time)
    answer['count'] = len(events)
    answer['events'] = events[-MAX_EVENTS:]
    answer['cursor'] = cursor_of(answer)
    return answer


def summary(events, limit=3):
    """'79 on GPU 3 (fallen off the bus) at ..., 2 more' for a failure line."""
    parts = []
    for event in events[:limit]:
        where = 'GPU %s' % event['gpu'] if event.get('gpu') is not None else 'PCI %s' % event.get('pci')
        parts.append('Xid %d on %s (%s)' % (event['code'], where, event.get('meaning') or meaning(event['code'])))
    if len(events) > limit:
        parts.append('%d more' % (len(events) - limit))
    return ', '.join(parts)


def judge(answer, cursor, expect):
    """The events since cursor, and the failures of expect's no_xid_since_last_run
    (ignore_xids left out). A log that was not read never passes that
    expectation: it says why instead."""
    expect = expect or {}
    wanted = bool(expect.get('no_xid_since_last_run'))
    ignore = set(expect.get('ignore_xids') or [])
    result = {'new': [], 'ignored': [], 'failures': []}
    since = 'since the last run' if cursor else 'in this boot'
    notes = (['ignoring %s' % ', '.join(str(c) for c in sorted(ignore))] if ignore else []) + (
        [] if cursor else ['no earlier run read this host\'s log'])
    words = since + (' (%s)' % '; '.join(notes) if notes else '')
    if not answer or answer.get('error'):
        if wanted:
            why = (answer or {}).get('error') or 'no GPU, or Xid reading off'
            result['failures'].append('no_xid_since_last_run: expected no Xid %s, found the kernel log not read: %s'
                                      % (words, why))
        return result
    new = after(answer.get('events') or [], cursor)
    result['ignored'] = [e for e in new if e['code'] in ignore]
    result['new'] = [e for e in new if e['code'] not in ignore]
    if wanted and result['new']:
        result['failures'].append('no_xid_since_last_run: expected no Xid %s, found %s' % (words, summary(result['new'])))
    return result
