# -*- coding: utf-8 -*-
"""The host's proof record (module_utils proof): which devices a run proved, the
record kept per stack, and how old the proof of each GPU is."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import proof

NOW = 1780000000.0
HOUR = 3600.0
UUIDS = ['GPU-aaaa', 'GPU-bbbb', 'GPU-cccc']
TORCH = {'torch_version': '2.11.0+cu130', 'markers': {'gpufleet-sgl_kernel.json': {'abi_key': '3f9c0a1b'}}}
STACK = proof.stack_of('/home/deploy/ml-env-2026', TORCH, '580.159.04')


def device_key(device):
    """As torch_verify's: a GPU by its UUID and nvidia-smi index, the CPU as 'cpu', anything else left out."""
    if device == 'cpu':
        return ('cpu', 'cpu')
    if isinstance(device, int) and device < len(UUIDS):
        return (UUIDS[device], device)
    return None


def smoke(device, dtype='bfloat16', nonfinite=0, relative_error=0.002):
    return dict(device=device, dtype=dtype, nonfinite=nonfinite, relative_error=relative_error)


def kernel(device, check='sgl_kernel.rmsnorm', status='ok'):
    return dict(device=device, check=check, status=status)


@pytest.mark.parametrize('link, path', [
    ('/home/deploy/ml-env', '/home/deploy/.ml-env.proof.json'),
    ('/home/deploy/ml-env/', '/home/deploy/.ml-env.proof.json'),
    ('~/ml-env', '~/.ml-env.proof.json'),
])
def test_record_path_is_beside_the_stable_path(link, path):
    assert proof.record_path(link) == path


def test_stack_of():
    assert STACK == {'venv': '/home/deploy/ml-env-2026', 'torch': '2.11.0+cu130', 'driver': '580.159.04',
                     'sgl_kernel': '3f9c0a1b'}
    # the driver torch saw where nvidia-smi gave none; no marker: no sgl_kernel build
    assert proof.stack_of('/v', {'torch_version': '2.9.1', 'driver_version': '570.1'}, None) == {
        'venv': '/v', 'torch': '2.9.1', 'driver': '570.1', 'sgl_kernel': ''}
    assert proof.stack_key(STACK) != proof.stack_key(dict(STACK, driver='590.48.01'))


PROVEN_CASES = [
    dict(id='smoke_and_kernels_ok_on_two_gpus',
         facts=dict(smoke=[smoke(0), smoke(0, 'float16'), smoke(1)], kernels=[kernel(0), kernel(1)]),
         proven={UUIDS[0]: dict(index=0, checks=['sgl_kernel.rmsnorm', 'smoke.bfloat16', 'smoke.float16']),
                 UUIDS[1]: dict(index=1, checks=['sgl_kernel.rmsnorm', 'smoke.bfloat16'])}),
    dict(id='a_failed_kernel_proves_nothing_on_its_device',
         facts=dict(smoke=[smoke(0), smoke(1)], kernels=[kernel(0), kernel(1, status='failed'), kernel(1, 'x.ok')]),
         proven={UUIDS[0]: dict(index=0, checks=['sgl_kernel.rmsnorm', 'smoke.bfloat16'])}),
    dict(id='a_non_finite_smoke_proves_nothing_on_its_device',
         facts=dict(smoke=[smoke(0), smoke(1, nonfinite=67108864, relative_error=None), smoke(1, 'float16')],
                    kernels=[kernel(1)]),
         proven={UUIDS[0]: dict(index=0, checks=['smoke.bfloat16'])}),
    dict(id='a_smoke_without_relative_error_proves_nothing',
         facts=dict(smoke=[smoke(0, relative_error=None)], kernels=[kernel(0)]),
         proven={}),
    dict(id='skipped_checks_do_not_count',
         facts=dict(smoke=[], kernels=[kernel(0, status='skipped'), kernel(1, 'a', 'skipped'), kernel(1, 'b', 'ok')]),
         proven={UUIDS[1]: dict(index=1, checks=['b'])}),
    dict(id='an_ok_all_reduce_is_added_to_every_proven_device',
         facts=dict(smoke=[smoke(0), smoke(1)], collectives=dict(status='ok')),
         proven={UUIDS[0]: dict(index=0, checks=['collectives.allreduce', 'smoke.bfloat16']),
                 UUIDS[1]: dict(index=1, checks=['collectives.allreduce', 'smoke.bfloat16'])}),
    dict(id='a_skipped_all_reduce_is_not_a_check',
         facts=dict(smoke=[smoke(0)], collectives=dict(status='skipped', reason='1 GPU')),
         proven={UUIDS[0]: dict(index=0, checks=['smoke.bfloat16'])}),
    dict(id='a_failed_all_reduce_proves_nothing',
         facts=dict(smoke=[smoke(0), smoke(1)], kernels=[kernel(0)], collectives=dict(status='failed')),
         proven={}),
    dict(id='the_cpu',
         facts=dict(smoke=[], kernels=[kernel('cpu'), kernel('cpu', 'sgl_kernel.silu_and_mul')]),
         proven={'cpu': dict(index='cpu', checks=['sgl_kernel.rmsnorm', 'sgl_kernel.silu_and_mul'])}),
    dict(id='a_device_the_key_leaves_out',
         facts=dict(smoke=[smoke(7)], kernels=[kernel(7), kernel(None)]),
         proven={}),
    dict(id='nothing_ran', facts=dict(), proven={}),
]


@pytest.mark.parametrize('case', PROVEN_CASES, ids=[case['id'] for case in PROVEN_CASES])
def test_proven(case):
    assert proof.proven(case['facts'], device_key) == case['proven']


# --- the record ----------------------------------------------------------------------------------------------

def test_update_adds_the_devices_of_this_run_and_keeps_the_others():
    record = proof.update({'version': 1, 'stacks': {}}, STACK, {UUIDS[0]: dict(index=0, checks=['smoke.bfloat16'])},
                          NOW - 5 * HOUR, 'full')
    record = proof.update(record, STACK, {UUIDS[1]: dict(index=1, checks=['sgl_kernel.rmsnorm'])}, NOW, 'auto')
    entry = record['stacks'][proof.stack_key(STACK)]
    assert entry['stack'] == STACK and entry['updated'] == NOW
    assert entry['devices'] == {
        UUIDS[0]: dict(index=0, checks=['smoke.bfloat16'], time=NOW - 5 * HOUR, mode='full'),
        UUIDS[1]: dict(index=1, checks=['sgl_kernel.rmsnorm'], time=NOW, mode='auto')}
    # the same device again: the newer proof replaces it
    again = proof.update(record, STACK, {UUIDS[0]: dict(index=0, checks=['x'])}, NOW + 1, 'full')
    assert again['stacks'][proof.stack_key(STACK)]['devices'][UUIDS[0]]['time'] == NOW + 1
    # the record given is not changed
    assert entry['devices'][UUIDS[0]]['time'] == NOW - 5 * HOUR


def test_update_keeps_at_most_keep_stacks_newest_first():
    record = {'version': 1, 'stacks': {}}
    stacks = [dict(STACK, torch='2.%d.0' % number) for number in range(proof.KEEP_STACKS + 2)]
    # written in an order that is not their age
    for number in (2, 0, 5, 1, 4, 3):
        record = proof.update(record, stacks[number], {UUIDS[0]: dict(index=0, checks=['c'])}, NOW + number, 'full')
    assert len(record['stacks']) == proof.KEEP_STACKS
    assert list(record['stacks']) == [proof.stack_key(stacks[number]) for number in (5, 4, 3, 2)]
    assert record['version'] == proof.VERSION


def test_write_and_load_round_trip(tmp_path):
    path = str(tmp_path / '.ml-env.proof.json')
    record = proof.update({'version': 1, 'stacks': {}}, STACK, {UUIDS[0]: dict(index=0, checks=['smoke.bfloat16'])},
                          NOW, 'full')
    proof.write(path, record)
    assert proof.load(path) == (record, None)
    assert os.listdir(str(tmp_path)) == ['.ml-env.proof.json']  # no temporary file left
    # written again over the old one
    record = proof.update(record, STACK, {UUIDS[1]: dict(index=1, checks=['c'])}, NOW + 1, 'auto')
    proof.write(path, record)
    assert proof.load(path)[0]['stacks'][proof.stack_key(STACK)]['devices'][UUIDS[1]]['mode'] == 'auto'
    assert os.listdir(str(tmp_path)) == ['.ml-env.proof.json']


def test_write_into_a_missing_directory_raises(tmp_path):
    with pytest.raises(OSError):
        proof.write(str(tmp_path / 'absent' / '.ml-env.proof.json'), {'version': 1, 'stacks': {}})


def test_load_a_missing_file_is_an_empty_record_without_error(tmp_path):
    assert proof.load(str(tmp_path / '.ml-env.proof.json')) == ({'version': 1, 'stacks': {}}, None)


@pytest.mark.parametrize('content, reason', [
    ('{"version": 1, "stacks": {', 'proof record %s not read: '),
    ('', 'proof record %s not read: '),
    ('[1, 2]', 'proof record %s not read: not a proof record'),
    ('{"version": 1, "stacks": []}', 'proof record %s not read: not a proof record'),
    ('{"version": 1}', 'proof record %s not read: not a proof record'),
])
def test_load_an_unreadable_record_says_why_naming_the_path(tmp_path, content, reason):
    path = tmp_path / '.ml-env.proof.json'
    path.write_text(content)
    record, error = proof.load(str(path))
    assert record == {'version': 1, 'stacks': {}}
    assert error.startswith(reason % path)
    if not reason.endswith('record'):
        assert len(error) > len(reason % path)  # the parser's reason follows


def test_load_a_directory_says_why(tmp_path):
    record, error = proof.load(str(tmp_path))
    assert record == {'version': 1, 'stacks': {}} and error.startswith('proof record %s not read: ' % tmp_path)


# --- freshness and expiry ------------------------------------------------------------------------------------

def record_with(ages_hours, stack=None):
    """A record under stack (STACK by default) with each UUID proven ages_hours[uuid] hours before NOW."""
    stack = STACK if stack is None else stack
    record = {'version': 1, 'stacks': {}}
    for uuid, age in ages_hours.items():
        record = proof.update(record, stack, {uuid: dict(index=UUIDS.index(uuid), checks=['smoke.bfloat16'])},
                              NOW - age * HOUR, 'full')
    return record


GPU0 = [(UUIDS[0], 'GPU 0')]
GPU01 = [(UUIDS[0], 'GPU 0'), (UUIDS[1], 'GPU 1')]


def test_all_proven_in_this_run():
    fresh = proof.freshness(record_with({UUIDS[0]: 0, UUIDS[1]: 0}), STACK, GPU01, NOW, proven_now={UUIDS[0], UUIDS[1]})
    assert fresh['summary'] == 'kernels proven in this run'
    assert fresh['never'] == [] and fresh['oldest_age_hours'] == 0.0 and fresh['stack'] == STACK


def test_proven_three_hours_ago():
    fresh = proof.freshness(record_with({UUIDS[0]: 3}), STACK, GPU0, NOW)
    assert fresh['summary'] == 'kernels last proven 3.0 h ago under this stack'
    assert fresh['oldest_age_hours'] == 3.0
    assert fresh['devices'] == [dict(key=UUIDS[0], label='GPU 0', age_hours=3.0, checks=['smoke.bfloat16'],
                                     proven_at='2026-05-28T17:26:40Z')]


def test_proven_in_this_run_on_one_gpu_the_other_an_hour_ago_gives_the_oldest():
    fresh = proof.freshness(record_with({UUIDS[0]: 0, UUIDS[1]: 1}), STACK, GPU01, NOW, proven_now={UUIDS[0]})
    assert fresh['summary'] == 'kernels last proven 1.0 h ago under this stack' and fresh['oldest_age_hours'] == 1.0


@pytest.mark.parametrize('other', [dict(STACK, torch='2.12.0+cu130'), dict(STACK, driver='590.48.01'),
                                   dict(STACK, venv='/home/deploy/ml-env-old'), dict(STACK, sgl_kernel='')])
def test_a_proof_under_another_stack_does_not_count(other):
    fresh = proof.freshness(record_with({UUIDS[0]: 1}, stack=other), STACK, GPU0, NOW)
    assert fresh['summary'] == 'never proven under this stack on GPU 0'
    assert fresh['never'] == ['GPU 0'] and fresh['oldest_age_hours'] is None
    assert fresh['devices'] == [dict(key=UUIDS[0], label='GPU 0', proven_at=None, age_hours=None, checks=[])]


def test_one_gpu_never_proven_the_other_two_hours_ago():
    fresh = proof.freshness(record_with({UUIDS[1]: 2}), STACK, GPU01, NOW)
    assert fresh['summary'] == 'never proven under this stack on GPU 0; the others last proven 2.0 h ago'
    assert fresh['never'] == ['GPU 0'] and fresh['oldest_age_hours'] is None
    assert [device['age_hours'] for device in fresh['devices']] == [None, 2.0]


def test_no_device_expected():
    assert proof.freshness(record_with({UUIDS[0]: 1}), STACK, [], NOW)['summary'] == 'no device to prove kernels on'


def test_an_entry_without_a_time_is_never_proven():
    record = record_with({UUIDS[0]: 1})
    record['stacks'][proof.stack_key(STACK)]['devices'][UUIDS[0]]['time'] = 'yesterday'
    assert proof.freshness(record, STACK, GPU0, NOW)['never'] == ['GPU 0']


WANTED = 'max_kernel_proof_age_hours: expected kernels proven under this stack within %s h on every GPU, found %s'


@pytest.mark.parametrize('ages, expected, max_hours, failure', [
    ({UUIDS[0]: 2}, GPU0, 1, WANTED % (1, 'GPU 0 last proven 2.0 h ago')),
    ({UUIDS[0]: 2, UUIDS[1]: 30}, GPU01, 1, WANTED % (1, 'GPU 0 last proven 2.0 h ago, GPU 1 last proven 30 h ago')),
    ({UUIDS[0]: 2, UUIDS[1]: 0.5}, GPU01, 1, WANTED % (1, 'GPU 0 last proven 2.0 h ago')),
    ({UUIDS[0]: 2}, GPU0, 24, None),
    ({UUIDS[0]: 1}, GPU0, 1, None),  # exactly the limit is within it
    ({UUIDS[0]: 0}, GPU0, 0, None),
    ({}, GPU0, 24, WANTED % (24, 'no proof on GPU 0')),
    ({UUIDS[1]: 1}, GPU01, 24, WANTED % (24, 'no proof on GPU 0')),
    ({}, GPU0, None, None),
    ({UUIDS[0]: 500}, GPU0, None, None),
])
def test_age_failure(ages, expected, max_hours, failure):
    assert proof.age_failure(proof.freshness(record_with(ages), STACK, expected, NOW), max_hours) == failure


@pytest.mark.parametrize('seconds, text', [
    (-5, '0 s'),
    (0, '0 s'),
    (59, '59 s'),
    (60, '1 min'),
    (90, '2 min'),
    (3 * HOUR, '3.0 h'),
    (9.9 * HOUR, '9.9 h'),
    (10 * HOUR, '10 h'),
    (30 * HOUR, '30 h'),
    (48 * HOUR, '2 d'),
    (4 * 24 * HOUR, '4 d'),
])
def test_format_age(seconds, text):
    assert proof.format_age(seconds) == text


def test_the_record_is_plain_json(tmp_path):
    path = str(tmp_path / 'r.json')
    proof.write(path, record_with({UUIDS[0]: 1}))
    with open(path) as handle:
        data = json.load(handle)
    assert data['version'] == 1 and list(data['stacks'].values())[0]['devices'][UUIDS[0]]['mode'] == 'full'


def test_replaceable_is_absent_or_readable_never_unreadable(tmp_path, monkeypatch):
    path = str(tmp_path / '.ml-env.proof.json')
    assert proof.replaceable(path)  # absent
    with open(path, 'w') as handle:
        handle.write('not json')
    assert proof.replaceable(path)  # readable, not a record
    monkeypatch.setattr(proof.os, 'access', lambda name, mode: False)
    assert not proof.replaceable(path)  # the module cannot read it: the operator's
