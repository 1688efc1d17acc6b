# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The all-reduce check across a host's GPUs: is the collective path right, and how fast.

The probe (torch_probe) calls run() inside the interpreter under test. run()
starts one child process per rank, each ``PYTHON -I -c <this file's source>
<json>``: nothing is written to the host's disk and nothing but torch is needed
(no torchrun). The ranks meet over TCP on 127.0.0.1 through
torch.distributed (NCCL on GPUs, one rank per GPU; gloo on CPUs, for tests
and for hosts without GPUs), then

1. all-reduce (sum) float32 tensors whose exact sum is known: rank r holds
   ((i * 7 + r * 13) mod 61) + 1 at element i, integers small enough that
   every partial sum is exact in float32. Any element that differs from the
   exact sum on any rank is a wrong result, whatever the speed;
2. time all_reduce at each message size; the bus bandwidth is the one
   nccl-tests defines: algbw = bytes / time, busbw = algbw * 2 (n - 1) / n,
   with the time of the slowest rank.

Every rank prints one JSON line per stage on its stdout, so a rank that hangs
is named with the stage it was in when the deadline ended it. NVLink
multicast (NVLS) is never used: NCCL_NVLS_ENABLE=0 in every rank's
environment.

Importing this module runs nothing; only the children run main().
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

BACKENDS = ('nccl', 'gloo')
DEFAULT_SIZES_MIB = (1, 16, 64)
DEFAULT_ITERATIONS = 5
WARMUP = 2
# Elements of the correctness tensor (4 MiB of float32).
CHECK_ELEMENTS = 1 << 20
MODULUS = 61
CHILD_ENV = {'NCCL_NVLS_ENABLE': '0'}
# Rank stages, in order: what a rank that did not finish was doing.
STAGES = ('started', 'imported', 'joining', 'joined', 'checked', 'timed')
STAGE_TEXT = {
    'started': 'importing torch',
    'imported': 'not yet joining the group (torch imported)',
    'joining': 'waiting for the other ranks to join',
    'joined': 'in the correctness all-reduce',
    'checked': 'timing all_reduce',
    'timed': 'finished timing, leaving',
}


def bus_bandwidth(nbytes, seconds, world_size):
    """(algbw, busbw) in GB/s (1e9 bytes) for an all-reduce of nbytes that took seconds."""
    if not seconds or seconds <= 0 or world_size < 1:
        return None, None
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * 2.0 * (world_size - 1) / world_size


def rank_value(index, rank):
    """The value rank holds at element index (python ints; the tensors are built the same way)."""
    return (index * 7 + rank * 13) % MODULUS + 1


def exact_sum(index, world_size):
    return sum(rank_value(index, rank) for rank in range(world_size))


def skip_reason(device_count, backend, world_size):
    """Why the check cannot run here, or None."""
    if backend == 'nccl':
        if device_count < 2:
            return '%d GPU' % device_count if device_count == 1 else 'no GPU'
        return None
    if world_size < 2:
        return 'gloo needs a world size of 2 or more, got %d' % world_size
    return None


def own_source():
    """This module's source: the probe's prelude keeps it (the probe is one -c
    string); on the controller it is read from the file."""
    source = globals().get('__gpufleet_source__')
    if source:
        return source
    with open(__file__) as handle:
        return handle.read()


def free_port():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]
    finally:
        sock.close()


def _reader(stream, lines):
    for raw in iter(stream.readline, b''):
        try:
            lines.append(json.loads(raw.decode('utf-8', 'replace')))
        except ValueError:
            pass
    stream.close()


def _tail(handle, limit=600):
    handle.seek(0)
    text = handle.read().decode('utf-8', 'replace').strip()
    return text[-limit:]


def new_result(backend, world_size, sizes_mib):
    return {
        'status': 'skipped', 'reason': None, 'backend': backend, 'world_size': world_size,
        'sizes_mib': list(sizes_mib), 'correct': None, 'wrong_elements': None, 'max_abs_error': None,
        'results': [], 'seconds': None, 'ranks': [],
    }


def run(python, backend, world_size, sizes_mib=DEFAULT_SIZES_MIB, iterations=DEFAULT_ITERATIONS,
        timeout=120, plant=None, environ=None):
    """Start world_size ranks of `python`, wait at most `timeout` seconds.

    Returns the result dict: status ok / failed, with why (reason), the
    correctness figures and one entry per message size (bytes, seconds,
    algbw_gbps, busbw_gbps). plant ({'wrong_rank': r} or {'hang_rank': r})
    makes one rank wrong or hung: the tests use it to prove both are caught."""
    result = new_result(backend, world_size, sizes_mib)
    port = free_port()
    env = dict(environ if environ is not None else os.environ)
    env.update(CHILD_ENV)
    procs, outputs, errors, threads = [], [], [], []
    started = time.time()
    deadline = started + timeout
    source = own_source()
    for rank in range(world_size):
        params = dict(rank=rank, world_size=world_size, backend=backend, port=port, sizes_mib=list(sizes_mib),
                      iterations=iterations, timeout=timeout, plant=plant or {})
        err = tempfile.TemporaryFile()
        # isolated (-I) as the probe itself was started
        flags = ['-I'] if sys.flags.isolated else []
        proc = subprocess.Popen([python] + flags + ['-c', source, json.dumps(params)], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=err, env=env)
        lines = []
        thread = threading.Thread(target=_reader, args=(proc.stdout, lines))
        thread.daemon = True
        thread.start()
        procs.append(proc)
        outputs.append(lines)
        errors.append(err)
        threads.append(thread)
    while time.time() < deadline and any(proc.poll() is None for proc in procs):
        time.sleep(0.05)
    hung = [rank for rank, proc in enumerate(procs) if proc.poll() is None]
    for rank in hung:
        procs[rank].kill()
    for proc, thread in zip(procs, threads):
        proc.wait()
        thread.join(5)
    result['seconds'] = round(time.time() - started, 3)

    finals = []
    for rank, (proc, lines, err) in enumerate(zip(procs, outputs, errors)):
        stages = [line.get('stage') for line in lines if line.get('stage')]
        final = lines[-1] if lines and lines[-1].get('stage') == 'done' else None
        result['ranks'].append({'rank': rank, 'rc': proc.returncode, 'stage': stages[-1] if stages else None,
                                'error': (final or {}).get('error')})
        finals.append(final)
        if final is None or rank in hung or proc.returncode != 0:
            result['ranks'][-1]['stderr'] = _tail(err)
        err.close()

    broken = [entry for entry, final in zip(result['ranks'], finals)
              if entry['rank'] not in hung and (final is None or final.get('error'))]
    broken_text = '; '.join('rank %d failed: %s' % (entry['rank'], entry.get('error') or 'rc %s, %s' % (
        entry['rc'], entry['stderr'].splitlines()[-1] if entry.get('stderr') else 'no output')) for entry in broken)
    if hung:
        result['status'] = 'failed'
        result['reason'] = 'expected every rank to finish within %d s, found %s%s' % (timeout, '; '.join(
            'rank %d %s' % (rank, STAGE_TEXT.get(result['ranks'][rank]['stage'], 'before starting'))
            for rank in hung), '; ' + broken_text if broken_text else '')
        return result
    if broken:
        result['status'] = 'failed'
        result['reason'] = 'expected every rank to finish the all-reduce, found %s' % broken_text
        return result

    wrong = [final for final in finals if final['wrong_elements']]
    result['correct'] = not wrong
    result['wrong_elements'] = max(final['wrong_elements'] for final in finals)
    result['max_abs_error'] = max(final['max_abs_error'] for final in finals)
    # the slowest rank's time, as an all-reduce is as fast as its slowest member
    for index, size in enumerate(sizes_mib):
        seconds = max(final['times'][index] for final in finals)
        nbytes = int(size * (1 << 20))
        algbw, busbw = bus_bandwidth(nbytes, seconds, world_size)
        result['results'].append({'size_mib': size, 'bytes': nbytes, 'seconds': seconds,
                                  'algbw_gbps': round(algbw, 3) if algbw is not None else None,
                                  'busbw_gbps': round(busbw, 3) if busbw is not None else None})
    if wrong:
        # ranks that saw the same wrong result are named together
        groups = {}
        for final in wrong:
            key = (final['wrong_elements'], final['first_wrong'], final['first_wrong_value'], final['first_wrong_exact'])
            groups.setdefault(key, []).append(final['rank'])
        result['status'] = 'failed'
        result['reason'] = 'expected the exact sum on every rank, found %s' % '; '.join(
            '%s %s: %d of %d elements wrong (first at element %d: %s, exact %s)' % (
                'rank' if len(ranks) == 1 else 'ranks', ', '.join(str(rank) for rank in ranks),
                key[0], CHECK_ELEMENTS, key[1], key[2], key[3])
            for key, ranks in sorted(groups.items(), key=lambda item: item[1]))
        return result
    result['status'] = 'ok'
    return result


def _say(**fields):
    sys.stdout.write(json.dumps(fields, sort_keys=True) + '\n')
    sys.stdout.flush()


def _rank_tensor(torch, rank, world_size, device, plant):
    index = torch.arange(CHECK_ELEMENTS, dtype=torch.int64, device=device)
    mine = ((index * 7 + rank * 13) % MODULUS + 1).to(torch.float32)
    exact = sum(((index * 7 + r * 13) % MODULUS + 1) for r in range(world_size)).to(torch.float32)
    if plant.get('wrong_rank') == rank:
        mine[12345] += 1.0
    return mine, exact


def _sync(torch, device):
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


def rank_main(params):
    """One rank: join, check, time; one JSON line per stage."""
    import datetime

    rank, world_size, backend = params['rank'], params['world_size'], params['backend']
    plant = params.get('plant') or {}
    _say(stage='started', rank=rank)
    import torch
    import torch.distributed as dist

    _say(stage='imported', rank=rank)
    if backend == 'nccl':
        torch.cuda.set_device(rank)
        device = torch.device('cuda', rank)
    else:
        device = torch.device('cpu')
    if plant.get('hang_rank') == rank:
        time.sleep(10 * params['timeout'] + 60)
    _say(stage='joining', rank=rank)
    dist.init_process_group(backend, init_method='tcp://127.0.0.1:%d' % params['port'], rank=rank,
                            world_size=world_size, timeout=datetime.timedelta(seconds=params['timeout']))
    _say(stage='joined', rank=rank)
    mine, exact = _rank_tensor(torch, rank, world_size, device, plant)
    dist.all_reduce(mine)
    _sync(torch, device)
    diff = (mine - exact).abs()
    bad = torch.nonzero(diff).flatten()
    first = int(bad[0]) if bad.numel() else None
    _say(stage='checked', rank=rank)
    times = []
    for size in params['sizes_mib']:
        data = torch.ones(int(size * (1 << 20)) // 4, dtype=torch.float32, device=device)
        for dummy in range(WARMUP):
            dist.all_reduce(data)
        _sync(torch, device)
        dist.barrier()
        begin = time.perf_counter()
        for dummy in range(params['iterations']):
            dist.all_reduce(data)
        _sync(torch, device)
        times.append((time.perf_counter() - begin) / params['iterations'])
    _say(stage='timed', rank=rank)
    dist.barrier()
    dist.destroy_process_group()
    _say(stage='done', rank=rank, times=times, wrong_elements=int(bad.numel()),
         max_abs_error=float(diff.max()), first_wrong=first,
         first_wrong_value=float(mine[first]) if first is not None else None,
         first_wrong_exact=float(exact[first]) if first is not None else None)


def main():
    params = json.loads(sys.argv[1])
    import signal

    # the parent kills at its deadline; this is the backstop if the parent is gone
    signal.alarm(int(params['timeout']) + 30)
    try:
        rank_main(params)
    except Exception as exc:  # pylint: disable=broad-except
        _say(stage='done', rank=params.get('rank'), error='%s: %s' % (type(exc).__name__, str(exc).splitlines()[0] if str(exc) else ''))
    sys.stdout.flush()
    os._exit(0)


if __name__ == '__main__':
    main()
