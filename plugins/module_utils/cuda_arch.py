# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Compute capability -> TORCH_CUDA_ARCH_LIST entries, and what nvcc makes of
such a list (its -gencode flags, the entries it cannot compile).

Shared by the gpu_facts module, the sgl_kernel value rules and the filters
cuda_arch_list, gencode_flags and arch_target_errors (which only wrap these),
so that the facts, the checks and the build can never derive two different
lists from the same GPUs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.inference.plugins.module_utils import arch_audit

# From compute capability 9.0 on, the architecture-specific features that the
# kernels we build rely on (wgmma on 9.0, tcgen05 on 10.x, the SM120 FP4 paths)
# only exist in the "a" variant of the target; "9.0" alone compiles them out.
ARCH_SPECIFIC_FROM_MAJOR = 9

_DOTTED_RE = re.compile(r'^\s*(\d+)\.(\d+)[af]?\s*$')
_SM_RE = re.compile(r'^\s*(?:sm_?)?(\d{2,3})[af]?\s*$', re.IGNORECASE)


class CudaArchError(ValueError):
    """A value that is not a compute capability."""


def parse_compute_capability(value):
    """Return (major, minor) for "9.0", 9.0, "sm_90", "sm90a", "120" or (9, 0)."""
    if isinstance(value, (tuple, list)) and len(value) == 2:
        try:
            return int(value[0]), int(value[1])
        except (TypeError, ValueError):
            raise CudaArchError('not a compute capability: %r' % (value,))
    if isinstance(value, bool) or value is None:
        raise CudaArchError('not a compute capability: %r' % (value,))
    if isinstance(value, float):
        value = '%.1f' % value
    text = str(value)
    match = _DOTTED_RE.match(text)
    if match:
        return int(match.group(1)), int(match.group(2))
    match = _SM_RE.match(text)
    if not match:
        raise CudaArchError('not a compute capability: %r' % (value,))
    digits = match.group(1)
    # "sm_90" / "90" / "120": the last digit is the minor version.
    return int(digits[:-1]), int(digits[-1])


def arch_for(major, minor):
    """One TORCH_CUDA_ARCH_LIST entry: "9.0a" from 9.0 on, plain "8.9" below."""
    suffix = 'a' if major >= ARCH_SPECIFIC_FROM_MAJOR else ''
    return '%d.%d%s' % (major, minor, suffix)


def cuda_arch_list(capabilities):
    """Deduplicated arch list, lowest first, for a list of compute capabilities."""
    if isinstance(capabilities, (str, bytes, int, float)):
        capabilities = [capabilities]
    pairs = set()
    for value in capabilities or []:
        pairs.add(parse_compute_capability(value))
    return [arch_for(major, minor) for major, minor in sorted(pairs)]


def arch_entries(arch_list):
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
    (code=compute_XY) for an entry with +PTX. A ValueError names an entry that
    is no target."""
    flags = []
    for entry, ptx in arch_entries(arch_list):
        arch_audit.parse_target(entry)
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
    for entry, dummy_ptx in arch_entries(arch_list):
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
