# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The steps of gpufleet.inference.torch_verify, in the order its main() runs them.

validate_options, read_gpus, find_interpreter and validate_checks refuse a run
before any CUDA work; plan decides what may run on which GPU; probe runs the
venv's interpreter once and reads its answer; judge lists every mismatch (and,
where sglang is installed in the venv, runs it once more to ask the serving
stack itself: serving_stack); write keeps the serving files of a pass. A step that refuses ends the module
(fail_json); its failure carries what the steps before it found.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import time

from ansible_collections.gpufleet.inference.plugins.module_utils import (
    backends, busy, kernel_checks, model_verify, probe_imports, proof, served_check, sglang_serving, torch_probe, xid)
from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import (
    HEALTH_EXPECT_SPEC,
    ProbeError,
    check_collectives,
    check_expectations,
    check_health,
    check_kernels,
    collectives_errors,
    diagnose_undefined_symbols,
    parse_probe_output,
)
from ansible_collections.gpufleet.inference.plugins.module_utils.gpu import (
    XID_EXPECT_SPEC,
    check_health_expectations,
    gather,
    reread_links,
)
from ansible_collections.gpufleet.inference.plugins.module_utils.probe_program import module_source, probe_argv
from ansible_collections.gpufleet.inference.plugins.module_utils.venv_link import (
    LinkError,
    missing_target_message,
    resolve,
)


def is_executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def demangle(module, symbols):
    """symbol -> demangled name, with one c++filt run for all of them; {} without c++filt."""
    cxxfilt = module.get_bin_path('c++filt')
    if not symbols or not cxxfilt:
        return {}
    rc, out, dummy = module.run_command([cxxfilt] + symbols, errors='replace')
    lines = out.splitlines()
    if rc != 0 or len(lines) != len(symbols):
        return {}
    return dict((symbol, line.strip()) for symbol, line in zip(symbols, lines) if line.strip() != symbol)


def numeric_expectations(expect, use, facts, gpu_facts):
    """The expectations and facts to judge: a numeric expectation only where the numeric checks ran (a GPU left
    out is a skip, never a failure), and the devices as nvidia-smi lists them where the probe saw only some."""
    expect = dict(expect)
    if not use['numeric']:
        for name in busy.NUMERIC_EXPECT:
            expect.pop(name, None)
    if use['collectives_skip']:
        expect.pop('min_allreduce_busbw_gbps', None)
    if use['visible'] is None or not (gpu_facts or {}).get('present'):
        return expect, facts
    devices = [dict(index=gpu['index'], name=gpu['name'], compute_capability=gpu['compute_capability'])
               for gpu in gpu_facts['gpus']]
    return expect, dict(facts, devices=devices, device_count=len(devices))


def keep_proof(module, params, link, facts, gpu_facts):
    """Add this run's numeric pass to the host's proof record (not in check mode) and report its age in
    facts['proof']; the max_kernel_proof_age_hours failure, or None."""
    path = proof.record_path(link['link_path'])
    gpus = (gpu_facts or {}).get('gpus') or [] if (gpu_facts or {}).get('present') else []
    by_index = dict((gpu['index'], gpu) for gpu in gpus)
    on_gpus = bool(gpus) and bool(facts.get('torch_cuda_version'))

    def key_of(gpu):
        return gpu.get('uuid') or 'gpu%d' % gpu['index']

    def device_key(device):
        if device == 'cpu' and not on_gpus:
            return ('cpu', 'cpu')
        if isinstance(device, int) and device in by_index and on_gpus:
            return (key_of(by_index[device]), device)
        return None

    record, error = proof.load(path)
    stack = proof.stack_of(link['target'], facts, (gpu_facts or {}).get('driver_version'))
    # a device with any failed numeric check, or a failed all-reduce, proves nothing
    found = proof.proven(facts, device_key, params['smoke_tolerance'])
    now = time.time()
    written = False
    if found:
        record = proof.update(record, stack, found, now, params['mode'])
        # a record that is not one (cut, edited by hand) is written anew; the error still says what was found
        if not module.check_mode and (error is None or proof.replaceable(path)):
            try:
                proof.write(path, record)
                written = True
            except (IOError, OSError) as exc:
                error = 'proof record %s not written: %s' % (path, exc)
    expected = [(key_of(gpu), 'GPU %d' % gpu['index']) for gpu in gpus] if on_gpus else [('cpu', 'cpu')]
    fresh = proof.freshness(record, stack, expected, now, proven_now=set(found))
    fresh.update(path=path, error=error, written=written, proven_now=sorted(found))
    facts['proof'] = fresh
    return proof.age_failure(fresh, params['expect'].get('max_kernel_proof_age_hours'))


def validate_options(module, params):
    """Refuse options that contradict each other before the GPUs are read; what was asked for:
    numeric (any check that works a GPU) and collectives."""
    health_expected = sorted(key for key in dict(HEALTH_EXPECT_SPEC, **XID_EXPECT_SPEC) if params['expect'].get(key) is not None)
    if health_expected and not params['gpu']:
        module.fail_json(msg='expect.%s: needs gpu=true (the GPUs\' health is read with them)' % health_expected[0],
                         probed=False)
    collectives_asked = params['collectives'] or params['expect']['min_allreduce_busbw_gbps'] is not None
    # the model checks are numeric too: the GPUs are read first, a busy one is never disturbed
    model_asked = bool(params['model'] or params['model_config'])
    numeric_asked = bool(params['smoke'] or params['kernels'] or params['expect']['kernels'] or collectives_asked
                         or model_asked)
    if params['busy_memory_mib'] < 1:
        module.fail_json(msg='busy_memory_mib: expected a positive number of MiB, found %d' % params['busy_memory_mib'],
                         probed=False)
    age = params['expect'].get('max_kernel_proof_age_hours')
    if age is not None and (age < 0 or not params['proof']):
        module.fail_json(msg='expect.max_kernel_proof_age_hours: expected a number of hours >= 0 with proof=true and link, '
                         'found %r%s' % (age, '' if params['proof'] else ' without proof=true'), probed=False)
    if params['proof'] and not params['link']:
        module.fail_json(msg='proof: needs link (the record is kept beside the stable path)', probed=False)
    return dict(numeric=numeric_asked, collectives=collectives_asked)


def read_gpus(module, params, asked):
    """What each GPU is doing, read before any CUDA work (a busy GPU is never disturbed), or None where nothing
    needs it; and the ansible_facts that travel with every result from here on (gpufleet_gpu with gpu=true)."""
    facts_out = {}
    gpu_facts = None
    if params['gpu'] or asked['numeric'] or params['proof'] or params['mode'] != 'auto':
        gpu_facts = gather(module, processes=True)[0]
        busy.judge(gpu_facts, params['busy_memory_mib'])
    if params['gpu']:
        facts_out['gpufleet_gpu'] = gpu_facts
        # Xid errors of this boot from the kernel log (read without root), or
        # the answer of a read made with become before this module
        if params['xid_answer']:
            gpu_facts['xid'] = dict(params['xid_answer'])
        elif params['xid'] == 'read' and gpu_facts['present']:
            gpu_facts['xid'] = xid.read(module, gpu_facts['gpus'])
        # judged by the fleet report, against the cursor the previous run left
        gpu_facts['xid_expect'] = dict((key, params['expect'].get(key)) for key in XID_EXPECT_SPEC
                                       if params['expect'].get(key) is not None)
        if params['gpu_required'] and not facts_out['gpufleet_gpu']['present']:
            message = 'gpu_required: expected an NVIDIA GPU, found none (%s)' % facts_out['gpufleet_gpu']['error']
            module.fail_json(msg=message, mismatches=[message], probed=False, ansible_facts=facts_out)
    return gpu_facts, facts_out


def find_interpreter(module, params, facts_out):
    """The interpreter to verify, and the result keys that travel with every result from here on (with link=...,
    the link's state). In check mode, a venv the real install has not built yet ends the module here."""
    if params['venv'] and not params['link']:
        module.fail_json(msg='venv: only used with link (got venv=%r without link)' % params['venv'])
    extra = {}
    if params['link']:
        try:
            extra['link'] = resolve(params['link'], params['venv'], adopt=params['adopt'])
        except LinkError as exc:
            module.fail_json(msg=str(exc), mismatches=[str(exc)], probed=False, ansible_facts=facts_out)
        missing = missing_target_message(extra['link'])
        if missing and module.check_mode and extra['link']['target']:
            module.exit_json(changed=False, probed=False, mismatches=[], ansible_facts=facts_out, msg=(
                'check mode: %s does not exist yet; it would be verified after the real install.'
                % extra['link']['target']), **extra)
        if missing:
            module.fail_json(msg=missing, mismatches=[missing], probed=False, ansible_facts=facts_out, **extra)
        python = extra['link']['target'] + '/bin/python'
    else:
        python = params['python']
    if not is_executable(python):
        module.fail_json(msg='python: expected an executable interpreter, found no executable file at %s' % python,
                         probed=False, ansible_facts=facts_out, **extra)
    return python, extra


def validate_checks(module, params, extra):
    """Refuse sizes, names and tolerances of the checks that cannot run; the model to verify, or None."""
    for name in ('smoke_size', 'smoke_iterations', 'collectives_iterations', 'collectives_timeout'):
        if params[name] < 1:
            module.fail_json(msg='%s: expected a positive number, found %d' % (name, params[name]), probed=False, **extra)

    problem = collectives_errors(params)
    if problem:
        module.fail_json(msg=problem, probed=False, **extra)

    if params['serving_name'] and (not params['link'] or '/' in params['serving_name']
                                   or params['serving_name'] in ('.', '..')):
        module.fail_json(msg='serving_name: expected a file name without "/" (with link), found %r%s'
                         % (params['serving_name'], '' if params['link'] else ' without link'), probed=False, **extra)
    for name in params['markers']:
        if not name or os.path.isabs(name) or '..' in name.split('/'):
            module.fail_json(msg='markers: expected relative paths under the venv without "..", found %r' % name,
                             probed=False, **extra)

    known = kernel_checks.check_names()
    tolerance_names = known + model_verify.check_names()
    for name in params['expect']['kernels']:
        if name not in known:
            module.fail_json(msg='expect.kernels: %r is not a kernel check; allowed: %s' % (name, ', '.join(known)),
                             probed=False, **extra)
    for name, value in params['kernel_tolerances'].items():
        if name not in tolerance_names:
            module.fail_json(msg='kernel_tolerances: %r is not a kernel check; allowed: %s' % (name, ', '.join(tolerance_names)),
                             probed=False, **extra)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            module.fail_json(msg='kernel_tolerances: %s must be a positive number (got %r)' % (name, value),
                             probed=False, **extra)
    model, model_errors = model_verify.resolve(params)
    if model_errors:
        module.fail_json(msg='; '.join(model_errors), mismatches=model_errors, probed=False, **extra)
    return model


def plan(module, params, gpu_facts, asked, python, facts_out, extra):
    """What this run may do on each GPU (busy.plan, with every GPU's usage); a refusal (mode=full on a busy GPU)
    ends the module before any CUDA work."""
    use = busy.plan(params['mode'], gpu_facts, params['environment'])
    use['gpus'] = [dict(index=gpu['index'], uuid=gpu.get('uuid'), busy=gpu.get('busy', False),
                        reason=gpu.get('busy_reason'), processes=gpu.get('processes') or [],
                        **(gpu.get('usage') or {}))
                   for gpu in ((gpu_facts or {}).get('gpus') or [])]
    if use['refused'] and not asked['numeric']:
        # nothing numeric was asked for: nothing to refuse
        use['refused'] = None
    if use['refused']:
        message = use['refused']
        module.fail_json(msg=message, mismatches=[message], probed=False, busy_refused=True,
                         ansible_facts=dict(facts_out, gpufleet_torch=dict(python_executable=python, gpu_use=use)), **extra)
    return use


def probe_params(params, use, asked, model):
    """The probe's JSON parameters: the numeric checks only where the plan lets them run."""
    imports = list(params['imports'])
    imports.extend(name for name in params['expect']['imports'] if name not in imports)
    sent = dict(
        imports=imports,
        smoke=params['smoke'] and use['numeric'],
        smoke_size=params['smoke_size'],
        smoke_iterations=params['smoke_iterations'],
        smoke_dtypes=params['smoke_dtypes'],
        kernels=(params['kernels'] or bool(params['expect']['kernels'])) and use['numeric'],
        kernel_tolerances=params['kernel_tolerances'],
        flashinfer_workspace_venv=params['flashinfer_workspace_venv'] and 'FLASHINFER_WORKSPACE_BASE' not in params['environment'],
        consistent=bool(params['expect']['consistent']),
        timeout=params['timeout'],
        packages=params['packages'],
        markers=params['markers'],
    )
    if model is not None and use['numeric']:
        sent.update(model_verify.probe_params(model, params))
    if asked['collectives'] and not use['collectives_skip']:
        sent.update((name, params[name]) for name in (
            'collectives', 'collectives_backend', 'collectives_world_size', 'collectives_sizes_mib',
            'collectives_iterations', 'collectives_timeout'))
        sent['collectives'] = True
    return sent


def probe_environ(params, use):
    """The environment the venv's interpreter runs under: the caller's, and the idle GPUs only, in nvidia-smi's order."""
    environ = dict((key, str(value)) for key, value in params['environment'].items())
    if use['mask'] is not None:
        environ['CUDA_VISIBLE_DEVICES'] = use['mask']
    return environ


def probe(module, params, python, use, asked, model, facts_out, extra):
    """Run the probe once (probe_program) under the plan's CUDA_VISIBLE_DEVICES and read its answer into
    gpufleet_torch, with nvidia-smi's GPU numbers; a probe without an answer ends the module. Returns the facts
    and the run: rc, err, cmd (the probe's source left out) and sent (its parameters)."""
    sent = probe_params(params, use, asked, model)
    argv = probe_argv(python, sent, isolated=params['isolated'])
    environ = probe_environ(params, use)

    started = time.time()
    rc, out, err = module.run_command(argv, environ_update=environ, errors='replace')
    probe_seconds = round(time.time() - started, 3)
    # The probe source is long and says nothing new: report the command without it.
    cmd = [arg if arg != argv[-2] else '<probe>' for arg in argv]
    try:
        facts = parse_probe_output(rc, out, params['timeout'])
    except ProbeError as exc:
        module.fail_json(msg=str(exc), rc=rc, stdout=out, stderr=err, cmd=cmd, mismatches=[str(exc)], probed=True,
                         ansible_facts=dict(facts_out, gpufleet_torch=dict(python_executable=python, probe_seconds=probe_seconds)),
                         **extra)
    facts['probe_seconds'] = probe_seconds
    if use['visible'] is not None:
        # torch's device numbers under the mask -> nvidia-smi's
        for entry in (facts.get('smoke') or []) + (facts.get('kernels') or []) + (facts.get('model_checks') or []):
            entry['device'] = busy.torch_to_smi(use, entry.get('device'))
        for device in facts.get('devices') or []:
            device['index'] = busy.torch_to_smi(use, device.get('index'))
    if asked['collectives'] and (use['collectives_skip'] or not use['numeric']):
        facts['collectives'] = dict(status='skipped', reason=use['collectives_skip'], backend=params['collectives_backend'],
                                    world_size=None, correct=None, results=[])
    facts['gpu_use'] = use

    symbols = sorted(set(entry['undefined_symbol'] for entry in facts['imports'].values() if entry.get('undefined_symbol')))
    diagnose_undefined_symbols(facts, demangle(module, symbols))
    return facts, dict(rc=rc, err=err, cmd=cmd, sent=sent)


def judge(module, params, facts, ran, use, model, gpu_facts, extra):
    """Every mismatch of the facts: the checks' own failures, the model's, the GPUs' health (their links read again
    where the probe has just worked them), the expectations where the checks ran, and the proof's age."""
    mismatches = check_health(facts, ran['sent']['smoke'], params['smoke_tolerance'])
    mismatches.extend(check_kernels(facts))
    mismatches.extend(check_collectives(facts))
    if model is not None:
        mismatches.extend(model_verify.judge(model, facts, params, use['numeric']))
    if params['gpu']:
        worked = facts.get('smoke') or facts.get('kernels') or (facts.get('collectives') or {}).get('results')
        if gpu_facts['present'] and worked and facts.get('device_count'):
            # the GPUs have just worked: their links are trained up again
            reread_links(module, gpu_facts)
        # no GPU health at all fails every health expectation that was set
        mismatches.extend(check_health_expectations(params['expect'], gpu_facts))
    expect, judged = numeric_expectations(params['expect'], use, facts, gpu_facts)
    mismatches.extend(check_expectations(expect, judged))
    if params['proof']:
        problem = keep_proof(module, params, extra['link'], facts, gpu_facts)
        if problem:
            mismatches.append(problem)
    mismatches.extend(serving_stack(module, params, facts, ran, use, model))
    mismatches.extend(served(module, params, facts, ran, use, model, mismatches))
    return mismatches


def _served_skip(module, params, facts, ran, use, model, mismatches):
    """Why the served check does not run here, or None where it does."""
    chosen = facts.get('backends') or {}
    if params.get('served_check') == 'off':
        return 'gpufleet_served_check: off'
    if chosen.get('status') != 'selected':
        return 'no serving flags were selected (backends %s)' % chosen.get('status')
    if not facts.get('torch_importable') or not sglang_serving.installed(ran['cmd'][0], facts.get('packages')):
        return 'sglang is not installed in the venv'
    if not (facts.get('imports') or {}).get('sglang.launch_server', {}).get('ok', False):
        return 'sglang.launch_server did not import'
    if mismatches:
        return 'the host failed the checks before it'
    if module.check_mode:
        return 'check mode'
    return None


def served(module, params, facts, ran, use, model, mismatches):
    """The served-request check (served_check): sglang's own server from the venv, with the selected flags, on
    idle GPUs, the model reduced to a few layers; a backend whose request fails is excluded and the next qualified
    one tried. facts['backends']['served'] says what served (or why it was skipped); the flags, args and env follow
    the backend that served. The mismatches: one where nothing served or the check could not be set up."""
    if model is None or facts.get('backends') is None:
        return []
    chosen = facts['backends']
    why = _served_skip(module, params, facts, ran, use, model, mismatches)
    mask, gpus = (None, None) if why else served_check.gpu_mask(use, model['tp'])
    if why is None and mask is None:
        why = gpus
    if why is not None:
        chosen['served'] = served_check.skipped(why)
        return []
    environ = dict(os.environ)
    environ.update(probe_environ(params, use))
    environ.update(CUDA_VISIBLE_DEVICES=mask, CUDA_DEVICE_ORDER='PCI_BUS_ID')
    started = time.time()
    try:
        setup = served_check.prepare(params, ran['cmd'][0], environ, model['tp'])
    except served_check.ServedCheckError as exc:
        chosen['served'] = dict(served_check.skipped(None), status='failed', reason=str(exc))
        return ['served: expected the served check to start, found %s' % exc]
    try:
        choice = {'qualification': chosen.get('qualification') or {}, 'families': model['families'],
                  'preference': params.get('backend_preference'), 'required': params.get('backend_required')}
        with served_check.signals_end_the_check():
            result = served_check.check(setup, chosen.get('flags') or {}, choice)
    finally:
        served_check.cleanup(setup)
    result.update(gpus=gpus, tp=model['tp'], layers=setup['override'], config=setup['origin'],
                  seconds=round(time.time() - started, 3))
    chosen['served'] = result
    if result['status'] != 'passed':
        return ['served: expected a request served by sglang with the qualified flags, found %s' % result['reason']]
    if result['flags'] != chosen.get('flags'):
        version = params.get('sglang_version') or backends.DEFAULT_SGLANG_VERSION
        chosen['flags'] = dict(result['flags'])
        chosen['args'] = backends.render_args(chosen['flags'], version)
    chosen['env'] = backends.render_env(chosen.get('flags') or {}, params.get('sglang_version') or backends.DEFAULT_SGLANG_VERSION,
                                        extra={'GPUFLEET_SERVED': result['args'] or 'no backend flags'})
    return []


def sglang_argv(python, sent, isolated=True):
    """sglang_serving's program: probe_imports and torch_probe built as the probe's prelude builds its helpers
    (gpufleet_<name>), then sglang_serving.main()."""
    lines = ['import sys as _gpufleet_sys, types as _gpufleet_types']
    for helper in (probe_imports, torch_probe, sglang_serving):
        name = 'gpufleet_' + helper.__name__.rsplit('.', 1)[-1]
        lines.append('_gpufleet_sys.modules[%r] = _gpufleet_types.ModuleType(%r)' % (name, name))
        lines.append('exec(compile(%r, %r, "exec"), _gpufleet_sys.modules[%r].__dict__)'
                     % (module_source(helper), os.path.basename(helper.__file__), name))
    lines.append('_gpufleet_sys.modules["gpufleet_sglang_serving"].main()')
    return [python] + (['-I'] if isolated else []) + ['-c', '\n'.join(lines), json.dumps(sent, sort_keys=True)]


def _sglang_sent(params, facts, use, model):
    """sglang_serving's parameters: the flags to parse once they were selected, the auto question where the GPUs
    were worked for the model."""
    sent = dict(imports=list(sglang_serving.SERVER_IMPORTS), timeout=params['timeout'], flags=None, auto=False)
    chosen = facts.get('backends')
    if model is None or chosen is None:
        return sent
    version = params.get('sglang_version') or backends.DEFAULT_SGLANG_VERSION
    if chosen.get('status') == 'selected':
        sent.update(flags=dict(chosen.get('flags') or {}), families=backends.families_of(version))
    if use['numeric'] and chosen.get('status') != 'skipped':
        sent.update(auto=True, precision=model['precision'], moe=model['shapes'].get('moe'),
                    fp8_block=model['profile']['quantization'].get('block'))
    return sent


def _sglang_answer(rc, out):
    """The program's JSON answer, or {'error': why there is none}."""
    lines = (out or '').strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return {'error': 'expected a JSON answer, found rc %s and %r' % (rc, (out or '')[-200:])}
    return answer


def serving_stack(module, params, facts, ran, use, model):
    """Where sglang is installed in the venv: its server's imports, the selected flags through its own argument
    parser and what its auto would run for the model's experts (sglang_serving), as facts['sglang'] and, beside
    the qualification, facts['backends']['flags_check'] and ['sglang_auto']; the mismatches. Elsewhere the flags
    are said not checked."""
    python = ran['cmd'][0]
    chosen = facts.get('backends')
    if not facts.get('torch_importable') or not sglang_serving.installed(python, facts.get('packages')):
        if chosen is not None:
            chosen.update(flags_check=sglang_serving.NOT_INSTALLED, sglang_auto_how=sglang_serving.NOT_INSTALLED,
                          sglang_auto=dict((gpu, sglang_serving.UNKNOWN) for gpu in chosen.get('qualification') or {}))
        return []
    sent = _sglang_sent(params, facts, use, model)
    rc, out, dummy = module.run_command(sglang_argv(python, sent, isolated=params['isolated']),
                                        environ_update=probe_environ(params, use), errors='replace')
    answer = _sglang_answer(rc, out)
    facts['sglang'] = dict((key, value) for key, value in answer.items() if key != 'imports')
    if answer.get('error'):
        return ['sglang: expected the serving stack to answer, found %s' % answer['error']]
    entries = answer.get('imports') or {}
    facts['imports'].update(entries)
    symbols = sorted(set(entry['undefined_symbol'] for entry in entries.values() if entry.get('undefined_symbol')))
    diagnose_undefined_symbols(dict(facts, imports=entries), demangle(module, symbols))
    conflicts = ''.join('; %s' % conflict for conflict in answer.get('pin_conflicts') or [])
    mismatches = ['sglang: expected %s to import (the server imports it at start), found %s%s'
                  % (name, entry.get('diagnosis') or entry.get('error'), conflicts)
                  for name, entry in sorted(entries.items()) if not entry.get('ok')]
    if chosen is None:
        return mismatches
    check = answer.get('flags_check')
    if check is None:
        chosen['flags_check'] = 'not checked: %s' % ('no flags selected' if sent['flags'] is None else 'sglang did not import')
    elif check['status'] == 'ok':
        chosen['flags_check'] = 'ok: sglang %s\'s argument parser took %r' % (answer.get('version'), ' '.join(check['argv']))
    else:
        chosen['flags_check'] = 'failed: %s' % check['reason']
        mismatches.append('backends: expected sglang %s\'s argument parser to take %r, found %s'
                          % (answer.get('version'), ' '.join(check['argv'] or []), check['reason']))
    auto = answer.get('auto') or {}
    chosen['sglang_auto_how'] = auto.get('how') or auto.get('reason') or 'not asked: no GPU was worked for the model'
    chosen['sglang_auto'] = dict((gpu, auto.get('moe_runner') if gpu == auto.get('gpu') else sglang_serving.UNKNOWN)
                                 for gpu in chosen.get('qualification') or {})
    return mismatches


def write(module, params, facts, mismatches, extra):
    """The verification's only write - the serving files (serving_name), after a pass with the backends
    selected: a host that failed keeps the files of its last pass. Whether a file changed; a file that could
    not be written is one more mismatch."""
    files = model_verify.serving_files(facts) if params['serving_name'] and not mismatches else None
    if files is None:
        return False
    extra['serving_files'] = model_verify.write_serving(extra['link']['target'], params['serving_name'], files,
                                                        module.check_mode)
    if extra['serving_files']['error']:
        mismatches.append(extra['serving_files']['error'])
    return bool(extra['serving_files']['changed'])
