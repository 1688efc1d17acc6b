#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: model_info
short_description: Read and judge the served model's config.json where it lives, on the host
version_added: 0.1.0
description:
  - Reads the model's Hugging Face C(config.json) (and a C(hf_quant_config.json) beside it) on the host, as
    P(gpufleet.inference.torch_verify#module) reads it for the model checks, and judges it the same way - the
    profile of its fields and the shard shapes at O(tp_size).
  - deploy.yml's preflight runs it for a C(gpufleet_model) that is a path, before anything is installed - a
    missing, unreadable or invalid file is refused there, naming C(gpufleet_model) and the path, instead of by
    the verification after the install and the build.
  - Every refusal starts with the variable to change (C(gpufleet_model) or C(gpufleet_tp_size)).
  - Read-only; never reports a change.
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  model:
    description:
      - The path on the host of the model's C(config.json), or of its directory, absolute or under C(~/) of the
        connecting user. A profile the collection ships (for example V(qwen3-30b-a3b)) is judged too, with
        nothing read.
    type: path
    required: true
  tp_size:
    description:
      - Tensor-parallel size the model is served with; it must divide the model's attention heads and
        intermediate sizes the way sglang splits them.
    type: int
    default: 1
extends_documentation_fragment:
  - gpufleet.inference.read_only
seealso:
  - module: gpufleet.inference.torch_verify
'''

EXAMPLES = r'''
- name: Read the model's config.json before the install
  gpufleet.inference.model_info:
    model: /models/Qwen3-30B-A3B
    tp_size: 2
'''

RETURN = r'''
path:
  description: The config.json read, C(~) expanded (empty for a shipped profile).
  returned: always
  type: str
  sample: /models/Qwen3-30B-A3B/config.json
model:
  description: The model as the verification will check it - its name, precision, TP size and shard shapes.
  returned: success
  type: dict
  sample: {"name": "/models/Qwen3-30B-A3B", "precision": "none", "tp": 2}
'''

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.inference.plugins.module_utils import model_profile, model_verify


def config_path(model):
    """The config.json a model path names (the file, or config.json in its directory), '' for a shipped profile;
    and why it cannot be read as such, '' where it can be tried."""
    if model in model_profile.PROFILES:
        return '', ''
    if not model.startswith('/'):
        return '', 'must be a shipped profile (%s) or an absolute or ~/ path of a config.json (got %r)' % (
            ', '.join(sorted(model_profile.PROFILES)), model)
    path = model
    if os.path.isdir(path):
        path = os.path.join(path, 'config.json')
    if not os.path.exists(path):
        return path, '%s does not exist on the host%s' % (
            path, '' if path == model else ' (from %r)' % model)
    if not os.path.isfile(path):
        return path, '%s is not a file: the path of the model\'s config.json or of its directory' % path
    return path, ''


def main():
    module = AnsibleModule(
        argument_spec=dict(
            # a path's ~ expanded by Ansible, a shipped profile's name left as it is
            model=dict(type='path', required=True),
            tp_size=dict(type='int', default=1),
        ),
        supports_check_mode=True,
    )
    model = module.params['model']
    path, problem = config_path(model)
    if problem:
        module.fail_json(msg='%s: %s' % (model_profile.MODEL_VARIABLE, problem), path=path)
    # the verification's own reading (torch_verify's model option): the same files, the same judgment
    resolved, errors = model_verify.resolve({'model': model, 'tp_size': module.params['tp_size']})
    if errors:
        module.fail_json(msg='; '.join(errors), path=path)
    module.exit_json(changed=False, path=path,
                     model=dict((key, resolved[key]) for key in ('name', 'precision', 'tp', 'shapes')))


if __name__ == '__main__':
    main()
