# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Compute capability -> TORCH_CUDA_ARCH_LIST entries.

Shared by the gpu_facts module and the cuda_arch_list filter so that the facts
and the roles can never derive two different lists from the same GPUs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

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
