#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: venv_adopt
short_description: (internal) move a hand-built venv off the stable path and link the stable path to a verified venv
version_added: 0.1.0
description:
  - Internal to the collection's playbooks and roles (one step of them); its options may change in any
    release. The modules for your own playbooks are M(gpufleet.inference.gpu_facts),
    M(gpufleet.inference.torch_verify), M(gpufleet.inference.venv_link_info), M(gpufleet.inference.arch_audit) and
    M(gpufleet.inference.patch_rules).
  - For C(gpufleet_adopt_existing_venv). When the stable path (for example C(~/ml-env)) is a real
    venv directory, renames it to O(destination) beside it and makes the stable path a symlink to
    O(target). Renames only, in the same folder; the hand-built venv is never copied or deleted.
  - The new link is created beside the stable path first, so the stable path is missing only
    between two C(rename(2)) calls.
  - A stable path that is a symlink already (a second run) is no change.
  - Fails, changing nothing, when the directory is not a Python venv (no C(pyvenv.cfg) or no
    C(bin/python); the message lists what it holds), when O(destination) exists, or when O(target)
    has no C(bin/python).
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  link:
    description:
      - The stable path, absolute or under C(~/) of the connecting user.
    type: str
    required: true
  target:
    description:
      - The verified venv the stable path is to point at, absolute or under C(~/).
      - Required unless in check mode (deploy.yml's preflight checks the directory and the
        destination before the new venv exists).
    type: str
    default: ''
  destination:
    description:
      - Where the hand-built venv goes, in the same folder as O(link). Empty means
        C(<link>-adopted-<YYYYMMDD>) with the host's date.
    type: str
    default: ''
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: Reports what it would move, and where, without moving it (O(target) may not exist yet).
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
seealso:
  - module: gpufleet.inference.venv_link_info
'''

EXAMPLES = r'''
- name: Adopt the hand-built ~/ml-env and point it at the verified venv
  gpufleet.inference.venv_adopt:
    link: ~/ml-env
    target: /home/deploy/ml-env-2026-12-01-3f2a9c1e
  register: adoption

- name: Say where it went
  ansible.builtin.debug:
    msg: "{{ adoption.moved_from }} is now {{ adoption.moved_to }}"
  when: adoption is changed
'''

RETURN = r'''
moved_from:
  description: The stable path the hand-built venv was moved from; empty when nothing was moved.
  returned: always
  type: str
  sample: /home/deploy/ml-env
moved_to:
  description: Where the hand-built venv is now; empty when nothing was moved.
  returned: always
  type: str
  sample: /home/deploy/ml-env-adopted-20261201
link_to:
  description: The venv the stable path points at (or would, in check mode).
  returned: always
  type: str
'''

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.inference.plugins.module_utils.venv_link import (
    LinkError,
    adopt,
    adopted_path,
    expand_path,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            link=dict(type='str', required=True),
            target=dict(type='str', default=''),
            destination=dict(type='str', default=''),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        link_path = expand_path('link', params['link'])
        target = expand_path('target', params['target']) if params['target'] or not module.check_mode else ''

        destination = (expand_path('destination', params['destination']) if params['destination']
                       else adopted_path(link_path, time.strftime('%Y%m%d')))
        result = adopt(link_path, target, destination, check_mode=module.check_mode)
    except LinkError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == '__main__':
    main()
