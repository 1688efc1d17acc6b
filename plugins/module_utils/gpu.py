# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""NVIDIA driver and GPU inventory from nvidia-smi, for gpufleet.inference.gpu_facts and torch_verify."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.gpufleet.inference.plugins.module_utils.cuda_arch import cuda_arch_list

# Ansible runs commands with these on top of the remote environment: nvidia-smi,
# ldconfig and nvcc then print the same words and number formats everywhere.
C_LOCALE = {'LANG': 'C', 'LC_ALL': 'C', 'LC_MESSAGES': 'C', 'LANGUAGE': 'C'}

# The inventory, also the whole query of the fallback without health. serial is
# the board serial number (the H200 with driver 580.159.04 answers it, GeForce
# boards [N/A]), kept a string: its leading zeros stay.
QUERY_FIELDS = ('index', 'name', 'uuid', 'compute_cap', 'memory.total', 'pci.bus_id', 'driver_version', 'serial')
# Health, read in the same query (all accepted together by driver 580): field -> key in gpu['health'].
HEALTH_FIELDS = (
    ('persistence_mode', 'persistence_mode'),
    ('pcie.link.gen.current', 'pcie_gen_current'),
    ('pcie.link.gen.max', 'pcie_gen_max'),
    ('pcie.link.width.current', 'pcie_width_current'),
    ('pcie.link.width.max', 'pcie_width_max'),
    ('ecc.mode.current', 'ecc_enabled'),
    ('ecc.errors.uncorrected.volatile.total', 'ecc_uncorrected_volatile'),
    ('retired_pages.pending', 'retired_pages_pending'),
    ('clocks_event_reasons.active', 'clocks_event_reasons_active'),
    ('temperature.gpu', 'temperature_c'),
    ('power.draw', 'power_draw_w'),
    ('power.limit', 'power_limit_w'),
    ('clocks.sm', 'clocks_sm_mhz'),
    ('clocks.max.sm', 'clocks_max_sm_mhz'),
)
# Row remapping (Ampere and later, where retired_pages.* answer [N/A]): a second
# query, made only when some GPU has no retired-pages answer.
REMAP_FIELDS = (('remapped_rows.pending', 'remapped_rows_pending'), ('remapped_rows.failure', 'remapped_rows_failure'))
HEALTH_KEYS = tuple(key for dummy, key in HEALTH_FIELDS + REMAP_FIELDS)
# What the GPU is doing, read last in the same query where the caller asks
# whether it is busy (gpu['usage']), with its compute processes from a second
# query (COMPUTE_APPS_FIELDS).
USAGE_FIELDS = (('memory.used', 'memory_used_mib'), ('utilization.gpu', 'utilization_pct'))
COMPUTE_APPS_FIELDS = ('gpu_uuid', 'pid', 'process_name', 'used_memory')
_BOOL_KEYS = ('persistence_mode', 'ecc_enabled', 'retired_pages_pending', 'remapped_rows_pending', 'remapped_rows_failure')
_FLOAT_KEYS = ('power_draw_w', 'power_limit_w')
# NVML's clocks event reason bits (nvmlClocksEventReason*), by the names nvidia-smi prints.
CLOCK_EVENT_REASONS = (
    (0x1, 'gpu_idle'),
    (0x2, 'applications_clocks_setting'),
    (0x4, 'sw_power_cap'),
    (0x8, 'hw_slowdown'),
    (0x10, 'sync_boost'),
    (0x20, 'sw_thermal_slowdown'),
    (0x40, 'hw_thermal_slowdown'),
    (0x80, 'hw_power_brake_slowdown'),
    (0x100, 'display_clock_setting'),
)
# The reasons that mean the GPU is held back by hardware or heat, not by policy or idleness.
SLOWDOWN_REASONS = ('hw_slowdown', 'sw_thermal_slowdown', 'hw_thermal_slowdown', 'hw_power_brake_slowdown')

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


def query_fields(health=True, usage=False):
    return (QUERY_FIELDS + (tuple(field for field, dummy in HEALTH_FIELDS) if health else ())
            + (tuple(field for field, dummy in USAGE_FIELDS) if usage else ()))


def nvidia_smi_argv(nvidia_smi, health=True, usage=False):
    return [nvidia_smi, '--query-gpu=' + ','.join(query_fields(health, usage)), '--format=csv,noheader,nounits']


def compute_apps_argv(nvidia_smi):
    return [nvidia_smi, '--query-compute-apps=' + ','.join(COMPUTE_APPS_FIELDS), '--format=csv,noheader,nounits']


def remap_argv(nvidia_smi):
    return [nvidia_smi, '--query-gpu=index,' + ','.join(field for field, dummy in REMAP_FIELDS),
            '--format=csv,noheader,nounits']


def _optional(value):
    return None if value in _NOT_AVAILABLE or value.startswith('[') else value


def parse_health_value(key, value, line=''):
    """One health field as nvidia-smi printed it -> its typed value; [N/A] and
    [Not Supported] (and any other bracketed answer) -> None."""
    value = _optional(value.strip())
    if value is None:
        return None
    if key in _BOOL_KEYS:
        word = value.lower()
        if word in ('enabled', 'yes', 'true', '1'):
            return True
        if word in ('disabled', 'no', 'false', '0'):
            return False
        raise NvidiaSmiParseError(line, '%s %r is neither enabled/yes nor disabled/no' % (key, value))
    if key == 'clocks_event_reasons_active':
        try:
            return int(value, 16) if value.lower().startswith('0x') else int(value)
        except ValueError:
            raise NvidiaSmiParseError(line, '%s %r is not a bit mask' % (key, value))
    try:
        number = float(value)
    except ValueError:
        raise NvidiaSmiParseError(line, '%s %r is not a number' % (key, value))
    return number if key in _FLOAT_KEYS else int(number)


def clock_event_reasons(mask):
    """A clocks_event_reasons bit mask -> the reason names, in bit order."""
    if mask is None:
        return None
    return [name for bit, name in CLOCK_EVENT_REASONS if mask & bit]


def parse_health(values, line=''):
    health = dict((key, parse_health_value(key, value, line)) for (dummy, key), value in zip(HEALTH_FIELDS, values))
    health['clocks_event_reasons'] = clock_event_reasons(health['clocks_event_reasons_active'])
    health['remapped_rows_pending'] = None
    health['remapped_rows_failure'] = None
    return health


def parse_usage(values, line=''):
    """memory.used (MiB) and utilization.gpu (%) -> gpu['usage']; [N/A] -> None."""
    usage = {}
    for (field, key), value in zip(USAGE_FIELDS, values):
        value = _optional(value.strip())
        if value is not None and not value.isdigit():
            raise NvidiaSmiParseError(line, '%s %r is not a whole number' % (field, value))
        usage[key] = None if value is None else int(value)
    return usage


def parse_gpu_line(line, health=False, usage=False):
    """One CSV row -> (gpu dict, driver_version); with health, the row has the
    HEALTH_FIELDS after the base fields and the gpu dict a 'health' dict; with
    usage, the USAGE_FIELDS last and a 'usage' dict."""
    fields = [field.strip() for field in line.split(',')]
    wanted = query_fields(health, usage)
    if len(fields) < len(wanted):
        raise NvidiaSmiParseError(line, 'expected %d comma-separated fields (%s), found %d'
                                  % (len(wanted), ','.join(wanted), len(fields)))
    if len(fields) > len(wanted):
        # Only the product name is free text: give it back the commas it had.
        extra = len(fields) - len(wanted)
        fields = [fields[0], ', '.join(fields[1:2 + extra])] + fields[2 + extra:]
    index, name, uuid, compute_cap, memory_total, bus_id, driver, serial = fields[:len(QUERY_FIELDS)]
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
        'serial': _optional(serial),
    }
    if health:
        gpu['health'] = parse_health(fields[len(QUERY_FIELDS):len(QUERY_FIELDS) + len(HEALTH_FIELDS)], line)
    if usage:
        gpu['usage'] = parse_usage(fields[len(fields) - len(USAGE_FIELDS):], line)
    return gpu, _optional(driver)


def parse_remap(out, gpus):
    """The second query's rows (index, pending, failure) into the gpus' health."""
    by_index = dict((gpu['index'], gpu) for gpu in gpus)
    for line in out.splitlines():
        if not line.strip():
            continue
        fields = [field.strip() for field in line.split(',')]
        if len(fields) != 1 + len(REMAP_FIELDS) or not fields[0].isdigit():
            raise NvidiaSmiParseError(line, 'expected index,%s' % ','.join(field for field, dummy in REMAP_FIELDS))
        gpu = by_index.get(int(fields[0]))
        if gpu is not None and 'health' in gpu:
            for (dummy, key), value in zip(REMAP_FIELDS, fields[1:]):
                gpu['health'][key] = parse_health_value(key, value, line)


def parse_compute_apps(out):
    """--query-compute-apps rows (gpu_uuid, pid, process_name, used_memory) ->
    [{gpu_uuid, pid, process_name, used_memory_mib}]; [N/A] -> None. Only the
    process name is free text: it keeps the commas it had."""
    apps = []
    for line in out.splitlines():
        if not line.strip():
            continue
        head = line.split(',', 2)
        tail = head[2].rsplit(',', 1) if len(head) == 3 else []
        if len(tail) != 2:
            raise NvidiaSmiParseError(line, 'expected %s' % ','.join(COMPUTE_APPS_FIELDS))
        uuid, pid, name, used = head[0].strip(), head[1].strip(), tail[0].strip(), _optional(tail[1].strip())
        if not pid.isdigit():
            raise NvidiaSmiParseError(line, 'pid %r is not a number' % pid)
        if used is not None and not used.isdigit():
            raise NvidiaSmiParseError(line, 'used_memory %r is not a number of MiB' % used)
        apps.append({'gpu_uuid': _optional(uuid), 'pid': int(pid), 'process_name': _optional(name),
                     'used_memory_mib': None if used is None else int(used)})
    return apps


def own_pids(pid=None, proc='/proc'):
    """This process and its descendants: the probe's own processes, which never make a GPU busy."""
    pid = pid or os.getpid()
    children = {}
    try:
        entries = os.listdir(proc)
    except OSError:
        return set([pid])
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc, entry, 'stat')) as handle:
                # the command name is in parentheses and may hold spaces: the ppid follows the last ')'
                ppid = int(handle.read().rsplit(')', 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo.extend(children.get(current, []))
    return found


def command_line(pid, proc='/proc', limit=120):
    """The command line of a process as one string (cut at limit), or None where it cannot be read
    (another PID namespace, a process that ended)."""
    try:
        with open(os.path.join(proc, str(pid), 'cmdline'), 'rb') as handle:
            raw = handle.read()
    except OSError:
        return None
    text = ' '.join(part.decode('utf-8', 'replace') for part in raw.split(b'\0') if part)
    if not text:
        return None
    return text if len(text) <= limit else text[:limit - 3] + '...'


def attach_processes(gpus, apps, own=(), proc='/proc'):
    """Each GPU's compute processes (gpu['processes']), the probe's own left out.
    A process whose GPU has no usable uuid is put on every GPU without one (it
    may be on any of them)."""
    by_uuid = dict((gpu['uuid'], gpu) for gpu in gpus if gpu.get('uuid'))
    unknown = [gpu for gpu in gpus if not gpu.get('uuid')]
    for gpu in gpus:
        gpu['processes'] = []
    for app in apps:
        if app['pid'] in own:
            continue
        found = by_uuid.get(app['gpu_uuid'])
        targets = [found] if found is not None else (gpus if len(gpus) == 1 else unknown)
        for gpu in targets:
            gpu['processes'].append(dict(app, command=command_line(app['pid'], proc)))
    return gpus


def link_argv(nvidia_smi):
    return [nvidia_smi, '--query-gpu=index,pcie.link.gen.current,pcie.link.width.current', '--format=csv,noheader,nounits']


def find_nvidia_smi(module, nvidia_smi=None):
    return nvidia_smi or module.get_bin_path(
        'nvidia-smi', opt_dirs=['/usr/bin', '/usr/local/nvidia/bin', '/usr/lib/wsl/lib'])


def with_timeout(module, argv, timeout):
    """argv under coreutils' timeout where the host has it and timeout is not 0."""
    timeout_bin = module.get_bin_path('timeout') if timeout else None
    return ([timeout_bin, '--kill-after=5', str(timeout)] + argv) if timeout_bin else argv


def reread_links(module, facts, nvidia_smi=None, timeout=60):
    """Read the PCIe links again, right after the GPUs worked: nvidia-smi's own
    help says the current link generation and width "may be reduced when the
    GPU is not in use", so a link read at idle can look trained down. Updates
    the gpus' health in place; says in health_error when it could not."""
    nvidia_smi = find_nvidia_smi(module, nvidia_smi)
    gpus = [gpu for gpu in facts.get('gpus') or [] if 'health' in gpu]
    if not nvidia_smi or not gpus:
        return
    rc, out, err = module.run_command(with_timeout(module, link_argv(nvidia_smi), timeout), errors='replace')
    by_index = dict((gpu['index'], gpu) for gpu in gpus)
    if rc == 0:
        try:
            for line in out.splitlines():
                fields = [field.strip() for field in line.split(',')]
                if len(fields) == 3 and fields[0].isdigit() and int(fields[0]) in by_index:
                    health = by_index[int(fields[0])]['health']
                    health['pcie_gen_current'] = parse_health_value('pcie_gen_current', fields[1], line)
                    health['pcie_width_current'] = parse_health_value('pcie_width_current', fields[2], line)
                    health['pcie_read_under_load'] = True
            return
        except NvidiaSmiParseError as exc:
            err = str(exc)
    facts['health_error'] = 'PCIe links not read again after the probe: rc %d: %s' % (
        rc, ((err or out).strip().splitlines() or ['no output'])[0])


def needs_remap_query(gpus):
    return any('health' in gpu and gpu['health']['retired_pages_pending'] is None for gpu in gpus)


def parse_query(out, health=False, usage=False):
    """Whole --query-gpu output -> (driver_version, [gpu, ...]), sorted by index."""
    gpus = []
    driver_version = None
    for line in out.splitlines():
        if not line.strip():
            continue
        gpu, driver = parse_gpu_line(line, health, usage)
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
        'health_error': None,
    }


def facts_from_query(out, cuda_version, health=False, health_error=None, usage=False):
    driver_version, gpus = parse_query(out, health, usage)
    if not gpus:
        return empty_facts('nvidia-smi listed no GPU')
    return {
        'present': True,
        'driver_version': driver_version,
        'cuda_driver_version': cuda_version,
        'gpus': gpus,
        'arch_list': cuda_arch_list([gpu['compute_capability'] for gpu in gpus if gpu['compute_capability']]),
        'error': None,
        'health_error': health_error,
    }


TIMED_OUT_RC = 124


def gather(module, nvidia_smi=None, timeout=60, processes=False):
    """Run nvidia-smi through the module and return (facts, command result or None).

    One query reads the inventory and the health fields; a second one reads
    row remapping only where a GPU has no retired-pages answer. With
    processes, the same first query reads each GPU's memory in use and
    utilization (gpu['usage']) and one more reads its compute processes
    (gpu['processes'], this process and its children left out); a failure of
    that one is 'processes_error', never a GPU without processes. A driver that
    refuses a health field (an older one) gives the inventory without health,
    the reason in 'health_error'. A host without nvidia-smi, a driver or a
    device gives empty facts with the reason in 'error'; a hang past timeout,
    another failure or a line that is not the CSV row asked for fails the module.
    """
    nvidia_smi = find_nvidia_smi(module, nvidia_smi)
    if not nvidia_smi:
        return empty_facts('nvidia-smi not found'), None

    def call(argv):
        wrapped = with_timeout(module, argv, timeout)
        rc, out, err = module.run_command(wrapped, errors='replace')
        result = dict(rc=rc, stdout=out, stderr=err, cmd=wrapped)
        if wrapped is not argv and rc in (TIMED_OUT_RC, 128 + 9):
            module.fail_json(msg='nvidia-smi did not answer within %d s' % timeout, **result)
        return rc, out, err, result

    health, health_error = True, None
    rc, out, err, result = call(nvidia_smi_argv(nvidia_smi, usage=processes))
    if rc != 0 and 'not a valid field' in (out + err):
        health = False
        health_error = 'nvidia-smi refused a health field: %s' % (out + err).strip().splitlines()[0]
        rc, out, err, result = call(nvidia_smi_argv(nvidia_smi, health=False, usage=processes))
    if rc in NO_GPU_RC or (rc != 0 and not out.strip()):
        reason = (err.strip() or out.strip()).splitlines()
        return empty_facts('nvidia-smi failed (rc %d): %s' % (rc, reason[0] if reason else 'no output')), result
    if rc != 0:
        module.fail_json(msg='nvidia-smi failed (rc %d)' % rc, **result)
    try:
        facts = facts_from_query(out, cuda_driver_version(), health, health_error, usage=processes)
        if processes and facts['present']:
            facts['processes_error'] = None
            rc, out, err, dummy = call(compute_apps_argv(nvidia_smi))
            if rc == 0:
                try:
                    attach_processes(facts['gpus'], parse_compute_apps(out), own_pids())
                except NvidiaSmiParseError as exc:
                    facts['processes_error'] = 'compute processes not read: %s' % exc
            else:
                facts['processes_error'] = 'compute processes not read: nvidia-smi rc %d: %s' % (
                    rc, ((err or out).strip().splitlines() or ['no output'])[0])
        if health and needs_remap_query(facts['gpus']):
            rc, out, err, remap = call(remap_argv(nvidia_smi))
            if rc == 0:
                try:
                    parse_remap(out, facts['gpus'])
                except NvidiaSmiParseError as exc:
                    facts['health_error'] = 'row remapping not read: %s' % exc
            else:
                facts['health_error'] = 'row remapping not read: nvidia-smi rc %d: %s' % (
                    rc, ((err or out).strip().splitlines() or ['no output'])[0])
        return facts, result
    except NvidiaSmiParseError as exc:
        module.fail_json(msg=str(exc), line=exc.line, **result)


# Health expectations (torch_verify expect, gpu_facts expect): key -> type.
HEALTH_EXPECT_SPEC = dict(
    min_pcie_gen=dict(type='int'),
    min_pcie_width=dict(type='int'),
    max_ecc_uncorrected=dict(type='int'),
    no_pending_remaps=dict(type='bool'),
    persistence_mode=dict(type='bool'),
    no_clock_slowdown=dict(type='bool'),
)
# Xid errors in the kernel log (module_utils/xid): no Xid since the last run,
# but for the codes ignored (for example application faults, 13 31 43). The
# fleet report judges them against the cursor the previous run left; gpu_facts
# against its xid_after.
XID_EXPECT_SPEC = dict(
    no_xid_since_last_run=dict(type='bool'),
    ignore_xids=dict(type='list', elements='int'),
)


# What the hardware must be (torch_verify expect, gpu_facts expect): key -> type.
# Judged from nvidia-smi before any change (deploy's preflight) and again from
# torch in the venv (torch_verify), with the same words.
DEVICE_EXPECT_SPEC = dict(
    device_count=dict(type='int'),
    device_name=dict(type='str'),
    compute_capability=dict(type='str'),
    min_driver_version=dict(type='str'),
)


def version_tuple(text):
    """"580.159.04" -> (580, 159, 4); numeric, so that "10" > "8"."""
    return tuple(int(part) for part in re.findall(r'\d+', str(text)))


def check_device_expectations(expect, devices, device_count, driver_version):
    """Every unmet device expectation -> 'name: expected X, found Y'.

    devices: [{index, name, compute_capability}], as nvidia-smi (gpu_facts) or
    torch (torch_verify) lists them; device_name is a regular expression."""
    expect = dict((key, value) for key, value in (expect or {}).items()
                  if key in DEVICE_EXPECT_SPEC and value is not None)
    failures = []
    devices = devices or []

    def fail(name, expected, found):
        failures.append('%s: expected %s, found %s' % (name, expected, found))

    if 'device_count' in expect and expect['device_count'] != device_count:
        fail('device_count', expect['device_count'], device_count)
    if 'device_name' in expect:
        pattern = re.compile(expect['device_name'])
        if not devices:
            fail('device_name', 'devices matching %r' % expect['device_name'], 'no device')
        for device in devices:
            if not pattern.search(device['name']):
                fail('device_name', 'a name matching %r' % expect['device_name'],
                     '%r on device %d' % (device['name'], device['index']))
    if 'compute_capability' in expect:
        if not devices:
            fail('compute_capability', expect['compute_capability'], 'no device')
        for device in devices:
            if device['compute_capability'] != expect['compute_capability']:
                fail('compute_capability', expect['compute_capability'],
                     '%s on device %d' % (device['compute_capability'], device['index']))
    if 'min_driver_version' in expect:
        if driver_version is None or version_tuple(driver_version) < version_tuple(expect['min_driver_version']):
            fail('min_driver_version', '>= %s' % expect['min_driver_version'], driver_version)
    return failures


def _label(gpu):
    return 'GPU %s (%s)' % (gpu.get('index'), gpu.get('name'))


def check_health_expectations(expect, facts):
    """Every health expectation that is not met -> 'name: expected X, found Y on GPU i (name)'.

    max_ecc_uncorrected is 0 where it is not set and ECC is on: an uncorrected
    error is never healthy. A value the GPU does not report ([N/A]) does not
    meet an expectation that asks for it."""
    expect = dict((key, value) for key, value in (expect or {}).items()
                  if key in HEALTH_EXPECT_SPEC and value is not None)
    failures = []
    gpus = (facts or {}).get('gpus') or []
    asked = dict(expect)
    if not gpus or not any('health' in gpu for gpu in gpus):
        for name, value in sorted(asked.items()):
            if value is not False:
                failures.append('%s: expected %s, found no GPU health (%s)' % (
                    name, value, (facts or {}).get('health_error') or (facts or {}).get('error') or 'no GPU'))
        return failures

    def fail(name, expected, found, gpu):
        failures.append('%s: expected %s, found %s on %s' % (name, expected, found, _label(gpu)))

    for gpu in gpus:
        health = gpu.get('health')
        if health is None:
            continue
        for name, current, maximum, unit in (('min_pcie_gen', 'pcie_gen_current', 'pcie_gen_max', 'Gen%s'),
                                             ('min_pcie_width', 'pcie_width_current', 'pcie_width_max', 'x%s')):
            if name in expect:
                found = health.get(current)
                if found is None or found < expect[name]:
                    fail(name, '>= %s' % (unit % expect[name]),
                         'not reported' if found is None else '%s (max %s)' % (
                             unit % found, unit % health.get(maximum) if health.get(maximum) is not None else '?'), gpu)
        limit = expect.get('max_ecc_uncorrected')
        if limit is None and health.get('ecc_enabled'):
            limit = 0
        if limit is not None:
            found = health.get('ecc_uncorrected_volatile')
            if found is None and 'max_ecc_uncorrected' in expect:
                fail('max_ecc_uncorrected', '<= %s' % limit, 'not reported (ECC %s)' % (
                    'on' if health.get('ecc_enabled') else 'off or not supported'), gpu)
            elif found is not None and found > limit:
                fail('max_ecc_uncorrected', '<= %s uncorrected ECC errors' % limit, found, gpu)
        if expect.get('no_pending_remaps'):
            pending = [label for key, label in (('retired_pages_pending', 'retired pages pending'),
                                                ('remapped_rows_pending', 'row remap pending'),
                                                ('remapped_rows_failure', 'row remap failed')) if health.get(key)]
            known = [key for key in ('retired_pages_pending', 'remapped_rows_pending') if health.get(key) is not None]
            if pending:
                fail('no_pending_remaps', 'no pending row remaps or retired pages', ', '.join(pending), gpu)
            elif not known:
                fail('no_pending_remaps', 'no pending row remaps or retired pages',
                     'neither retired pages nor row remapping reported', gpu)
        if expect.get('persistence_mode') is not None and health.get('persistence_mode') != expect['persistence_mode']:
            found = health.get('persistence_mode')
            fail('persistence_mode', 'on' if expect['persistence_mode'] else 'off',
                 'not reported' if found is None else ('on' if found else 'off'), gpu)
        if expect.get('no_clock_slowdown'):
            reasons = health.get('clocks_event_reasons')
            slow = [reason for reason in reasons or [] if reason in SLOWDOWN_REASONS]
            if reasons is None:
                fail('no_clock_slowdown', 'no hardware or thermal clock slowdown', 'clock event reasons not reported', gpu)
            elif slow:
                fail('no_clock_slowdown', 'no hardware or thermal clock slowdown', ', '.join(slow), gpu)
    return failures
