#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: arch_audit
short_description: Audit which GPU targets a built CUDA artifact carries, from cuobjdump
version_added: 0.1.0
description:
  - Lists the device code of every shared object in a built artifact with C(cuobjdump) and compares the
    targets found with the ones requested, so that a build is proven, from what it produced, to run on the
    fleet's GPUs and to carry no code for GPUs the fleet does not have.
  - O(path) is a wheel (a zip, whose shared objects are extracted to a temporary directory), a directory
    (searched recursively) or one shared object. Shared objects are the files named C(*.so) or C(*.so.N).
  - Per shared object, C(cuobjdump --list-elf) lists its SASS (cubins) and C(cuobjdump --list-ptx) its PTX, as
    argument lists with a C locale. C(--list-elf) names a family-specific cubin (C(sm_100f)) like the plain one
    (C(x.1.sm_100.cubin)), so where it lists a plain SASS target of major 10 or later, the fatbin headers
    (C(cuobjdump FILE) without options, C(arch = sm_100f)) are read as well and give the SASS targets.
  - A requested target (a C(TORCH_CUDA_ARCH_LIST) entry) is covered by SASS that the GPU runs, or by PTX that
    the driver compiles for it. SASS - that of exactly the target (C(sm_90a) for V(9.0a)); family-specific
    SASS C(sm_XWf) for every target of the same major X with minor Y >= W, whatever its suffix (C(sm_100f)
    covers V(10.0), V(10.0a), V(10.3), V(10.3a), V(10.3f)); and for an C(a) target, plain SASS of its GPU
    (C(sm_90) for V(9.0a)), which lacks the target's arch-specific instructions - said in RV(plain_only)
    and RV(notes), and not counted with O(require_arch_specific). Arch-specific SASS covers no plain target
    (C(sm_90a) does not cover V(9.0)). PTX - for a plain V(X.Y) plain PTX C(compute_Z) with Z <= XY, for
    V(X.Ya) exactly C(compute_XYa), for V(X.Yf) C(compute_XWf) of the same major with W <= Y.
  - A shared object without device code (cuobjdump says C(does not contain device code); a host-only
    library such as a CPU op library) misses nothing. When no shared object of the artifact has device code,
    every requested target is missing for the artifact as a whole (file V(*)).
  - Read-only; never reports a change.
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  path:
    description:
      - The built artifact, on the host where the module runs - a wheel (C(.whl)), a directory or a shared object.
    type: path
    required: true
  targets:
    description:
      - The targets the artifact must carry code for, as C(TORCH_CUDA_ARCH_LIST) entries - C(MAJOR.MINOR) with
        an optional C(a) (architecture-specific) or C(f) (family-specific) suffix, for example V(9.0a),
        V(12.0a), V(10.0f), V(8.9).
      - An entry that is not a known CUDA target fails the module and lists the allowed ones.
    type: list
    elements: str
    required: true
  cuobjdump:
    description:
      - Path of C(cuobjdump). By default C(<cuda_home>/bin/cuobjdump) when O(cuda_home) is set, else
        C(cuobjdump) looked up on E(PATH) and in C(/usr/local/cuda/bin).
      - Mutually exclusive with O(cuda_home).
    type: path
  cuda_home:
    description:
      - The CUDA toolkit whose C(bin/cuobjdump) to use, normally the one the build used.
    type: path
  fail_on_missing:
    description:
      - Fail when a requested target is missing, with a message that names every shared object and target.
    type: bool
    default: true
  fail_on_unwanted:
    description:
      - Fail when a shared object carries SASS or PTX that no requested target needs (build time spent on
        GPUs the fleet does not have).
    type: bool
    default: false
  require_arch_specific:
    description:
      - An C(a) target (V(9.0a)) is covered only by its arch-specific or family-specific code (C(sm_90a),
        C(compute_90a), C(sm_100f) for V(10.0a)), not by plain SASS of its GPU (C(sm_90)), which runs there
        without the arch-specific instructions (wgmma and the like) that the fast kernels need.
    type: bool
    default: false
extends_documentation_fragment:
  - gpufleet.inference.read_only
notes:
  - Only the executable fatbin of a shared object is read (cuobjdump's default); the relocatable device code
    that C(-rdc) leaves for a later device link is not what the loader runs.
  - cuobjdump of the CUDA toolkit that built the artifact, or a newer one, knows every target in it; an older
    cuobjdump may not read the fatbin of a newer nvcc.
seealso:
  - module: gpufleet.inference.gpu_facts
  - plugin: gpufleet.inference.cuda_arch_list
    plugin_type: filter
  - name: cuobjdump
    description: The CUDA binary utilities.
    link: https://docs.nvidia.com/cuda/cuda-binary-utilities/
'''

EXAMPLES = r'''
- name: The sgl-kernel wheel carries code for exactly the fleet's GPUs
  gpufleet.inference.arch_audit:
    path: "{{ sgl_kernel_wheel }}"
    targets: "{{ gpufleet_gpu.arch_list }}"
    cuda_home: "{{ sgl_kernel_cuda_home }}"
    fail_on_unwanted: true

- name: Report, without failing, what a build tree holds
  gpufleet.inference.arch_audit:
    path: /srv/build/sgl-kernel/build
    targets: ["9.0a", "10.0f", "12.0a"]
    cuobjdump: /usr/local/cuda-13.0/bin/cuobjdump
    fail_on_missing: false
  register: audit

- name: Show the targets that are missing
  ansible.builtin.debug:
    msg: "{{ audit.missing | map(attribute='target') | unique | join(', ') }}"
  when: audit.missing | length > 0
'''

RETURN = r'''
requested:
  description: The requested targets, validated and deduplicated, in the order given.
  returned: success or a failed audit
  type: list
  elements: str
  sample: ["9.0a", "12.0a"]
files:
  description: One entry per shared object, by path.
  returned: success or a failed audit
  type: list
  elements: dict
  contains:
    file:
      description: Path relative to the wheel, the directory, or the directory of the single shared object.
      type: str
      sample: sgl_kernel/common_ops.abi3.so
    device_code:
      description: Whether the shared object has any device code. V(false) for a host-only library.
      type: bool
      sample: true
    sass:
      description: Targets of its SASS (cubins), lowest first.
      type: list
      elements: str
      sample: ["sm_90a", "sm_120a"]
    ptx:
      description: Targets of its PTX, lowest first.
      type: list
      elements: str
      sample: ["compute_90"]
missing:
  description: Requested targets that a shared object with device code cannot run. File V(*) when no shared object has device code.
  returned: success or a failed audit
  type: list
  elements: dict
  contains:
    file:
      description: Path of the shared object (as in RV(files)), or V(*).
      type: str
      sample: sgl_kernel/common_ops.abi3.so
    target:
      description: The requested target (an O(targets) entry).
      type: str
      sample: "9.0a"
  sample: [{"file": "sgl_kernel/common_ops.abi3.so", "target": "9.0a"}]
unwanted:
  description: SASS and PTX targets present that no requested target needs.
  returned: success or a failed audit
  type: list
  elements: dict
  contains:
    file:
      description: Path of the shared object (as in RV(files)).
      type: str
      sample: sgl_kernel/common_ops.abi3.so
    target:
      description: The cuobjdump target name, C(sm_XY) for SASS, C(compute_XY) for PTX.
      type: str
      sample: sm_100a
  sample: [{"file": "sgl_kernel/common_ops.abi3.so", "target": "sm_100a"}]
plain_only:
  description:
    - Requested C(a) targets that a shared object runs on plain SASS of the target's GPU alone (no C(a) or
      C(f) SASS, no C(a) PTX for it) - it runs, without the target's arch-specific instructions. Empty with
      O(require_arch_specific), where those targets are in RV(missing) instead.
  returned: success or a failed audit
  type: list
  elements: dict
  contains:
    file:
      description: Path of the shared object (as in RV(files)).
      type: str
      sample: sgl_kernel/infllm_ops.abi3.so
    target:
      description: The requested target.
      type: str
      sample: "9.0a"
    sass:
      description: The plain SASS that runs it.
      type: str
      sample: sm_90
  sample: [{"file": "sgl_kernel/infllm_ops.abi3.so", "target": "9.0a", "sass": "sm_90"}]
notes:
  description: One sentence per RV(plain_only) entry.
  returned: success or a failed audit
  type: list
  elements: str
  sample: ["sgl_kernel/infllm_ops.abi3.so runs on 9.0a through plain SASS sm_90, without the arch-specific instructions of sm_90a"]
compiled:
  description: Every target found in the artifact, lowest first, SASS before PTX of the same target.
  returned: success or a failed audit
  type: list
  elements: str
  sample: ["sm_90a", "compute_90a", "sm_120a"]
cuobjdump:
  description: The cuobjdump that was run.
  returned: success or a failed audit
  type: str
  sample: /usr/local/cuda-13.0/bin/cuobjdump
'''

import os
import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.inference.plugins.module_utils import arch_audit
from ansible_collections.gpufleet.inference.plugins.module_utils.cuobjdump import (
    SHARED_OBJECT_RE, extract_wheel, find_cuobjdump, list_targets, shared_objects_in)
from ansible_collections.gpufleet.inference.plugins.module_utils.gpu import C_LOCALE


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            targets=dict(type='list', elements='str', required=True),
            cuobjdump=dict(type='path'),
            cuda_home=dict(type='path'),
            fail_on_missing=dict(type='bool', default=True),
            fail_on_unwanted=dict(type='bool', default=False),
            require_arch_specific=dict(type='bool', default=False),
        ),
        mutually_exclusive=[('cuobjdump', 'cuda_home')],
        supports_check_mode=True,
    )
    module.run_command_environ_update = C_LOCALE
    params = module.params
    try:
        requested = arch_audit.normalize_targets(params['targets'])
    except ValueError as exc:
        module.fail_json(msg='targets: %s' % exc)
    if not requested:
        module.fail_json(msg='targets: must name at least one target (got [])')
    path = params['path']
    if not os.path.exists(path):
        module.fail_json(msg='path: %s does not exist' % path)
    if os.path.isfile(path) and not (path.endswith('.whl') or SHARED_OBJECT_RE.search(path)):
        module.fail_json(msg='path: must be a wheel (.whl), a directory or a shared object (.so); got %s' % path)
    cuobjdump = find_cuobjdump(module)

    scratch = None
    try:
        if os.path.isdir(path):
            objects = shared_objects_in(path)
        elif path.endswith('.whl'):
            scratch = tempfile.mkdtemp(prefix='arch_audit_', dir=module.tmpdir)
            objects = extract_wheel(module, path, scratch)
        else:
            objects = [(os.path.basename(path), path)]
        listings = dict((name, list_targets(module, cuobjdump, name, full)) for name, full in objects)
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)

    report = arch_audit.audit(requested, listings, params['require_arch_specific'])
    result = dict(changed=False, cuobjdump=cuobjdump, notes=arch_audit.plain_only_notes(report), **report)
    problems = []
    if params['fail_on_missing'] and report['missing']:
        problems.append(arch_audit.missing_message(report, path, params['require_arch_specific']))
    if params['fail_on_unwanted'] and report['unwanted']:
        problems.append(arch_audit.unwanted_message(report))
    if problems:
        module.fail_json(msg=' | '.join(problems), **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
