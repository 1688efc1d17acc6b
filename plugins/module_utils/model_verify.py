# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""torch_verify's model part, on the host before and after the probe: the
served model's profile and shard shapes from the module's options (before any
GPU work, with errors naming the variable), and after the probe the
qualification of each serving backend per GPU model, the sglang flags that
follow from it and the operator's preference, and the failures."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.gpufleet.inference.plugins.module_utils import atomic_file, backends, model_checks, model_profile

JIT_MODES = ('cache_only', 'allow')
# The family each kind of model needs flags for. An MXFP4 model's MoE runner
# is not asked for: no check of this collection runs an MXFP4 MoE yet, so no
# backend could qualify (UNCHECKED says so in the facts, and the MoE checks are
# skipped with the reason: never a pass).
NEEDED = (('moe_runner', lambda profile: bool(profile and profile.get('experts')
                                              and profile['quantization']['method'] != 'mxfp4')),
          ('fp4_gemm', lambda profile: bool(profile and profile['quantization']['method'] == 'nvfp4')))
# Per precision, the families whose flag is left to sglang because nothing
# here checks them, and why.
UNCHECKED = {
    'mxfp4': {'moe_runner': 'no MXFP4 check on this collection yet: the MoE runner backend is left to sglang '
                            '(not qualified here)'},
}


# Compiling flashinfer's fused MoE module for SM90 took more than 28 minutes
# on 16 cores: with model_jit=allow the verification needs this much time.
ALLOW_JIT_MIN_TIMEOUT = 3600


def _read(path):
    """The file's bytes; an unreadable file is a ProfileError naming it."""
    try:
        with open(path, 'rb') as handle:
            return handle.read()
    except (IOError, OSError) as exc:
        raise model_profile.ProfileError(model_profile.MODEL_VARIABLE, 'cannot read %s: %s' % (path, exc))


def resolve(params):
    """(model dict or None, [errors]) from the options model, model_config,
    model_quant_config, tp_size, backend_preference, backend_required,
    backend_families, sglang_version, model_jit."""
    errors = []
    model = params.get('model') or ''
    config = params.get('model_config') or None
    tp = params.get('tp_size')
    tp = 1 if tp is None else tp
    errors.extend(backends.validate(params.get('backend_preference') or {}, params.get('backend_required') or {},
                                    params.get('sglang_version') or backends.DEFAULT_SGLANG_VERSION))
    if params.get('model_jit', 'cache_only') not in JIT_MODES:
        errors.append('gpufleet_model_jit: must be one of %s, found %r' % (', '.join(JIT_MODES), params.get('model_jit')))
    elif (params.get('model_jit') == 'allow' and (model or config) and params.get('timeout') is not None
          and params['timeout'] < ALLOW_JIT_MIN_TIMEOUT):
        errors.append('gpufleet_model_jit: allow compiles flashinfer modules during the verification (the fused MoE '
                      'module for SM90 takes more than 28 minutes on 16 cores): it needs a timeout of at least %d s '
                      '(verify_timeout), found %s' % (ALLOW_JIT_MIN_TIMEOUT, params['timeout']))
    families = params.get('backend_families')
    known = backends.families_of(params.get('sglang_version') or backends.DEFAULT_SGLANG_VERSION) \
        if (params.get('sglang_version') or backends.DEFAULT_SGLANG_VERSION) in backends.known_versions() else {}
    for family in families or []:
        if family not in known:
            errors.append('gpufleet_backend_families: %r is not a backend family; allowed: %s'
                          % (family, ', '.join(sorted(known))))
    if not model and not config:
        return None, errors
    try:
        if config:
            quant = params.get('model_quant_config') or None
            profile = model_profile.profile_from_config(config, quant, name=model or 'model_config')
            resolved = {'profile': profile, 'shapes': model_profile.shard_shapes(profile, tp)}
        elif model in model_profile.PROFILES:
            resolved = model_profile.resolve(model, tp)
        else:
            path = os.path.expanduser(model)
            if os.path.isdir(path):
                path = os.path.join(path, 'config.json')
            text = _read(path) if os.path.isfile(path) else None
            quant_path = os.path.join(os.path.dirname(path), 'hf_quant_config.json')
            quant_text = _read(quant_path) if text is not None and os.path.isfile(quant_path) else None
            resolved = model_profile.resolve(path, tp, config_text=text, quant_text=quant_text)
    except model_profile.ProfileError as exc:
        errors.append(str(exc))
        return None, errors
    profile = resolved['profile']
    resolved['name'] = profile['name']
    resolved['precision'] = profile['quantization']['method']
    resolved['tp'] = resolved['shapes']['tp']
    if families is None:
        families = [family for family, needed in NEEDED if needed(profile)]
    resolved['families'] = list(families)
    unchecked = dict((family, why) for family, why in UNCHECKED.get(resolved['precision'], {}).items()
                     if family not in families and profile.get('experts'))
    if unchecked:
        resolved['unchecked'] = unchecked
    return resolved, errors


def judge(model, facts, params, numeric):
    """After the probe: facts['model'] and facts['backends'], and the mismatches.
    numeric: whether the GPUs were worked (False in in_service mode or with
    every GPU busy: nothing is qualified then, and that is not a failure)."""
    mismatches = []
    results = facts.get('model_checks') or []
    if facts.get('model_checks_error'):
        mismatches.append('model: expected the model checks to run, found %s' % facts['model_checks_error'].splitlines()[0])
    for entry in results:
        if entry.get('status') == 'failed' and entry['check'] not in backends.CHECK_BACKENDS:
            mismatches.append('model: expected %s at the shapes of %s to match fp32 on device %s (%s), found %s'
                              % (entry['check'], model['name'], entry.get('device'), entry.get('device_name'),
                                 entry.get('reason')))
    facts['model'] = dict((key, model[key]) for key in ('name', 'precision', 'tp', 'shapes', 'families'))
    if model.get('unchecked'):
        facts['model']['unchecked'] = dict(model['unchecked'])
    version = params.get('sglang_version') or backends.DEFAULT_SGLANG_VERSION
    gpus = [entry for entry in results if entry.get('device') != 'cpu']
    if not numeric or not gpus:
        why = 'no GPU was worked (mode %s)' % params.get('mode') if not numeric else 'no CUDA device'
        facts['backends'] = {'status': 'skipped', 'reason': why, 'flags': {}, 'args': None, 'env': None,
                             'qualification': {}, 'problems': []}
        return mismatches
    # a dense model's MoE checks say "no MoE layer": nothing to qualify there
    qualification = backends.qualify([entry for entry in results if entry.get('reason') != model_checks.NO_MOE])
    selection = backends.select(qualification, model['families'], params.get('backend_preference') or None,
                                params.get('backend_required') or None)
    record = backends.record(qualification, selection, version, model['name'])
    record['status'] = 'failed' if selection['problems'] else 'selected'
    record['env'] = backends.render_env(selection['flags'], version) if not selection['problems'] else None
    # the verdicts alone (no reasons, no error values): what the serving record keeps
    record['verdicts'] = dict(('%s / %s / %s' % (gpu, family, backend), verdict['status'])
                              for gpu, families in qualification.items()
                              for family, per_backend in families.items()
                              for backend, verdict in per_backend.items())
    record['tp'] = model['tp']
    record['precision'] = model['precision']
    facts['backends'] = record
    mismatches.extend('backends: %s' % problem for problem in selection['problems'])
    return mismatches


def serving_files(facts):
    """{'json': text, 'env': text}: the serving record and sglang's flags for
    the serving unit (systemd's EnvironmentFile=), from a verification whose
    backends were selected; None when there is nothing to write. Only what
    changes with the flags or the verdicts is kept: reasons and errors vary
    run by run and stay in the report."""
    chosen = facts.get('backends') or {}
    if chosen.get('status') != 'selected':
        return None
    model = facts.get('model') or {}
    record = {'model': model.get('name'), 'tp': model.get('tp'), 'precision': model.get('precision'),
              'model_shapes': model.get('shapes'), 'sglang_version': chosen.get('sglang_version'),
              'source': chosen.get('source'), 'flags': chosen.get('flags') or {}, 'args': chosen.get('args'),
              'verdicts': chosen.get('verdicts') or {}}
    served = chosen.get('served') or {}
    if served.get('status') == 'passed':
        # what served a request (its timings vary run by run: the report has them)
        record['served'] = {'args': served.get('args'), 'excluded': served.get('excluded') or []}
    return {'json': json.dumps(record, indent=4, sort_keys=True, separators=(',', ': ')) + '\n',
            'env': chosen.get('env') or ''}


def write_serving(venv, name, files, check_mode=False):
    """Write <venv>/<name>.json and <venv>/<name>.env (mode 0644, each
    atomically: a temporary file beside it, then a rename) where their
    content differs. {'paths': [...], 'changed': [paths written or that would
    be], 'error': None or why a file could not be written}."""
    out = {'paths': [], 'changed': [], 'error': None}
    for ext in ('json', 'env'):
        path = os.path.join(venv, '%s.%s' % (name, ext))
        out['paths'].append(path)
        try:
            with open(path, 'r') as handle:
                if handle.read() == files[ext]:
                    continue
        except (IOError, OSError, UnicodeDecodeError):
            pass
        out['changed'].append(path)
        if check_mode:
            continue
        try:
            atomic_file.write_text(path, files[ext], mode=0o644, prefix='.%s.' % name)
        except (IOError, OSError) as exc:
            out['error'] = 'serving flags: expected to write %s, found %s' % (path, exc)
            out['changed'].remove(path)
            break
    return out


def probe_params(model, params):
    """What the probe needs to run the model checks."""
    return {'model_shapes': model['shapes'], 'model_precision': model['precision'],
            'model_jit': params.get('model_jit') or 'cache_only',
            'model_fp8_block': model['profile']['quantization'].get('block')}


def check_names():
    return model_checks.check_names()
