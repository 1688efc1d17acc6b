#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name (plugins/action/fleet_reach.py),
# on the controller, which runs gpufleet.inference.venv_link_info on the host; this file holds its documentation.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: fleet_reach
short_description: (internal) reach a host, read its stable path and deploy key, and choose deploy.yml's path, in one task
version_added: 0.4.0
description:
  - Internal to the collection's playbooks and roles (one step of them); its options may change in any
    release. The modules for your own playbooks are M(gpufleet.inference.gpu_facts),
    M(gpufleet.inference.torch_verify), M(gpufleet.inference.venv_link_info), M(gpufleet.inference.arch_audit) and
    M(gpufleet.inference.patch_rules).
  - The first task of deploy.yml and rollback.yml on each host (the fleet role's C(reach.yml)).
  - Runs gpufleet.inference.venv_link_info on the host once - the stable path, the active venv and the deploy key
    recorded in it (C(gpufleet-deployed.json)). A host that cannot be reached does not fail the task - RV(record)
    says unreachable (stage C(connect)) so that the fleet report still covers it. The module's own failure (a
    stable path that is not a symlink) does not fail it either (RV(link_failed)); the validation names it later.
  - Then, on the controller, the deploy key of the host (filter gpufleet.inference.deploy_key) against the
    recorded one - RV(fast) is V(true) when they are the same and the run walks the whole chain (no C(--tags), no
    C(--skip-tags) that names a tag of the chain, no O(full_run)).
  - In the same module run, whether the host lock directory O(lock_path) is there - RV(take_lock) is V(false) only
    on the fast path of a host where it is not (that path only verifies, as verify.yml does, which takes no lock).
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  link:
    description: The stable path (C(gpufleet_venv_link)).
    type: raw
    required: true
  adopt:
    description: A hand-built venv directory at the stable path counts as the active venv (it has no deploy key).
    type: raw
    default: false
  mode:
    description: The playbook - V(rollback) has no fast path and computes no deploy key.
    type: str
    required: true
    choices: [deploy, rollback]
  full_run:
    description: Walk the whole chain whatever the recorded key (C(gpufleet_full_run)).
    type: raw
    default: false
  first_stage:
    description: The stage a failure after this task is recorded at, until a stage says otherwise.
    type: str
    default: connect
  root:
    description: The collection's root, whose code the deploy key hashes.
    type: path
    required: true
  lock_path:
    description:
      - The host lock directory (C(gpufleet_host_lock_path)). Empty, or not an absolute path (the lock step refuses
        that, naming it), and the run takes the lock step whatever the path.
    type: str
    default: ''
attributes:
  action:
    description: The work is done by the action plugin of the same name.
    support: full
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: It only reads.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
seealso:
  - module: gpufleet.inference.venv_link_info
'''

EXAMPLES = r'''
- name: Reach | Connect to the host, read its stable path and deploy key, choose the path
  gpufleet.inference.fleet_reach:
    link: "{{ gpufleet_venv_link }}"
    mode: deploy
    root: "{{ playbook_dir | dirname }}"
    lock_path: /var/lock/gpufleet
  check_mode: false
  register: fleet_reach
'''

RETURN = r'''
record:
  description: The host's first record for the fleet report - C(running), or C(unreachable) with its message.
  returned: always
  type: dict
  sample: {"status": "running"}
stage:
  description: The stage a failure from here on is recorded at - C(connect), C(verify) on the fast path, else O(first_stage).
  returned: always
  type: str
deploy_key:
  description: The host's deploy key (empty for O(mode=rollback) and an unreachable host).
  returned: always
  type: str
fast:
  description: The active venv carries this run's deploy key and the run may take the fast path.
  returned: always
  type: bool
whole_run:
  description:
    - The run walks the whole chain - no C(--tags), and no C(--skip-tags) that names one of the chain's tags (its
      stages, the roles' C(<role>_<phase>) tags, C(always), C(tagged), C(untagged)); skipping tags the chain does
      not use (molecule's C(notest)) leaves nothing out. Only such a run records the key.
  returned: always
  type: bool
take_lock:
  description:
    - The run takes the host lock on this host - always for O(mode=rollback) and the full chain; on the fast path
      only when a lock is there (a live run's is waited for or refuses the run, a stale one is broken).
  returned: always
  type: bool
host_unreachable:
  description: The host could not be reached.
  returned: always
  type: bool
link_failed:
  description: venv_link_info failed on the host (its C(msg) says why); left to the validation to name.
  returned: always
  type: bool
markers:
  description: The markers read from the active venv, as venv_link_info returns them.
  returned: when the host was reached
  type: dict
'''
