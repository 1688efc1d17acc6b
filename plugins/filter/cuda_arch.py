# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters on CUDA compute capabilities and targets (docs: cuda_arch_list.yml,
gencode_flags.yml, arch_target_errors.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.inference.plugins.module_utils import arch_audit
from ansible_collections.gpufleet.inference.plugins.module_utils.cuda_arch import (
    CudaArchError,
    cuda_arch_list as _cuda_arch_list,
)


def cuda_arch_list(capabilities):
    """Compute capabilities -> deduplicated TORCH_CUDA_ARCH_LIST entries."""
    try:
        return _cuda_arch_list(capabilities)
    except CudaArchError as exc:
        raise AnsibleFilterError('cuda_arch_list: %s' % exc)


def _entries(arch_list):
    """TORCH_CUDA_ARCH_LIST entries with their +PTX flag: [('9.0a', False), ('8.9', True)]."""
    if isinstance(arch_list, str):
        arch_list = arch_list.replace(',', ';').replace(' ', ';').split(';')
    out = []
    for raw in arch_list or []:
        text = str(raw).strip()
        if text:
            out.append((text[:-4], True) if text.endswith('+PTX') else (text, False))
    return out


def gencode_flags(arch_list):
    """Arch list -> the nvcc -gencode flags that compile exactly it: SASS of each
    target ('9.0a' -> -gencode=arch=compute_90a,code=sm_90a), plus its PTX
    (code=compute_XY) for an entry with +PTX."""
    flags = []
    for entry, ptx in _entries(arch_list):
        try:
            arch_audit.parse_target(entry)
        except ValueError as exc:
            raise AnsibleFilterError('gencode_flags: %s' % exc)
        compute, sm = arch_audit.ptx_name(entry), arch_audit.sass_name(entry)
        flags.append('-gencode=arch=%s,code=%s' % (compute, sm))
        if ptx:
            flags.append('-gencode=arch=%s,code=%s' % (compute, compute))
    return flags


def arch_target_errors(arch_list, cuda_version=None, name='sgl_kernel_arch_list'):
    """Why an arch list cannot be compiled ([] when it can): entries that are no
    CUDA target (the allowed ones named), and targets newer than the nvcc of
    cuda_version compiles (the release each needs named)."""
    allowed = ', '.join(arch_audit.known_targets())
    errors = []
    for entry, dummy_ptx in _entries(arch_list):
        if entry not in arch_audit.MINIMUM_CUDA:
            errors.append("%s: '%s' is not a CUDA target; allowed: %s, each optionally with +PTX" % (name, entry, allowed))
        elif cuda_version and not arch_audit.can_compile(entry, cuda_version):
            last = arch_audit.LAST_CUDA.get(entry)
            if last and arch_audit.version_tuple(cuda_version)[:2] > arch_audit.version_tuple(last):
                errors.append('%s: %s is not compiled by CUDA %s (its last release is %s)' % (name, entry, cuda_version, last))
            else:
                errors.append('%s: %s needs CUDA >= %s, the toolkit is CUDA %s'
                              % (name, entry, arch_audit.minimum_cuda(entry), cuda_version))
    return errors


class FilterModule(object):
    def filters(self):
        return {'cuda_arch_list': cuda_arch_list, 'gencode_flags': gencode_flags, 'arch_target_errors': arch_target_errors}
