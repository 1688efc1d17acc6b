#!/usr/bin/env python
"""One verification of the machine's torch with torch_verify's own probe
(expectations.probe_argv: the program the module sends) and its own judging
(check_health, check_kernels, check_expectations), written as JSON and as a
table. Used by h200-kernel-checks.sh, once per build of the fixture.

    h200-kernel-checks.py LABEL OUT_JSON [expect.kernels names...]
The extensions come from PYTHONPATH (the probe runs without -I here);
EVIDENCE_IMPORTS (comma-separated) replaces the modules imported."""
import json
import os
import sys
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, '.collections'))
from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import (  # noqa: E402
    check_expectations, check_health, check_kernels, parse_probe_output, probe_argv)

label, out_json = sys.argv[1], sys.argv[2]
required = sys.argv[3:]
imports = os.environ.get('EVIDENCE_IMPORTS', 'flashinfer,sgl_kernel,torchvision,torchaudio').split(',')
params = {'imports': imports, 'smoke': True, 'kernels': True,
          'consistent': True, 'timeout': 1800, 'packages': False, 'markers': []}
argv = probe_argv(sys.executable, params, isolated=False)
started = time.time()
proc = subprocess.run(argv, capture_output=True, text=True, check=False)
seconds = time.time() - started
facts = parse_probe_output(proc.returncode, proc.stdout, params['timeout'])
expect = {'compute_capability': '9.0', 'consistent': True, 'kernels': required,
          'imports': [name for name in imports if name in ('flashinfer', 'sgl_kernel')]}
mismatches = check_health(facts, True, 0.02) + check_kernels(facts) + check_expectations(expect, facts)
with open(out_json, 'w') as handle:
    json.dump({'label': label, 'probe_seconds': round(seconds, 2), 'expect': expect, 'mismatches': mismatches,
               'facts': facts}, handle, indent=1, sort_keys=True)

devices = ', '.join(d['name'] for d in facts['devices'])
print('== %s: probe %.1f s, torch %s, %s' % (label, seconds, facts['torch_version'], devices))
for name, entry in sorted(facts['imports'].items()):
    print('import %-12s %s' % (name, ('ok ' + str(entry['version'])) if entry['ok'] else
                               '%s | causes: %s | %s' % (entry['error'], entry.get('causes'), entry.get('diagnosis'))))
for entry in facts['smoke']:
    print('smoke  %-10s dev %s %8.1f TFLOP/s  rel.err %.2g  nonfinite %d' % (
        entry['dtype'], entry['device'], entry['tflops'], entry['relative_error'] or -1, entry['nonfinite']))
print('%-34s %-4s %-8s %10s %9s %8s  %s' % ('check', 'dev', 'status', 'rel.err', 'TFLOP/s', 'compile', 'reason'))
for entry in facts['kernels']:
    print('%-34s %-4s %-8s %10s %9s %8s  %s' % (
        entry['check'], entry['device'], entry['status'],
        '%.3g' % entry['relative_error'] if entry['relative_error'] is not None else '-',
        entry['tflops'] if entry['tflops'] is not None else '-',
        '%.1fs' % entry['compile_seconds'] if entry.get('compile_seconds') else '-', entry['reason'] or ''))
print('flashinfer JIT: %s' % json.dumps(facts['flashinfer_jit']))
print('requirement conflicts: %s' % facts['requirement_conflicts'])
print('kernels_error: %s' % facts['kernels_error'])
print('verification: %s' % ('PASSED' if not mismatches else 'FAILED (%d)' % len(mismatches)))
for line in mismatches:
    print('  - ' + line)
