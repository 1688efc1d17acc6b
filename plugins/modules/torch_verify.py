#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: torch_verify
short_description: Verify a PyTorch environment on the host with its own interpreter, and register it as facts
version_added: 0.1.0
description:
  - Runs the given interpreter (normally the venv's C(python)) once with a probe that is sent on
    its command line (C(python -I -c PROBE)), never written to the target's disk, and isolated from
    the user's site-packages and C(PYTHON*) variables.
  - The probe imports torch and reports the Python and torch versions, torch's CUDA version, the
    devices torch sees, cuDNN, NCCL, the C++11 ABI flag, torch's compiled arch list, the NVIDIA
    driver version, where the loader resolves C(libcudart) (C(ldconfig -p)) and C(nvcc --version)
    of the CUDA_HOME torch would use. C(ldconfig) and C(nvcc) run while torch is being imported,
    so they add no wall time.
  - O(imports) are imported in the same process after torch. An C(undefined symbol) import error
    is diagnosed as an extension built against another torch, with the symbol demangled by
    C(c++filt) where the host has it.
  - O(smoke=true) runs real kernels on every GPU - a bfloat16 and a float16 matrix product checked
    against a float32 reference, every element checked finite - and reports TFLOP/s per device
    and dtype. V(true) from C(torch.cuda.is_available) can coexist with kernels that produce NaN; this catches it.
  - O(kernels=true) runs the ops the serving stack calls (torch's FP8/NVFP4 GEMMs, sgl_kernel's and flashinfer's
    norms, activations, sampling and FP4 GEMMs) on every GPU against an fp32 reference of the same inputs, over
    several row counts; every check is listed as ok, failed or skipped with its reason. An import error is
    followed along its exception chain (a library built for another CUDA is named), and O(expect.consistent)
    checks the installed distributions against each other's pins on torch.
  - O(collectives=true) checks the collective path across the host's GPUs - one process per GPU through
    C(torch.distributed) with NCCL, started by the probe (no C(torchrun)) - with an all-reduce whose exact
    sum is known (any wrong element on any rank fails the host, whatever the speed) and the bus bandwidth at
    each of O(collectives_sizes_mib) (busbw = algbw x 2(n-1)/n, as nccl-tests defines it). A host with
    fewer than 2 GPUs reports it skipped with the reason (C(1 GPU)), never as passed; O(expect.min_allreduce_busbw_gbps)
    makes the skip a failure.
  - >-
    O(expect) compares the facts with what the inventory expects. Every mismatch is listed in
    one failure message as C(name: expected X, found Y).
  - The facts are returned on failure too, in the registered result
    (C(result.ansible_facts.gpufleet_torch)), and in C(ansible_failed_result) inside a C(rescue).
  - Read-only; never reports a change.
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  python:
    description:
      - Interpreter to verify, for example C(~/ml-env/bin/python). It must be executable.
      - One of O(python) and O(link) is required.
    type: path
  link:
    description:
      - The stable venv path (for example C(~/ml-env)), absolute or under C(~/). The module reads it
        as P(gpufleet.inference.venv_link_info#module) does and verifies C(<venv>/bin/python), where
        C(<venv>) is O(venv), or the venv the link points at when O(venv) is empty. The link, the
        active venv and the activation history are returned in RV(link), so that a fleet
        verification reads them and verifies the venv in one module run.
      - Fails, naming the path, when the stable path is not a symlink, when there is no venv to
        verify, or when the venv has no interpreter. In check mode a venv that does not exist yet
        is not a failure; the result says it would be verified after the real install
        (RV(probed=false)).
    type: str
  venv:
    description:
      - With O(link), the venv to verify instead of the one the link points at, absolute or under C(~/).
    type: str
    default: ''
  adopt:
    description:
      - With O(link), accept a hand-built venv directory (with C(pyvenv.cfg) and C(bin/python)) at the
        stable path as the active venv, as P(gpufleet.inference.venv_link_info#module)'s O(adopt) does.
    type: bool
    default: false
  imports:
    description:
      - Modules to import after torch in the same process, for example C(sgl_kernel), C(flashinfer).
      - Each is reported as ok or error, with its version. Use O(expect.imports) to make one required.
    type: list
    elements: str
    default: []
  smoke:
    description:
      - Run the matrix product smoke test on every CUDA device. Fails when torch sees no device.
    type: bool
    default: false
  kernels:
    description:
      - Run the kernel checks on every
        GPU, or on the CPU where an op has a CPU kernel and the host has no GPU. The checks are the low-precision GEMMs of torch
        (FP8 e4m3 per-tensor C(torch._scaled_mm) on compute capability >= 8.9, NVFP4 on >= 10.0) and the
        built-in check sets of C(sgl_kernel) (rmsnorm, fused_add_rmsnorm, silu_and_mul, fp8_scaled_mm,
        cutlass_scaled_fp4_mm) and C(flashinfer) (norm.rmsnorm, activation.silu_and_mul, top-k sampling at
        k=1 against argmax, gemm.mm_fp4 per backend), each against an fp32 torch reference of the same inputs,
        over several numbers of rows M (1, 7, 128, 1024 for norms and activations, hidden size 2048 on a GPU and 256 on
        the CPU; 16 to 4096 for GEMMs, N = K = 4096).
      - Every check is listed in RV(ansible_facts.gpufleet_torch.kernels) as ok, failed (with what) or skipped
        (with why). A failed check fails the module; a skipped one fails it only when O(expect.kernels)
        requires it.
      - V(true) as well when O(expect.kernels) is set. O(smoke=true) runs the torch GEMMs too.
    type: bool
    default: false
  collectives:
    description:
      - Run the all-reduce check (module_utils C(collectives)) where the host has 2 or more GPUs, or with
        O(collectives_backend=gloo) over O(collectives_world_size) CPU processes. It runs within O(timeout),
        bounded by O(collectives_timeout); a rank that does not finish is named with what it was doing.
      - Every rank runs with C(NCCL_NVLS_ENABLE=0); NVLink multicast is never used.
    type: bool
    default: false
  collectives_backend:
    description:
      - V(nccl) - one rank per GPU; V(gloo) - CPU ranks, for hosts without GPUs and for tests of the same code path.
    type: str
    choices: [nccl, gloo]
    default: nccl
  collectives_world_size:
    description:
      - Number of CPU ranks with O(collectives_backend=gloo) (2 or more); with NCCL the world is one rank per GPU.
    type: int
    default: 2
  collectives_sizes_mib:
    description:
      - All-reduce message sizes in MiB at which the bus bandwidth is measured.
    type: list
    elements: int
    default: [1, 16, 64]
  collectives_iterations:
    description:
      - Timed all-reduces per message size, after 2 warm-up ones.
    type: int
    default: 5
  collectives_timeout:
    description:
      - Seconds the all-reduce check may take (all ranks, torch imports included), within what is left of O(timeout).
    type: int
    default: 120
  kernel_tolerances:
    description:
      - Largest accepted relative error C(||out - ref|| / ||ref||) per check name, overriding the built-in one.
    type: dict
    default: {}
  flashinfer_workspace_venv:
    description:
      - Keep flashinfer's JIT cache in the verified venv (C(FLASHINFER_WORKSPACE_BASE) = the venv's root, so
        the cache is C(<venv>/.cache/flashinfer)) unless O(environment) sets C(FLASHINFER_WORKSPACE_BASE).
        A rollback then keeps the cache compiled for its own flashinfer.
    type: bool
    default: true
  smoke_size:
    description:
      - Size N of the N x N matrices of the smoke test.
    type: int
    default: 8192
  smoke_iterations:
    description:
      - Timed products per device and dtype, after one warm-up product.
    type: int
    default: 10
  smoke_dtypes:
    description:
      - Data types of the smoke test, each compared with a float32 reference.
    type: list
    elements: str
    choices: [bfloat16, float16]
    default: [bfloat16, float16]
  smoke_tolerance:
    description:
      - Largest accepted relative error C(||C - C_fp32|| / ||C_fp32||) of a smoke product.
    type: float
    default: 0.02
  expect:
    description:
      - Expectations; the ones left unset are not checked.
    type: dict
    default: {}
    suboptions:
      torch_version:
        description:
          - torch version, exact (C(2.12.0.dev20260307+cu130)), a prefix that ends at a version
            boundary (C(2.12.0.dev20260307)), or a glob (C(2.12.*)).
        type: str
      python_version:
        description: Python version, exact or prefix (C(3.12)).
        type: str
      cuda_version:
        description: CUDA version torch was built with (C(torch.version.cuda)), exact or prefix.
        type: str
      device_count:
        description: Number of CUDA devices torch sees.
        type: int
      device_name:
        description: Regular expression that every device name must contain a match of (C(H200)).
        type: str
      compute_capability:
        description: Compute capability of every device, C(MAJOR.MINOR).
        type: str
      min_driver_version:
        description: Lowest accepted NVIDIA driver version, compared numerically.
        type: str
      min_cudnn_version:
        description: Lowest accepted cuDNN version, compared numerically.
        type: str
      min_smoke_tflops:
        description: Lowest accepted smoke TFLOP/s of every device and dtype. Needs O(smoke=true).
        type: float
      cxx11_abi:
        description: Expected value of C(torch.compiled_with_cxx11_abi).
        type: bool
      min_allreduce_busbw_gbps:
        description:
          - Lowest accepted all-reduce bus bandwidth in GB/s at O(expect.allreduce_size_mib). Needs
            O(collectives=true); a host where the check was skipped (C(1 GPU)) fails it, naming why.
        type: float
      allreduce_size_mib:
        description:
          - The message size (MiB) at which O(expect.min_allreduce_busbw_gbps) is judged; one of
            O(collectives_sizes_mib). Default - the largest of them.
        type: int
      imports:
        description: Modules that must import; they are added to O(imports).
        type: list
        elements: str
        default: []
      kernels:
        description:
          - Kernel checks that must pass on every device, by name (C(sgl_kernel.rmsnorm),
            C(torch.fp8_scaled_mm), ...). A required check that was skipped fails, naming why. Sets O(kernels=true).
        type: list
        elements: str
        default: []
      min_pcie_gen:
        description:
          - Lowest accepted PCIe generation of every GPU's link as trained. Needs O(gpu=true), as do the five below.
          - A GPU may lower its link when idle (nvidia-smi - "may be reduced when the GPU is not in use"), so where the
            probe ran the smoke test or the kernel checks on a GPU, the links are read again right after it, under load
            (C(pcie_read_under_load) in the GPU's health).
        type: int
      min_pcie_width:
        description: Lowest accepted PCIe link width of every GPU as trained (V(16) for x16).
        type: int
      max_ecc_uncorrected:
        description: Most accepted uncorrected volatile ECC errors per GPU; V(0) on a GPU with ECC on when unset.
        type: int
      no_pending_remaps:
        description: No pending or failed row remap and no pending retired page on any GPU.
        type: bool
      persistence_mode:
        description: Persistence mode on (V(true)) or off (V(false)) on every GPU.
        type: bool
      no_clock_slowdown:
        description: No hardware, thermal or power-brake clock slowdown active on any GPU.
        type: bool
      no_xid_since_last_run:
        description:
          - No Xid error in the kernel log since the last run. Not judged here - the module has no memory of runs - but
            returned in C(xid_expect) of RV(ansible_facts.gpufleet_gpu) for the fleet report, which judges it against the
            cursor the host's previous report row left (verify.yml, deploy.yml); a kernel log that could not be read
            fails it. P(gpufleet.inference.gpu_facts#module) judges it against its O(gpufleet.inference.gpu_facts#module:xid_after).
          - Needs O(gpu=true) and O(xid=read) (or O(xid_answer)).
        type: bool
      ignore_xids:
        description: Xid codes that O(expect.no_xid_since_last_run) leaves out, for example V([13, 31, 43]) (application faults).
        type: list
        elements: int
      max_kernel_proof_age_hours:
        description:
          - The oldest accepted numeric pass (hours) of every GPU under this stack, from the record of O(proof); a GPU
            never proven under this stack (a new stack, a new driver) fails it too. Needs O(proof=true).
        type: float
      consistent:
        description:
          - The installed distributions must agree with each other's pins on torch, torchvision and
            torchaudio (read from their metadata), for example
            C(torchvision 0.24.1 requires torch==2.9.1, installed torch is 2.11.0+cu130).
        type: bool
  timeout:
    description:
      - Seconds the probe may run, smoke test included; the probe ends itself with an alarm after that.
      - V(0) waits for ever.
    type: int
    default: 300
  isolated:
    description:
      - Run the interpreter with C(-I) (no user site, no C(PYTHON*) variables, no current directory
        on C(sys.path)).
    type: bool
    default: true
  environment:
    description:
      - Variables to set for the probe, for example C(CUDA_HOME) or C(CUDA_VISIBLE_DEVICES).
    type: dict
    default: {}
  packages:
    description:
      - Also list the interpreter's installed distributions (name and version), read in the
        same process, as RV(ansible_facts.gpufleet_torch.packages). Distributions installed by
        direct reference (a local wheel build) are left out, as in C(uv pip freeze)'s
        C(name==version) lines.
    type: bool
    default: false
  gpu:
    description:
      - Also read the NVIDIA driver and the GPUs with C(nvidia-smi), as P(gpufleet.inference.gpu_facts#module)
        does, and return them as RV(ansible_facts.gpufleet_gpu), in the same module run (one task and
        one connection for a fleet verification instead of two).
    type: bool
    default: false
  gpu_required:
    description:
      - With O(gpu=true), fail when the host has no usable NVIDIA GPU, before the probe runs.
    type: bool
    default: false
  mode:
    description:
      - How deep the verification goes on a GPU that serves. Before any CUDA work the module reads each GPU's
        compute processes (C(nvidia-smi --query-compute-apps); its own left out), memory in use and utilization; a
        GPU is busy when another program has a context on it, or when O(busy_memory_mib) of its memory is in use.
      - V(auto) - the numeric checks (O(smoke), O(kernels), O(collectives)) run on the idle GPUs only; the probe sees
        only those (C(CUDA_VISIBLE_DEVICES)), so no CUDA context is made on a busy one, and each busy GPU is listed in
        RV(ansible_facts.gpufleet_torch.gpu_use) as skipped with its processes. A skip is never a failure; the
        numeric expectations are judged where the checks ran.
      - V(in_service) - no GPU time at all - versions, imports, pins, markers and health only; every GPU is listed as
        skipped.
      - V(full) - the numeric checks on every GPU; a busy GPU fails the module before the probe runs, naming the
        processes (RV(busy_refused)).
      - The numbers of smoke and kernel results are nvidia-smi's GPU indexes (the probe sets
        C(CUDA_DEVICE_ORDER=PCI_BUS_ID) unless the environment sets it, and its device numbers under the mask are
        mapped back).
    type: str
    choices: [auto, in_service, full]
    default: auto
  busy_memory_mib:
    description:
      - Memory in use (MiB) that makes a GPU busy when none of its processes is listed (a process of another
        container is not listed, its memory is).
    type: int
    default: 2048
  proof:
    description:
      - With O(link), keep the host's record of its last numeric pass per GPU and stack (the venv, torch, the driver,
        the sgl_kernel build) beside the stable path (C(~/.ml-env.proof.json) for C(~/ml-env)), written atomically
        when a GPU passed its numeric checks, never in check mode; and report how old each GPU's proof is in
        RV(ansible_facts.gpufleet_torch.proof). Writing the record is not reported as a change.
    type: bool
    default: false
  model:
    description:
      - The model the node will serve, to verify it at that model's own shapes - a profile the collection
        ships (V(qwen3-30b-a3b), V(qwen3-30b-a3b-fp8), V(qwen3-235b-a22b), V(mixtral-8x7b), V(deepseek-v3),
        V(kimi-k2), V(gpt-oss-120b), V(gpt-oss-20b), V(llama-4-scout)), or the path on the host of the model's
        Hugging Face C(config.json) (or of its directory; a C(hf_quant_config.json) beside it is read too; a
        multimodal one through its C(text_config)). Empty - no model checks.
      - With a model, the model checks run on every idle GPU - the GEMMs of its layers (qkv and o, or MLA's qkv_a, q_b
        or q and kv_a, kv_b and o; gate_up, down; the shared experts' shared_gate_up, shared_down) at the
        per-GPU shard shapes of O(tp_size) in the model's precision, M over 1, 7, 127, 128, 129, 1024 and 2001, and
        one MoE layer with the model's router (softmax or sigmoid top-k, grouped, with its correction bias and
        scaling factor, or Llama 4's weight on the input) through each fused MoE backend the GPU supports
        (flashinfer's, and sglang's triton runner where sglang is installed in the venv - BF16, per-tensor FP8 or the model's FP8 blocks;
        an MXFP4 model's experts, GEMMs and MoE, are skipped with the reason, its BF16 GEMMs checked), M over
        1, 7, 128, 129 and 1024, autotuned backends with flashinfer's autotuner off and on, each against fp32 of the
        same inputs - and each
        serving backend is qualified per GPU model; RV(ansible_facts.gpufleet_torch.backends) carries the sglang
        flags that follow.
    type: str
    default: ''
  model_config:
    description:
      - The model's C(config.json) as a dict (read on the controller, for example with
        C(lookup('ansible.builtin.file', 'config.json') | from_json)); takes the place of a path in O(model), which
        then only names it.
    type: dict
  model_quant_config:
    description: With O(model_config), the model's C(hf_quant_config.json) (ModelOpt) as a dict, where it has one.
    type: dict
  tp_size:
    description:
      - Tensor-parallel size the model is served with; it must divide the attention heads and the intermediate
        sizes (and keep FP8 blocks and NVFP4 groups whole). A value that does not fails before any GPU work, naming
        the sizes that fit.
    type: int
    default: 1
  backend_preference:
    description:
      - Per backend family (V(moe_runner), V(fp4_gemm), V(fp8_gemm)), the sglang backend names in the order they are
        preferred; the first that qualified on every GPU model of the host is the flag. Names are sglang's choices
        for O(sglang_version). Families not given keep the collection's order (moe_runner - flashinfer_cutlass,
        flashinfer_trtllm, triton; fp4_gemm - flashinfer_cudnn, flashinfer_cutlass, flashinfer_trtllm).
    type: dict
    default: {}
  backend_required:
    description:
      - Per family, one backend that must qualify; the host fails otherwise (C(expected X, found failed ...)).
    type: dict
    default: {}
  backend_families:
    description:
      - The families the host must get a flag for. Default - moe_runner for a model with experts, fp4_gemm for an
        NVFP4 model. A needed family where no backend qualified fails the host.
    type: list
    elements: str
  sglang_version:
    description: The sglang release whose flag names and choices the flags are written for.
    type: str
    default: 0.5.23
  xid:
    description:
      - V(read) - with O(gpu=true), read the Xid errors of the current boot from the kernel log (C(journalctl -k) where the
        host has it, else C(dmesg)) as the connecting user, into C(xid) of RV(ansible_facts.gpufleet_gpu); a log that user
        cannot read is an answer with its reason (C(error)), never an empty list. V(off) - not read.
    type: str
    choices: [read, 'off']
    default: 'off'
  xid_answer:
    description:
      - The answer of an Xid read made before this module (P(gpufleet.inference.gpu_facts#module) with
        O(gpufleet.inference.gpu_facts#module:xid=true) and become, where only root can read the kernel log), used as is.
    type: dict
  serving_name:
    description:
      - With O(model) and O(link), where the verification passed and every needed backend family qualified
        (C(backends.status) V(selected)), write the serving flags inside the verified venv - C(<venv>/<name>.json) (the
        model, its shard shapes, the flags and per GPU model each backend's verdict) and C(<venv>/<name>.env)
        (C(SGLANG_ARGS="--moe-runner-backend ..."), for systemd's C(EnvironmentFile=)) - each only where its content
        changed (then the module reports changed; under check mode it only says so). A host that did not pass keeps the
        files of its last pass. A file name, without C(/). Empty - nothing is written.
    type: str
    default: ''
  served_check:
    description:
      - V(auto) - with a model whose serving flags were selected, sglang installed in the venv and the host's checks
        passed so far, serve requests through sglang's own server (C(<venv>/bin/python -m sglang.launch_server)) with
        those flags, C(--load-format dummy), the model's config.json reduced to 2 layers through
        C(--json-model-override-args) (experts, heads and hidden sizes kept) and C(--skip-tokenizer-init), at
        O(tp_size) on the first idle GPUs, on a free loopback port; single and batched token-id requests, greedy,
        with logprobs, pass only when every logprob is finite and no output is one token repeated. A backend whose
        request fails is excluded and the next qualified one tried; the host fails where none is left, naming each
        with the server's last log lines. The server's process group is always stopped. Where it cannot run (no idle
        GPU, no sglang, no flags), C(served) of RV(ansible_facts.gpufleet_torch.backends) says skipped and why.
      - V(off) - not run (said so in the same place).
    type: str
    choices: [auto, 'off']
    default: auto
  served_timeout:
    description: Seconds the served check waits for the server's C(/health) to answer 200, per backend tried.
    type: int
    default: 600
  model_jit:
    description:
      - V(cache_only) - a flashinfer module missing from the prebuilt JIT cache is never compiled during verification
        (C(FLASHINFER_DISABLE_JIT=1) around the model checks); the check is skipped and names the module. V(allow) -
        compile it (the CUTLASS fused MoE module for SM90 takes more than 28 minutes on 16 cores); refused with a
        O(timeout) below 3600.
    type: str
    choices: [cache_only, allow]
    default: cache_only
  markers:
    description:
      - JSON files under the interpreter's C(sys.prefix) (the venv's root), for example
        C(gpufleet-sgl_kernel.json), read in the same process and returned as
        RV(ansible_facts.gpufleet_torch.markers); a missing or unreadable file gives V(null).
      - Relative paths only, without C(..).
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - gpufleet.inference.read_only
attributes:
  facts:
    description: Returns C(gpufleet_torch) under C(ansible_facts).
    support: full
notes:
  - The probe runs with a C locale. Output that is not UTF-8 is decoded with replacement characters.
  - I(probe_seconds) is the wall time of the interpreter run; importing torch dominates it.
seealso:
  - module: gpufleet.inference.gpu_facts
'''

EXAMPLES = r'''
- name: Verify the venv, run kernels on every GPU, and compare with the inventory
  gpufleet.inference.torch_verify:
    python: "{{ uv_venv_python }}"
    imports: [sgl_kernel, flashinfer]
    smoke: true
    expect:
      torch_version: "2.12.0.dev20260307+cu130"
      cuda_version: "13.0"
      device_count: 8
      device_name: "RTX PRO 6000 Blackwell"
      compute_capability: "12.0"
      min_driver_version: "580.65.06"
      min_smoke_tflops: 100
      imports: [sgl_kernel]

- name: Verify an SM120 node the way the reference cluster does (kernels that failed in the field must pass)
  gpufleet.inference.torch_verify:
    python: ~/ml-env/bin/python
    imports: [sgl_kernel, flashinfer]
    smoke: true
    kernels: true
    kernel_tolerances: {sgl_kernel.cutlass_scaled_fp4_mm: 0.12}
    expect:
      compute_capability: "12.0"
      consistent: true
      kernels: [torch.nvfp4_scaled_mm, sgl_kernel.cutlass_scaled_fp4_mm, flashinfer.mm_fp4.cutlass]

- name: Verify, keep the facts whatever happens, decide later
  gpufleet.inference.torch_verify:
    python: ~/ml-env/bin/python
    expect: "{{ gpufleet_expect }}"
  register: torch_verify_result
  ignore_errors: true

- name: Show what was found
  ansible.builtin.debug:
    msg: "{{ torch_verify_result.ansible_facts.gpufleet_torch.torch_version }}"
'''

RETURN = r'''
link:
  description: With O(link), what P(gpufleet.inference.venv_link_info#module) returns.
  returned: when O(link) is given and is a usable path
  type: dict
  contains:
    link_path: {description: The stable path with C(~) expanded., type: str}
    history_path: {description: The activation history beside it., type: str}
    link_exists: {description: Whether the stable path exists., type: bool}
    link_is_directory: {description: 'Whether it is a hand-built venv directory (only with O(adopt)).', type: bool}
    active_venv: {description: The venv the link points at (a real path) or empty., type: str}
    history: {description: 'Venvs activated before, oldest first.', type: list, elements: str}
    target: {description: The venv verified., type: str}
    target_python: {description: Whether C(<target>/bin/python) exists., type: bool}
probed:
  description: Whether the interpreter was run; V(false) only in check mode for a venv that does not exist yet.
  returned: always
  type: bool
busy_refused:
  description: With O(mode=full), whether the module refused the host before any CUDA work because a GPU was busy.
  returned: when it refused
  type: bool
serving_files:
  description:
    - With O(serving_name), the serving files - C(paths) (both), C(changed) (those written, or that would be under check
      mode) and C(error) (why one could not be written; that fails the host).
  returned: when O(serving_name) was given and the backends were selected
  type: dict
  sample: {paths: [/home/deploy/ml-env/gpufleet-serving.json, /home/deploy/ml-env/gpufleet-serving.env], changed: [], error: null}
mismatches:
  description: 'Every failed check, as C(name: expected X, found Y); empty on success.'
  returned: always
  type: list
  elements: str
  sample: ["device_count: expected 8, found 7"]
ansible_facts:
  description: Facts to add to the host's facts.
  returned: always
  type: dict
  contains:
    gpufleet_gpu:
      description: With O(gpu=true), the driver and GPUs in the shape P(gpufleet.inference.gpu_facts#module) returns.
      returned: when O(gpu=true)
      type: dict
    gpufleet_torch:
      description: What the interpreter really has.
      returned: always
      type: dict
      contains:
        model:
          description:
            - With O(model), the model verified - its name, precision, TP size, shard shapes and the backend families it
              needs; C(unchecked) (family -> why) names the families whose flag is left to sglang because no check here
              runs the model's precision (the MoE runner of an MXFP4 model).
          returned: with O(model)
          type: dict
        model_checks:
          description:
            - With O(model), one entry per model check and GPU in the shape of RV(ansible_facts.gpufleet_torch.kernels),
              plus C(shapes), C(autotune) (the modes run) and, for MoE, C(experts_checked) and C(note) when fewer experts
              than the model's were checked.
          returned: with O(model)
          type: list
          elements: dict
        model_checks_error:
          description: The exception that stopped the model checks, when one did.
          returned: with O(model)
          type: str
        backends:
          description:
            - With O(model), the serving backends - C(status) (V(selected), V(failed), or V(skipped) with C(reason) when no
              GPU was worked), C(qualification) (per GPU model, family and backend - qualified, failed or skipped, with
              the reason), C(flags) (family -> backend), C(args) (the sglang command-line flags), C(env) (an environment
              file with C(SGLANG_ARGS)), C(problems), C(sglang_version) and C(source).
            - C(flags_check) - the flags through the installed sglang's own argument parser (what C(sglang serve)
              parses with; nothing is started) - V(ok) or V(failed) with what it said (a failure is a mismatch and keeps the
              serving files of the last pass), or V(not checked) with why - V(sglang not installed) where the venv has
              no sglang.
            - C(sglang_auto) - per GPU model, the moe_runner backend sglang's C(--moe-runner-backend auto) would run
              for the model's experts there (C(unknown) where sglang could not be asked), and C(sglang_auto_how) - how
              it was asked (ServerArgs resolved without the model's files, then the MoE quantization method's runner)
              or why not.
            - C(served) - the served check (O(served_check)) - C(status) (V(passed), V(failed), V(skipped)), C(reason),
              C(args) (the flags that served; C(flags), C(args) and C(env) follow them, and C(env) says
              C(GPUFLEET_SERVED)), C(excluded) (backends whose request failed), C(ready_seconds), C(tokens_per_second),
              C(seconds), C(gpus), C(layers) (the model override) and C(attempts) (per backend tried - C(args),
              C(status), C(reason), C(log_tail), C(stopped)).
          returned: with O(model)
          type: dict
          sample: {status: selected, flags: {moe_runner: flashinfer_cutlass}, args: "--moe-runner-backend flashinfer_cutlass"}
        sglang:
          description:
            - Where sglang is installed in the venv, what it answered when run once more after the probe - C(version),
              C(flags_check) (C(status), C(reason), C(argv)), C(auto) (C(gpu), C(moe_runner), C(how) or C(reason)),
              C(pin_conflicts) (the torch pins of sglang, sglang-kernel and flashinfer-python the installed torch breaks,
              when an import failed) or C(error). Its server's imports (C(sglang), C(sglang.launch_server),
              C(sglang.srt.entrypoints.http_server)) are added to RV(ansible_facts.gpufleet_torch.imports); one that
              fails is a mismatch.
          returned: when sglang is installed in the venv
          type: dict
        python_executable:
          description: C(sys.executable) of the interpreter.
          type: str
          sample: /home/deploy/ml-env/bin/python
        python_version:
          description: Python version.
          type: str
          sample: "3.12.3"
        torch_importable:
          description: Whether C(import torch) worked.
          type: bool
          sample: true
        torch_error:
          description: The exception of C(import torch), when it failed.
          type: str
          sample: "ModuleNotFoundError: No module named 'torch'"
        torch_import_seconds:
          description: Seconds C(import torch) took.
          type: float
          sample: 1.7
        torch_version:
          description: C(torch.__version__).
          type: str
          sample: "2.11.0+cu130"
        torch_git_version:
          description: C(torch.version.git_version).
          type: str
          sample: "70d99e998b3a7b2e4bc9b1f2a8a3b3c3d3e3f301"
        torch_cuda_version:
          description: C(torch.version.cuda), V(null) for a CPU build.
          type: str
          sample: "13.0"
        cuda_available:
          description: What C(torch.cuda.is_available) returned.
          type: bool
          sample: true
        device_count:
          description: Number of CUDA devices torch sees.
          type: int
          sample: 1
        devices:
          description: The CUDA devices torch sees.
          type: list
          elements: dict
          contains:
            index:
              description: torch device index.
              type: int
              sample: 0
            name:
              description: Device name.
              type: str
              sample: NVIDIA H200
            compute_capability:
              description: C(MAJOR.MINOR).
              type: str
              sample: "9.0"
            memory_total_mib:
              description: Total memory in MiB.
              type: int
              sample: 143166
            multiprocessor_count:
              description: Streaming multiprocessors.
              type: int
              sample: 132
        cudnn_version:
          description: cuDNN version torch loaded, as C(X.Y.Z).
          type: str
          sample: "9.13.0"
        nccl_version:
          description: NCCL version torch carries.
          type: str
          sample: "2.27.7"
        cxx11_abi:
          description: What C(torch.compiled_with_cxx11_abi) returned; an extension must be built with the same.
          type: bool
          sample: true
        arch_list:
          description: The architectures torch was compiled for.
          type: list
          elements: str
          sample: ["sm_75", "sm_80", "sm_90", "sm_100", "sm_120"]
        driver_version:
          description: NVIDIA kernel module version (C(/proc/driver/nvidia/version)).
          type: str
          sample: "580.159.04"
        cuda_driver_version:
          description: CUDA version the driver supports, as torch sees it.
          type: str
          sample: "13.0"
        libcudart:
          description: The C(libcudart) entries of C(ldconfig -p), in the loader's order; more than one major is a warning sign.
          type: list
          elements: dict
          contains:
            soname:
              description: Library name.
              type: str
              sample: libcudart.so.13
            abi:
              description: ldconfig's ABI column.
              type: str
              sample: libc6,x86-64
            path:
              description: Where the loader resolves it.
              type: str
              sample: /usr/local/cuda-13.0/targets/x86_64-linux/lib/libcudart.so.13
        torch_libcudart:
          description: The C(libcudart) files mapped into the process once CUDA was initialised.
          type: list
          elements: str
          sample: ["/home/deploy/ml-env/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13"]
        cuda_home:
          description: The CUDA_HOME torch's extension builder would use (C(CUDA_HOME), C(CUDA_PATH), nvcc on E(PATH), C(/usr/local/cuda)).
          type: str
          sample: /usr/local/cuda
        nvcc_version:
          description: Version from C(CUDA_HOME/bin/nvcc --version).
          type: str
          sample: "13.0.88"
        imports:
          description:
            - One entry per module of O(imports) and O(expect.imports), by name; where sglang is installed in the venv,
              also its server's imports (RV(ansible_facts.gpufleet_torch.sglang)).
          type: dict
          sample:
            sgl_kernel:
              ok: false
              version: null
              error: "ImportError: common_ops.so: undefined symbol: _ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib"
              undefined_symbol: _ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib
              undefined_symbol_demangled: "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool)"
              diagnosis: "sgl_kernel was built against a different torch than the installed torch 2.12.0.dev20260307+cu130: ..."
        smoke:
          description: One entry per device and dtype of the smoke test; empty when it did not run.
          type: list
          elements: dict
          contains:
            device:
              description: Device index.
              type: int
              sample: 0
            name:
              description: Device name.
              type: str
              sample: NVIDIA H200
            dtype:
              description: C(bfloat16) or C(float16).
              type: str
              sample: bfloat16
            size:
              description: N of the N x N product.
              type: int
              sample: 8192
            iterations:
              description: Timed products.
              type: int
              sample: 10
            seconds:
              description: GPU time of the timed products.
              type: float
              sample: 0.0171
            tflops:
              description: Achieved TFLOP/s (2 N^3 per product).
              type: float
              sample: 642.9
            nonfinite:
              description: Elements of the result that are NaN or Inf.
              type: int
              sample: 0
            relative_error:
              description: C(||C - C_fp32|| / ||C_fp32||), V(null) when not finite.
              type: float
              sample: 0.0021
        smoke_error:
          description: Why the smoke test could not run, else V(null).
          type: str
          sample: null
        kernels:
          description: One entry per kernel check and device, skipped ones included; empty when no check ran.
          type: list
          elements: dict
          contains:
            check: {description: 'C(<set>.<name>).', type: str, sample: sgl_kernel.rmsnorm}
            set: {description: 'C(torch), C(sgl_kernel) or C(flashinfer).', type: str}
            device: {description: 'GPU index, or C(cpu) on a host without GPU.', type: raw}
            device_name: {description: 'Device name.', type: str}
            status: {description: 'C(ok), C(failed) or C(skipped).', type: str}
            reason: {description: 'What failed (non-finite count, all zeros, relative error vs tolerance, the exception) or why it was skipped.', type: str}
            relative_error: {description: 'Worst C(||out - ref|| / ||ref||) over the sweep.', type: float}
            tolerance: {description: 'The tolerance applied.', type: float}
            nonfinite: {description: 'NaN/Inf elements over the sweep.', type: int}
            sizes: {description: 'The numbers of rows M swept.', type: list, elements: int}
            failed_sizes: {description: 'The M that failed.', type: list, elements: int}
            seconds: {description: 'Wall time of the check, compile included.', type: float}
            compiled: {description: 'Whether a JIT compile happened during the check (flashinfer), V(null) where not tracked.', type: bool}
            compile_seconds: {description: 'Seconds of the first call when it compiled.', type: float}
            tflops: {description: 'TFLOP/s of a GEMM check at its largest M.', type: float}
          sample:
            - {check: sgl_kernel.rmsnorm, set: sgl_kernel, device: 0, device_name: NVIDIA H200, status: failed,
               reason: "relative error 0.41 > tolerance 0.005 at M=128, 1024", relative_error: 0.41, tolerance: 0.005,
               nonfinite: 0, sizes: [1, 7, 128, 1024], failed_sizes: [128, 1024], seconds: 0.01, compiled: null,
               compile_seconds: null, tflops: null}
        kernels_error:
          description: The kernel check engine's own error, else V(null); a failure, never a pass.
          type: str
        collectives:
          description: The all-reduce check with O(collectives=true), else V(null).
          type: dict
          contains:
            status: {description: 'C(ok), C(failed) or C(skipped).', type: str}
            reason:
              description: Why it failed (wrong elements per rank, a rank that did not finish and what it was doing) or was skipped (C(1 GPU)).
              type: str
            backend: {description: 'C(nccl) or C(gloo).', type: str}
            world_size: {description: 'Number of ranks.', type: int}
            correct: {description: 'Every element of the all-reduce equal to the exact sum on every rank; V(null) when it did not run.', type: bool}
            wrong_elements: {description: 'Most wrong elements seen by one rank.', type: int}
            max_abs_error: {description: 'Largest absolute difference from the exact sum.', type: float}
            results:
              description: One entry per message size - C(size_mib), C(bytes), C(seconds) (slowest rank, per all-reduce), C(algbw_gbps), C(busbw_gbps).
              type: list
              elements: dict
            nccl_version: {description: 'NCCL version torch uses (NCCL only).', type: str}
            p2p: {description: 'C(torch.cuda.can_device_access_peer) for every pair of GPUs (NCCL only; V(null) on the diagonal).', type: list, elements: list}
            ranks:
              description: Per rank - C(rank), C(rc), the last C(stage) it reached, C(error), and C(stderr) (its tail) where it failed.
              type: list
              elements: dict
            seconds: {description: 'Wall time of the check.', type: float}
          sample: {status: skipped, reason: 1 GPU, backend: nccl, world_size: 1, correct: null, results: []}
        flashinfer_jit:
          description: Where flashinfer's JIT cache is (C(workspace), C(cache_dir)), and the installed
            C(flashinfer-jit-cache) version (C(jit_cache_package)), V(null) when absent.
          type: dict
        requirement_conflicts:
          description: With O(expect.consistent), the installed distributions whose pins on torch, torchvision or
            torchaudio the installed versions contradict, as sentences; V(null) when not checked.
          type: list
          elements: str
          sample: ["torchvision 0.24.1 requires torch==2.9.1, installed torch is 2.11.0+cu130"]
        packages:
          description: Installed distributions by name, with O(packages=true); else empty.
          type: dict
          sample: {"torch": "2.13.0+cpu", "numpy": "2.3.4"}
        markers:
          description: Content of each file of O(markers) by its name, V(null) when absent.
          type: dict
          sample: {"gpufleet-sgl_kernel.json": {"abi_key": "3f9c0a1b2c3d4e5f"}}
        gpu_use:
          description:
            - What each GPU was doing and what this run did on it (O(mode)) - C(requested) (the mode), C(numeric)
              (whether any numeric check ran), C(devices) (the GPUs they ran on, V(null) for whatever torch saw),
              C(mask) (C(CUDA_VISIBLE_DEVICES) of the probe, or V(null)), C(visible), C(busy) (busy GPU indexes),
              C(skipped) (C(gpu) and C(reason) per GPU left out), C(collectives_skip), C(refused), and C(gpus) (per GPU -
              C(index), C(uuid), C(busy), C(reason), C(processes), C(memory_used_mib), C(utilization_pct)).
          type: dict
          sample: {requested: auto, numeric: false, devices: [], mask: "", busy: [0],
                   skipped: [{gpu: 0, reason: "busy (pid 4242 python3 -m sglang.launch_server, 86.1 GiB)"}]}
        proof:
          description:
            - With O(proof), the age of the last numeric pass per GPU under this stack - C(summary) (one sentence),
              C(devices) (C(label), C(proven_at), C(age_hours), C(checks)), C(oldest_age_hours) (V(null) when a GPU was
              never proven), C(never), C(stack), C(path), C(written), C(proven_now), C(error).
          type: dict
          sample: {summary: "kernels last proven 3.2 h ago under this stack", oldest_age_hours: 3.2, never: []}
        probe_seconds:
          description: Wall time of the probe run, interpreter start to exit.
          type: float
          sample: 2.41
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpufleet.inference.plugins.module_utils import backends, busy, model_verify
from ansible_collections.gpufleet.inference.plugins.module_utils import verify_steps as steps
from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import EXPECT_SPEC, SMOKE_DTYPES
from ansible_collections.gpufleet.inference.plugins.module_utils.gpu import C_LOCALE


def argument_spec():
    # a new spec each run: AnsibleModule puts the default objects themselves into params
    return dict(
        python=dict(type='path'),
        link=dict(type='str'),
        venv=dict(type='str', default=''),
        imports=dict(type='list', elements='str', default=[]),
        smoke=dict(type='bool', default=False),
        smoke_size=dict(type='int', default=8192),
        smoke_iterations=dict(type='int', default=10),
        smoke_dtypes=dict(type='list', elements='str', choices=list(SMOKE_DTYPES), default=list(SMOKE_DTYPES)),
        smoke_tolerance=dict(type='float', default=0.02),
        kernels=dict(type='bool', default=False),
        kernel_tolerances=dict(type='dict', default={}),
        flashinfer_workspace_venv=dict(type='bool', default=True),
        expect=dict(type='dict', default={}, options=EXPECT_SPEC),
        timeout=dict(type='int', default=300),
        collectives=dict(type='bool', default=False),
        collectives_backend=dict(type='str', choices=['nccl', 'gloo'], default='nccl'),
        collectives_world_size=dict(type='int', default=2),
        collectives_sizes_mib=dict(type='list', elements='int', default=[1, 16, 64]),
        collectives_iterations=dict(type='int', default=5),
        collectives_timeout=dict(type='int', default=120),
        isolated=dict(type='bool', default=True),
        environment=dict(type='dict', default={}),
        packages=dict(type='bool', default=False),
        markers=dict(type='list', elements='str', default=[]),
        adopt=dict(type='bool', default=False),
        gpu=dict(type='bool', default=False),
        gpu_required=dict(type='bool', default=False),
        mode=dict(type='str', choices=list(busy.MODES), default='auto'),
        busy_memory_mib=dict(type='int', default=busy.DEFAULT_BUSY_MEMORY_MIB),
        proof=dict(type='bool', default=False),
        model=dict(type='str', default=''),
        model_config=dict(type='dict'),
        model_quant_config=dict(type='dict'),
        tp_size=dict(type='int', default=1),
        backend_preference=dict(type='dict', default={}),
        backend_required=dict(type='dict', default={}),
        backend_families=dict(type='list', elements='str'),
        sglang_version=dict(type='str', default=backends.DEFAULT_SGLANG_VERSION),
        model_jit=dict(type='str', choices=list(model_verify.JIT_MODES), default='cache_only'),
        xid=dict(type='str', choices=['read', 'off'], default='off'),
        xid_answer=dict(type='dict'),
        serving_name=dict(type='str', default=''),
        served_check=dict(type='str', choices=['auto', 'off'], default='auto'),
        served_timeout=dict(type='int', default=600),
    )


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(),
        required_one_of=[['python', 'link']],
        mutually_exclusive=[['python', 'link']],
        supports_check_mode=True,
    )
    params = module.params
    module.run_command_environ_update = C_LOCALE
    asked = steps.validate_options(module, params)
    # The GPUs first: their facts travel with every result below, failures included.
    gpu_facts, facts_out = steps.read_gpus(module, params, asked)
    # With link=..., the link's state travels with every result below.
    python, extra = steps.find_interpreter(module, params, facts_out)
    model = steps.validate_checks(module, params, extra)
    use = steps.plan(module, params, gpu_facts, asked, python, facts_out, extra)
    facts, ran = steps.probe(module, params, python, use, asked, model, facts_out, extra)
    mismatches = steps.judge(module, params, facts, ran, use, model, gpu_facts, extra)
    changed = steps.write(module, params, facts, mismatches, extra)
    result = dict(changed=changed, mismatches=mismatches, probed=True, ansible_facts=dict(facts_out, gpufleet_torch=facts), **extra)
    if mismatches:
        module.fail_json(msg='%d check(s) failed for %s: %s' % (len(mismatches), python, '; '.join(mismatches)),
                         rc=ran['rc'], stderr=ran['err'], cmd=ran['cmd'], **result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
