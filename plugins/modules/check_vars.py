#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name (plugins/action/check_vars.py),
# on the controller; this file holds its documentation.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: check_vars
short_description: (internal) check the types and the values of variables in one task
version_added: 0.3.0
description:
  - Internal to the collection's playbooks and roles (one step of them); its options may change in any
    release. The modules for your own playbooks are M(gpufleet.inference.gpu_facts),
    M(gpufleet.inference.torch_verify), M(gpufleet.inference.venv_link_info), M(gpufleet.inference.arch_audit) and
    M(gpufleet.inference.patch_rules).
  - Does what M(ansible.builtin.validate_argument_spec) does (types, choices, required variables,
    taken from the task's variables or O(provided_arguments)), and fails with the caller's own
    messages in O(errors) as well - the rules a type cannot express, such as a path pattern or a
    lower bound, computed in the task's Jinja.
  - Every message of both kinds is reported in one failure, before anything is changed.
  - Runs on the controller only; one task where a type check and an assert would be two, which
    matters on large fleets (each local task costs the controller a worker per host).
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  argument_spec:
    description:
      - The argument specification, as for M(ansible.builtin.validate_argument_spec) (a role's
        C(meta/argument_specs.yml) entry point options have this form).
    type: dict
    required: true
  provided_arguments:
    description:
      - The values to check; a variable of O(argument_spec) not given here is taken from the
        task's variables.
    type: dict
    default: {}
  errors:
    description:
      - The caller's messages for rules that failed, one per rule; empty strings are ignored.
      - Write each as C(<variable> must be <allowed> (got <value>)).
    type: list
    elements: str
    default: []
  rules:
    description:
      - The value rules of a role's entry point, C(<role>.<entry point>), written in the collection
        (C(plugins/plugin_utils/rules/<role>.py)), checked on the same values as the types - for example
        V(fleet.validate) (the playbooks' inputs), V(verify.main) or V(torch_nightly.main). Their messages come
        before O(errors).
      - An unknown name fails the task, listing the known ones.
    type: str
  context:
    description:
      - Other variables the value rules read besides the entry point's own, such as another role's results
        (C(uv_venv_dir)). They are not type-checked here.
    type: dict
    default: {}
extends_documentation_fragment:
  - gpufleet.inference.read_only
attributes:
  action:
    description: Implemented by an action plugin that runs on the controller.
    support: full
seealso:
  - module: ansible.builtin.validate_argument_spec
  - module: ansible.builtin.assert
'''

EXAMPLES = r'''
- name: Check the playbook's variables
  gpufleet.inference.check_vars:
    argument_spec:
      gpufleet_keep_previous_venvs: {type: int}
      gpufleet_venv_link: {type: str}
    provided_arguments:
      gpufleet_keep_previous_venvs: "{{ gpufleet_keep_previous_venvs | default(2) }}"
      gpufleet_venv_link: "{{ gpufleet_venv_link | default('~/ml-env') }}"
    errors:
      - "{{ '' if (gpufleet_keep_previous_venvs | default(2) | int) >= 0 else
            'gpufleet_keep_previous_venvs must be an integer >= 0' }}"
'''

RETURN = r'''
argument_errors:
  description: Every failed check, the type errors first, then O(errors).
  returned: on failure
  type: list
  elements: str
  sample: ["gpufleet_keep_previous_venvs must be an integer >= 0 (got -1)"]
'''
