#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name (plugins/action/sglang_requirements.py),
# on the controller; this file holds its documentation.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: sglang_requirements
short_description: (internal) judge the stack's pins against the pinned sglang's requirements, on the controller
version_added: 0.4.0
description:
  - Internal to the collection's playbooks and roles (the sglang role's preflight); its options may change in any
    release. The modules for your own playbooks are M(gpufleet.inference.gpu_facts),
    M(gpufleet.inference.torch_verify), M(gpufleet.inference.venv_link_info), M(gpufleet.inference.arch_audit) and
    M(gpufleet.inference.patch_rules).
  - Reads the core metadata (C(Requires-Dist), C(Requires-Python)) of sglang O(version) on the controller, without
    installing or importing it - from the wheel in O(wheelhouse) when one is given, else from the controller's cache
    O(cache_dir), else from the first of O(index_urls) that has the release (the simple API, PEP 691 JSON or PEP 503
    HTML). What is fetched is kept in O(cache_dir), in a folder named after its sha256, only once that was checked -
    against O(sha256), else the collection's pin of that release, else the index's hash (the METADATA file the index
    serves beside the wheel, PEP 658, where no wheel is pinned). A second run reads the cache and asks no index.
  - Judges the stack's pins (torch, torchvision, torchaudio, the flashinfer packages, the kernel package) against
    the requirements that apply on Linux x86_64 to each of O(pythons), per PEP 440 (V(2.14.1+cu130) meets
    V(==2.14.1)), and fails naming each contradiction, both sides and what to change. O(extras) must be extras the
    release names.
  - Nothing on the host is read or changed.
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  version:
    description: The sglang release to read.
    type: str
    required: true
  extras:
    description: The extras the install asks for; each must be one the release names.
    type: list
    elements: str
    default: []
  wheelhouse:
    description: A controller folder of wheels; its C(sglang-<version>-*.whl) is read. Empty means the cache and the indexes.
    type: str
    default: ""
  index_urls:
    description:
      - Index URLs (the simple API's root, such as V(https://pypi.org/simple)), tried in order; credentials
        (V(https://user:token@host/...)) are sent as an Authorization header and never shown.
    type: list
    elements: str
    default: []
  cache_dir:
    description: The controller's cache of what was fetched.
    type: path
    required: true
  sha256:
    description: The sha256 of the wheel to read; empty means the collection's pin of that release, else the index's hash.
    type: str
    default: ""
  pythons:
    description: The Pythons of the hosts' venvs, for C(Requires-Python) and the requirements' markers.
    type: list
    elements: str
    default: ["3.11", "3.12"]
  torch:
    description: "The torch packages' pins, C({name: version}) (the torch_nightly role's C(torch_nightly_pins))."
    type: dict
    default: {}
  flashinfer_version:
    description: The flashinfer packages' version; unset when the stack has no flashinfer stage.
    type: str
  flashinfer_versions:
    description: Per-package versions of the flashinfer packages, over O(flashinfer_version).
    type: dict
    default: {}
  flashinfer_packages:
    description: The flashinfer packages the stack installs.
    type: list
    elements: str
    default: []
  kernel_package:
    description: The kernel's distribution (V(sglang-kernel), formerly V(sgl-kernel)); unset when no version is pinned.
    type: str
  kernel_version:
    description: The kernel's pinned version.
    type: str
  timeout:
    description: Seconds each request to an index may take.
    type: int
    default: 600
extends_documentation_fragment:
  - gpufleet.inference.read_only
attributes:
  action:
    description: Implemented by an action plugin that runs on the controller.
    support: full
seealso:
  - module: gpufleet.inference.wheel_fit
'''

EXAMPLES = r'''
- name: Judge the stack's pins against sglang's requirements
  gpufleet.inference.sglang_requirements:
    version: "0.5.23"
    index_urls: [https://pypi.org/simple]
    cache_dir: "{{ playbook_dir }}/.cache/artifacts/sglang/_wheels"
    torch: {torch: "2.14.1", torchaudio: "2.11.0"}
    flashinfer_version: "0.7.2"
    flashinfer_packages: [flashinfer-python]
    kernel_package: sglang-kernel
    kernel_version: "0.4.10"
'''

RETURN = r'''
sglang:
  description: The release read, C(name) and C(version).
  returned: success
  type: dict
  sample: {name: sglang, version: "0.5.23"}
file:
  description: The file on the controller its metadata was read from (a wheel, or an index's METADATA file).
  returned: success
  type: str
  sample: /srv/gpufleet/.cache/artifacts/sglang/_wheels/8d25.../sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl
source:
  description: Where that file came from, V(wheelhouse), V(cache) or V(index).
  returned: success
  type: str
  sample: cache
requires_python:
  description: The release's C(Requires-Python).
  returned: success
  type: str
  sample: ">=3.11"
requirements:
  description: "What the release requires of the distributions the stack pins, C({name: [requirement]})."
  returned: success
  type: dict
  sample: {torch: ["torch==2.14.1"], sglang-kernel: ["sglang-kernel==0.4.10"]}
pins:
  description: "The stack's pins compared, C({name: version})."
  returned: success
  type: dict
  sample: {torch: "2.14.1", torchaudio: "2.11.0", flashinfer-python: "0.7.2", sglang-kernel: "0.4.10"}
problems:
  description: One message per contradiction or unknown extra; empty when the stack meets the requirements.
  returned: success
  type: list
  elements: str
  sample: ["sglang 0.5.23 requires torch==2.14.1; torch_nightly_versions.torch is 2.13.0: set it to 2.14.1 ..."]
'''
