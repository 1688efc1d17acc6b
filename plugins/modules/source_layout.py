#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: source_layout
short_description: (internal) find the folder of the sgl_kernel role's source that holds the kernel's CMakeLists.txt
version_added: 0.3.0
description:
  - Internal to the collection's playbooks and roles (one step of them); its options may change in any
    release. The modules for your own playbooks are M(gpufleet.inference.gpu_facts),
    M(gpufleet.inference.torch_verify), M(gpufleet.inference.venv_link_info), M(gpufleet.inference.arch_audit) and
    M(gpufleet.inference.patch_rules).
  - Reads, on the controller, a commit of a git clone, a source archive or a folder, and finds the folder
    (the layout) whose C(CMakeLists.txt) the kernel is built from, before anything is built. The kernel's
    sources moved in sgl-project/sglang (sgl-kernel, then python/sglang/kernels/aot); O(layouts) names
    where each layout keeps them.
  - O(subdir=auto) takes the first layout of O(layouts) that has the file; in an archive whose members
    all lie under one top folder (a forge's archive), the layouts are looked for under it too.
  - An explicit O(subdir) must have the file. A subdir without it, or V(auto) when no layout has it, fails
    before any build, naming C(sgl_kernel_subdir), C(sgl_kernel_ref) (or the archive or folder) and the
    layouts that source does have.
  - The paths a layout builds with besides its folder (its C(with)) are returned where the source has them.
  - Reads only; never reports a change.
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  source:
    description:
      - What O(path) is.
    type: str
    choices: [git, archive, folder]
    required: true
  path:
    description:
      - The git clone (V(git)), the archive file, C(.tar*) or C(.zip) (V(archive)), or the folder (V(folder)),
        on the controller.
    type: path
    required: true
  commit:
    description:
      - The commit to read, with O(source=git).
    type: str
    default: ''
  ref:
    description:
      - The ref as given (C(sgl_kernel_ref)), named in a failure.
    type: str
    default: ''
  subdir:
    description:
      - The folder of the kernel's C(CMakeLists.txt), relative to the source's root, or V(auto).
    type: str
    required: true
  layouts:
    description:
      - The known layouts, most recent first, each with C(name), C(subdir) (relative to the root) and
        C(with) (other paths, relative to the root, that its build reads).
    type: list
    elements: dict
    required: true
  marker:
    description:
      - The file a layout's folder must hold.
    type: str
    default: CMakeLists.txt
attributes:
  check_mode:
    description: Reads only, in check mode as well.
    support: full
  diff_mode:
    description: Reports no differences; it changes nothing.
    support: none
'''

EXAMPLES = r'''
- name: Find the layout of the commit
  gpufleet.inference.source_layout:
    source: git
    path: /srv/cache/sglang
    commit: 3ec6e09487cbf7424f7875cb098860a2142666a3
    ref: 3ec6e09487cbf7424f7875cb098860a2142666a3
    subdir: auto
    layouts:
      - {name: aot, subdir: python/sglang/kernels/aot, with: [python/sglang/kernels/jit/include]}
      - {name: sgl-kernel, subdir: sgl-kernel, with: []}
  delegate_to: localhost
  register: layout
'''

RETURN = r'''
subdir:
  description: The folder of the kernel's CMakeLists.txt, relative to the source's root.
  returned: success
  type: str
  sample: python/sglang/kernels/aot
layout:
  description: The name of the layout O(subdir) is (the folder ends with that layout's), empty for another folder.
  returned: success
  type: str
  sample: aot
with:
  description: The paths of the layout's C(with) that the source has, relative to its root.
  returned: success
  type: list
  elements: str
  sample: [python/sglang/kernels/jit/include]
found:
  description: The subdirs of the layouts whose marker the source has.
  returned: always
  type: list
  elements: str
  sample: [python/sglang/kernels/aot]
'''

import os
import tarfile
import zipfile

from ansible.module_utils.basic import AnsibleModule


class LayoutError(Exception):
    pass


def _clean(path):
    while path.startswith('./'):
        path = path[2:]
    return path.strip('/')


def archive_names(path):
    """The member paths of a tar or zip archive, without a leading ./, folders implied by files included."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            raw = archive.namelist()
    else:
        with tarfile.open(path) as archive:
            raw = archive.getnames()
    names = set()
    for name in raw:
        name = _clean(name)
        while name:
            names.add(name)
            name = os.path.dirname(name)
    return names


def top_folder(names):
    """The one folder every member lies under, else ''."""
    tops = set(name.split('/', 1)[0] for name in names)
    if len(tops) == 1:
        top = tops.pop()
        if any(name.startswith(top + '/') for name in names):
            return top
    return ''


def where(source, ref, commit, path):
    """The source as a failure names it."""
    if source == 'git':
        return 'at sgl_kernel_ref %s%s' % (ref, ' (commit %s)' % commit if commit and commit != ref else '')
    if source == 'archive':
        return 'in the archive %s (sgl_kernel_archive_url)' % os.path.basename(path)
    return 'in sgl_kernel_local_dir %s' % path


def resolve(subdir, layouts, has, prefixes=('',), marker='CMakeLists.txt', place=''):
    """The folder of the kernel's MARKER: (subdir, layout name, with, found). HAS(path) says whether the
    source has a path; PREFIXES are the roots the layouts are looked for under. Raises LayoutError, naming
    the variables, for an explicit subdir without the marker and for auto when no layout has it."""
    found = []
    for prefix in prefixes:
        for layout in layouts:
            folder = '/'.join(p for p in (prefix, layout['subdir']) if p)
            if folder not in found and has(folder + '/' + marker):
                found.append(folder)
    known = ', '.join(layout['subdir'] for layout in layouts)
    if subdir == 'auto':
        if not found:
            raise LayoutError(
                'sgl_kernel_subdir auto: there is no %s %s in any folder the kernel was kept in (%s): set '
                'sgl_kernel_subdir to the folder of its %s, or sgl_kernel_ref to a ref that has one; nothing was '
                'built' % (marker, place, known, marker), found)
        subdir = found[0]
    subdir = subdir.strip('/')
    if not has(subdir + '/' + marker):
        there = ('the kernel is in %s there: set sgl_kernel_subdir to auto (or %s)' % (', '.join(found), found[0])
                 if found else 'nor has any folder the kernel was kept in (%s): set sgl_kernel_subdir to the '
                 'folder of its %s' % (known, marker))
        raise LayoutError('sgl_kernel_subdir %s has no %s %s; %s, or sgl_kernel_ref to a ref that has %s/%s; '
                          'nothing was built' % (subdir, marker, place, there, subdir, marker), found)
    for layout in layouts:
        if subdir == layout['subdir'] or subdir.endswith('/' + layout['subdir']):
            prefix = subdir[:len(subdir) - len(layout['subdir'])]
            paths = [prefix + extra for extra in layout.get('with') or []]
            return subdir, layout['name'], [p for p in paths if has(p)], found
    return subdir, '', [], found


def source_reader(module, source, path, commit):
    """has(path) for the source, and the prefixes auto looks under."""
    if source == 'git':
        git = module.get_bin_path('git', required=True)

        def has(member):
            rc, dummy_out, dummy_err = module.run_command([git, '-C', path, 'cat-file', '-e', '%s:%s' % (commit, member)])
            return rc == 0
        return has, ('',)
    if source == 'archive':
        try:
            names = archive_names(path)
        except (IOError, OSError, tarfile.TarError, zipfile.BadZipfile) as exc:
            raise LayoutError('sgl_kernel_archive_url: %s is not a tar or zip archive that can be read: %s'
                              % (path, exc), [])
        top = top_folder(names)
        return names.__contains__, ('', top) if top else ('',)
    if not os.path.isdir(path):
        raise LayoutError('sgl_kernel_local_dir %s is not a folder on the controller' % path, [])
    return (lambda member: os.path.exists(os.path.join(path, member))), ('',)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type='str', required=True, choices=['git', 'archive', 'folder']),
            path=dict(type='path', required=True),
            commit=dict(type='str', default=''),
            ref=dict(type='str', default=''),
            subdir=dict(type='str', required=True),
            layouts=dict(type='list', elements='dict', required=True),
            marker=dict(type='str', default='CMakeLists.txt'),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params['source'] == 'git' and not params['commit']:
        module.fail_json(msg='source_layout: commit is required with source git', found=[])
    try:
        has, prefixes = source_reader(module, params['source'], params['path'], params['commit'])
        subdir, layout, extra, found = resolve(
            params['subdir'], params['layouts'], has, prefixes, params['marker'],
            where(params['source'], params['ref'], params['commit'], params['path']))
    except LayoutError as exc:
        module.fail_json(msg=str(exc.args[0]), found=exc.args[1])
    module.exit_json(changed=False, subdir=subdir, layout=layout, found=found, **{'with': extra})


if __name__ == '__main__':
    main()
