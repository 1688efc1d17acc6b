# -*- coding: utf-8 -*-
"""Xid errors from the kernel log: the driver's lines as journald and dmesg
give them, their GPU by PCI address, the cursor between runs and the
expectation no_xid_since_last_run."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import xid

GPUS = [
    {'index': 0, 'uuid': 'GPU-aaaa', 'pci_bus_id': '00000000:19:00.0'},
    {'index': 3, 'uuid': 'GPU-dddd', 'pci_bus_id': '00000000:3B:00.0'},
]
BOOT = '1b629215-6ec9-4d26-818d-c812f7799105'

DMESG = """\
[    0.577607] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build
[ 1234.500001] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.
[ 1300.000002] some other line
[ 1400.25] NVRM: Xid (PCI:0000:19:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception: ESR 0x404490=0x80000001
[ 1500.000000] NVRM: Xid (PCI:0000:af:00): 94, pid=77, name=sglang::schedu, Contained: SM (0x1). RST: No, D-RST: No
"""


def test_dmesg_lines_parse_with_time_since_boot_gpu_and_meaning():
    events = xid.attach(xid.parse_dmesg(DMESG), GPUS, BOOT, 1000.0)
    assert [e['code'] for e in events] == [79, 13, 94]
    fallen, graphics, contained = events
    assert fallen['monotonic_us'] == 1234500001
    assert (fallen['gpu'], fallen['uuid'], fallen['pid'], fallen['process']) == (3, 'GPU-dddd', 1234, 'python3')
    assert fallen['meaning'] == 'GPU has fallen off the bus'
    assert fallen['text'] == 'GPU has fallen off the bus.'
    assert fallen['time'] == pytest.approx(1000.0 + 1234.500001)
    # quoted pid and <unknown> name, a fraction shorter than microseconds
    assert (graphics['gpu'], graphics['pid'], graphics['process']) == (0, None, None)
    assert graphics['monotonic_us'] == 1400250000
    assert graphics['text'].startswith('Graphics Exception')
    # an address no GPU of nvidia-smi has: kept, with no GPU
    assert (contained['gpu'], contained['pci'], contained['uuid']) == (None, '0000:af:00', None)
    assert contained['meaning'] == 'contained ECC error'
    assert all(e['boot_id'] == BOOT for e in events)


def test_journal_json_parses_message_bytes_and_timestamps():
    lines = [
        {'MESSAGE': 'NVRM: Xid (PCI:0000:19:00): 48, pid=9, name=x, DBE (double bit error) ECC error',
         '_SOURCE_MONOTONIC_TIMESTAMP': '5000000', '__REALTIME_TIMESTAMP': '1796342400500000'},
        {'MESSAGE': 'usb 1-1: new device', '_SOURCE_MONOTONIC_TIMESTAMP': '6000000'},
        # a message journald keeps as bytes (not UTF-8)
        {'MESSAGE': list(b'NVRM: Xid (PCI:0000:3b:00): 119, pid=1, name=a, Timeout \xff'), '__MONOTONIC_TIMESTAMP': '7000000'},
    ]
    text = '\n'.join(json.dumps(line) for line in lines) + '\nnot json\n'
    events = xid.attach(xid.parse_journal(text), GPUS, BOOT, 100.0)
    assert [(e['code'], e['gpu'], e['monotonic_us']) for e in events] == [(48, 0, 5000000), (119, 3, 7000000)]
    assert events[0]['time'] == pytest.approx(1796342400.5)  # journald's wall time wins
    assert events[1]['time'] == pytest.approx(107.0)
    assert events[1]['meaning'] == 'GSP RPC timeout'


@pytest.mark.parametrize('line', ['NVRM: GPU at PCI:0000:3b:00: GPU-aaaa', 'NVRM: Xid 79 without an address', ''])
def test_lines_that_are_not_xid_are_left_out(line):
    assert xid.parse_message(line) is None


def test_pci_key_matches_nvidia_smi_and_driver_forms():
    assert xid.pci_key('00000000:3B:00.0') == xid.pci_key('0000:3b:00') == (0, 0x3b, 0)
    assert xid.pci_key('garbage') is None and xid.pci_key(None) is None


def _events(*pairs):
    return [{'code': code, 'boot_id': boot, 'monotonic_us': mono, 'gpu': 0, 'pci': '0000:19:00', 'meaning': xid.meaning(code)}
            for code, boot, mono in pairs]


def test_after_counts_what_came_after_the_cursor_and_a_new_boot():
    events = _events((79, BOOT, 10), (13, BOOT, 20), (48, 'other-boot', 5))
    assert [e['code'] for e in xid.after(events, {'boot_id': BOOT, 'monotonic_us': 10})] == [13, 48]
    assert len(xid.after(events, None)) == 3


def test_cursor_is_the_later_of_the_read_and_the_last_event():
    answer = {'boot_id': BOOT, 'read_monotonic_us': 100, 'events': _events((79, BOOT, 150))}
    assert xid.cursor_of(answer) == {'boot_id': BOOT, 'monotonic_us': 150}
    answer['events'] = []
    assert xid.cursor_of(answer) == {'boot_id': BOOT, 'monotonic_us': 100}
    # a log that was not read keeps the earlier cursor
    assert xid.cursor_of({'error': 'dmesg: Operation not permitted'}, {'boot_id': BOOT, 'monotonic_us': 7}) == {
        'boot_id': BOOT, 'monotonic_us': 7}


def test_judge_fails_new_events_but_the_ignored_codes():
    answer = {'source': 'dmesg', 'error': None, 'boot_id': BOOT, 'events': _events((79, BOOT, 10), (13, BOOT, 20), (31, BOOT, 30))}
    cursor = {'boot_id': BOOT, 'monotonic_us': 5}
    judged = xid.judge(answer, cursor, {'no_xid_since_last_run': True, 'ignore_xids': [13, 31]})
    assert [e['code'] for e in judged['new']] == [79] and [e['code'] for e in judged['ignored']] == [13, 31]
    assert judged['failures'] == ['no_xid_since_last_run: expected no Xid since the last run (ignoring 13, 31), '
                                  'found Xid 79 on GPU 0 (GPU has fallen off the bus)']
    # only ignored codes: passes
    assert xid.judge(answer, {'boot_id': BOOT, 'monotonic_us': 15}, {'no_xid_since_last_run': True, 'ignore_xids': [13, 31]})[
        'failures'] == []
    # without the expectation the events are counted, never a failure
    assert xid.judge(answer, cursor, {})['failures'] == [] and len(xid.judge(answer, cursor, {})['new']) == 3
    # no cursor: the whole boot, and the words say so
    assert 'in this boot' in xid.judge(answer, None, {'no_xid_since_last_run': True})['failures'][0]


def test_judge_a_log_not_read_never_passes_the_expectation():
    unread = {'source': 'dmesg', 'error': 'dmesg: read kernel buffer failed: Operation not permitted', 'events': []}
    failures = xid.judge(unread, None, {'no_xid_since_last_run': True})['failures']
    assert failures and 'found the kernel log not read: dmesg: read kernel buffer failed' in failures[0]
    assert xid.judge(None, None, {'no_xid_since_last_run': True})['failures']
    assert xid.judge(unread, None, {})['failures'] == []


class FakeModule(object):
    def __init__(self, bins, answers):
        self.bins, self.answers, self.calls = bins, list(answers), []

    def get_bin_path(self, name, *args, **kwargs):
        return self.bins.get(name)

    def run_command(self, argv, errors=None):
        self.calls.append(argv)
        return self.answers.pop(0)


def test_read_prefers_journald_and_falls_back_without_pattern_matching():
    journal = json.dumps({'MESSAGE': 'NVRM: Xid (PCI:0000:19:00): 79, pid=1, name=a, GPU has fallen off the bus.',
                          '_SOURCE_MONOTONIC_TIMESTAMP': '9000000'})
    module = FakeModule({'journalctl': '/usr/bin/journalctl', 'dmesg': '/usr/bin/dmesg'},
                        [(1, '', 'Compiled without pattern matching support'), (0, journal + '\n', '')])
    answer = xid.read(module, GPUS, timeout=0)
    assert answer['source'] == 'journald' and answer['error'] is None
    assert [(e['code'], e['gpu']) for e in answer['events']] == [(79, 0)] and answer['count'] == 1
    assert '--grep=NVRM: Xid' in module.calls[0] and '--grep=NVRM: Xid' not in module.calls[1]
    assert module.calls[0][1:4] == ['-k', '-b', '0']
    assert answer['cursor']['monotonic_us'] >= 9000000


def test_read_unreadable_journal_falls_back_to_dmesg():
    module = FakeModule({'journalctl': '/usr/bin/journalctl', 'dmesg': '/bin/dmesg', 'timeout': '/usr/bin/timeout'},
                        [(0, '', 'Hint: You are currently not seeing messages from other users and the system.'),
                         (0, DMESG, '')])
    answer = xid.read(module, GPUS, timeout=30)
    assert answer['source'] == 'dmesg' and answer['error'] is None and answer['count'] == 3
    assert module.calls[1][:4] == ['/usr/bin/timeout', '--kill-after=5', '30', '/bin/dmesg']


def test_read_says_why_when_no_log_can_be_read():
    module = FakeModule({'dmesg': '/bin/dmesg'}, [(1, '', 'dmesg: read kernel buffer failed: Operation not permitted\n')])
    answer = xid.read(module, GPUS, timeout=0)
    assert answer['events'] == [] and answer['cursor'] is None
    assert answer['error'].startswith('dmesg: read kernel buffer failed: Operation not permitted')
    assert 'gpufleet_xid: become' in answer['error']
    assert xid.read(FakeModule({}, []), GPUS)['error'] == 'neither journalctl nor dmesg found'


def test_read_keeps_the_latest_events_and_counts_all():
    lines = ''.join('[%d.000000] NVRM: Xid (PCI:0000:19:00): 13, pid=1, name=a, x\n' % (i + 1) for i in range(xid.MAX_EVENTS + 5))
    answer = xid.read(FakeModule({'dmesg': '/bin/dmesg'}, [(0, lines, '')]), GPUS, timeout=0)
    assert answer['count'] == xid.MAX_EVENTS + 5 and len(answer['events']) == xid.MAX_EVENTS
    assert answer['events'][-1]['monotonic_us'] == (xid.MAX_EVENTS + 5) * 1000000


def test_read_a_journal_without_kernel_messages_falls_back_to_dmesg():
    # journalctl installed, but the journal holds no kernel message of this boot (journald not running)
    module = FakeModule({'journalctl': '/usr/bin/journalctl', 'dmesg': '/bin/dmesg'},
                        [(0, '', ''), (0, '', ''), (0, DMESG, '')])
    answer = xid.read(module, GPUS, timeout=0)
    assert answer['source'] == 'dmesg' and answer['error'] is None and answer['count'] == 3
    assert module.calls[1][1:6] == ['-k', '-b', '0', '-n', '1']


def test_read_a_journal_with_kernel_messages_and_no_xid_is_an_empty_answer():
    module = FakeModule({'journalctl': '/usr/bin/journalctl', 'dmesg': '/bin/dmesg'},
                        [(0, '', ''), (0, '{"MESSAGE": "Linux version 6.1"}\n', '')])
    answer = xid.read(module, GPUS, timeout=0)
    assert (answer['source'], answer['error'], answer['events']) == ('journald', None, [])
    assert len(module.calls) == 2  # dmesg not asked
