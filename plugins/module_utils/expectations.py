# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller-free logic of gpufleet.inference.torch_verify: reading the probe's
answer, and judging facts against expectations (the probe's program is built in
probe_program).

Every failure is one line of the form ``name: expected X, found Y``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import json

from ansible_collections.gpufleet.inference.plugins.module_utils import torch_probe
from ansible_collections.gpufleet.inference.plugins.module_utils.gpu import (
    DEVICE_EXPECT_SPEC, HEALTH_EXPECT_SPEC, XID_EXPECT_SPEC, check_device_expectations, version_tuple)
# The probe's program is built in probe_program; flashinfer_aot and the benches import it from here.
from ansible_collections.gpufleet.inference.plugins.module_utils.probe_program import (  # pylint: disable=unused-import
    module_source, probe_argv, probe_source)

# The probe's own exit when its alarm fires (default SIGALRM action).
TIMED_OUT_RC = -14

EXPECT_SPEC = dict(
    torch_version=dict(type='str'),
    python_version=dict(type='str'),
    cuda_version=dict(type='str'),
    min_cudnn_version=dict(type='str'),
    min_smoke_tflops=dict(type='float'),
    cxx11_abi=dict(type='bool'),
    min_allreduce_busbw_gbps=dict(type='float'),
    allreduce_size_mib=dict(type='int'),
    imports=dict(type='list', elements='str', default=[]),
    kernels=dict(type='list', elements='str', default=[]),
    consistent=dict(type='bool'),
    max_kernel_proof_age_hours=dict(type='float'),
    **dict(DEVICE_EXPECT_SPEC, **dict(HEALTH_EXPECT_SPEC, **XID_EXPECT_SPEC))
)

SMOKE_DTYPES = ('bfloat16', 'float16')


class ProbeError(Exception):
    """The probe gave no usable answer; msg says why."""


def parse_probe_output(rc, out, timeout):
    """Probe stdout -> facts dict; raises ProbeError with a message."""
    if rc == TIMED_OUT_RC:
        raise ProbeError('timeout: expected the probe to finish within %d s, found it still running' % timeout)
    text = (out or '').strip()
    if not text:
        raise ProbeError('probe: expected a JSON document on stdout, found no output (rc %s)' % rc)
    try:
        document = json.loads(text)
    except ValueError:
        raise ProbeError('probe: expected a JSON document on stdout, found %r' % text[:200])
    if not isinstance(document, dict) or document.get('schema') != torch_probe.PROBE_SCHEMA:
        raise ProbeError('probe: expected schema %s, found %r' % (torch_probe.PROBE_SCHEMA, text[:200]))
    if 'error' in document:
        raise ProbeError('probe: expected to finish, found %s' % document['error'])
    if rc != 0:
        raise ProbeError('probe: expected rc 0, found rc %s' % rc)
    return document['facts']


def version_matches(expected, found):
    """Exact, a glob ("2.12.*"), or a prefix ending at a version boundary
    ("2.12.0.dev20260307" matches "2.12.0.dev20260307+cu130", "2.1" does not match "2.12.0")."""
    if found is None:
        return False
    expected, found = str(expected), str(found)
    if expected == found:
        return True
    if any(char in expected for char in '*?['):
        return fnmatch.fnmatchcase(found, expected)
    return found.startswith(expected) and found[len(expected)] in '.+-'


def diagnose_undefined_symbols(facts, demangled):
    """Explain import errors that are ABI breaks: the extension was built against another torch."""
    for name, entry in sorted(facts.get('imports', {}).items()):
        symbol = entry.get('undefined_symbol')
        if not symbol:
            continue
        pretty = demangled.get(symbol)
        entry['undefined_symbol_demangled'] = pretty
        entry['diagnosis'] = (
            '%s was built against a different torch than the installed torch %s: undefined symbol %s%s; '
            'rebuild it against torch %s' % (
                name, facts.get('torch_version'), symbol, ' (%s)' % pretty if pretty else '',
                facts.get('torch_version')))


def _device_label(entry):
    return 'device %s (%s)' % (entry.get('device', entry.get('index')), entry.get('name'))


def check_kernels(facts):
    """Every failed kernel check, and a kernel engine that broke; skips are not failures here
    (expect.kernels makes a skip of a required check one)."""
    failures = []
    if facts.get('kernels_error'):
        failures.append('kernels: expected the kernel checks to run, found %s' % facts['kernels_error'].splitlines()[0])
    for entry in facts.get('kernels') or []:
        if entry.get('status') == 'failed':
            failures.append('kernels: expected %s to match fp32 on %s, found %s'
                            % (entry['check'], _kernel_device(entry), entry.get('reason')))
    return failures


def _kernel_device(entry):
    if entry.get('device') == 'cpu':
        return 'the CPU'
    return 'device %s (%s)' % (entry.get('device'), entry.get('device_name'))


def collectives_errors(params):
    """What is wrong with torch_verify's collectives options (or None), before anything runs."""
    if params['collectives_backend'] == 'gloo' and params['collectives_world_size'] < 2:
        return 'collectives_world_size: expected 2 or more ranks for gloo, found %d' % params['collectives_world_size']
    sizes = params['collectives_sizes_mib']
    if not sizes or any(size < 1 for size in sizes) or len(set(sizes)) != len(sizes):
        return 'collectives_sizes_mib: expected a list of different positive sizes in MiB, found %r' % (sizes,)
    expect = params['expect']
    busbw, size = expect.get('min_allreduce_busbw_gbps'), expect.get('allreduce_size_mib')
    if busbw is not None and not busbw >= 0:
        return 'expect.min_allreduce_busbw_gbps: expected a number >= 0, found %r' % busbw
    if size is not None and size not in sizes:
        return ('expect.allreduce_size_mib: expected one of collectives_sizes_mib (%s), found %r'
                % (', '.join(str(item) for item in sizes), size))
    return None


def check_collectives(facts):
    """A failed all-reduce check (wrong sum, a rank that did not finish); a skip is not a failure here
    (expect.min_allreduce_busbw_gbps makes it one)."""
    result = facts.get('collectives') or {}
    if result.get('status') == 'failed':
        return ['collectives: %s' % result.get('reason')]
    return []


def check_health(facts, smoke_requested, tolerance):
    """Failures that need no expectation: no torch, non-finite or wrong smoke results."""
    failures = []
    if not facts.get('torch_importable'):
        failures.append('torch: expected torch importable by %s, found %s'
                        % (facts.get('python_executable'), facts.get('torch_error')))
        return failures
    if smoke_requested and facts.get('smoke_error'):
        failures.append('smoke: expected a CUDA device to run on, found %s' % facts['smoke_error'])
    for entry in facts.get('smoke') or []:
        if entry.get('nonfinite'):
            failures.append('smoke: expected finite %s results on %s, found %d NaN/Inf values of %d'
                            % (entry['dtype'], _device_label(entry), entry['nonfinite'], entry['size'] ** 2))
        elif entry.get('relative_error') is None or entry['relative_error'] > tolerance:
            failures.append('smoke: expected %s relative error <= %s against fp32 on %s, found %s'
                            % (entry['dtype'], tolerance, _device_label(entry), entry.get('relative_error')))
    return failures


def check_expectations(expect, facts):
    """Every expectation that is set -> list of 'name: expected X, found Y'."""
    expect = dict((key, value) for key, value in (expect or {}).items() if value not in (None, []))
    failures = []
    devices = facts.get('devices') or []

    def fail(name, expected, found):
        failures.append('%s: expected %s, found %s' % (name, expected, found))

    for name, fact in (('torch_version', 'torch_version'), ('python_version', 'python_version'),
                       ('cuda_version', 'torch_cuda_version')):
        if name in expect and not version_matches(expect[name], facts.get(fact)):
            fail(name, expect[name], facts.get(fact))
    failures += check_device_expectations(expect, devices, facts.get('device_count'), facts.get('driver_version'))
    if 'min_cudnn_version' in expect:
        found = facts.get('cudnn_version')
        if found is None or version_tuple(found) < version_tuple(expect['min_cudnn_version']):
            fail('min_cudnn_version', '>= %s' % expect['min_cudnn_version'], found)
    if 'min_smoke_tflops' in expect:
        results = facts.get('smoke') or []
        if not results:
            fail('min_smoke_tflops', '>= %s' % expect['min_smoke_tflops'], 'no smoke result (set smoke: true)')
        for entry in results:
            if entry.get('tflops') is None or entry['tflops'] < expect['min_smoke_tflops']:
                fail('min_smoke_tflops', '>= %s' % expect['min_smoke_tflops'],
                     '%s %s on %s' % (entry.get('tflops'), entry['dtype'], _device_label(entry)))
    if 'min_allreduce_busbw_gbps' in expect:
        result = facts.get('collectives') or {}
        sizes = [entry['size_mib'] for entry in result.get('results') or []]
        size = expect.get('allreduce_size_mib') or (max(sizes) if sizes else max(result.get('sizes_mib') or [0]))
        wanted = '>= %s GB/s bus bandwidth at %s MiB' % (expect['min_allreduce_busbw_gbps'], size)
        entry = [item for item in result.get('results') or [] if item['size_mib'] == size]
        if not result:
            fail('min_allreduce_busbw_gbps', wanted, 'no all-reduce result (set collectives: true)')
        elif result.get('status') == 'skipped':
            fail('min_allreduce_busbw_gbps', wanted, 'not measured (skipped: %s)' % result.get('reason'))
        elif not entry or entry[0].get('busbw_gbps') is None:
            fail('min_allreduce_busbw_gbps', wanted, 'not measured (%s)' % (result.get('reason') or 'no result at that size'))
        elif result.get('correct') is False:
            fail('min_allreduce_busbw_gbps', wanted, '%s GB/s, but the sums were wrong' % entry[0]['busbw_gbps'])
        elif entry[0]['busbw_gbps'] < expect['min_allreduce_busbw_gbps']:
            fail('min_allreduce_busbw_gbps', wanted, '%s GB/s over %d ranks' % (entry[0]['busbw_gbps'], result['world_size']))
    if 'cxx11_abi' in expect and expect['cxx11_abi'] != facts.get('cxx11_abi'):
        fail('cxx11_abi', expect['cxx11_abi'], facts.get('cxx11_abi'))
    if 'kernels' in expect:
        results = facts.get('kernels') or []
        for name in expect['kernels']:
            entries = [entry for entry in results if entry.get('check') == name]
            if not entries:
                fail('kernels', '%s to pass' % name, 'it did not run (kernel checks off, or torch did not import)')
            # A failed check is reported once, by check_kernels, required or not.
            for entry in entries:
                if entry.get('status') == 'skipped':
                    fail('kernels', '%s to pass on %s' % (name, _kernel_device(entry)), 'skipped: %s' % entry.get('reason'))
    if expect.get('consistent') and facts.get('torch_importable'):
        conflicts = facts.get('requirement_conflicts')
        if conflicts is None:
            fail('consistent', 'the installed distributions to agree with their pins', 'not checked')
        for conflict in conflicts or []:
            fail('consistent', 'the installed distributions to agree with their pins', conflict)
    for name in expect.get('imports', []):
        entry = (facts.get('imports') or {}).get(name)
        if entry is None:
            fail('imports', '%s to import' % name, 'it was not tried (torch did not import)')
        elif not entry['ok']:
            fail('imports', '%s to import' % name, entry.get('diagnosis') or entry.get('error'))
    return failures
