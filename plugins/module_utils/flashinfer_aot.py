# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""flashinfer's JIT modules compiled once on a builder and placed on every host.

flashinfer compiles a kernel family with nvcc the first time it is called
(its JIT). Under FLASHINFER_DISABLE_JIT=1 (how the model checks run) it loads
only prebuilt modules: those of the flashinfer-jit-cache package, or a module at
<flashinfer package>/data/aot/<name>/<name>.so. This file builds named modules
with flashinfer's own JIT build (JitSpec.build, no GPU needed once the target
architectures are given) and installs the result at that place, checked by
sha256.

Two halves: the rules (module names, architectures, the artifact record),
imported by the module and the role's preflight; and a program the module runs
with the venv's interpreter (python -I -c <this source> <JSON>), so flashinfer
is imported where it is installed, never on the controller.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import re
import shutil
import sys
import time

# name -> (module, generator, arguments): the JIT module names flashinfer gives
# these kernel families (the name a "not built" skip of the checks shows).
GENERATORS = {
    'norm': ('flashinfer.jit.norm', 'gen_norm_module', ()),
    'silu_and_mul': ('flashinfer.jit.activation', 'gen_act_and_mul_module', ('silu',)),
    'sampling': ('flashinfer.jit.sampling', 'gen_sampling_module', ()),
    'topk': ('flashinfer.jit.topk', 'gen_topk_module', ()),
    'fused_moe_89': ('flashinfer.jit.fused_moe', 'gen_cutlass_fused_moe_sm89_module', ()),
    'fused_moe_90': ('flashinfer.jit.fused_moe', 'gen_cutlass_fused_moe_sm90_module', ()),
    'fused_moe_100': ('flashinfer.jit.fused_moe', 'gen_cutlass_fused_moe_sm100_module', ()),
    'fused_moe_103': ('flashinfer.jit.fused_moe', 'gen_cutlass_fused_moe_sm103_module', ()),
    'fused_moe_120': ('flashinfer.jit.fused_moe', 'gen_cutlass_fused_moe_sm120_module', ()),
    'fp4_gemm_cutlass': ('flashinfer.jit.gemm.core', 'gen_gemm_sm100_module_cutlass_fp4', ()),
    'fp4_gemm_cutlass_sm103': ('flashinfer.jit.gemm.core', 'gen_gemm_sm103_module_cutlass_fp4', ()),
    'fp4_gemm_cutlass_sm120': ('flashinfer.jit.gemm.core', 'gen_gemm_sm120_module_cutlass_fp4', ()),
}

# FLASHINFER_CUDA_ARCH_LIST entries: major.minor with an optional a/f suffix.
ARCH_RE = re.compile(r'^[1-9][0-9]?\.[0-9][af]?$')
RECORD = 'build.json'
MARKER = 'gpufleet-aot.json'
SCHEMA = 1


def module_errors(modules, variable='flashinfer_aot_modules'):
    """Messages for a module list that cannot be built (empty when fine)."""
    if not isinstance(modules, (list, tuple)):
        return ['%s: expected a list of flashinfer JIT module names, found %r' % (variable, modules)]
    errors = []
    for name in modules:
        if name not in GENERATORS:
            errors.append('%s: expected flashinfer JIT module names from %s, found %r'
                          % (variable, ', '.join(sorted(GENERATORS)), name))
    if len(set(map(str, modules))) != len(modules):
        errors.append('%s: expected each module once, found %s' % (variable, ', '.join(map(str, modules))))
    return errors


def arch_errors(arch_list, variable='flashinfer_aot_arch_list'):
    """Messages for target architectures flashinfer cannot take."""
    if not isinstance(arch_list, (list, tuple)) or not arch_list:
        return ['%s: expected a non-empty list of CUDA architectures such as 9.0a or 12.0f, found %r'
                % (variable, arch_list)]
    bad = [str(arch) for arch in arch_list if not ARCH_RE.match(str(arch))]
    if bad:
        return ['%s: expected CUDA architectures as major.minor with an optional a or f (9.0a, 10.0a, 12.0f), '
                'found %s' % (variable, ', '.join(bad))]
    return []


def key_data(flashinfer_version, cuda_version, arch_list, modules):
    """What an artifact is built for; equal data = the same files."""
    return {'flashinfer_version': str(flashinfer_version), 'cuda_version': str(cuda_version),
            'arch_list': sorted(str(arch) for arch in arch_list), 'modules': sorted(modules)}


def aot_key(data):
    """16 hex digits of the sha256 of DATA as canonical JSON: the artifact's folder name."""
    text = json.dumps(data, sort_keys=True, separators=(',', ':'))
    return hashlib.sha256(text.encode('utf-8')).hexdigest()[:16]


def record_errors(record, data):
    """Messages when a build record does not hold the modules of DATA."""
    if not isinstance(record, dict) or record.get('schema') != SCHEMA:
        return ['expected a build record of schema %d, found %r' % (SCHEMA, str(record)[:200])]
    errors = []
    for field in ('flashinfer_version', 'cuda_version', 'arch_list'):
        if record.get(field) != data[field]:
            errors.append('%s: expected %r, found %r in the build record' % (field, data[field], record.get(field)))
    found = sorted(record.get('modules') or {})
    missing = [name for name in data['modules'] if name not in found]
    if missing:
        errors.append('modules: expected %s, found %s in the build record' % (', '.join(missing), ', '.join(found) or 'none'))
    return errors


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, 'rb') as handle:
        for block in iter(lambda: handle.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def flashinfer_location():
    """(version, package dir) of the installed flashinfer, without importing it."""
    import importlib.util
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        import importlib_metadata as metadata
    spec = importlib.util.find_spec('flashinfer')
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError('flashinfer: expected it installed in this interpreter (%s), found no package'
                           % sys.executable)
    return metadata.version('flashinfer-python'), list(spec.submodule_search_locations)[0]


def _say(text):
    sys.stderr.write('%s\n' % text)
    sys.stderr.flush()


def build(params):
    """Compile each module with flashinfer's JIT build into params['out']."""
    arch_list = params['arch_list']
    os.environ['FLASHINFER_CUDA_ARCH_LIST'] = ' '.join(arch_list)
    os.environ['FLASHINFER_WORKSPACE_BASE'] = params['workspace']
    os.environ.pop('FLASHINFER_DISABLE_JIT', None)
    import importlib
    version, dummy = flashinfer_location()
    out = params['out']
    os.makedirs(out, exist_ok=True)
    record = {'schema': SCHEMA, 'flashinfer_version': version, 'cuda_version': params['cuda_version'],
              'arch_list': sorted(arch_list), 'modules': {}, 'started': time.time()}
    for index, name in enumerate(params['modules']):
        module, function, args = GENERATORS[name]
        spec = getattr(importlib.import_module(module), function)(*args)
        if spec.name != name:
            raise RuntimeError('%s: expected flashinfer to name the module %s, found %s' % (name, name, spec.name))
        _say('building %s (%d/%d)' % (name, index + 1, len(params['modules'])))
        started = time.time()
        spec.build(verbose=False)
        seconds = round(time.time() - started, 1)
        target = os.path.join(out, name + '.so')
        shutil.copyfile(str(spec.jit_library_path), target + '.part')
        os.replace(target + '.part', target)
        record['modules'][name] = {'sha256': sha256_file(target), 'bytes': os.path.getsize(target),
                                   'seconds': seconds}
        _say('built %s in %.1f s (%d bytes)' % (name, seconds, os.path.getsize(target)))
    record['seconds'] = round(time.time() - record.pop('started'), 1)
    with open(os.path.join(out, RECORD + '.part'), 'w') as handle:
        json.dump(record, handle, indent=1, sort_keys=True)
    os.replace(os.path.join(out, RECORD + '.part'), os.path.join(out, RECORD))
    return {'changed': True, 'record': record}


def install(params):
    """Place the modules of params['src'] under flashinfer's data/aot, checked by sha256."""
    version, package = flashinfer_location()
    src = params.get('src')
    data = key_data(version, params.get('cuda_version', ''), params.get('arch_list', []), params['modules'])
    if params['modules']:
        with open(os.path.join(src, RECORD)) as handle:
            record = json.load(handle)
        errors = record_errors(record, data)
    else:  # nothing to place: only what an earlier install placed goes
        record, errors = {'modules': {}}, []
    # Every file is checked before the first is placed: a bad artifact changes nothing.
    for name in params['modules']:
        path = os.path.join(src, name + '.so')
        want = ((record.get('modules') or {}).get(name) or {}).get('sha256')
        if not os.path.exists(path):
            errors.append('%s: expected %s, found no file' % (name, path))
        elif want and sha256_file(path) != want:
            errors.append('%s: expected sha256 %s, found %s in %s' % (name, want, sha256_file(path), path))
        elif not want and name in (record.get('modules') or {}):
            errors.append('%s: expected a sha256 in the build record, found none' % name)
    if errors:
        return {'failed': True, 'msg': '; '.join(errors)}
    aot = os.path.join(package, 'data', 'aot')
    placed = []
    for name in params['modules']:
        target = os.path.join(aot, name, name + '.so')
        want = record['modules'][name]['sha256']
        if os.path.exists(target) and sha256_file(target) == want:
            continue
        placed.append(name)
        if params.get('check_mode'):
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(src, name + '.so'), target + '.part')
        os.replace(target + '.part', target)
    marker = dict(data, sha256={name: record['modules'][name]['sha256'] for name in params['modules']},
                  key=params.get('key'))
    old = read_marker(aot)
    # Modules an earlier install placed that this one does not hold: flashinfer
    # would load them as prebuilt, so they go (the package's uninstall does not
    # know them).
    removed = sorted(set((old or {}).get('modules', [])) - set(params['modules']))
    for name in removed:
        if not params.get('check_mode'):
            shutil.rmtree(os.path.join(aot, name), ignore_errors=True)
    if not params['modules']:
        marker = None
    changed = bool(placed) or bool(removed) or old != marker
    if changed and not params.get('check_mode') and marker is None:
        try:
            os.remove(os.path.join(aot, MARKER))
        except OSError:
            pass
    elif changed and not params.get('check_mode'):
        os.makedirs(aot, exist_ok=True)
        with open(os.path.join(aot, MARKER + '.part'), 'w') as handle:
            json.dump(marker, handle, indent=1, sort_keys=True)
        os.replace(os.path.join(aot, MARKER + '.part'), os.path.join(aot, MARKER))
    return {'changed': changed, 'placed': placed, 'removed': removed, 'aot_dir': aot, 'marker': marker}


def read_marker(aot):
    try:
        with open(os.path.join(aot, MARKER)) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def status(params):
    """What is installed: the flashinfer version, the marker and each module's sha256."""
    version, package = flashinfer_location()
    aot = os.path.join(package, 'data', 'aot')
    marker = read_marker(aot)
    present = {}
    for name in (marker or {}).get('modules', []):
        path = os.path.join(aot, name, name + '.so')
        present[name] = sha256_file(path) if os.path.exists(path) else None
    intact = (bool(marker) and marker.get('flashinfer_version') == version
              and all(present.get(name) == sha for name, sha in marker.get('sha256', {}).items()))
    result = {'changed': False, 'flashinfer_version': version, 'aot_dir': aot, 'marker': marker,
              'present': present, 'intact': intact}
    if params.get('modules'):
        # the key of what is asked for, and whether this venv lacks it
        data = key_data(version, params.get('cuda_version', ''), params.get('arch_list', []), params['modules'])
        result.update(key_data=data, key=aot_key(data), needed=not (intact and marker.get('key') == aot_key(data)))
    return result


ACTIONS = {'build': build, 'install': install, 'status': status}


def main(argv):
    """Run the action of the JSON in argv[1]; one JSON line on stdout, exit status 0."""
    params = json.loads(argv[1])
    try:
        result = ACTIONS[params['action']](params)
    except Exception as exc:  # the module reports it, with the action
        result = {'failed': True, 'msg': '%s: %s: %s' % (params.get('action'), type(exc).__name__, exc)}
    sys.stdout.write(json.dumps(result, sort_keys=True) + '\n')


if __name__ == '__main__':
    main(sys.argv)
