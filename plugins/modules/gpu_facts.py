#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: gpu_facts
short_description: NVIDIA driver and GPU facts from nvidia-smi
version_added: 0.1.0
description:
  - Runs C(nvidia-smi --query-gpu=... --format=csv,noheader,nounits) once, as an argument
    list with a C locale, and returns the driver version, the CUDA version the driver supports,
    and per GPU its index, name, UUID, compute capability, total memory and PCI bus id.
  - Derives the arch list to build CUDA kernels for (C(12.0a) for compute capability 12.0,
    C(10.0a) for 10.0, C(9.0a) for 9.0, plain C(8.9), C(8.6), C(8.0) below, deduplicated),
    the same list that the P(gpufleet.inference.cuda_arch_list#filter) filter gives.
  - Needs no PyTorch. A host without an NVIDIA GPU, without a working driver, or without
    C(nvidia-smi) returns O(ignore:present=false) and no GPUs, and fails only when O(required=true).
  - A line of C(nvidia-smi) output that cannot be parsed fails the task and names the line.
  - Read-only; never reports a change.
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  required:
    description:
      - Fail when the host has no usable NVIDIA GPU (no C(nvidia-smi), no driver, no device).
    type: bool
    default: false
  nvidia_smi:
    description:
      - Path of C(nvidia-smi). By default it is looked up on E(PATH) and in the usual system directories.
    type: path
  timeout:
    description:
      - Seconds to wait for C(nvidia-smi), which can hang on a GPU that has fallen off the bus.
      - Enforced with the C(timeout) command when the host has it (coreutils, busybox).
      - V(0) waits for ever.
    type: int
    default: 60
extends_documentation_fragment:
  - gpufleet.inference.read_only
attributes:
  facts:
    description: Returns C(gpufleet_gpu) under C(ansible_facts).
    support: full
notes:
  - The CUDA version the driver supports is read from C(libcuda.so.1) (C(cuDriverGetVersion),
    which creates no GPU context), since the C(--query-gpu) CSV has no field for it; it is
    V(null) when the library cannot be loaded.
seealso:
  - module: gpufleet.inference.torch_verify
  - plugin: gpufleet.inference.cuda_arch_list
    plugin_type: filter
'''

EXAMPLES = r'''
- name: Read the GPUs of the host
  gpufleet.inference.gpu_facts:

- name: Build for the GPUs that are really there
  ansible.builtin.debug:
    msg: "TORCH_CUDA_ARCH_LIST={{ gpufleet_gpu.arch_list | join(';') }}"
  when: gpufleet_gpu.present

- name: A GPU node must have its GPUs
  gpufleet.inference.gpu_facts:
    required: true
    timeout: 30
'''

RETURN = r'''
ansible_facts:
  description: Facts to add to the host's facts.
  returned: always
  type: dict
  contains:
    gpufleet_gpu:
      description: The NVIDIA driver and GPUs of the host.
      returned: always
      type: dict
      contains:
        present:
          description: Whether nvidia-smi listed at least one GPU.
          type: bool
          returned: always
          sample: true
        driver_version:
          description: NVIDIA driver version.
          type: str
          returned: always
          sample: "580.159.04"
        cuda_driver_version:
          description: Highest CUDA version the driver supports (what the nvidia-smi banner calls "CUDA Version").
          type: str
          returned: always
          sample: "13.0"
        gpus:
          description: One entry per GPU, by index.
          type: list
          elements: dict
          returned: always
          contains:
            index:
              description: nvidia-smi index.
              type: int
              sample: 0
            name:
              description: Product name.
              type: str
              sample: NVIDIA H200
            uuid:
              description: GPU UUID.
              type: str
              sample: GPU-3b6a8c0e-5f8e-2f36-9a7b-0d1c2e3f4a5b
            compute_capability:
              description: Compute capability as C(MAJOR.MINOR).
              type: str
              sample: "9.0"
            memory_total_mib:
              description: Total memory in MiB, V(null) where the GPU has no dedicated memory.
              type: int
              sample: 143771
            pci_bus_id:
              description: PCI bus id, C(domain:bus:device.function).
              type: str
              sample: "00000000:19:00.0"
        arch_list:
          description: TORCH_CUDA_ARCH_LIST entries for these GPUs, lowest first, deduplicated.
          type: list
          elements: str
          returned: always
          sample: ["9.0a"]
        error:
          description: Why O(ignore:present) is false (no nvidia-smi, driver not loaded, no device), else V(null).
          type: str
          returned: always
          sample: "nvidia-smi not found"
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.inference.plugins.module_utils.gpu import C_LOCALE, gather


def main():
    module = AnsibleModule(
        argument_spec=dict(
            required=dict(type='bool', default=False),
            nvidia_smi=dict(type='path'),
            timeout=dict(type='int', default=60),
        ),
        supports_check_mode=True,
    )
    module.run_command_environ_update = C_LOCALE
    facts, result = gather(module, module.params['nvidia_smi'], module.params['timeout'])
    if module.params['required'] and not facts['present']:
        module.fail_json(msg='required: expected an NVIDIA GPU, found none (%s)' % facts['error'],
                         ansible_facts=dict(gpufleet_gpu=facts), **(result or {}))
    module.exit_json(changed=False, ansible_facts=dict(gpufleet_gpu=facts))


if __name__ == '__main__':
    main()
