#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: wheelhouse_push
short_description: (internal) put the controller's missing or changed wheels in a host's wheelhouse, in one task
version_added: 0.3.0
description:
  - Internal to the collection's playbooks and roles (one step of them); its options may change in any
    release. The modules for your own playbooks are M(gpufleet.inference.gpu_facts),
    M(gpufleet.inference.torch_verify), M(gpufleet.inference.venv_link_info), M(gpufleet.inference.arch_audit) and
    M(gpufleet.inference.patch_rules).
  - Compares the controller's files (O(files), listed once for the run with their SHA-1) with the host's
    (O(present)) by name and checksum; only the files missing on the host or different there are sent.
  - The action plugin of the same name sends them into this task's temporary folder on the host (one
    transfer each, no module run between them) and runs this module once, which checks each file's SHA-1
    against the controller's and puts it in O(dest) under a temporary name, renamed over the final one
    (a wheel is never seen half written). A file whose checksum differs after the transfer fails the task,
    naming it and both checksums, and is not put in place.
  - A loop of C(ansible.builtin.copy) over the wheels ran two modules and a checksum of the source on the
    controller per wheel and host; this runs none when nothing is missing and one otherwise.
  - Through the action, one line per host at the default verbosity names the files it sends, with their
    number and size.
  - In check mode nothing is sent; the task reports a change when a file would be, naming them.
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  files:
    description:
      - The controller's files, each a dict with C(path) (on the controller) and C(checksum) (its SHA-1, hex),
        as C(ansible.builtin.find) with O(ansible.builtin.find#module:get_checksum=true) lists them. On the
        host each goes to O(dest) under its base name.
    type: list
    elements: dict
    required: true
  present:
    description:
      - The files already in O(dest) on the host, in the same form (C(path), C(checksum)).
    type: list
    elements: dict
    default: []
  dest:
    description:
      - The wheelhouse folder on the host, an absolute path. It must exist.
    type: path
    required: true
  mode:
    description:
      - The mode of each file put in place.
    type: str
    default: "0644"
  staged:
    description:
      - Filled by the action plugin - for each file to put in place, its base name and the path of the copy it
        sent into the task's temporary folder. A task sets none.
    type: dict
    default: {}
attributes:
  action:
    description: The action plugin of the same name compares the lists and sends the files from the controller.
    support: full
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: N/A
    platforms: posix
'''

EXAMPLES = r'''
- name: List the controller wheelhouse with checksums
  ansible.builtin.find:
    paths: /srv/wheelhouse
    file_type: file
    get_checksum: true
  delegate_to: localhost
  run_once: true
  register: local_wheels

- name: List the host wheelhouse with checksums
  ansible.builtin.find:
    paths: /home/deploy/.cache/gpufleet/wheelhouse
    file_type: file
    get_checksum: true
  register: host_wheels

- name: Push missing or changed wheels to the host
  gpufleet.inference.wheelhouse_push:
    files: "{{ local_wheels.files }}"
    present: "{{ host_wheels.files }}"
    dest: /home/deploy/.cache/gpufleet/wheelhouse
'''

RETURN = r'''
pushed:
  description: The base names of the files sent and put in place (in check mode, those that would be), sorted.
  returned: always
  type: list
  elements: str
  sample: [torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl]
bytes:
  description: The size of those files together, in bytes.
  returned: always
  type: int
  sample: 184549376
'''

import os
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.inference.plugins.module_utils.wheelhouse import missing


def place(staged, dest, mode):
    """Copy staged to dest under a temporary name beside it, set its mode, rename it over dest.
    On failure the temporary is removed and dest is left as it was."""
    part = os.path.join(os.path.dirname(dest), '.%s.gpufleet-part' % os.path.basename(dest))
    try:
        # a copy, not a rename out of the temporary folder: the file is the module's user's
        # (the become user's), as one the copy module writes
        shutil.copyfile(staged, part)
        os.chmod(part, mode)
        os.replace(part, dest)
    except BaseException:
        if os.path.lexists(part):
            os.unlink(part)
        raise


def main():
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type='list', elements='dict', required=True),
            present=dict(type='list', elements='dict', default=[]),
            dest=dict(type='path', required=True),
            mode=dict(type='str', default='0644'),
            staged=dict(type='dict', default={}),
        ),
        supports_check_mode=True,
    )
    params = module.params
    dest = params['dest']
    try:
        mode = int(params['mode'], 8)
    except ValueError:
        module.fail_json(msg='mode must be an octal mode such as 0644 (got %r)' % params['mode'])
    if not os.path.isabs(dest):
        module.fail_json(msg='dest must be an absolute path (got %r)' % dest)
    todo = missing(params['files'], params['present'])
    names = [os.path.basename(f['path']) for f in todo]
    if module.check_mode or not todo:
        module.exit_json(changed=bool(todo), pushed=names, bytes=0)
    if not os.path.isdir(dest):
        module.fail_json(msg='the wheelhouse folder %s does not exist on the host' % dest, pushed=[], bytes=0)
    staged = params['staged']
    done, size = [], 0
    for f, name in zip(todo, names):
        src = staged.get(name)
        if not src or not os.path.isfile(src):
            module.fail_json(msg='%s was not sent to the host (no staged copy)' % name, pushed=done, bytes=size)
        got = module.sha1(src)
        if got != f.get('checksum'):
            module.fail_json(msg='%s arrived with SHA-1 %s, the controller has %s: not put in place'
                             % (name, got, f.get('checksum')), pushed=done, bytes=size)
        length = os.path.getsize(src)
        try:
            place(src, os.path.join(dest, name), mode)
        except OSError as exc:
            module.fail_json(msg='%s: could not put it in %s: %s' % (name, dest, exc), pushed=done, bytes=size)
        done.append(name)
        size += length
    module.exit_json(changed=True, pushed=done, bytes=size)


if __name__ == '__main__':
    main()
