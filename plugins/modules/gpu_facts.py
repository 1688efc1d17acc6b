#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

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
    and per GPU its index, name, UUID, compute capability, total memory, PCI bus id and board serial number.
  - Reads each GPU's health in the same query - persistence mode, the PCIe link as trained against its
    maximum (generation and width), ECC mode and uncorrected volatile errors, pending retired pages, the
    active clock event reasons (decoded), temperature, power draw and limit, SM clock and its maximum - and,
    only where a GPU has no retired-pages answer (row-remapping GPUs such as the H200), pending and failed
    row remaps in a second query. C([N/A]) and C([Not Supported]) become V(null), never a failure by
    themselves; a driver that refuses a health field gives the inventory without health, and says why.
  - >-
    O(expect) checks the hardware (device count, name, compute capability, driver) and the health against what
    the inventory expects; every unmet expectation is one C(name: expected X, found Y) line of the failure
    (C(... on GPU i (name)) for the health). deploy.yml's preflight runs it before anything changes, so a wrong
    fleet is refused before the CUDA install, the torch download and the sgl-kernel build.
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
  processes:
    description:
      - Also read what each GPU is doing - its compute processes (C(nvidia-smi --query-compute-apps) - pid, process
        name, memory used, and the command line where C(/proc) shows it), its memory in use and its utilization -
        and judge it busy or idle (RV(ansible_facts.gpufleet_gpu.gpus[].busy), with the reason). This module's own
        processes never count. V(true) as well with O(expect.idle).
    type: bool
    default: false
  xid:
    description:
      - Also read the Xid errors of the current boot from the kernel log - C(journalctl -k) where the host has it, else
        C(dmesg) - into RV(ansible_facts.gpufleet_gpu.xid), each mapped to its GPU by the PCI address the driver names and
        decoded to a short meaning for the common codes. V(true) as well with O(expect.no_xid_since_last_run).
      - A kernel log the user cannot read (C(kernel.dmesg_restrict), not in the systemd-journal group) is an answer with
        its reason, never an empty list; run this task with become where only root can read it.
    type: bool
    default: false
  xid_after:
    description:
      - The cursor an earlier read returned (C(cursor) in RV(ansible_facts.gpufleet_gpu.xid) - C(boot_id), C(monotonic_us)).
        O(expect.no_xid_since_last_run) counts only what came after it; without it, the whole current boot counts.
    type: dict
  busy_memory_mib:
    description:
      - A GPU with no compute process listed is still busy when this much of its memory (MiB) is in use (a process
        of another container is not listed, its memory is).
    type: int
    default: 2048
  expect:
    description:
      - Hardware and health expectations; the ones left unset are not checked, except
        O(expect.max_ecc_uncorrected), which is V(0) on a GPU with ECC on once any health expectation is given.
        A value the GPU does not report does not meet an expectation that asks for it.
    type: dict
    default: {}
    suboptions:
      device_count:
        description: Number of GPUs nvidia-smi lists (V(0) on a host that must have none).
        type: int
      device_name:
        description: Regular expression every GPU's name must match (C(re.search)), e.g. C(RTX PRO 6000 Blackwell).
        type: str
      compute_capability:
        description: Compute capability of every GPU, C(MAJOR.MINOR) (C(12.0) for SM120).
        type: str
      min_driver_version:
        description: Lowest accepted NVIDIA driver version, compared numerically (C(590.48.01)).
        type: str
      min_pcie_gen:
        description:
          - Lowest accepted PCIe generation of the link as trained (C(pcie.link.gen.current)).
          - Read as the GPU is now; a GPU may lower its link when idle (nvidia-smi - "may be reduced when the GPU is not
            in use"). torch_verify reads the links again right after its smoke test, under load.
        type: int
      min_pcie_width:
        description: Lowest accepted PCIe link width as trained (C(pcie.link.width.current)), for example V(16).
        type: int
      max_ecc_uncorrected:
        description: Most accepted uncorrected volatile ECC errors.
        type: int
      no_pending_remaps:
        description: No pending row remap, no failed row remap and no pending retired page.
        type: bool
      persistence_mode:
        description: Persistence mode on (V(true)) or off (V(false)).
        type: bool
      no_clock_slowdown:
        description: No hardware slowdown, thermal slowdown or power-brake clock event reason active.
        type: bool
      no_xid_since_last_run:
        description: No Xid error in the kernel log after O(xid_after) (the whole boot without it); a log that cannot be read fails it.
        type: bool
      ignore_xids:
        description: Xid codes O(expect.no_xid_since_last_run) leaves out, for example V([13, 31, 43]) (application faults).
        type: list
        elements: int
      idle:
        description:
          - Every GPU idle - no compute process of another program on it and less than O(busy_memory_mib) in use - for
            example before a change that must be verified on every GPU (a busy one is named with its processes).
        type: bool
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

- name: The hardware the inventory names, before anything changes
  gpufleet.inference.gpu_facts:
    required: true
    expect:
      device_count: 8
      device_name: RTX PRO 6000 Blackwell
      compute_capability: "12.0"
      min_driver_version: "590.48.01"

- name: Every GPU on a full x16 link, nothing pending, not held back (the generation is judged by torch_verify, under load)
  gpufleet.inference.gpu_facts:
    required: true
    expect:
      min_pcie_width: 16
      no_pending_remaps: true
      persistence_mode: true
      no_clock_slowdown: true

- name: The Xid errors of this boot, read as root where only root may read the kernel log
  gpufleet.inference.gpu_facts:
    xid: true
  become: true

- name: No Xid since the cursor an earlier read left, but for application faults
  gpufleet.inference.gpu_facts:
    xid_after: "{{ earlier.ansible_facts.gpufleet_gpu.xid.cursor }}"
    expect:
      no_xid_since_last_run: true
      ignore_xids: [13, 31, 43]
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
            serial:
              description:
                - The board serial number (C(nvidia-smi --query-gpu=serial)), the one physically printed on the board;
                  a string, leading zeros kept.
                - V(null) where the board has none (nvidia-smi answers C([N/A]) or C([Not Supported]), as GeForce
                  boards do).
              type: str
              sample: "1654124044948"
            health:
              description:
                - The GPU's health; V(null) for what the GPU does not report. Absent where the driver refused a
                  health field (RV(ansible_facts.gpufleet_gpu.health_error) says which).
                - C(persistence_mode), C(ecc_enabled), C(retired_pages_pending), C(remapped_rows_pending),
                  C(remapped_rows_failure) are booleans; C(pcie_gen_current), C(pcie_gen_max), C(pcie_width_current),
                  C(pcie_width_max), C(ecc_uncorrected_volatile), C(temperature_c), C(clocks_sm_mhz),
                  C(clocks_max_sm_mhz) integers; C(power_draw_w), C(power_limit_w) numbers;
                  C(clocks_event_reasons_active) the bit mask and C(clocks_event_reasons) its names
                  (C(gpu_idle), C(sw_power_cap), C(hw_slowdown), C(sw_thermal_slowdown), C(hw_thermal_slowdown),
                  C(hw_power_brake_slowdown), ...).
              type: dict
              sample: {persistence_mode: true, pcie_gen_current: 5, pcie_gen_max: 5, pcie_width_current: 16,
                       pcie_width_max: 16, ecc_enabled: true, ecc_uncorrected_volatile: 0, retired_pages_pending: null,
                       remapped_rows_pending: false, remapped_rows_failure: false, clocks_event_reasons_active: 0,
                       clocks_event_reasons: [], temperature_c: 31, power_draw_w: 76.28, power_limit_w: 700.0,
                       clocks_sm_mhz: 345, clocks_max_sm_mhz: 1980}
            usage:
              description: With O(processes), C(memory_used_mib) and C(utilization_pct) (V(null) where not reported).
              type: dict
              sample: {memory_used_mib: 88166, utilization_pct: 97}
            processes:
              description:
                - With O(processes), the compute processes on the GPU (this module's own left out) - C(pid),
                  C(process_name), C(used_memory_mib), C(command) (the command line, V(null) where C(/proc) does not
                  show it, for example a process of another container).
              type: list
              elements: dict
              sample: [{pid: 4242, process_name: python3, used_memory_mib: 88166,
                        command: "python3 -m sglang.launch_server --model-path /models/llama"}]
            busy:
              description: With O(processes), whether another program uses the GPU (processes, or memory in use).
              type: bool
            busy_reason:
              description: With O(processes), why it is busy, else V(null).
              type: str
              sample: "busy (pid 4242 python3 -m sglang.launch_server --model-path /models/llama, 86.1 GiB)"
        xid:
          description:
            - With O(xid), the Xid errors of the current boot - C(source) (V(journald) or V(dmesg)), C(error) (why the log
              could not be read, else V(null)), C(boot_id), C(read_monotonic_us) (the time since boot it was read up to),
              C(cursor) (where a later read starts counting), C(count) and C(events), the latest 200, each with C(code),
              C(meaning), C(gpu) (index, V(null) for an address no GPU listed has), C(uuid), C(pci), C(pid), C(process),
              C(text), C(monotonic_us) and C(time) (epoch seconds).
            - An empty C(events) list with no C(error) is an answer - no Xid in this boot.
          type: dict
          returned: when O(xid) is true and a GPU is present
          sample: {source: dmesg, error: null, boot_id: 1b629215-6ec9-4d26-818d-c812f7799105, count: 1,
                   cursor: {boot_id: 1b629215-6ec9-4d26-818d-c812f7799105, monotonic_us: 86400000000},
                   events: [{code: 79, meaning: GPU has fallen off the bus, gpu: 3, pci: "0000:3b:00", pid: null,
                             process: null, text: GPU has fallen off the bus., monotonic_us: 81234567890,
                             time: 1796342400.5}]}
        xid_expect:
          description: torch_verify's O(gpufleet.inference.torch_verify#module:expect) Xid keys, for the fleet report to judge.
          type: dict
          returned: by torch_verify
        processes_error:
          description: With O(processes), why the compute processes could not be read, else V(null).
          type: str
          returned: when O(processes) is true and a GPU is present
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
        health_error:
          description: Why the health is missing or incomplete (a health field the driver refused, row remapping not read), else V(null).
          type: str
          returned: always
          sample: null
mismatches:
  description: 'Every unmet O(expect) entry, as C(name: expected X, found Y on GPU i (name)).'
  type: list
  elements: str
  returned: always
  sample: ["min_pcie_width: expected >= x16, found x8 (max x16) on GPU 3 (NVIDIA RTX PRO 6000 Blackwell Server Edition)"]
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.inference.plugins.module_utils.gpu import (
    C_LOCALE,
    DEVICE_EXPECT_SPEC,
    HEALTH_EXPECT_SPEC,
    XID_EXPECT_SPEC,
    check_device_expectations,
    check_health_expectations,
    gather,
)
from ansible_collections.gpufleet.inference.plugins.module_utils.busy import DEFAULT_BUSY_MEMORY_MIB, judge
from ansible_collections.gpufleet.inference.plugins.module_utils import xid


def main():
    module = AnsibleModule(
        argument_spec=dict(
            required=dict(type='bool', default=False),
            nvidia_smi=dict(type='path'),
            timeout=dict(type='int', default=60),
            processes=dict(type='bool', default=False),
            busy_memory_mib=dict(type='int', default=DEFAULT_BUSY_MEMORY_MIB),
            xid=dict(type='bool', default=False),
            xid_after=dict(type='dict'),
            expect=dict(type='dict', default={}, options=dict(DEVICE_EXPECT_SPEC, idle=dict(type='bool'),
                                                              **dict(HEALTH_EXPECT_SPEC, **XID_EXPECT_SPEC))),
        ),
        supports_check_mode=True,
    )
    module.run_command_environ_update = C_LOCALE
    expect = dict((key, value) for key, value in module.params['expect'].items() if value is not None)
    for name in ('device_count', 'min_pcie_gen', 'min_pcie_width', 'max_ecc_uncorrected'):
        if expect.get(name) is not None and expect[name] < 0:
            module.fail_json(msg='expect.%s: expected a number >= 0, found %d' % (name, expect[name]))
    if module.params['busy_memory_mib'] < 1:
        module.fail_json(msg='busy_memory_mib: expected a positive number of MiB, found %d' % module.params['busy_memory_mib'])
    processes = module.params['processes'] or bool(expect.get('idle'))
    facts, result = gather(module, module.params['nvidia_smi'], module.params['timeout'], processes=processes)
    if processes:
        judge(facts, module.params['busy_memory_mib'])
    if module.params['required'] and not facts['present']:
        module.fail_json(msg='required: expected an NVIDIA GPU, found none (%s)' % facts['error'],
                         ansible_facts=dict(gpufleet_gpu=facts), **(result or {}))
    health = dict((key, value) for key, value in expect.items() if key in HEALTH_EXPECT_SPEC)
    mismatches = check_device_expectations(expect, facts['gpus'], len(facts['gpus']), facts['driver_version'])
    mismatches += check_health_expectations(health, facts) if health else []
    if module.params['xid'] or expect.get('no_xid_since_last_run'):
        if facts['present']:
            facts['xid'] = xid.read(module, facts['gpus'])
        mismatches += xid.judge(facts.get('xid'), module.params['xid_after'], expect)['failures']
    if expect.get('idle'):
        mismatches += ['idle: expected no other program on GPU %s, found %s' % (gpu['index'], gpu['busy_reason'])
                       for gpu in facts['gpus'] if gpu.get('busy')]
    if mismatches:
        module.fail_json(msg='%d hardware or health check(s) failed: %s' % (len(mismatches), '; '.join(mismatches)),
                         mismatches=mismatches, ansible_facts=dict(gpufleet_gpu=facts))
    module.exit_json(changed=False, mismatches=[], ansible_facts=dict(gpufleet_gpu=facts))


if __name__ == '__main__':
    main()
