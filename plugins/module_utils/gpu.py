# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA driver and GPU inventory from nvidia-smi, for gpufleet.inference.gpu_facts and torch_verify."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.inference.plugins.module_utils.cuda_arch import cuda_arch_list

# Ansible runs commands with these on top of the remote environment: nvidia-smi,
# ldconfig and nvcc then print the same words and number formats everywhere.
C_LOCALE = {'LANG': 'C', 'LC_ALL': 'C', 'LC_MESSAGES': 'C', 'LANGUAGE': 'C'}

QUERY_FIELDS = ('index', 'name', 'uuid', 'compute_cap', 'memory.total', 'pci.bus_id', 'driver_version')

# nvidia-smi exit codes that mean "no usable NVIDIA GPU here" rather than a bug:
# 6 no devices found, 9 cannot talk to the driver, 12 NVML shared library not found.
NO_GPU_RC = (6, 9, 12)

_NOT_AVAILABLE = ('[N/A]', 'N/A', '[Not Supported]', '')
_CC_RE = re.compile(r'^\d+\.\d+$')


class NvidiaSmiParseError(ValueError):
    """nvidia-smi printed a line that is not the CSV row we asked for."""

    def __init__(self, line, reason):
        self.line = line
        self.reason = reason
        super(NvidiaSmiParseError, self).__init__('cannot parse nvidia-smi line %r: %s' % (line, reason))


def nvidia_smi_argv(nvidia_smi):
    return [nvidia_smi, '--query-gpu=' + ','.join(QUERY_FIELDS), '--format=csv,noheader,nounits']


def _optional(value):
    return None if value in _NOT_AVAILABLE else value


def parse_gpu_line(line):
    """One CSV row -> (gpu dict, driver_version)."""
    fields = [field.strip() for field in line.split(',')]
    if len(fields) < len(QUERY_FIELDS):
        raise NvidiaSmiParseError(line, 'expected %d comma-separated fields (%s), found %d'
                                  % (len(QUERY_FIELDS), ','.join(QUERY_FIELDS), len(fields)))
    if len(fields) > len(QUERY_FIELDS):
        # Only the product name is free text: give it back the commas it had.
        extra = len(fields) - len(QUERY_FIELDS)
        fields = [fields[0], ', '.join(fields[1:2 + extra])] + fields[2 + extra:]
    index, name, uuid, compute_cap, memory_total, bus_id, driver = fields
    if not index.isdigit():
        raise NvidiaSmiParseError(line, 'index %r is not a number' % index)
    compute_cap = _optional(compute_cap)
    if compute_cap is not None and not _CC_RE.match(compute_cap):
        raise NvidiaSmiParseError(line, 'compute capability %r is not MAJOR.MINOR' % compute_cap)
    memory_total = _optional(memory_total)
    if memory_total is not None:
        if not memory_total.isdigit():
            raise NvidiaSmiParseError(line, 'memory.total %r is not a number of MiB' % memory_total)
        memory_total = int(memory_total)
    gpu = {
        'index': int(index),
        'name': name,
        'uuid': _optional(uuid),
        'compute_capability': compute_cap,
        'memory_total_mib': memory_total,
        'pci_bus_id': _optional(bus_id),
    }
    return gpu, _optional(driver)


def parse_query(out):
    """Whole --query-gpu output -> (driver_version, [gpu, ...]), sorted by index."""
    gpus = []
    driver_version = None
    for line in out.splitlines():
        if not line.strip():
            continue
        gpu, driver = parse_gpu_line(line)
        gpus.append(gpu)
        driver_version = driver_version or driver
    gpus.sort(key=lambda gpu: gpu['index'])
    return driver_version, gpus


def format_cuda_version(value):
    """CUDA's integer version (13000, 12080) -> "13.0", "12.8"."""
    if value is None:
        return None
    value = int(value)
    return '%d.%d' % (value // 1000, (value % 1000) // 10)


def cuda_driver_version():
    """The CUDA version the installed driver supports, from libcuda, or None.

    cuDriverGetVersion is documented as callable before cuInit: it creates no
    context and starts no process, unlike a second nvidia-smi run (the CSV
    query has no field for it).
    """
    try:
        import ctypes

        libcuda = ctypes.CDLL('libcuda.so.1')
        version = ctypes.c_int(0)
        if libcuda.cuDriverGetVersion(ctypes.byref(version)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return format_cuda_version(version.value) if version.value else None


def empty_facts(error=None):
    return {
        'present': False,
        'driver_version': None,
        'cuda_driver_version': None,
        'gpus': [],
        'arch_list': [],
        'error': error,
    }


def facts_from_query(out, cuda_version):
    driver_version, gpus = parse_query(out)
    if not gpus:
        return empty_facts('nvidia-smi listed no GPU')
    return {
        'present': True,
        'driver_version': driver_version,
        'cuda_driver_version': cuda_version,
        'gpus': gpus,
        'arch_list': cuda_arch_list([gpu['compute_capability'] for gpu in gpus if gpu['compute_capability']]),
        'error': None,
    }


TIMED_OUT_RC = 124


def gather(module, nvidia_smi=None, timeout=60):
    """Run nvidia-smi through the module and return (facts, command result or None).

    A host without nvidia-smi, a driver or a device gives empty facts with the
    reason in 'error'; a hang past timeout, another failure or a line that is
    not the CSV row asked for fails the module.
    """
    nvidia_smi = nvidia_smi or module.get_bin_path(
        'nvidia-smi', opt_dirs=['/usr/bin', '/usr/local/nvidia/bin', '/usr/lib/wsl/lib'])
    if not nvidia_smi:
        return empty_facts('nvidia-smi not found'), None
    argv = nvidia_smi_argv(nvidia_smi)
    timeout_bin = module.get_bin_path('timeout') if timeout else None
    if timeout_bin:
        argv = [timeout_bin, '--kill-after=5', str(timeout)] + argv
    rc, out, err = module.run_command(argv, errors='replace')
    result = dict(rc=rc, stdout=out, stderr=err, cmd=argv)
    if timeout_bin and rc in (TIMED_OUT_RC, 128 + 9):
        module.fail_json(msg='nvidia-smi did not answer within %d s' % timeout, **result)
    if rc in NO_GPU_RC or (rc != 0 and not out.strip()):
        reason = (err.strip() or out.strip()).splitlines()
        return empty_facts('nvidia-smi failed (rc %d): %s' % (rc, reason[0] if reason else 'no output')), result
    if rc != 0:
        module.fail_json(msg='nvidia-smi failed (rc %d)' % rc, **result)
    try:
        return facts_from_query(out, cuda_driver_version()), result
    except NvidiaSmiParseError as exc:
        module.fail_json(msg=str(exc), line=exc.line, **result)
