# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which GPUs are serving, and how deep a verification may go on each.

A GPU is busy when another process has a compute context on it
(nvidia-smi --query-compute-apps; the probe's own processes are left out by
module_utils.gpu), or when more of its memory is in use than an idle GPU
holds (a process of another container is not listed, its memory is). The
verification depth is chosen per run:

- full: the numeric checks (smoke GEMMs, kernel checks, all-reduce) on every
  GPU; a busy GPU refuses the host before any CUDA work, naming what runs;
- in_service: no GPU time at all; the probe sees only the idle GPUs (no CUDA
  context is ever made on a busy one) and proves what needs no GPU time
  (versions, imports, pins, the arch marker, health);
- auto: full on the idle GPUs, in_service on the busy ones.

A numeric check left out is a skip with its reason, never a pass and never a
failure.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

MODES = ('auto', 'in_service', 'full')
DEFAULT_BUSY_MEMORY_MIB = 2048
# the numeric expectations, judged only where the numeric checks ran
NUMERIC_EXPECT = ('min_smoke_tflops', 'kernels', 'min_allreduce_busbw_gbps')


def gib(mib):
    return '%.1f GiB' % (mib / 1024.0)


def describe_process(process):
    """'pid 4242 python3 -m sglang.launch_server, 86.1 GiB'."""
    name = process.get('command') or process.get('process_name') or 'unknown process'
    used = process.get('used_memory_mib')
    return 'pid %s %s, %s' % (process.get('pid'), name, gib(used) if used is not None else 'memory not reported')


def busy_reason(gpu, busy_memory_mib=DEFAULT_BUSY_MEMORY_MIB, processes_error=None):
    """Why a GPU counts as busy, or None when it is idle."""
    processes = gpu.get('processes') or []
    used = (gpu.get('usage') or {}).get('memory_used_mib')
    if processes:
        shown = [describe_process(process) for process in processes[:3]]
        more = ' and %d more' % (len(processes) - 3) if len(processes) > 3 else ''
        return 'busy (%s%s)' % ('; '.join(shown), more)
    if used is not None and used >= busy_memory_mib:
        return 'busy (%s in use by processes not visible from this host)' % gib(used)
    if processes_error and used is None:
        return 'busy state unknown (%s)' % processes_error
    return None


def judge(gpu_facts, busy_memory_mib=DEFAULT_BUSY_MEMORY_MIB):
    """Set gpu['busy'] and gpu['busy_reason'] on every GPU of gpu_facts; return the busy ones."""
    busy = []
    for gpu in (gpu_facts or {}).get('gpus') or []:
        reason = busy_reason(gpu, busy_memory_mib, gpu_facts.get('processes_error'))
        gpu['busy'] = reason is not None
        gpu['busy_reason'] = reason
        if reason:
            busy.append(gpu)
    return busy


def _label(gpu):
    return 'GPU %s' % gpu.get('index')


def user_devices(value, gpus):
    """The GPUs a CUDA_VISIBLE_DEVICES value names, in its order (indexes, UUIDs or unique UUID prefixes), or
    None where it names something else (a MIG instance, an unknown id)."""
    by_index = dict((str(gpu['index']), gpu) for gpu in gpus)
    chosen = []
    for part in str(value).split(','):
        part = part.strip()
        if not part:
            continue
        gpu = by_index.get(part)
        if gpu is None:
            found = [g for g in gpus if g.get('uuid') and g['uuid'].startswith(part) and part.startswith('GPU-')]
            gpu = found[0] if len(found) == 1 else None
        if gpu is None or gpu in chosen:
            return None
        chosen.append(gpu)
    return chosen


def _ids(chosen):
    if all(gpu.get('uuid') for gpu in chosen):
        return ','.join(gpu['uuid'] for gpu in chosen)
    return ','.join(str(gpu['index']) for gpu in chosen)


def plan(mode, gpu_facts, environment=None):
    """What this run may do on each GPU.

    Returns a dict: requested (the mode asked for), numeric (whether any numeric
    check runs), devices (the nvidia-smi indexes they run on; None: whatever
    torch sees, a host without nvidia-smi's GPUs), mask (CUDA_VISIBLE_DEVICES
    for the probe, or None: as the caller's environment has it), visible (the
    nvidia-smi indexes the probe sees, in torch's order, where known), refused
    (the message that refuses the host: full on a busy GPU), skipped ([{gpu,
    reason}] for every GPU left out) and collectives_skip (why the all-reduce
    is left out, or None). A CUDA_VISIBLE_DEVICES of the caller narrows the
    GPUs to the ones it names; one that cannot be read (a MIG instance) leaves
    all of them in play, so a busy GPU still counts."""
    if mode not in MODES:
        raise ValueError('mode: expected one of %s, found %r' % (', '.join(MODES), mode))
    gpus = list((gpu_facts or {}).get('gpus') or []) if (gpu_facts or {}).get('present') else []
    out = dict(requested=mode, numeric=True, devices=None, mask=None, visible=None, refused=None, skipped=[],
               collectives_skip=None, busy=[gpu['index'] for gpu in gpus if gpu.get('busy')])
    seen, readable = gpus, True
    if 'CUDA_VISIBLE_DEVICES' in (environment or {}) and gpus:
        named = user_devices((environment or {})['CUDA_VISIBLE_DEVICES'], gpus)
        if named is None:
            readable = False
        else:
            seen = named
            out['visible'] = [gpu['index'] for gpu in seen]
    busy = [gpu for gpu in seen if gpu.get('busy')]
    idle = [gpu for gpu in seen if not gpu.get('busy')]
    if mode == 'in_service':
        out['numeric'] = False
        out['devices'] = []
        out['collectives_skip'] = 'in_service run: no GPU time'
        out['skipped'] = [dict(gpu=gpu['index'], reason=gpu['busy_reason'] if gpu.get('busy')
                               else 'in_service run: no GPU time') for gpu in seen] or [
            dict(gpu='cpu', reason='in_service run: no numeric checks')]
    elif busy and (mode == 'full' or not readable):
        out['refused'] = ('full verification refused before any CUDA work: %s; drain the host first '
                          '(gpufleet_drain_hook) or verify it in_service'
                          % '; '.join('%s %s' % (_label(gpu), gpu['busy_reason']) for gpu in busy))
        if mode != 'full':
            # auto under a CUDA_VISIBLE_DEVICES that cannot be read: no numeric check, nothing refused
            out['refused'] = None
            out['collectives_skip'] = 'GPU %s busy' % ', '.join(str(gpu['index']) for gpu in busy)
        out['numeric'] = False
        out['devices'] = []
        out['skipped'] = [dict(gpu=gpu['index'], reason=gpu['busy_reason']) for gpu in busy]
    else:
        out['skipped'] = [dict(gpu=gpu['index'], reason=gpu['busy_reason']) for gpu in busy]
        if seen:
            out['devices'] = [gpu['index'] for gpu in idle]
            out['numeric'] = bool(idle)
        if busy:
            out['collectives_skip'] = 'GPU %s busy' % ', '.join(str(gpu['index']) for gpu in busy)
    if readable and seen and (busy or mode == 'in_service'):
        # the probe sees the idle GPUs only: no CUDA context on a busy one
        out['visible'] = [gpu['index'] for gpu in idle]
        out['mask'] = _ids(idle)
    return out


def torch_to_smi(plan_result, torch_index):
    """The nvidia-smi index of torch's device torch_index under the plan's mask."""
    visible = plan_result.get('visible')
    if visible is not None and isinstance(torch_index, int) and torch_index < len(visible):
        return visible[torch_index]
    return torch_index
