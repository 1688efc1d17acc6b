#!/usr/bin/env python
"""What verifying for the served model adds to torch_verify on a GPU host.

A (model): the probe torch_verify sends (expectations.probe_argv) with the
kernel checks and the model checks of one model profile at one TP size
(module_utils/model_checks: the layers' GEMMs at the shard shapes, the MoE
layer through each fused MoE backend, autotuner off and on).
B (no model): the same probe with the kernel checks alone (today's shapes).
Both import the same extensions, on a warm flashinfer JIT cache. A and B run
in turn (A B A B ...) after a warm-up pair; the ratio A/B is taken pair by
pair and its median printed, with the model checks' own seconds per check.
No goal is set for the ratio: the MoE sweep costs what the model's experts
cost; the figure says what a fleet verification pays for it.

    bench/model_checks_overhead.py --python python3 --model qwen3-30b-a3b [--tp 1] \
        [--imports flashinfer] [--runs 3] [--jit cache_only|allow] [--json out.json]
"""
import argparse
import json
import os
import sys

# the probe run and the summary are kernel_checks_overhead's (beside this file)
from kernel_checks_overhead import ROOT, run, summary
sys.path.insert(0, os.path.join(ROOT, '.collections'))
from ansible_collections.gpufleet.inference.plugins.module_utils import model_profile  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--python', required=True)
    parser.add_argument('--model', default='qwen3-30b-a3b')
    parser.add_argument('--tp', type=int, default=1)
    parser.add_argument('--imports', default='flashinfer')
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--jit', choices=['cache_only', 'allow'], default='cache_only')
    parser.add_argument('--json')
    args = parser.parse_args()
    resolved = model_profile.resolve(args.model, args.tp)
    base = {'imports': args.imports.split(','), 'kernels': True, 'timeout': 1800, 'packages': False, 'markers': []}
    with_model = dict(base, model_shapes=resolved['shapes'],
                      model_precision=resolved['profile']['quantization']['method'], model_jit=args.jit)
    env = dict(os.environ)
    run(args.python, with_model, env)
    run(args.python, base, env)
    a_s, b_s, ratios = [], [], []
    for dummy in range(args.runs):
        a, facts = run(args.python, with_model, env)
        b = run(args.python, base, env)[0]
        a_s.append(a)
        b_s.append(b)
        ratios.append(a / b)
    checks = [(e['check'], e['device'], e['status'], e.get('seconds'), e.get('relative_error'), e.get('reason'))
              for e in facts.get('model_checks') or []]
    report = {'model': args.model, 'tp': args.tp, 'torch_version': facts['torch_version'],
              'devices': [d['name'] for d in facts['devices']], 'runs': args.runs,
              'with_model_seconds': summary(a_s), 'without_model_seconds': summary(b_s), 'ratio': summary(ratios),
              'model_checks': checks, 'model_checks_error': facts.get('model_checks_error')}
    print('%-34s %8s %8s %8s' % ('', 'min', 'median', 'max'))
    for label, key in (('kernels + model checks s', 'with_model_seconds'), ('kernels only s', 'without_model_seconds'),
                       ('ratio (pairwise)', 'ratio')):
        row = report[key]
        print('%-34s %8.3f %8.3f %8.3f' % (label, row['min'], row['median'], row['max']))
    print('%d pairs on %s, torch %s, %s tp %d: median ratio %.3f'
          % (args.runs, ', '.join(report['devices']) or 'no GPU', report['torch_version'], args.model, args.tp,
             report['ratio']['median']))
    for check in checks:
        print('  %-30s device %-4s %-8s %6s s  error %s  %s' % (check[:5] + (check[5] or '',)))
    if args.json:
        with open(args.json, 'w') as handle:
            json.dump(report, handle, indent=2, sort_keys=True)


if __name__ == '__main__':
    main()
