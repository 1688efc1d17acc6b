#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Run through the action plugin of the same name (plugins/action/host_lock.py),
# which builds O(holder) and O(live) on the controller.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: host_lock
short_description: (internal) take or release the per-host run lock of deploy.yml and rollback.yml
version_added: 0.3.0
description:
  - Internal to the collection's playbooks and roles (one step of them); its options may change in any
    release. The modules for your own playbooks are M(gpufleet.inference.gpu_facts),
    M(gpufleet.inference.torch_verify), M(gpufleet.inference.venv_link_info), M(gpufleet.inference.arch_audit) and
    M(gpufleet.inference.patch_rules).
  - One gpufleet run at a time per host. The lock is a directory (O(path), for example
    C(/var/lock/gpufleet)) holding C(holder.json), the record of the run that holds it. It is
    created under a temporary name with its record inside and renamed into place, so it never
    exists without its record and two runs can never both take it.
  - With O(state=acquire), takes the lock for the run of O(holder). A lock this run holds
    already is taken again. A lock another run holds is waited for, at most O(wait) seconds, and
    then refused, naming its holder (RV(holder_text)) and why it counts as alive (RV(reason)),
    unless it is stale - then it is broken (renamed aside, removed) and taken.
  - >-
    A lock is stale when its holder ran on this very controller (same boot and pid namespace,
    per O(live)) and its ansible-playbook process is gone (a killed run); when it is older than
    O(stale_after) seconds; or when O(force=true). A lock whose holder cannot be checked (another
    controller) is alive until then.
  - With O(state=release), removes the lock if, and only if, the run O(run_id) holds it.
  - Taking or releasing the run's own lock is the run's bookkeeping, not a change to the host;
    only breaking a stale lock reports a change.
  - The action plugin of the same name runs on the controller, builds O(holder) and O(live) for
    this run (its run id is the same for every host of one C(ansible-playbook) run) and runs this
    module on the host once; a task sets neither of them.
  - Through the action, a lock another live run holds fails the task, naming the holder and why it counts as alive,
    then O(refuse_hint) (check mode is not refused by a stale lock that a real run would break). A stale lock
    broken, a wait, a stale lock left by check mode, and a release that found the lock was not this run's any more
    are said as warnings.
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  path:
    description:
      - The lock directory, an absolute path. Its parent is created when missing (not in check mode).
    type: str
    required: true
  state:
    description:
      - V(acquire) takes the lock, V(release) removes it.
    type: str
    choices: [acquire, release]
    default: acquire
  holder:
    description:
      - The holder record of this run, written to C(holder.json) - C(run_id) (required), C(controller)
        (C(hostname), C(machine_id), C(boot_id), C(pid_ns)), C(pid) and C(pid_start) (the
        ansible-playbook process and its start in clock ticks since boot), C(user), C(playbook) and
        C(started).
      - Filled by the action plugin; needed with O(state=acquire).
    type: dict
  live:
    description:
      - The controller's live snapshot - C(boot_id), C(pid_ns), C(ticks_now) (clock ticks since boot)
        and C(pids) (V([pid, start ticks]) of every running ansible-playbook process), against which
        a holder from the same controller is judged.
      - Filled by the action plugin.
    type: dict
    default: {}
  run_id:
    description:
      - The run whose lock O(state=release) removes; the action plugin defaults it to this run's id.
    type: str
  playbook:
    description:
      - The playbook the holder record names (C(holder.playbook)), for example V(deploy.yml).
      - The action plugin's default is the playbook files given to C(ansible-playbook).
    type: str
  stale_after:
    description:
      - Seconds after which any lock is stale, by the age of its C(holder.json) on the host's clock.
        V(0) never breaks a lock by its age.
    type: int
    default: 43200
  wait:
    description:
      - Seconds to wait for a live holder to release the lock (polled every 2 seconds) before refusing.
    type: int
    default: 0
  force:
    description:
      - Break a lock another run holds, alive or not (the operator's override, C(gpufleet_host_lock_break)).
    type: bool
    default: false
  refuse_hint:
    description:
      - What the refusal says after the holder (how to wait for it or break it). Read by the action plugin, which
        fails the task when another live run holds the lock; the module itself only reports RV(held).
    type: str
    default: ""
  path_name:
    description:
      - The variable O(path) came from, named by the action plugin's refusal of a path that is not absolute, before
        the host is reached.
    type: str
    default: path
attributes:
  action:
    description: The action plugin of the same name builds this run's holder record on the controller.
    support: full
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: Only reads the lock - it is neither taken, broken nor removed; RV(stale) says whether a real run would break it.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
notes:
  - The host side needs the standard library only (Python 3.6 or later).
  - The default C(/var/lock/gpufleet) lies on tmpfs, so a reboot frees the lock; taking it there needs root.
'''

EXAMPLES = r'''
- name: Take the host lock
  gpufleet.inference.host_lock:
    path: /var/lock/gpufleet
    playbook: deploy.yml
    wait: 600
    # a live holder fails the task: its record, why it is alive, then this
    refuse_hint: Wait for it to finish, or break it with -e gpufleet_host_lock_break=true.
  become: true

- name: Release it at the end (only this run's own lock is removed)
  gpufleet.inference.host_lock:
    path: /var/lock/gpufleet
    state: release
  become: true
'''

RETURN = r'''
refused:
  description: Whether another live run holds the lock, so that the task failed (set by the action plugin).
  returned: state is acquire
  type: bool
  sample: false
acquired:
  description: Whether this run holds the lock now (V(false) in check mode unless it held it already).
  returned: state is acquire
  type: bool
  sample: true
held:
  description:
    - With O(state=acquire), whether another run held the lock at the last look.
    - With O(state=release), whether the lock is there after the task.
  returned: always
  type: bool
  sample: false
stale:
  description: Whether the other run's lock counts as stale (see RV(reason)).
  returned: state is acquire
  type: bool
  sample: false
broke:
  description: The record of the stale lock that was broken, with its C(age) and the C(reason); V(null) when none was.
  returned: state is acquire
  type: dict
  sample: {"run_id": "0c4e...", "pid": 4242, "age": 7200, "reason": "its ansible-playbook process 4242 is no longer running on this controller"}
waited:
  description: Seconds waited for the lock.
  returned: state is acquire
  type: int
  sample: 0
age:
  description: Seconds since the lock's record was written (host clock); V(null) when there is no lock.
  returned: state is acquire
  type: int
  sample: 12
holder:
  description: The record of the run that holds the lock (this run's when it took it), V({}) when there is none.
  returned: always
  type: dict
  sample: {"run_id": "0c4e2b...", "controller": {"hostname": "ctl1"}, "pid": 4242, "playbook": "deploy.yml",
    "started": "2026-03-08T12:00:00Z", "user": "ops"}
holder_text:
  description: RV(holder) in words.
  returned: state is acquire
  type: str
  sample: since 2026-03-08T12:00:00Z (controller ctl1, pid 4242, playbook deploy.yml, run 0c4e2b9d1a7f)
reason:
  description: Why another run's lock is alive or stale; empty when no other run held it.
  returned: state is acquire
  type: str
  sample: its process 4242 is running on this controller
message:
  description: What happened, in one line.
  returned: state is acquire
  type: str
  sample: host lock /var/lock/gpufleet taken by run 0c4e2b9d1a7f
released:
  description: Whether the lock was removed.
  returned: state is release
  type: bool
  sample: true
ours:
  description: Whether the run O(run_id) held the lock.
  returned: state is release
  type: bool
  sample: true
check:
  description: Whether the module ran in check mode (and so changed nothing).
  returned: always
  type: bool
  sample: false
path:
  description: The lock directory.
  returned: state is acquire
  type: str
  sample: /var/lock/gpufleet
run_id:
  description: The run id the action plugin used - this run's, or O(run_id).
  returned: always
  type: str
  sample: 0c4e2b9d1a7f4c3e8b5a6d7e8f901234
'''

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.inference.plugins.module_utils.host_lock import acquire, release


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='str', required=True),
            state=dict(type='str', choices=['acquire', 'release'], default='acquire'),
            holder=dict(type='dict'),
            live=dict(type='dict', default={}),
            run_id=dict(type='str'),
            stale_after=dict(type='int', default=43200),
            wait=dict(type='int', default=0),
            force=dict(type='bool', default=False),
            playbook=dict(type='str'),
            # the action's: what its refusal says after the holder
            refuse_hint=dict(type='str', default=''),
            path_name=dict(type='str', default='path'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    path = params['path']
    if not os.path.isabs(path):
        module.fail_json(msg='path must be absolute (got %r)' % path, rc=2)
    try:
        if params['state'] == 'release':
            if not params['run_id']:
                module.fail_json(msg='state=release needs the run_id of the lock to remove', rc=2)
            result = release(path, params['run_id'], check=module.check_mode)
            module.exit_json(changed=False, **result)
        holder = params['holder'] or {}
        if not holder.get('run_id'):
            module.fail_json(msg='holder needs a run_id', rc=2)
        if params['playbook']:
            holder = dict(holder, playbook=params['playbook'])
        result = acquire(path, holder, params['live'] or {}, stale_after=params['stale_after'], wait=params['wait'],
                         force=params['force'], check=module.check_mode)
    except OSError as exc:
        module.fail_json(msg='host lock %s: %s' % (path, exc), rc=1)
    module.exit_json(changed=result['broke'] is not None, **result)


if __name__ == '__main__':
    main()
