#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name (plugins/action/fleet_finish.py);
# this file holds its documentation.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: fleet_finish
short_description: (internal) a fleet run's last task on a host - its metrics into node_exporter's textfile directory, then its failure
version_added: 0.4.0
description:
  - Internal to the collection's playbooks and roles (one step of them); its options may change in any
    release. The modules for your own playbooks are M(gpufleet.inference.gpu_facts),
    M(gpufleet.inference.torch_verify), M(gpufleet.inference.venv_link_info), M(gpufleet.inference.arch_audit) and
    M(gpufleet.inference.patch_rules).
  - With O(textfile_dir) and O(textfile_src) set, the host's metrics (rendered on the controller by
    gpufleet.inference.fleet_report) are written to C(.gpufleet.prom.staged) in O(textfile_dir) and renamed over
    C(gpufleet.prom), so that node_exporter's textfile collector, which reads C(*.prom), never reads a half-written
    file. A file that is already the same is left alone (V(changed=false)). One shell command with the metrics on
    its standard input - one round trip, no module and no file transfer. A failure here is a warning, never a
    failed host.
  - With O(fail=true) the host is then failed with O(msg).
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  textfile_src:
    description: The host's metrics file on the controller; empty means none.
    type: path
  textfile_dir:
    description: node_exporter's C(--collector.textfile.directory) on the host; empty means none.
    type: str
    default: ""
  fail:
    description: Fail the host (after the metrics are written).
    type: bool
    default: false
  msg:
    description: What the host is failed with.
    type: str
    default: ""
attributes:
  action:
    description: The work is done by the action plugin of the same name.
    support: full
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: partial
    details: Writes nothing and reports a change wherever the metrics would be written.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
seealso:
  - module: gpufleet.inference.fleet_report
'''

EXAMPLES = r'''
- name: Put the host's metrics in place and fail it when it did not pass
  gpufleet.inference.fleet_finish:
    textfile_src: "{{ report_dir }}/textfile/{{ inventory_hostname }}.prom"
    textfile_dir: /var/lib/node_exporter/textfile
    fail: "{{ status != 'ok' }}"
    msg: "{{ inventory_hostname }}: {{ status }}"
'''

RETURN = r'''
changed:
  description: Whether the metrics file was replaced (or, in check mode, would be).
  returned: always
  type: bool
'''
