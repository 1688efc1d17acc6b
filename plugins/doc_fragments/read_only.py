# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    """The attributes every read-only module of the collection shares."""

    DOCUMENTATION = r'''
attributes:
  check_mode:
    description: Runs the same in check mode; it only reads.
    support: full
  diff_mode:
    description: Reports no differences; it changes nothing.
    support: none
'''
