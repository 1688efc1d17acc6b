# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters on CUDA compute capabilities (docs: cuda_arch_list.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

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


class FilterModule(object):
    def filters(self):
        return {'cuda_arch_list': cuda_arch_list}
