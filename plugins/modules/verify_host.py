#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name (plugins/action/verify_host.py),
# on the controller, which runs gpufleet.inference.torch_verify on the host; this file holds its documentation.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: verify_host
short_description: (internal) check the inputs, verify a venv with torch_verify and summarize it, in one task
version_added: 0.4.0
description:
  - Internal to the collection's playbooks and roles (one step of them); its options may change in any
    release. The modules for your own playbooks are M(gpufleet.inference.gpu_facts),
    M(gpufleet.inference.torch_verify), M(gpufleet.inference.venv_link_info), M(gpufleet.inference.arch_audit) and
    M(gpufleet.inference.patch_rules).
  - The verify role's task. First the check groups of O(checks), on the controller - the types of one entry point of
    a role's argument spec (read from its file once per process) and the caller's value rules, rendered into
    messages. A type error or a message fails the task before anything is read on the host, with the wording of
    gpufleet.inference.check_vars.
  - Then each directory of O(writable_dirs) with a non-empty path must exist on the host and be writable by the
    connecting user (one C(ansible.builtin.stat) each), or the task fails naming the variable.
  - Then gpufleet.inference.torch_verify runs once with O(verify), and the result carries its summary beside the
    module's own result - what the roles and the fleet report read (RV(passed), RV(fail_message), RV(target), ...).
  - With C(xid=become) in O(verify) (the verify role's C(verify_xid)), the Xid errors are not read here - the answer
    of the read as root made before this task, O(xid_root), goes to torch_verify as its C(xid_answer) (none on a
    host without GPUs; one that says why where that read failed or is missing).
  - A verification that did not pass does not fail the task (RV(passed) is V(false)); a host lost during it is
    not unreachable either (RV(host_unreachable) is V(true)). The caller decides - the verify role's main fails
    the host, verify.yml fails it after the fleet report.
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  checks:
    description:
      - Check groups, each a dict with C(role) (a role of this collection - its C(meta/argument_specs.yml) and
        its value rules, C(plugins/plugin_utils/rules/<role>.py)) or C(spec) (the path of an argument spec), C(entry_point)
        (default C(main)) and C(errors) (more messages; empty strings are rules that held).
      - The options of the entry point are read from the task's variables and type-checked.
    type: list
    elements: dict
    default: []
  writable_dirs:
    description: Directories on the host that must exist and be writable, by the name of the variable that gives each.
    type: dict
    default: {}
  verify:
    description:
      - The options of gpufleet.inference.torch_verify; C(link) (the stable path) is required, here or from
        O(from_role).
    type: dict
    default: {}
  from_role:
    description:
      - Take torch_verify's options from the variables of this role (V(verify) - C(verify_venv_link) for C(link),
        C(verify_venv), C(verify_expect), C(verify_timeout), ...), each templated once for its type check and for
        the module; O(verify) adds to them and wins.
    type: str
    choices: [verify]
  role_inputs:
    description:
      - With O(from_role), O(checks), O(writable_dirs), O(deploy_key) and O(xid_root) that the task does not give
        come from the role's variables too - the role's own check group unless C(fleet_preflight_done) is true, then
        C(verify_checks); C(verify_writable_dirs); C(verify_deploy_key) - templated in the action, in the one pass
        every variable gets, rather than as the task's arguments (compiled again for every host); and
        C(verify_xid_root), a registered result, as it is.
    type: bool
    default: false
  xid_root:
    description:
      - The registered result of a P(gpufleet.inference.gpu_facts#module) read with
        O(gpufleet.inference.gpu_facts#module:xid=true) made as root before this task, for C(xid=become) in O(verify).
      - With O(role_inputs), the variable C(verify_xid_root) (the verify role's task registers it on a host with
        C(verify_xid=become)), where the task does not give it.
    type: dict
  deploy_key:
    description:
      - The deploy key (deploy.yml's fast path) that the verified venv must carry in its
        C(gpufleet-deployed.json) marker (give it in O(verify)'s C(markers)). A venv that carries another key
        did not pass (RV(passed) is V(false), RV(fail_message) says so); empty checks no key.
    type: str
    default: ""
attributes:
  action:
    description: The work is done by the action plugin of the same name.
    support: full
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: It only reads; RV(passed) is V(null) for a venv that only a real run would create.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
seealso:
  - module: gpufleet.inference.torch_verify
  - module: gpufleet.inference.check_vars
'''

EXAMPLES = r'''
- name: Verify the active venv
  gpufleet.inference.verify_host:
    checks:
      - spec: "{{ role_path }}/meta/argument_specs.yml"
        entry_point: main
        errors: "{{ [] if verify_timeout | int > 0 else ['verify_timeout must be > 0'] }}"
    writable_dirs:
      gpufleet_textfile_dir: /var/lib/node_exporter/textfile
    verify:
      link: ~/ml-env
      gpu: true
  register: verify_result

- name: Fail the host when it did not pass
  ansible.builtin.assert:
    that: verify_result.passed is none or verify_result.passed
    fail_msg: "{{ verify_result.fail_message }}"
'''

RETURN = r'''
passed:
  description: Whether the venv passed; V(null) in check mode for a venv only a real run would create.
  returned: success
  type: bool
fail_message:
  description: What a host that did not pass is failed with (empty when it passed).
  returned: success
  type: str
message:
  description: torch_verify's message when it did not pass.
  returned: success
  type: str
host_unreachable:
  description: The host was lost during the verification (it counts as not passed).
  returned: success
  type: bool
verify_failed:
  description: torch_verify itself failed (or the host was lost).
  returned: success
  type: bool
any_set:
  description:
    - The verification ran (the host was reached) and a variable that the role's C(verify_any_set) names (with
      O(from_role)) is set and not empty on the host - verify.yml's hooks step runs only for such a host.
  returned: success
  type: bool
link_path:
  description: The stable path, expanded.
  returned: success
  type: str
history_path:
  description: The file of the stable path's history.
  returned: success
  type: str
target:
  description: The venv verified.
  returned: success
  type: str
active_venv:
  description: The venv the stable path points at.
  returned: success
  type: str
previous_venv:
  description: The venv before the active one in the history, if the active one is its last.
  returned: success
  type: str
history:
  description: The venvs the stable path pointed at, oldest first.
  returned: success
  type: list
  elements: str
link_is_directory:
  description: A hand-built venv directory is at the stable path (adopted).
  returned: success
  type: bool
ansible_facts:
  description:
    - The GPU facts as the host fact C(gpufleet_gpu), which roles after a verification read.
    - torch_verify's C(gpufleet_torch) is not made a host fact - its content is in RV(torch), RV(packages), C(gpu_use),
      C(proof) and the markers' fields.
  returned: when the host answered
  type: dict
gpu:
  description: The GPU facts (torch_verify's C(gpufleet_gpu)).
  returned: success
  type: dict
torch:
  description: What the venv's interpreter said of torch, CUDA and the checks (C(gpufleet_torch) without packages and markers).
  returned: success
  type: dict
packages:
  description: The venv's installed distributions, name to version.
  returned: success
  type: dict
mismatches:
  description: The expectations that did not hold.
  returned: success
  type: list
  elements: dict
sgl_kernel_abi_key:
  description: The ABI key of the installed sgl_kernel build (its marker), or empty.
  returned: success
  type: str
sgl_kernel_targets:
  description: The GPU targets the installed sgl_kernel wheel carries (its arch audit).
  returned: success
  type: list
  elements: str
sgl_kernel_choice:
  description: The installed sgl_kernel build's origin - C(source) V(wheel) (the published wheel) or V(build), and C(reason).
  returned: success
  type: dict
deploy_stamp:
  description: deploy.yml's record in the venv (C(key), C(venv)), or empty.
  returned: success
  type: dict
'''
