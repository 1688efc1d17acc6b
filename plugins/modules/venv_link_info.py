#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: venv_link_info
short_description: Read the stable venv path, the venv it points at and its activation history
version_added: 0.2.0
description:
  - Reads, in one module run, what the P(gpufleet.inference.verify#role) role needs before it
    verifies or switches a venv - the stable path (for example C(~/ml-env)), the venv it links
    to, the activation history kept beside it (C(.ml-env.history), one venv per line, oldest
    first), and whether the venv to verify has an interpreter.
  - Fails when the stable path exists and is not a symlink (a venv made by hand), naming it;
    the collection manages that path as a link to a fingerprinted venv. With O(adopt), a venv
    directory there is accepted as the active venv (P(gpufleet.inference.venv_adopt#module)
    moves it aside when the stable path is switched); a directory that is not a venv still fails.
  - Read-only; never reports a change.
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  link:
    description:
      - The stable path, absolute or under C(~/) of the connecting user.
    type: str
    required: true
  venv:
    description:
      - The venv to look at, absolute or under C(~/). Empty means the venv the stable path points at.
    type: str
    default: ''
  markers:
    description:
      - JSON files to read from the active venv, relative paths without C(..), for example
        C(gpufleet-deployed.json) (the deploy key deploy.yml records); returned in RV(markers).
    type: list
    elements: str
    default: []
  exists:
    description:
      - Absolute paths whose existence to report in RV(exists), read in the same run (deploy.yml's reach step asks
        for the host lock directory, C(gpufleet_host_lock_path)).
    type: list
    elements: str
    default: []
  adopt:
    description:
      - Accept a hand-built venv directory (with C(pyvenv.cfg) and C(bin/python)) at the stable
        path as the active venv, for C(gpufleet_adopt_existing_venv). Without it such a directory fails.
    type: bool
    default: false
extends_documentation_fragment:
  - gpufleet.inference.read_only
seealso:
  - module: gpufleet.inference.torch_verify
'''

EXAMPLES = r'''
- name: Find the active venv and its history
  gpufleet.inference.venv_link_info:
    link: ~/ml-env
  register: venv_state

- name: Show it
  ansible.builtin.debug:
    msg: "{{ venv_state.active_venv or 'no active venv' }}, {{ venv_state.history | length }} in the history"
'''

RETURN = r'''
link_path:
  description: The stable path with C(~) expanded.
  returned: always
  type: str
  sample: /home/deploy/ml-env
history_path:
  description: The activation history file beside the stable path.
  returned: always
  type: str
  sample: /home/deploy/.ml-env.history
link_exists:
  description: Whether the stable path exists (as a symlink, or as a venv directory with O(adopt)).
  returned: always
  type: bool
link_is_directory:
  description: Whether the stable path is a hand-built venv directory (only with O(adopt); then RV(active_venv) is that path).
  returned: always
  type: bool
active_venv:
  description: Where the stable path points, resolved to a real path, empty when there is no link.
  returned: always
  type: str
  sample: /home/deploy/ml-env-2026-11-20-3f2a9c1e
history:
  description: The venvs activated before, oldest first, the active one last.
  returned: always
  type: list
  elements: str
target:
  description: The venv to verify - O(venv) with C(~) expanded, or RV(active_venv); no trailing slash.
  returned: always
  type: str
target_python:
  description: Whether C(<target>/bin/python) exists.
  returned: always
  type: bool
markers:
  description: Each of O(markers) parsed, V(null) when missing or not JSON; empty without an active venv.
  returned: always
  type: dict
  sample: {"gpufleet-deployed.json": {"key": "3f2a9c1e", "venv": "/home/deploy/ml-env-2026-11-20-3f2a9c1e"}}
exists:
  description: Each of O(exists) - whether something (a file, a directory, a symlink) is there.
  returned: always
  type: dict
  sample: {"/var/lock/gpufleet": false}
'''

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.inference.plugins.module_utils.venv_link import LinkError, resolve


def main():
    module = AnsibleModule(
        argument_spec=dict(
            link=dict(type='str', required=True),
            venv=dict(type='str', default=''),
            markers=dict(type='list', elements='str', default=[]),
            exists=dict(type='list', elements='str', default=[]),
            adopt=dict(type='bool', default=False),
        ),
        supports_check_mode=True,
    )
    try:
        state = resolve(module.params['link'], module.params['venv'], module.params['markers'],
                        adopt=module.params['adopt'])
    except LinkError as exc:
        module.fail_json(msg=str(exc))
    relative = [p for p in module.params['exists'] if not p.startswith('/')]
    if relative:
        module.fail_json(msg='exists takes absolute paths (got %s)' % ', '.join(relative))
    state['exists'] = dict((p, os.path.lexists(p)) for p in module.params['exists'])
    module.exit_json(changed=False, **state)


if __name__ == '__main__':
    main()
