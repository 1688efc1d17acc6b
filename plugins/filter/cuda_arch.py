# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Filters on CUDA compute capabilities and targets (docs: cuda_arch_list.yml,
gencode_flags.yml, arch_target_errors.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.inference.plugins.module_utils.cuda_arch import (
    CudaArchError,
    arch_target_errors,
    cuda_arch_list as _cuda_arch_list,
    gencode_flags as _gencode_flags,
)


def cuda_arch_list(capabilities):
    """Compute capabilities -> deduplicated TORCH_CUDA_ARCH_LIST entries."""
    try:
        return _cuda_arch_list(capabilities)
    except CudaArchError as exc:
        raise AnsibleFilterError('cuda_arch_list: %s' % exc)


def gencode_flags(arch_list):
    """Arch list -> the nvcc -gencode flags that compile exactly it (module_utils cuda_arch)."""
    try:
        return _gencode_flags(arch_list)
    except ValueError as exc:
        raise AnsibleFilterError('gencode_flags: %s' % exc)


class FilterModule(object):
    def filters(self):
        return {'cuda_arch_list': cuda_arch_list, 'gencode_flags': gencode_flags, 'arch_target_errors': arch_target_errors}
