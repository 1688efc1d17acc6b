# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Running cuobjdump on the shared objects of an artifact, for the modules
that audit GPU targets (arch_audit, wheel_fit): finding cuobjdump, the
shared objects of a wheel, a directory or one file, and each one's SASS and
PTX targets. Each function takes the AnsibleModule and fails through it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import zipfile

from ansible_collections.gpufleet.inference.plugins.module_utils import arch_audit

SHARED_OBJECT_RE = re.compile(r'\.so(\.\d+)*$')
CUOBJDUMP_HINT = ('it comes with the CUDA toolkit the build used: point sgl_kernel_cuda_home at that toolkit, '
                  'or sgl_kernel_cuobjdump at a cuobjdump of the same CUDA version or newer (NVIDIA\'s '
                  'nvidia-cuda-cuobjdump wheel carries one)')
# An older cuobjdump than the toolkit that built the file does not know its newest targets.
OLD_CUOBJDUMP_HINT = ('a cuobjdump older than the CUDA toolkit that built the file cannot read it: set '
                      'sgl_kernel_cuobjdump (or sgl_kernel_cuda_home) to the build toolkit\'s cuobjdump or a newer one')


def find_cuobjdump(module, hint=CUOBJDUMP_HINT):
    """The cuobjdump of module.params cuobjdump / cuda_home, else PATH and /usr/local/cuda/bin."""
    params = module.params
    if params['cuobjdump'] or params['cuda_home']:
        path = params['cuobjdump'] or os.path.join(params['cuda_home'], 'bin', 'cuobjdump')
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        module.fail_json(msg='cuobjdump: not found at %s; %s' % (path, hint))
    path = module.get_bin_path('cuobjdump', opt_dirs=['/usr/local/cuda/bin'])
    if not path:
        module.fail_json(msg='cuobjdump: not found at PATH or /usr/local/cuda/bin; %s' % hint)
    return path


def shared_objects_in(root):
    """[(path relative to root, full path)] of every shared object under root, sorted."""
    found = []
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            if SHARED_OBJECT_RE.search(name):
                full = os.path.join(directory, name)
                found.append((os.path.relpath(full, root), full))
    return found


def extract_wheel(module, path, dest):
    """Extract only the wheel's shared objects; return [(name in the wheel, extracted path)]."""
    try:
        with zipfile.ZipFile(path) as wheel:
            members = [info for info in wheel.infolist()
                       if not info.is_dir() and SHARED_OBJECT_RE.search(info.filename)]
            # ZipFile.extract drops absolute and '..' parts of member names.
            return sorted((info.filename, wheel.extract(info, dest)) for info in members)
    except (zipfile.BadZipfile, OSError) as exc:
        module.fail_json(msg='path: %s is not a readable wheel (zip): %s' % (path, exc))


def run_cuobjdump(module, cuobjdump, option, path, name, hint=OLD_CUOBJDUMP_HINT):
    """Return the parsed target names, or None when the file has no device code."""
    argv = [cuobjdump] + ([option] if option else []) + [path]
    rc, out, err = module.run_command(argv, errors='replace')
    if rc != 0:
        if arch_audit.NO_DEVICE_CODE in err + out:
            return None
        reason = (err.strip() or out.strip() or 'no output').splitlines()[0]
        module.fail_json(msg='cuobjdump failed on %s (rc %d): %s; %s' % (name, rc, reason, hint),
                         rc=rc, stdout=out, stderr=err, cmd=argv)
    return arch_audit.parse_listing(out)


def list_targets(module, cuobjdump, name, path, hint=OLD_CUOBJDUMP_HINT):
    """{'sass', 'ptx', 'device_code'} of one shared object."""
    sass = run_cuobjdump(module, cuobjdump, '--list-elf', path, name, hint)
    if sass is None:
        return {'sass': [], 'ptx': [], 'device_code': False}
    ptx = run_cuobjdump(module, cuobjdump, '--list-ptx', path, name, hint) or []
    if arch_audit.family_ambiguous(sass):
        headers = run_cuobjdump(module, cuobjdump, None, path, name, hint) or []
        sass = [target for target in headers if target.startswith('sm_')]
    return {'sass': sass, 'ptx': ptx, 'device_code': True}
