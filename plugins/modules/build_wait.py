#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name (plugins/action/build_wait.py),
# on the controller; this file holds its documentation.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: build_wait
short_description: (internal) wait for a long sgl-kernel build, one progress line per poll
version_added: 0.1.0
description:
  - Internal to the collection's playbooks and roles (one step of them); its options may change in any
    release. The modules for your own playbooks are M(gpufleet.inference.gpu_facts),
    M(gpufleet.inference.torch_verify), M(gpufleet.inference.venv_link_info), M(gpufleet.inference.arch_audit) and
    M(gpufleet.inference.patch_rules).
  - Runs a build's status command (O(argv)) on the target every O(interval) seconds until
    it reports the build finished, at most O(timeout) seconds.
  - >-
    Prints one line per poll at default verbosity, where an C(until) loop prints
    C(FAILED - RETRYING) on every poll of a build that is going well. For example
    "sbx1: sgl-kernel build 12/40 (30%), 1m20s elapsed, about 3m05s left: Building CUDA object csrc/x.cu.o";
    before ninja counts its steps, the last line of the log,
    "sbx1: sgl-kernel build configuring, 0m40s elapsed: -- Detected CUDA_VERSION=13.0";
    at the end, "sbx1: sgl-kernel build finished (rc 0), 4m10s elapsed".
  - The time left is the time elapsed per step so far times the steps left. With C(-v) the status
    line of every poll is shown as well.
  - The status command prints one JSON line with C(finished) (bool), C(rc), C(progress) (text),
    and, optionally, C(done) and C(total) (ninja's C([done/total]) counter), C(started) and
    C(now) (epoch seconds by the target's clock); C(build-wheel.sh status) of the
    P(gpufleet.inference.sgl_kernel#role) role prints it.
  - Returns the last status line as RV(stdout) whatever the build's exit status; failing on
    C(rc) is the caller's job. Fails when the build has not finished after O(timeout) seconds,
    naming the last progress, and when the status command fails or prints no status line.
  - Runs the status command only; it never reports a change. In check mode it does nothing and
    is skipped.
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  argv:
    description:
      - The status command, as an argument list (no shell), for example
        V([bash, /home/deploy/.cache/gpufleet/sgl_kernel/bin/build-wheel.sh, status, <log>]), with absolute paths (no shell expands V(~)).
    type: list
    elements: str
    required: true
  interval:
    description:
      - Seconds between two polls, at least 1.
    type: int
    default: 15
  timeout:
    description:
      - Seconds to wait at most, at least 1; the role passes C(sgl_kernel_build_timeout).
    type: int
    required: true
  label:
    description:
      - The name at the start of each line; the host's C(inventory_hostname) when not given.
    type: str
attributes:
  action:
    description: Implemented by an action plugin that runs on the controller and polls the target.
    support: full
  check_mode:
    description: Does nothing in check mode (there is no build to wait for) and is skipped.
    support: none
  diff_mode:
    description: Reports no differences; it changes nothing.
    support: none
seealso:
  - module: ansible.builtin.async_status
  - module: ansible.builtin.command
'''

EXAMPLES = r'''
- name: Wait for the build
  gpufleet.inference.build_wait:
    argv: [bash, /home/deploy/.cache/gpufleet/sgl_kernel/bin/build-wheel.sh, status, /home/deploy/build.log]
    interval: 15
    timeout: 21600
  register: build_status

- name: Fail on the build's exit status
  ansible.builtin.fail:
    msg: "the build failed (rc {{ (build_status.stdout | from_json).rc }})"
  when: (build_status.stdout | from_json).rc != 0
'''

RETURN = r'''
stdout:
  description: The last status line (JSON) of the status command.
  returned: success, and on timeout
  type: str
  sample: '{"finished": true, "rc": 0, "progress": "[40/40] Linking CXX shared module common_ops.so", "done": 40,
    "total": 40, "started": 1767225600, "now": 1767225850}'
elapsed:
  description: Seconds since the build started (by the target's clock where the status gives its start, else the time waited).
  returned: success, and on timeout
  type: int
  sample: 250
polls:
  description: How many times the status command printed a status line.
  returned: except in check mode
  type: int
  sample: 17
'''
