# -*- coding: utf-8 -*-
"""The all-reduce check: its arithmetic, the parent's handling of ranks that
finish, disagree, crash or hang (with stand-in rank programs started the way
the real ones are: PYTHON -I -c SOURCE PARAMS), and how torch_verify judges
the result. The real ranks, with torch and gloo, are tested in
tests/integration/test_collectives_real.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat
import sys
import textwrap

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import collectives
from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import (
    check_collectives,
    check_expectations,
    collectives_errors,
)


def test_bus_bandwidth_is_the_nccl_tests_definition():
    # 8 ranks, 1 GB in 0.05 s: algbw 20 GB/s, busbw = 20 * 2 * 7 / 8 = 35
    algbw, busbw = collectives.bus_bandwidth(10 ** 9, 0.05, 8)
    assert algbw == pytest.approx(20.0)
    assert busbw == pytest.approx(35.0)
    # 2 ranks: the factor is 1; 1 rank moves nothing
    assert collectives.bus_bandwidth(10 ** 9, 0.1, 2) == (pytest.approx(10.0), pytest.approx(10.0))
    assert collectives.bus_bandwidth(10 ** 9, 0.1, 1)[1] == 0
    assert collectives.bus_bandwidth(10 ** 9, 0, 8) == (None, None)


def test_the_exact_sums_stay_exact_in_float32():
    # float32 holds every integer below 2**24 exactly; the largest sum over 8 ranks is 8 * 61
    assert max(collectives.exact_sum(i, 8) for i in range(collectives.MODULUS * 2)) <= 8 * collectives.MODULUS < 2 ** 24
    # the ranks hold different values, so a rank that is left out changes the sum
    assert len(set(collectives.rank_value(5, rank) for rank in range(8))) == 8
    assert collectives.exact_sum(5, 3) == sum(collectives.rank_value(5, r) for r in range(3))


@pytest.mark.parametrize('count, backend, world, reason', [
    (1, 'nccl', 1, '1 GPU'),
    (0, 'nccl', 0, 'no GPU'),
    (8, 'nccl', 8, None),
    (0, 'gloo', 1, 'gloo needs a world size of 2 or more, got 1'),
    (0, 'gloo', 3, None),
])
def test_skip_reason(count, backend, world, reason):
    assert collectives.skip_reason(count, backend, world) == reason


# A stand-in interpreter: ignores the source it is given (-I -c SOURCE) and
# runs a rank that behaves as FAKE_RANK_MODE says, printing the same JSON lines.
FAKE_RANK = textwrap.dedent('''\
    import json, os, sys, time
    params = json.loads(sys.argv[-1])
    rank, mode = params['rank'], os.environ.get('FAKE_RANK_MODE', 'ok')
    def say(**f):
        sys.stdout.write(json.dumps(f) + '\\n'); sys.stdout.flush()
    say(stage='started', rank=rank)
    assert os.environ.get('NCCL_NVLS_ENABLE') == '0', 'NVLS not off'
    say(stage='imported', rank=rank)
    if mode == 'hang' and rank == 1:
        time.sleep(60)
    say(stage='joining', rank=rank)
    say(stage='joined', rank=rank)
    if mode == 'hang' and rank != 1:
        time.sleep(60)
    if mode == 'crash' and rank == 2:
        sys.stderr.write('Traceback...\\nRuntimeError: NCCL error: unhandled system error\\n')
        sys.exit(1)
    wrong = 3 if mode == 'wrong' and rank in (0, 2) else 0
    say(stage='checked', rank=rank)
    say(stage='timed', rank=rank)
    say(stage='done', rank=rank, times=[0.001 * (rank + 1) for dummy in params['sizes_mib']],
        wrong_elements=wrong, max_abs_error=1.0 if wrong else 0.0, first_wrong=7 if wrong else None,
        first_wrong_value=9.0 if wrong else None, first_wrong_exact=8.0 if wrong else None)
    ''')


@pytest.fixture(name='fake_python')
def fake_python_fixture(tmp_path):
    rank = tmp_path / 'fake_rank.py'
    rank.write_text(FAKE_RANK)
    python = tmp_path / 'python'
    python.write_text('#!/bin/sh\nexec %s %s "$@"\n' % (sys.executable, rank))
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return str(python)


def _run(python, mode, world=4, timeout=20):
    env = dict(os.environ, FAKE_RANK_MODE=mode)
    return collectives.run(python, 'nccl', world, [1, 64], 3, timeout, environ=env)


def test_ranks_that_agree_give_busbw_from_the_slowest_rank(fake_python):
    result = _run(fake_python, 'ok')
    assert result['status'] == 'ok' and result['reason'] is None and result['correct'] is True
    assert [r['stage'] for r in result['ranks']] == ['done'] * 4
    # rank 3 took 0.004 s: 64 MiB / 0.004 s = 16.78 GB/s algbw, x 2 * 3 / 4 busbw
    big = result['results'][1]
    assert big['size_mib'] == 64 and big['seconds'] == pytest.approx(0.004)
    assert big['algbw_gbps'] == pytest.approx(64 * 2 ** 20 / 0.004 / 1e9, rel=1e-3)
    assert big['busbw_gbps'] == pytest.approx(big['algbw_gbps'] * 1.5, rel=1e-3)


def test_a_wrong_sum_fails_naming_the_ranks_that_saw_it(fake_python):
    result = _run(fake_python, 'wrong')
    assert result['status'] == 'failed' and result['correct'] is False
    assert result['reason'] == ('expected the exact sum on every rank, found ranks 0, 2: 3 of %d elements wrong '
                                '(first at element 7: 9.0, exact 8.0)' % collectives.CHECK_ELEMENTS)
    # the speed is still reported; a wrong result fails whatever it is
    assert len(result['results']) == 2


def test_a_hung_rank_is_ended_by_the_deadline_and_named_with_its_stage(fake_python):
    result = _run(fake_python, 'hang', world=3, timeout=3)
    assert result['status'] == 'failed'
    assert result['reason'] == ('expected every rank to finish within 3 s, found rank 0 in the correctness all-reduce; '
                                'rank 1 not yet joining the group (torch imported); rank 2 in the correctness all-reduce')
    assert result['seconds'] < 15
    assert all(r['rc'] != 0 for r in result['ranks'])


def test_a_crashed_rank_is_named_with_its_last_error_line(fake_python):
    result = _run(fake_python, 'crash', world=3)
    assert result['status'] == 'failed'
    assert result['reason'] == ('expected every rank to finish the all-reduce, found rank 2 failed: rc 1, '
                                'RuntimeError: NCCL error: unhandled system error')


def _facts(status, busbw=None, reason=None, correct=True):
    results = [] if busbw is None else [{'size_mib': 16, 'busbw_gbps': busbw / 2}, {'size_mib': 64, 'busbw_gbps': busbw}]
    return {'collectives': {'status': status, 'reason': reason, 'world_size': 8, 'sizes_mib': [16, 64],
                            'correct': correct, 'results': results}}


@pytest.mark.parametrize('facts, expect, mismatches', [
    (_facts('ok', 40.0), {'min_allreduce_busbw_gbps': 30}, []),
    (_facts('ok', 20.0), {'min_allreduce_busbw_gbps': 30},
     ['min_allreduce_busbw_gbps: expected >= 30 GB/s bus bandwidth at 64 MiB, found 20.0 GB/s over 8 ranks']),
    # judged at the stated size, not the largest
    (_facts('ok', 40.0), {'min_allreduce_busbw_gbps': 30, 'allreduce_size_mib': 16},
     ['min_allreduce_busbw_gbps: expected >= 30 GB/s bus bandwidth at 16 MiB, found 20.0 GB/s over 8 ranks']),
    # a skip is never a pass
    (_facts('skipped', reason='1 GPU'), {'min_allreduce_busbw_gbps': 30},
     ['min_allreduce_busbw_gbps: expected >= 30 GB/s bus bandwidth at 64 MiB, found not measured (skipped: 1 GPU)']),
    ({'collectives': None}, {'min_allreduce_busbw_gbps': 30},
     ['min_allreduce_busbw_gbps: expected >= 30 GB/s bus bandwidth at 0 MiB, found no all-reduce result '
      '(set collectives: true)']),
    # fast and wrong: the expectation fails too
    (_facts('failed', 99.0, reason='expected the exact sum on every rank, found ...', correct=False),
     {'min_allreduce_busbw_gbps': 30},
     ['collectives: expected the exact sum on every rank, found ...',
      'min_allreduce_busbw_gbps: expected >= 30 GB/s bus bandwidth at 64 MiB, found 99.0 GB/s, but the sums were wrong']),
    (_facts('skipped', reason='1 GPU'), {}, []),
])
def test_judging(facts, expect, mismatches):
    assert check_collectives(facts) + check_expectations(expect, facts) == mismatches


def _params(**overrides):
    params = dict(collectives_backend='nccl', collectives_world_size=2, collectives_sizes_mib=[1, 16, 64],
                  expect={'min_allreduce_busbw_gbps': None, 'allreduce_size_mib': None})
    params.update(overrides)
    return params


@pytest.mark.parametrize('params, message', [
    (_params(), None),
    (_params(collectives_backend='gloo', collectives_world_size=1),
     'collectives_world_size: expected 2 or more ranks for gloo, found 1'),
    (_params(collectives_sizes_mib=[1, 0]), 'collectives_sizes_mib: expected a list of different positive sizes in MiB, found [1, 0]'),
    (_params(collectives_sizes_mib=[]), 'collectives_sizes_mib: expected a list of different positive sizes in MiB, found []'),
    # one series per size in the Prometheus export: a size given twice is refused
    (_params(collectives_sizes_mib=[64, 64]),
     'collectives_sizes_mib: expected a list of different positive sizes in MiB, found [64, 64]'),
    (_params(expect={'min_allreduce_busbw_gbps': 10.0, 'allreduce_size_mib': 256}),
     'expect.allreduce_size_mib: expected one of collectives_sizes_mib (1, 16, 64), found 256'),
    (_params(expect={'min_allreduce_busbw_gbps': -1.0, 'allreduce_size_mib': None}),
     'expect.min_allreduce_busbw_gbps: expected a number >= 0, found -1.0'),
])
def test_option_errors(params, message):
    assert collectives_errors(params) == message


def test_the_probe_carries_the_collectives_source_for_its_ranks():
    from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import probe_source

    namespace = {}
    # the prelude alone (everything before torch_probe's own text) builds the helpers
    source = probe_source()
    prelude = source[:source.index('"""The probe that gpufleet.inference.torch_verify runs')]
    before = set(sys.modules)
    try:
        exec(compile(prelude, 'prelude', 'exec'), namespace)  # pylint: disable=exec-used
        module = sys.modules['gpufleet_collectives']
        assert module.own_source() == collectives.own_source()
        assert json.dumps(module.CHILD_ENV) == '{"NCCL_NVLS_ENABLE": "0"}'
    finally:
        for name in set(sys.modules) - before:
            del sys.modules[name]
