#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: flashinfer_aot
short_description: (internal) build flashinfer JIT modules once, place them in a venv as prebuilt
version_added: 0.3.0
description:
  - Internal to the P(gpufleet.inference.flashinfer#role) role (its C(flashinfer_aot_modules)); its options
    may change in any release.
  - flashinfer compiles a kernel family with nvcc on first use (its JIT). Under C(FLASHINFER_DISABLE_JIT=1),
    the way the model checks run, it loads only prebuilt modules, among them
    C(<flashinfer package>/data/aot/<name>/<name>.so). This module builds named modules with flashinfer's own
    JIT build on a builder, and places them at that path on a host, each checked against the sha256 of the
    build record.
  - Runs a program in the venv's interpreter (O(python) C(-I -c)), so flashinfer is read where it is
    installed.
  - O(action=build) compiles O(modules) for O(arch_list) into O(out) (one C(<name>.so) each and
    C(build.json) with their sha256, sizes and compile seconds). No GPU is needed; nvcc must be on C(PATH)
    or at C(CUDA_HOME) (the task's environment). Reports a change.
  - O(action=install) checks every file of O(src) against its record and against this venv's flashinfer
    version, O(cuda_version) and O(arch_list) before it places the first one, so a wrong artifact changes
    nothing; then places those whose sha256 differs, removes the modules an earlier install placed that
    O(modules) no longer names, and writes C(gpufleet-aot.json) beside them. With O(modules) empty it only
    removes. Reports a change only when a file changed.
  - O(action=status) reads what is placed; never a change.
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  python:
    description: The venv's interpreter, an absolute path.
    type: path
    required: true
  action:
    description: What to do.
    type: str
    choices: [build, install, status]
    default: status
  modules:
    description: flashinfer JIT module names, for example V(fused_moe_90), V(norm).
    type: list
    elements: str
    default: []
  arch_list:
    description: Target CUDA architectures as C(FLASHINFER_CUDA_ARCH_LIST) takes them, for example V(9.0a).
    type: list
    elements: str
    default: []
  cuda_version:
    description: The CUDA release the modules are built with (nvcc's C(release X.Y)), kept in the record.
    type: str
    default: ''
  out:
    description: Where O(action=build) writes the modules and the record.
    type: path
  workspace:
    description: flashinfer's JIT workspace for O(action=build) (C(FLASHINFER_WORKSPACE_BASE)).
    type: path
  src:
    description: The artifact directory O(action=install) reads; required unless O(modules) is empty.
    type: path
  key:
    description: The artifact's key, written to the marker.
    type: str
    default: ''
attributes:
  check_mode:
    description: O(action=install) reports what it would place or remove and writes nothing; O(action=build)
      does nothing and says so; O(action=status) runs.
    support: full
  diff_mode:
    description: Reports no differences.
    support: none
'''

EXAMPLES = r'''
- name: Build fused_moe_90 once on the builder
  gpufleet.inference.flashinfer_aot:
    python: /home/deploy/ml-env/bin/python
    action: build
    modules: [fused_moe_90]
    arch_list: ["9.0a"]
    cuda_version: "13.0"
    out: /home/deploy/.cache/gpufleet/flashinfer_aot/3f2a9c1d
    workspace: /home/deploy/.cache/gpufleet/flashinfer_aot/ws
  environment:
    CUDA_HOME: /usr/local/cuda-13.0
'''

RETURN = r'''
record:
  description: The build record (action build).
  returned: action build
  type: dict
placed:
  description: Modules whose file was (or in check mode would be) written.
  returned: action install
  type: list
  elements: str
removed:
  description: Modules an earlier install placed that were (or would be) removed.
  returned: action install
  type: list
  elements: str
marker:
  description: What is placed (flashinfer_version, cuda_version, arch_list, modules, sha256, key).
  returned: action install and status
  type: dict
intact:
  description: Whether every module of the marker is there with its sha256, for this flashinfer version.
  returned: action status
  type: bool
flashinfer_version:
  description: The venv's flashinfer-python version.
  returned: action status
  type: str
progress:
  description: The program's progress lines (one per module built).
  returned: always
  type: list
  elements: str
'''

import json

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.inference.plugins.module_utils import flashinfer_aot
from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import module_source


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type='path', required=True),
            action=dict(type='str', choices=['build', 'install', 'status'], default='status'),
            modules=dict(type='list', elements='str', default=[]),
            arch_list=dict(type='list', elements='str', default=[]),
            cuda_version=dict(type='str', default=''),
            out=dict(type='path'),
            workspace=dict(type='path'),
            src=dict(type='path'),
            key=dict(type='str', default='', no_log=False),
        ),
        required_if=[('action', 'build', ('out', 'workspace'))],
        supports_check_mode=True,
    )
    params = dict(module.params)
    action = params['action']
    if action != 'status':
        errors = flashinfer_aot.module_errors(params['modules'], 'modules')
        if params['modules'] or action == 'build':
            errors += flashinfer_aot.arch_errors(params['arch_list'], 'arch_list')
        if action == 'build' and not params['modules']:
            errors.append('modules: expected at least one module to build, found none')
        if action == 'install' and params['modules'] and not params['src']:
            errors.append('src: expected the artifact directory to place %s from, found none'
                          % ', '.join(params['modules']))
        if errors:
            module.fail_json(msg='; '.join(errors))
    if action == 'build' and module.check_mode:
        module.exit_json(changed=True, progress=[], msg='check mode: would build %s for %s'
                         % (', '.join(params['modules']), ' '.join(params['arch_list'])))
    params['check_mode'] = module.check_mode
    module.run_command_environ_update = {'LANGUAGE': 'C', 'LC_ALL': 'C'}
    argv = [params['python'], '-I', '-c', module_source(flashinfer_aot), json.dumps(params, sort_keys=True)]
    rc, out, err = module.run_command(argv)
    progress = [line for line in (err or '').splitlines() if line.startswith(('building ', 'built '))]
    lines = [line for line in (out or '').splitlines() if line.strip()]
    try:
        result = json.loads(lines[-1])
    except (IndexError, ValueError):
        module.fail_json(msg='%s: expected a JSON line from %s, found none (rc %s)' % (action, params['python'], rc),
                         rc=rc, stdout=out, stderr=err)
    if rc != 0 or result.pop('failed', False):
        module.fail_json(msg=result.get('msg') or 'rc %s' % rc, rc=rc, stderr=err, progress=progress)
    module.exit_json(progress=progress, **result)


if __name__ == '__main__':
    main()
