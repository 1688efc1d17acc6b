# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sglang serving backends, derived from what the kernel checks qualified.

The node's first users were served NaN because sglang's automatic choice of
MoE runner and FP4 GEMM backend picked kernels that were wrong on their GPU;
naming other backends on sglang's command line fixed it. So the backends are
no longer left to sglang's "auto": every kernel check that exercises a backend
sglang can be told to use (CHECK_BACKENDS) votes for or against it on each GPU
model, and the flags name, per family, the first backend of the operator's
order of preference that qualified on every GPU model of the host.

qualify() turns check results into a verdict per GPU model, family and
backend; select() picks the flags and lists the problems; render_args() and
render_env() write them for sglang and for a systemd EnvironmentFile=;
record() is what is written beside the venv. validate() checks the operator's
variables before anything runs. Standard library only: the controller imports
this file.

The flag names and their choices are sglang's own, read from the release named
in SGLANG_SERVER_ARGS: a backend name sglang would refuse is refused here,
before a unit is written that could not start.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.inference.plugins.module_utils.arch_audit import unique

# Per sglang release: where the flags and their argparse choices were read,
# and per family the flag and its choices, in sglang's order. In 0.5.23 the
# choice lists are in python/sglang/srt/arg_groups/choices.py and the fields in
# arg_groups/fields/exec_.py (moe_runner_backend, whose flag is derived from
# the field name; fp4_gemm_runner_backend and fp8_gemm_runner_backend, whose
# cli_name is --fp4-gemm-backend and --fp8-gemm-backend); server_args.py
# imports both. The published wheel records no commit id (_version.py has
# commit_id None), hence the tag.
SGLANG_SERVER_ARGS = {
    '0.5.23': {
        'source': ('sgl-project/sglang@v0.5.23 (PyPI wheel sglang==0.5.23) python/sglang/srt/server_args.py'
                   ' via python/sglang/srt/arg_groups/choices.py and arg_groups/fields/exec_.py'),
        'families': {
            'moe_runner': {
                'flag': '--moe-runner-backend',
                'field': 'moe_runner_backend',
                'choices': (
                    'auto', 'deep_gemm', 'triton', 'triton_kernel', 'flashinfer_trtllm',
                    'experimental_sgl_trtllm', 'flashinfer_trtllm_routed', 'flashinfer_cutlass',
                    'flashinfer_mxfp4', 'flashinfer_cutedsl', 'flashinfer_megamoe', 'cutlass', 'aiter',
                    'marlin', 'humming', 'experimental_sgl_marlin', 'lora_cutedsl', 'lora_triton',
                    'lora_marlin', 'hpc_ops', 'megamoe', 'intel_xpu',
                ),
            },
            'fp4_gemm': {
                'flag': '--fp4-gemm-backend',
                'field': 'fp4_gemm_runner_backend',
                'choices': (
                    'auto', 'flashinfer_cudnn', 'flashinfer_cutedsl', 'flashinfer_cutlass',
                    'flashinfer_trtllm', 'marlin',
                ),
            },
            'fp8_gemm': {
                'flag': '--fp8-gemm-backend',
                'field': 'fp8_gemm_runner_backend',
                'choices': (
                    'auto', 'deep_gemm', 'flashinfer_trtllm', 'flashinfer_cutlass', 'flashinfer_deepgemm',
                    'flashinfer_cutedsl', 'cutlass', 'triton', 'aiter',
                ),
            },
        },
    },
}
DEFAULT_SGLANG_VERSION = '0.5.23'
# The order of the families on the command line and in the environment file.
FAMILIES = ('moe_runner', 'fp4_gemm', 'fp8_gemm')

# Kernel check -> (family, the backend as sglang spells it). A check not in this
# table qualifies no backend (its failure still fails the host elsewhere).
CHECK_BACKENDS = {
    'moe.flashinfer_cutlass.bf16': ('moe_runner', 'flashinfer_cutlass'),
    'moe.flashinfer_cutlass.fp8': ('moe_runner', 'flashinfer_cutlass'),
    'moe.flashinfer_cutlass.nvfp4': ('moe_runner', 'flashinfer_cutlass'),
    'moe.flashinfer_trtllm.nvfp4': ('moe_runner', 'flashinfer_trtllm'),
    'moe.triton.bf16': ('moe_runner', 'triton'),
    'moe.triton.fp8': ('moe_runner', 'triton'),
    'model.mm_fp4.cudnn': ('fp4_gemm', 'flashinfer_cudnn'),
    'model.mm_fp4.cutlass': ('fp4_gemm', 'flashinfer_cutlass'),
    'model.mm_fp4.trtllm': ('fp4_gemm', 'flashinfer_trtllm'),
}

# The order in which qualified backends are preferred, per family; the
# operator's verify_backend_preference replaces a family's list. cuDNN comes
# first for FP4 GEMM because flashinfer_cutlass is the one that returned NaN
# on SM120, and it is what sglang 0.5.23's auto picks there
# (layers/quantization/fp4_utils.py: flashinfer_cutedsl on SM100, marlin on
# SM80-SM90, flashinfer_cutlass otherwise). sglang's triton MoE runner comes
# after flashinfer's, so a host where those qualify keeps its flag; it is what
# 0.5.23's auto runs for BF16 and FP8 experts on SM90 and SM120, and it needs
# no module built ahead (flashinfer's fused MoE for SM90 takes about an hour).
DEFAULT_PREFERENCE = {
    'moe_runner': ['flashinfer_cutlass', 'flashinfer_trtllm', 'triton'],
    'fp4_gemm': ['flashinfer_cudnn', 'flashinfer_cutlass', 'flashinfer_trtllm'],
}

STATUSES = ('qualified', 'failed', 'skipped')
# What a backend name may be made of: it is written unquoted into a command
# line and an environment file.
SAFE_NAME = re.compile(r'^[a-z0-9_-]+$')
ENV_NAME = re.compile(r'^[A-Z_][A-Z0-9_]*$')
# Values of extra environment variables: double-quoted, so a space is fine;
# nothing that a shell or systemd would expand or unquote.
ENV_VALUE = re.compile(r'^[A-Za-z0-9 _./:,=+@%-]*$')
UNKNOWN_GPU = 'unknown GPU'


def known_versions():
    return sorted(SGLANG_SERVER_ARGS)


def families_of(sglang_version=DEFAULT_SGLANG_VERSION):
    """The families table of that sglang version; ValueError naming the known ones."""
    if sglang_version not in SGLANG_SERVER_ARGS:
        raise ValueError('unknown sglang version %r; known: %s' % (sglang_version, ', '.join(known_versions())))
    return SGLANG_SERVER_ARGS[sglang_version]['families']


def _type_name(value):
    return type(value).__name__


def _check_name(variable, family, name, families, sglang_version):
    """Errors of one backend name of a family ([] when sglang accepts it)."""
    if not isinstance(name, str):
        return ['%s.%s: %r is not a backend name (a string)' % (variable, family, name)]
    choices = families[family]['choices']
    if name not in choices:
        return ['%s.%s: %r is not a sglang %s %s choice; allowed: %s'
                % (variable, family, name, sglang_version, families[family]['flag'], ', '.join(choices))]
    return []


def _check_family(variable, family, families):
    if family not in families:
        return ['%s: unknown family %r; known: %s' % (variable, family, ', '.join(f for f in FAMILIES if f in families))]
    return []


def validate(preference, required, sglang_version=DEFAULT_SGLANG_VERSION):
    """The operator's variables against sglang's choices: a list of errors, [] when fine.

    preference: verify_backend_preference, None or a dict family -> list of
    backend names; required: verify_backend_required, None or a dict
    family -> one backend name; sglang_version: verify_sglang_version.
    """
    errors = []
    if sglang_version not in SGLANG_SERVER_ARGS:
        errors.append('gpufleet_sglang_version: unknown sglang version %r; known: %s'
                      % (sglang_version, ', '.join(known_versions())))
        families = None
    else:
        families = SGLANG_SERVER_ARGS[sglang_version]['families']

    if preference is not None:
        variable = 'gpufleet_backend_preference'
        if not isinstance(preference, dict):
            errors.append('%s must be a dict of family -> list of backend names, got %s'
                          % (variable, _type_name(preference)))
        else:
            for family, names in preference.items():
                if families is not None:
                    problems = _check_family(variable, family, families)
                    if problems:
                        errors.extend(problems)
                        continue
                if not isinstance(names, (list, tuple)):
                    errors.append('%s.%s must be a list of backend names, got %s' % (variable, family, _type_name(names)))
                    continue
                seen = set()
                for name in names:
                    if families is not None:
                        errors.extend(_check_name(variable, family, name, families, sglang_version))
                    if isinstance(name, str) and name in seen:
                        errors.append('%s.%s: %r is listed twice' % (variable, family, name))
                    if isinstance(name, str):
                        seen.add(name)

    if required is not None:
        variable = 'gpufleet_backend_required'
        if not isinstance(required, dict):
            errors.append('%s must be a dict of family -> one backend name, got %s' % (variable, _type_name(required)))
        else:
            for family, name in required.items():
                if families is not None:
                    problems = _check_family(variable, family, families)
                    if problems:
                        errors.extend(problems)
                        continue
                if not isinstance(name, str):
                    errors.append('%s.%s must be one backend name, got %s' % (variable, family, _type_name(name)))
                elif families is not None:
                    errors.extend(_check_name(variable, family, name, families, sglang_version))
    return errors


def _verdict(entries):
    """{'status', 'reason', 'checks', 'devices'} of one backend on one GPU model."""
    failures = []
    skips = []
    passed = False
    for entry in entries:
        status = entry.get('status')
        if status == 'ok':
            passed = True
        elif status == 'skipped':
            skips.append(entry.get('reason') or 'no reason given')
        else:
            # failed, or a status this file does not know: never a pass
            reason = entry.get('reason') or ('status %r' % (status,) if status != 'failed' else 'no reason given')
            failures.append('%s on GPU %s: %s' % (entry.get('check'), entry.get('device'), reason))
    if failures:
        status, reason = 'failed', '; '.join(failures)
    elif passed:
        status, reason = 'qualified', None
    else:
        status, reason = 'skipped', '; '.join(unique(skips))
    devices = unique(entry.get('device') for entry in entries if entry.get('device') is not None)
    return {
        'status': status,
        'reason': reason,
        'checks': unique(entry.get('check') for entry in entries),
        'devices': sorted(devices),
    }


def qualify(results):
    """{gpu_name: {family: {backend: {'status', 'reason', 'checks', 'devices'}}}}.

    Over the check results whose check is in CHECK_BACKENDS, by GPU model
    (device_name), family and backend: failed when any of its checks failed on
    any device of that model, qualified when at least one ran ok and none
    failed, skipped when all were skipped. A skip (a busy GPU, a missing
    package) is neither a pass nor a failure.
    """
    grouped = {}
    for result in results or ():
        if not isinstance(result, dict) or result.get('check') not in CHECK_BACKENDS:
            continue
        family, backend = CHECK_BACKENDS[result['check']]
        gpu = result.get('device_name') or UNKNOWN_GPU
        grouped.setdefault(gpu, {}).setdefault(family, {}).setdefault(backend, []).append(result)
    qualification = {}
    for gpu, by_family in grouped.items():
        qualification[gpu] = {}
        for family in sorted(by_family, key=_family_key):
            qualification[gpu][family] = dict(
                (backend, _verdict(entries)) for backend, entries in by_family[family].items())
    return qualification


def _family_key(family):
    return (FAMILIES.index(family) if family in FAMILIES else len(FAMILIES), family)


def _verdict_of(qualification, gpu, family, backend):
    return qualification.get(gpu, {}).get(family, {}).get(backend)


def _tried(qualification, gpu, family, order):
    parts = []
    for backend in order:
        verdict = _verdict_of(qualification, gpu, family, backend)
        if verdict is None:
            parts.append('%s (not checked)' % backend)
        else:
            parts.append('%s (%s: %s)' % (backend, verdict['status'], verdict['reason']))
    return ', '.join(parts) if parts else 'nothing (no backend in the order of preference)'


def select(qualification, families_needed, preference=None, required=None):
    """{'flags': {family: backend}, 'per_gpu': {gpu: {family: backend or None}}, 'problems': [str]}.

    Per needed family, the order is verify_backend_required's backend alone
    when one is required, else the family's list of preference (the operator's,
    else DEFAULT_PREFERENCE); a backend outside it is never chosen. Per GPU
    model the first of the order that qualified there; the flag is the first
    that qualified on every GPU model of the host. A family is left out of the
    flags when none did, with a problem saying why.
    """
    preference = preference or {}
    required = required or {}
    gpus = list(qualification)
    flags = {}
    per_gpu = dict((gpu, {}) for gpu in gpus)
    problems = []
    for family in sorted(unique(families_needed), key=_family_key):
        if family not in FAMILIES:
            raise ValueError('unknown backend family %r; known: %s' % (family, ', '.join(FAMILIES)))
        wanted = required.get(family)
        if wanted:
            order = [wanted]
        else:
            order = list(preference.get(family, DEFAULT_PREFERENCE.get(family, ())))
        if not gpus:
            problems.append('no %s backend qualified: no kernel check result names a GPU' % family)
            continue
        for gpu in gpus:
            chosen = None
            for backend in order:
                verdict = _verdict_of(qualification, gpu, family, backend)
                if verdict is not None and verdict['status'] == 'qualified':
                    chosen = backend
                    break
            per_gpu[gpu][family] = chosen
            if chosen is not None:
                continue
            if wanted:
                verdict = _verdict_of(qualification, gpu, family, wanted)
                if verdict is None:
                    found, reason = 'not checked', 'no kernel check of %s ran on %s' % (wanted, gpu)
                else:
                    found, reason = verdict['status'], verdict['reason']
                problems.append('gpufleet_backend_required.%s: expected %s, found %s (%s) on %s'
                                % (family, wanted, found, reason, gpu))
            else:
                problems.append('no %s backend qualified on %s: tried %s'
                                % (family, gpu, _tried(qualification, gpu, family, order)))
        if any(per_gpu[gpu][family] is None for gpu in gpus):
            continue
        common = [backend for backend in order
                  if all((_verdict_of(qualification, gpu, family, backend) or {}).get('status') == 'qualified'
                         for gpu in gpus)]
        if common:
            flags[family] = common[0]
        else:
            problems.append('no %s backend qualified on all GPU models of the host: %s'
                            % (family, ', '.join('%s on %s' % (per_gpu[gpu][family], gpu) for gpu in gpus)))
    return {'flags': flags, 'per_gpu': per_gpu, 'problems': problems}


def _checked_flags(flags, sglang_version):
    """[(family, flag, backend)] in family order; ValueError for anything sglang or a unit file would refuse."""
    families = families_of(sglang_version)
    out = []
    for family in flags:
        if family not in families:
            raise ValueError('unknown backend family %r; known: %s' % (family, ', '.join(FAMILIES)))
    for family in sorted(flags, key=_family_key):
        backend = flags[family]
        if backend is None:
            continue
        if not isinstance(backend, str) or not SAFE_NAME.match(backend):
            raise ValueError('%s backend %r: only a-z, 0-9, _ and - are allowed' % (family, backend))
        if backend not in families[family]['choices']:
            raise ValueError('%s backend %r is not a sglang %s %s choice; allowed: %s'
                             % (family, backend, sglang_version, families[family]['flag'],
                                ', '.join(families[family]['choices'])))
        out.append((family, families[family]['flag'], backend))
    return out


def render_args(flags, sglang_version=DEFAULT_SGLANG_VERSION):
    """'--moe-runner-backend flashinfer_cutlass --fp4-gemm-backend flashinfer_cudnn' (family order)."""
    return ' '.join('%s %s' % (flag, backend) for dummy, flag, backend in _checked_flags(flags, sglang_version))


def env_variable(family):
    """moe_runner -> SGLANG_MOE_RUNNER_BACKEND."""
    return 'SGLANG_%s_BACKEND' % family.upper()


def render_env(flags, sglang_version=DEFAULT_SGLANG_VERSION, extra=None):
    """The text of an environment file for systemd's EnvironmentFile= (also safe to source from a shell).

    A comment line, SGLANG_ARGS="<render_args>", then one
    SGLANG_<FAMILY>_BACKEND=<backend> line per family; extra is an optional
    dict of further variables (NAME: value), written double-quoted in its
    order. A name or value that would need escaping is refused (ValueError).
    """
    checked = _checked_flags(flags, sglang_version)
    lines = [
        '# sglang %s backends qualified by the gpufleet.inference kernel checks; written by the verification, do not edit'
        % sglang_version,
        'SGLANG_ARGS="%s"' % ' '.join('%s %s' % (flag, backend) for dummy, flag, backend in checked),
    ]
    for family, dummy, backend in checked:
        lines.append('%s=%s' % (env_variable(family), backend))
    taken = set(['SGLANG_ARGS'] + [env_variable(family) for family in FAMILIES])
    for name, value in (extra or {}).items():
        if not isinstance(name, str) or not ENV_NAME.match(name):
            raise ValueError('environment variable name %r: only A-Z, 0-9 and _ are allowed, not first a digit' % (name,))
        if name in taken:
            raise ValueError('environment variable %s is written from the qualified backends' % name)
        if not isinstance(value, str) or '\n' in value or not ENV_VALUE.match(value):
            raise ValueError('environment variable %s: value %r has characters a unit file or a shell would interpret'
                             % (name, value))
        lines.append('%s="%s"' % (name, value))
        taken.add(name)
    return '\n'.join(lines) + '\n'


def record(qualification, selection, sglang_version, model_name):
    """The JSON-able record written beside the venv."""
    families_of(sglang_version)
    return {
        'sglang_version': sglang_version,
        'source': SGLANG_SERVER_ARGS[sglang_version]['source'],
        'model': model_name,
        'qualification': qualification,
        'flags': dict(selection.get('flags', {})),
        'args': render_args(selection.get('flags', {}), sglang_version),
        'problems': list(selection.get('problems', [])),
    }
