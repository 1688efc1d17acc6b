#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: wheel_fit
short_description: Judge whether a prebuilt wheel with CUDA and C++ extensions fits the fleet's GPUs and a venv's torch
version_added: 0.4.0
description:
  - Answers, before anything is installed, the two questions a prebuilt extension wheel (sgl-kernel, or any
    wheel whose shared objects link against PyTorch) must pass - does it carry code for the GPUs, and does it
    load against the torch that is installed.
  - B(Arch) - the SASS and PTX of every shared object (C(cuobjdump), as M(gpufleet.inference.arch_audit) reads
    them) against O(targets), with its rules - family-specific SASS (C(sm_100f)) covers every GPU of its
    family, and an C(a) target run by plain SASS of its GPU alone (C(sm_90) for V(9.0a)) fits with a sentence in
    RV(notes), unless O(require_arch_specific). A shared object matched by an O(scope) entry is audited only
    for the targets that entry serves; what was left out is returned in C(arch.scoped_out) with the entry's reason.
  - B(ABI) - every undefined dynamic symbol of its shared objects in the namespaces torch provides (C(c10::),
    C(at::), C(torch::), C(caffe2::)) must be exported by a library in the venv's C(torch/lib). The first
    unresolved ones are named, demangled, with the overloads of the same name that torch does export (a
    parameter that changed type). The CUDA runtime the wheel links (C(libcudart.so.N)) must be the major
    version torch was built with, and the torch libraries it links must exist (a CPU torch has no
    C(libc10_cuda.so)). The wheel's tags must fit the venv's Python and machine. When the wheel does not fit,
    the torch its metadata requires is named beside the venv's if the venv's does not meet it (PEP 440 - the
    local label of C(2.14.1+cu130) meets C(==2.14.1)), or if the metadata names none.
  - The shared objects are read as ELF by the module itself (no binutils needed); demangling uses the C++
    runtime's own demangler. Torch is located through the venv's interpreter without importing it.
  - O(path) alone gives the arch verdict and RV(abi_needs); O(needs) (an earlier run's RV(abi_needs)) with
    O(python) judges the ABI on a host that does not have the wheel - the collection's sgl_kernel role reads
    the wheel once on the controller and judges the ABI on the builder of each torch.
  - Read-only; never reports a change.
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  path:
    description:
      - The wheel (C(.whl)), a directory of shared objects (an unpacked wheel) or one shared object, on the host
        where the module runs. Required unless O(needs) is given.
    type: path
  targets:
    description:
      - GPU targets the wheel must carry code for, as C(TORCH_CUDA_ARCH_LIST) entries (V(9.0a), V(12.0a), V(8.9)).
        Empty - the arch is not judged (said in RV(arch)).
    type: list
    elements: str
    default: []
  require_arch_specific:
    description:
      - An C(a) target (V(9.0a)) is covered only by its arch-specific or family-specific code, not by plain SASS
        of its GPU (C(sm_90)); as the same option of M(gpufleet.inference.arch_audit).
    type: bool
    default: false
  scope:
    description:
      - Libraries that serve some GPUs only, by design. Each entry - C(files) (a glob on the path inside the
        wheel, like V(sgl_kernel/flashmla_ops*)), C(serves) (the targets it is audited for) and C(reason).
        The first entry that matches a shared object applies.
    type: list
    elements: dict
    default: []
  cuobjdump:
    description: Path of C(cuobjdump); by default C(<cuda_home>/bin/cuobjdump), else PATH and C(/usr/local/cuda/bin).
    type: path
  cuda_home:
    description: A CUDA toolkit whose C(bin/cuobjdump) to use.
    type: path
  python:
    description:
      - The interpreter of the venv whose torch the wheel must load against. Without it the ABI is not judged
        (said in RV(abi)), and RV(abi_needs) says what a later run must find.
    type: path
  needs:
    description:
      - RV(abi_needs) of an earlier run on the same wheel, to judge the ABI where the wheel itself is not.
    type: dict
  unpack_dir:
    description:
      - Extract the wheel's shared objects here and keep them; a later run on the same wheel (same sha256)
        reads them again without extracting. By default they go to a temporary directory, removed at the end.
    type: path
  show:
    description: How many unresolved symbols per shared object the message names.
    type: int
    default: 3
  fail:
    description: Fail when the wheel does not fit. V(false) returns RV(fits) and RV(reasons) without failing.
    type: bool
    default: true
extends_documentation_fragment:
  - gpufleet.inference.read_only
notes:
  - An unresolved symbol is what C(import) reports as C(undefined symbol) - the whole extension fails to load.
    Symbols outside torch's namespaces (the C++ runtime, CUDA, libc) are not judged here.
seealso:
  - module: gpufleet.inference.arch_audit
  - module: gpufleet.inference.verify_host
'''

EXAMPLES = r'''
- name: Does the published sgl-kernel wheel fit our H200s and the venv's torch?
  gpufleet.inference.wheel_fit:
    path: /srv/wheels/sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl
    targets: ["9.0a"]
    cuda_home: /usr/local/cuda-13.0
    python: /home/deploy/ml-env/bin/python
    scope:
      - files: sgl_kernel/flashmla_ops*
        serves: ["9.0a", "10.0a"]
        reason: FlashMLA is an SM90/SM100 kernel; sglang does not load it elsewhere

- name: Judge without failing, then decide
  gpufleet.inference.wheel_fit:
    path: "{{ wheel }}"
    python: "{{ venv }}/bin/python"
    fail: false
  register: fit

- name: Say why it does not fit
  ansible.builtin.debug:
    msg: "{{ fit.reasons }}"
  when: not fit.fits

- name: Read the wheel on the controller once ...
  gpufleet.inference.wheel_fit:
    path: "{{ wheel }}"
    targets: "{{ arch_list }}"
  delegate_to: localhost
  run_once: true
  register: wheel_read

- name: ... and judge the ABI on each host against its own torch
  gpufleet.inference.wheel_fit:
    needs: "{{ wheel_read.abi_needs }}"
    python: "{{ venv }}/bin/python"
'''

RETURN = r'''
fits:
  description: Whether every judged part fits (arch, ABI, tags). A part that was not judged is not a fit; see RV(judged).
  returned: always
  type: bool
judged:
  description: The parts that were judged, of V(arch) and V(abi).
  returned: always
  type: list
  elements: str
  sample: ["arch", "abi"]
reasons:
  description: One sentence per reason it does not fit, naming the shared object and what is missing.
  returned: always
  type: list
  elements: str
  sample:
    - "sgl_kernel/sm90/common_ops.abi3.so needs 7 symbols that torch 2.14.1 does not export; the first:
       c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool) (torch exports
       c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, unsigned int, bool,
       c10::cuda::CUDAErrorLogCapture*))"
notes:
  description:
    - Sentences about what fits with a caveat - an C(a) target that a shared object runs on plain SASS of its
      GPU alone, without the target's arch-specific instructions (C(arch.plain_only)).
  returned: always
  type: list
  elements: str
  sample: ["sgl_kernel/infllm_ops.abi3.so runs on 9.0a through plain SASS sm_90, without the arch-specific instructions of sm_90a"]
wheel:
  description: The wheel's name, version, tags and the torch its metadata requires (empty when it names none).
  returned: when O(path) is a wheel, or from O(needs)
  type: dict
  sample: {"name": "sgl-kernel", "version": "0.3.21", "tags": ["cp310-abi3-manylinux2014_x86_64"], "requires_torch": ""}
arch:
  description:
    - The audit as M(gpufleet.inference.arch_audit) returns it (requested, files, missing, plain_only, compiled,
      cuobjdump) plus C(scoped_out) - [{file, targets, reason}]. C(judged) false and C(why) when not judged.
  returned: always
  type: dict
abi:
  description:
    - C(torch_version), C(torch_cuda), C(torch_lib), C(checked) (symbols looked up), C(missing) - [{file, symbol,
      name, torch_exports}] with the demangled name and the same-name overloads torch exports - and
      C(libraries) - sentences about the CUDA runtime and torch libraries. C(judged) false and C(why) when not judged.
  returned: always
  type: dict
abi_needs:
  description: What the wheel needs from torch, for O(needs) of a later run - symbols and linked libraries per shared object.
  returned: when O(path) is given
  type: dict
'''

import json
import os
import re
import shutil
import tempfile
import zipfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.inference.plugins.module_utils import arch_audit, elf_symbols, probe_imports
from ansible_collections.gpufleet.inference.plugins.module_utils.cuobjdump import (
    SHARED_OBJECT_RE, extract_wheel, find_cuobjdump, list_targets, shared_objects_in)
from ansible_collections.gpufleet.inference.plugins.module_utils.gpu import C_LOCALE

CUOBJDUMP_HINT = ('set cuobjdump or cuda_home (the sgl_kernel role: sgl_kernel_wheel_cuobjdump) to a cuobjdump of '
                  'CUDA 12.8 or newer; NVIDIA\'s nvidia-cuda-cuobjdump wheel on PyPI carries one')
READ_HINT = 'this cuobjdump cannot read the file: use one of the newest CUDA release'
STAMP = '.gpufleet-unpacked.json'
CUDART_RE = re.compile(r'^libcudart\.so\.(\d+)')
TORCH_LIB_RE = re.compile(r'^lib(c10|torch|caffe2)[a-z0-9_]*\.so')
TAG_RE = re.compile(r'^(?P<interp>[a-z]+)(?P<ver>\d+)?$')

# Where torch is, without importing it: its version and CUDA from torch/version.py,
# the interpreter's tag and machine.
TORCH_PROBE = r'''
import importlib.util as iu, json, os, platform, re, sys
out = {"python_tag": "cp%d%d" % sys.version_info[:2], "machine": platform.machine(), "torch_dir": None}
spec = iu.find_spec("torch")
if spec is not None and spec.submodule_search_locations:
    out["torch_dir"] = list(spec.submodule_search_locations)[0]
    try:
        text = open(os.path.join(out["torch_dir"], "version.py")).read()
    except OSError:
        text = ""
    for key in ("__version__", "cuda"):
        m = re.search(r"^%s\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]" % key, text, re.M)
        out[key.strip("_")] = m.group(1) if m else None
print(json.dumps(out))
'''


def wheel_info(module, path):
    """Name, version, tags and the torch requirement of a wheel, from its dist-info."""
    try:
        with zipfile.ZipFile(path) as wheel:
            names = wheel.namelist()
            meta_name = [n for n in names if re.match(r'^[^/]+\.dist-info/METADATA$', n)]
            tags_name = [n for n in names if re.match(r'^[^/]+\.dist-info/WHEEL$', n)]
            meta = wheel.read(meta_name[0]).decode('utf-8', 'replace') if meta_name else ''
            tags = wheel.read(tags_name[0]).decode('utf-8', 'replace') if tags_name else ''
    except (zipfile.BadZipfile, OSError, KeyError) as exc:
        module.fail_json(msg='path: %s is not a readable wheel (zip): %s' % (path, exc))
    header = meta.split('\n\n', 1)[0]

    def field(name):
        return [line.split(':', 1)[1].strip() for line in header.splitlines() if line.lower().startswith(name.lower() + ':')]
    requires = [r for r in field('Requires-Dist') if re.match(r'^torch\b(?![-_.a-z])', r, re.I)]
    return {'name': (field('Name') or [''])[0], 'version': (field('Version') or [''])[0],
            'tags': [line.split(':', 1)[1].strip() for line in tags.splitlines() if line.startswith('Tag:')],
            'requires_torch': '; '.join(requires)}


def read_stamp(unpack_dir):
    try:
        with open(os.path.join(unpack_dir, STAMP)) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}


def unpack(module, path, unpack_dir):
    """The wheel's shared objects in unpack_dir (kept, reused for the same sha256) or a temporary folder.
    A new unpack goes to a folder of its own, renamed into place when complete: runs side by side never
    read a half-written one."""
    if not unpack_dir:
        scratch = tempfile.mkdtemp(prefix='wheel_fit_', dir=module.tmpdir)
        return extract_wheel(module, path, scratch), scratch
    digest = module.sha256(path)
    for attempt in (1, 2):
        recorded = read_stamp(unpack_dir)
        if recorded.get('sha256') == digest:
            return [(name, os.path.join(unpack_dir, name)) for name in recorded.get('objects', [])], None
        if attempt == 2:
            break
        parent = os.path.dirname(os.path.abspath(unpack_dir))
        if not os.path.isdir(parent):
            os.makedirs(parent)
        part = tempfile.mkdtemp(prefix='.unpacking-', dir=parent)
        objects = extract_wheel(module, path, part)
        with open(os.path.join(part, STAMP), 'w') as handle:
            json.dump({'sha256': digest, 'wheel': os.path.basename(path), 'objects': [pair[0] for pair in objects]}, handle)
        old = None
        if os.path.isdir(unpack_dir):
            old = tempfile.mkdtemp(prefix='.replaced-', dir=parent)
            try:
                os.rename(unpack_dir, os.path.join(old, 'dir'))
            except OSError:
                pass
        try:
            os.rename(part, unpack_dir)
        except OSError:
            shutil.rmtree(part, ignore_errors=True)  # another run put its complete copy in place first
        if old:
            shutil.rmtree(old, ignore_errors=True)
    module.fail_json(msg='unpack_dir: %s does not hold the shared objects of %s after unpacking' % (unpack_dir, path))


def read_needs(module, objects):
    """What each shared object needs from torch: its torch-namespace undefined symbols and linked libraries."""
    symbols, libraries = {}, {}
    for name, full in objects:
        try:
            dynamic = elf_symbols.read_dynamic(full)
        except elf_symbols.ElfError as exc:
            module.fail_json(msg='path: %s' % exc)
        needed = elf_symbols.torch_needed(dynamic['undefined'])
        links = [lib for lib in dynamic['needed'] if TORCH_LIB_RE.match(lib) or CUDART_RE.match(lib)]
        if needed:
            symbols[name] = needed
        if links:
            libraries[name] = links
    return {'symbols': symbols, 'libraries': libraries}


def tag_fits(tag, python_tag, machine):
    """Whether one wheel tag (cp310-abi3-manylinux2014_x86_64) installs on python_tag (cp311) on machine."""
    parts = tag.split('-')
    if len(parts) != 3:
        return False
    interp, abi, plat = parts
    have = int(python_tag[2:]) if python_tag.startswith('cp') and python_tag[2:].isdigit() else 0
    match = TAG_RE.match(interp)
    if not match:
        return False
    want = int(match.group('ver') or 0)
    if match.group('interp') == 'cp':
        if abi == 'abi3':
            ok = have >= want
        else:
            ok = have == want
    else:
        ok = match.group('interp') == 'py' and str(want)[:1] in ('', '3') and abi == 'none'
    return ok and (plat == 'any' or plat.endswith('_' + machine))


def find_torch(module, python):
    if not os.path.exists(python):
        module.fail_json(msg='python: %s does not exist' % python)
    rc, out, err = module.run_command([python, '-I', '-c', TORCH_PROBE], errors='replace')
    try:
        found = json.loads(out.strip().splitlines()[-1]) if rc == 0 else None
    except (ValueError, IndexError):
        found = None
    if not found:
        module.fail_json(msg='python: %s did not answer where torch is (rc %d): %s' % (python, rc, (err or out).strip()[-400:]),
                         rc=rc, stdout=out, stderr=err)
    return found


def torch_exports(lib_dir):
    exports, files = set(), []
    for name in sorted(os.listdir(lib_dir)) if os.path.isdir(lib_dir) else []:
        if SHARED_OBJECT_RE.search(name):
            try:
                exports.update(elf_symbols.read_dynamic(os.path.join(lib_dir, name))['defined'])
            except elf_symbols.ElfError:
                continue
            files.append(name)
    return exports, files


def judge_abi(needs, torch, show):
    """(abi result, reasons) of needs against torch (find_torch's answer)."""
    version = torch.get('version') or '?'
    lib_dir = os.path.join(torch['torch_dir'], 'lib')
    exports, files = torch_exports(lib_dir)
    result = {'judged': True, 'torch_version': version, 'torch_cuda': torch.get('cuda'), 'torch_lib': lib_dir,
              'checked': 0, 'missing': [], 'libraries': []}
    reasons = []
    cuda_major = (torch.get('cuda') or '').split('.')[0]
    # one sentence per library and cause, naming the shared objects that link it
    linked = {}
    for name in sorted(needs.get('libraries') or {}):
        for lib in needs['libraries'][name]:
            cudart = CUDART_RE.match(lib)
            if cudart and cuda_major and cudart.group(1) != cuda_major:
                cause = 'CUDA %s) but torch %s is built with CUDA %s' % (cudart.group(1), version, torch.get('cuda'))
            elif cudart and not cuda_major:
                cause = 'CUDA %s) but torch %s is a CPU build' % (cudart.group(1), version)
            elif TORCH_LIB_RE.match(lib) and lib not in files:
                cause = 'a torch library) which torch %s does not have in %s' % (version, lib_dir)
            else:
                continue
            linked.setdefault((lib, cause), []).append(name)
    for (lib, cause), names in sorted(linked.items()):
        shown = ', '.join(names[:show]) + (' and %d more' % (len(names) - show) if len(names) > show else '')
        result['libraries'].append('%s link%s %s (%s' % (shown, 's' if len(names) == 1 else '', lib, cause))
    for name in sorted(needs.get('symbols') or {}):
        wanted = needs['symbols'][name]
        result['checked'] += len(wanted)
        _count, missing = elf_symbols.resolve(wanted, exports)
        if not missing:
            continue
        first = missing[:show]
        others = elf_symbols.same_name_exports(first, exports)
        names = elf_symbols.demangle(first + sorted(set(s for v in others.values() for s in v)))
        described = []
        for symbol in missing:
            entry = {'file': name, 'symbol': symbol, 'name': names.get(symbol, symbol),
                     'torch_exports': arch_audit.unique(names.get(s, s) for s in others.get(symbol, []))}
            result['missing'].append(entry)
            if symbol in first:
                described.append(entry['name'] + (' (torch exports %s)' % ' and '.join(entry['torch_exports'])
                                                  if entry['torch_exports'] else ' (torch exports no symbol of that name)'))
        reasons.append('%s needs %d symbol%s that torch %s does not export; the first: %s'
                       % (name, len(missing), '' if len(missing) == 1 else 's', version, '; '.join(described)))
    return result, reasons + result['libraries']


def judge_arch(module, objects, targets, scope, arch_specific):
    cuobjdump = find_cuobjdump(module, CUOBJDUMP_HINT)
    listings = dict((name, list_targets(module, cuobjdump, name, full, READ_HINT)) for name, full in objects)
    report = arch_audit.scoped_audit(targets, listings, scope, arch_specific)
    report.update(judged=True, cuobjdump=cuobjdump)
    reasons = [arch_audit.missing_message(dict(report, missing=[m]), 'the wheel', arch_specific).replace('arch audit: ', '', 1)
               for m in report['missing']]
    return report, reasons


def torch_pin_met(requires_torch, torch_version):
    """Whether torch_version meets every torch requirement of the wheel's metadata (wheel_info's
    requires_torch: Requires-Dist lines joined by '; '), per PEP 440: True, False, or None when one
    cannot be read. Markers are not evaluated."""
    verdicts = []
    for part in requires_torch.split(';'):
        match = re.match(r'^\s*torch\s*(?:\[[^\]]*\])?\s*\(?([^()]*)\)?\s*$', part, re.I)
        if match:  # a marker ('platform_machine == "x86_64"') names no torch
            verdicts.append(probe_imports.version_satisfies(torch_version, re.sub(r'\s+', '', match.group(1))))
    if False in verdicts:
        return False
    return None if None in verdicts or not verdicts else True


def torch_pin_reason(requires_torch, torch_version):
    """The sentence that names the torch the wheel's metadata requires beside the venv's, or None when the
    venv's meets it: a met pin is no reason, only one that is not met (or cannot be read), or none at all."""
    if requires_torch and torch_pin_met(requires_torch, torch_version):
        return None
    return ('the wheel\'s metadata %s; the venv has torch %s'
            % ('requires ' + requires_torch if requires_torch else 'names no torch it was built for', torch_version))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path'),
            targets=dict(type='list', elements='str', default=[]),
            scope=dict(type='list', elements='dict', default=[]),
            require_arch_specific=dict(type='bool', default=False),
            cuobjdump=dict(type='path'),
            cuda_home=dict(type='path'),
            python=dict(type='path'),
            needs=dict(type='dict'),
            unpack_dir=dict(type='path'),
            show=dict(type='int', default=3),
            fail=dict(type='bool', default=True),
        ),
        mutually_exclusive=[('cuobjdump', 'cuda_home'), ('path', 'needs')],
        required_one_of=[('path', 'needs')],
        supports_check_mode=True,
    )
    module.run_command_environ_update = C_LOCALE
    params = module.params
    try:
        targets = arch_audit.normalize_targets(params['targets'])
    except ValueError as exc:
        module.fail_json(msg='targets: %s' % exc)
    errors = arch_audit.scope_errors(params['scope'])
    if errors:
        module.fail_json(msg='scope: ' + '; '.join(errors))
    if params['show'] < 1:
        module.fail_json(msg='show: must be an integer >= 1 (got %d)' % params['show'])
    path = params['path']
    if path is not None and not os.path.exists(path):
        module.fail_json(msg='path: %s does not exist' % path)
    if path and os.path.isfile(path) and not (path.endswith('.whl') or SHARED_OBJECT_RE.search(path)):
        module.fail_json(msg='path: must be a wheel (.whl), a directory or a shared object (.so); got %s' % path)

    result = dict(changed=False, judged=[], reasons=[], notes=[])
    reasons = []
    needs = params['needs']
    scratch = None
    try:
        if path:
            if os.path.isdir(path):
                objects = shared_objects_in(path)
            elif path.endswith('.whl'):
                result['wheel'] = wheel_info(module, path)
                objects, scratch = unpack(module, path, params['unpack_dir'])
            else:
                objects = [(os.path.basename(path), path)]
            needs = read_needs(module, objects)
            needs['wheel'] = result.get('wheel') or {}
            result['abi_needs'] = needs
            if targets:
                result['arch'], found = judge_arch(module, objects, targets, params['scope'],
                                                   params['require_arch_specific'])
                result['judged'].append('arch')
                result['notes'] = arch_audit.plain_only_notes(result['arch'])
                reasons.extend(found)
            else:
                result['arch'] = {'judged': False, 'why': 'no targets given'}
        else:
            result['wheel'] = needs.get('wheel') or {}
            result['arch'] = {'judged': False, 'why': 'judged where the wheel was read (needs given)'}
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)

    if params['python']:
        torch = find_torch(module, params['python'])
        if not torch.get('torch_dir'):
            result['abi'] = {'judged': True, 'torch_version': None, 'missing': [], 'libraries': []}
            reasons.append('there is no torch in the venv of %s' % params['python'])
        else:
            result['abi'], found = judge_abi(needs, torch, params['show'])
            reasons.extend(found)
        result['judged'].append('abi')
        tags = (result.get('wheel') or {}).get('tags') or []
        if tags and not any(tag_fits(tag, torch['python_tag'], torch['machine']) for tag in tags):
            reasons.append('the wheel\'s tags %s do not install on %s on %s'
                           % (', '.join(tags), torch['python_tag'], torch['machine']))
        pin = (result.get('wheel') or {}).get('requires_torch')
        named = torch_pin_reason(pin, result['abi']['torch_version']) if result['abi'].get('torch_version') else None
        if reasons and named:
            reasons.append(named)
    else:
        result['abi'] = {'judged': False, 'why': 'no python given (the venv whose torch to judge against)'}
    result['reasons'] = reasons
    result['fits'] = not reasons and result['judged'] == ['arch', 'abi']
    if reasons and params['fail']:
        module.fail_json(msg='the wheel does not fit: ' + ' | '.join(reasons), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
