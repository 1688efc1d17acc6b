# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The wheels a host's wheelhouse lacks, for gpufleet.inference.wheelhouse_push:
the action plugin sends only those, and the module puts only those in place.
Standard library only (the host side runs with the host's python3)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os


def missing(files, present):
    """The entries of files whose base name is absent from present or has another checksum there, by name."""
    have = dict((os.path.basename(f.get('path') or ''), f.get('checksum')) for f in present)
    wanted = {}
    for f in files:
        name = os.path.basename(f.get('path') or '')
        if have.get(name) != f.get('checksum'):
            wanted[name] = f
    return [wanted[name] for name in sorted(wanted)]
