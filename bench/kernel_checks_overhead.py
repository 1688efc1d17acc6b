#!/usr/bin/env python
"""What the kernel checks add to torch_verify on a GPU host.

A (kernels): the probe torch_verify sends (expectations.probe_argv), with the smoke
test and the kernel checks (torch FP8/NVFP4 GEMMs, the sgl_kernel and
flashinfer sets) on a warm flashinfer JIT cache.
B (smoke only): the same probe with today's smoke test alone (bf16/fp16).
Both import the same extensions. A and B run in turn (A B A B ...) after a
warm-up pair; the ratio A/B is taken pair by pair and its median printed.
Goal: median ratio <= 1.25. The cold-cache cost (the first run of A on an
empty JIT cache) is reported on its own: it is paid once per venv, at deploy.

    bench/kernel_checks_overhead.py --python python3 --imports flashinfer,sgl_kernel \
        [--runs 5] [--workspace DIR] [--json out.json]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, '.collections'))
from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import parse_probe_output, probe_argv  # noqa: E402


def run(python, params, env):
    # not isolated: the extensions may come from PYTHONPATH on a test machine
    argv = probe_argv(python, params, isolated=False)
    started = time.perf_counter()
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - started
    return seconds, parse_probe_output(proc.returncode, proc.stdout, params['timeout'])


def summary(values):
    return {'min': round(min(values), 3), 'median': round(statistics.median(values), 3), 'max': round(max(values), 3)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--python', required=True)
    parser.add_argument('--imports', default='flashinfer,sgl_kernel')
    parser.add_argument('--runs', type=int, default=5)
    parser.add_argument('--workspace', help='FLASHINFER_WORKSPACE_BASE for the runs (emptied first: cold cache)')
    parser.add_argument('--warm', action='store_true',
                        help='keep the workspace as it is (already warmed) and skip the cold-cache run')
    parser.add_argument('--json')
    args = parser.parse_args()
    env = dict(os.environ)
    workspace = args.workspace or tempfile.mkdtemp(prefix='flashinfer-workspace-')
    if not args.warm:
        shutil.rmtree(workspace, ignore_errors=True)
    os.makedirs(workspace, exist_ok=True)
    env['FLASHINFER_WORKSPACE_BASE'] = workspace
    base = {'imports': args.imports.split(','), 'smoke': True, 'timeout': 1800, 'packages': False, 'markers': []}
    with_kernels = dict(base, kernels=True)
    smoke_only = dict(base, kernels=False)

    cold_s, compiled = None, []
    if not args.warm:
        cold_s, cold = run(args.python, with_kernels, env)
        compiled = [e for e in cold['kernels'] if e.get('compiled')]
        print('cold-cache run: %.1f s' % cold_s, flush=True)
    for dummy in range(1):
        run(args.python, with_kernels, env)
        run(args.python, smoke_only, env)
    a_s, b_s, ratios, warm_compiled = [], [], [], set()
    for dummy in range(args.runs):
        a, facts = run(args.python, with_kernels, env)
        b = run(args.python, smoke_only, env)[0]
        # a warm cache compiles nothing; if it did, the figure says so
        warm_compiled.update(e['check'] for e in facts['kernels'] if e.get('compiled'))
        a_s.append(a)
        b_s.append(b)
        ratios.append(a / b)
    report = {
        'torch_version': facts['torch_version'], 'devices': [d['name'] for d in facts['devices']],
        'runs': args.runs, 'kernels_seconds': summary(a_s), 'smoke_only_seconds': summary(b_s),
        'ratio': summary(ratios), 'goal': 1.25,
        'cold_cache_seconds': round(cold_s, 2) if cold_s is not None else None,
        'cold_cache_compiled': [(e['check'], e['compile_seconds']) for e in compiled],
        'warm_runs_compiled': sorted(warm_compiled),
        'checks': [(e['check'], e['device'], e['status'], e.get('reason')) for e in facts['kernels']],
    }
    print('%-34s %8s %8s %8s' % ('', 'min', 'median', 'max'))
    for label, key in (('smoke + kernel checks (warm) s', 'kernels_seconds'), ('smoke only s', 'smoke_only_seconds'),
                       ('ratio (pairwise)', 'ratio')):
        row = report[key]
        print('%-34s %8.3f %8.3f %8.3f' % (label, row['min'], row['median'], row['max']))
    print('%d pairs on %s, torch %s: median ratio %.3f (goal <= %.2f)'
          % (args.runs, ', '.join(report['devices']) or 'no GPU', report['torch_version'], report['ratio']['median'], 1.25))
    if cold_s is not None:
        print('cold JIT cache: first run %.1f s; compiled: %s' % (
            cold_s, ', '.join('%s %.1f s' % (name, sec or 0) for name, sec in report['cold_cache_compiled']) or 'nothing'))
    print('warm runs compiled: %s' % (', '.join(sorted(warm_compiled)) or 'nothing'))
    if args.json:
        with open(args.json, 'w') as handle:
            json.dump(report, handle, indent=2, sort_keys=True)
    if not args.workspace and not args.warm:
        shutil.rmtree(workspace, ignore_errors=True)


if __name__ == '__main__':
    main()
