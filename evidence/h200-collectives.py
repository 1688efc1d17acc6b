#!/usr/bin/env python
"""Evidence for the all-reduce check (module_utils collectives) on the
single-GPU H200 test machine, with its own torch (python3 = torch 2.11.0+cu130):

1. torch_verify's probe (expectations.probe_argv, the program the module sends)
   with collectives on, NCCL: the host has 1 GPU, so the check is skipped
   with the reason "1 GPU"; judged as torch_verify judges it, without an
   expectation (no mismatch: a skip is not a failure by itself) and with
   expect.min_allreduce_busbw_gbps (a mismatch naming the skip: a skip is
   never a pass);
2. the ranks' code on this GPU: collectives.run with NCCL and one rank, so
   that init_process_group('nccl'), the exact-sum check and the timing ran on
   the H200 (a one-rank all-reduce moves no data: busbw is 0 by definition,
   this is not a bandwidth figure);
3. the same code with gloo and 4 CPU ranks, correct and with a planted
   wrong rank.

    OUT=folder python3 evidence/h200-collectives.py
Writes $OUT/h200-collectives.json and prints a summary."""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, '.collections'))
from ansible_collections.gpufleet.inference.plugins.module_utils import collectives  # noqa: E402
from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import (  # noqa: E402
    check_collectives, check_expectations, parse_probe_output, probe_argv)

out = os.environ['OUT']
record = {'python': sys.executable}
status = 0

params = {'imports': [], 'smoke': False, 'kernels': False, 'consistent': False, 'timeout': 600,
          'packages': False, 'markers': [], 'collectives': True, 'collectives_backend': 'nccl',
          'collectives_sizes_mib': [1, 16, 64]}
started = time.time()
proc = subprocess.run(probe_argv(sys.executable, params, isolated=True), capture_output=True, text=True, check=False)
facts = parse_probe_output(proc.returncode, proc.stdout, params['timeout'])
expect = {'min_allreduce_busbw_gbps': 20.0, 'allreduce_size_mib': 64}
record['probe'] = {
    'seconds': round(time.time() - started, 2), 'device_count': facts['device_count'],
    'devices': [d['name'] for d in facts['devices']], 'nccl_version': facts['nccl_version'],
    'torch_version': facts['torch_version'], 'collectives': facts['collectives'],
    'mismatches_without_expectation': check_collectives(facts) + check_expectations({}, facts),
    'expect': expect, 'mismatches_with_expectation': check_collectives(facts) + check_expectations(expect, facts)}
print('probe: %d GPU(s) %s, NCCL %s: collectives %s (%s)' % (
    facts['device_count'], ', '.join(record['probe']['devices']), facts['nccl_version'],
    facts['collectives']['status'], facts['collectives']['reason']))
print('  without an expectation: %s' % (record['probe']['mismatches_without_expectation'] or 'no mismatch'))
print('  with %s: %s' % (expect, record['probe']['mismatches_with_expectation']))
if facts['collectives']['status'] != 'skipped' or facts['collectives']['reason'] != '1 GPU' \
        or record['probe']['mismatches_without_expectation'] or not record['probe']['mismatches_with_expectation']:
    status = 1

runs = (('nccl, 1 rank on the GPU', 'nccl', 1, None),
        ('gloo, 4 CPU ranks', 'gloo', 4, None),
        ('gloo, 4 CPU ranks, rank 2 planted wrong', 'gloo', 4, {'wrong_rank': 2}))
record['runs'] = []
for label, backend, world, plant in runs:
    result = collectives.run(sys.executable, backend, world, [1, 16, 64], 5, 300, plant=plant)
    record['runs'].append({'label': label, 'result': result})
    reason = ': ' + result['reason'] if result['reason'] else ''
    print('%s: %s, correct %s, %s s%s' % (label, result['status'], result['correct'], round(result['seconds'], 1), reason))
    for entry in result['results']:
        print('  %4d MiB: %.6f s per all-reduce, algbw %.3f GB/s, busbw %.3f GB/s' % (
            entry['size_mib'], entry['seconds'], entry['algbw_gbps'], entry['busbw_gbps']))
    expected = 'failed' if plant else 'ok'
    if result['status'] != expected:
        status = 1

with open(os.path.join(out, 'h200-collectives.json'), 'w') as handle:
    json.dump(record, handle, indent=1, sort_keys=True)
print('rc %d' % status)
sys.exit(status)
