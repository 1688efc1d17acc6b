# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The probe that gpufleet.inference.torch_verify runs inside the interpreter under test.

torch_verify reads this file's source and runs it as
``PYTHON -I -c <source> <json parameters>``: it is never written to the target's
disk, and importing this module (as the controller side does) runs nothing.

It prints exactly one JSON document on the stdout it was started with. Before it
imports anything else, fd 1 is pointed at stderr, so whatever torch or an
extension prints cannot corrupt that document.

Speed matters (torch_verify must cost little more than a bare ``import torch``):
``ldconfig -p`` and ``nvcc --version`` start before the torch import and run
while it loads; nothing else is spawned.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import sys
import time

PROBE_SCHEMA = 1
# The extensions that have a built-in kernel check set (kernel_checks.SETS).
EXTENSION_SETS = ('sgl_kernel', 'flashinfer')


def helper(name):
    """A module_utils helper of probe_program.PROBE_HELPERS: in the probe, the module
    its prelude built from its source (the probe is one -c string, nothing on disk);
    on the controller, the ordinary import."""
    module = sys.modules.get('gpufleet_' + name)
    if module is None:
        import importlib

        module = importlib.import_module('ansible_collections.gpufleet.inference.plugins.module_utils.' + name)
    return module


def _which(name, extra_dirs=()):
    for directory in os.environ.get('PATH', '').split(os.pathsep) + list(extra_dirs):
        candidate = os.path.join(directory or '.', name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def find_cuda_home():
    """The CUDA_HOME that torch.utils.cpp_extension._find_cuda_home picks, without importing it."""
    home = os.environ.get('CUDA_HOME') or os.environ.get('CUDA_PATH')
    if home:
        return home
    nvcc = _which('nvcc')
    if nvcc:
        return os.path.dirname(os.path.dirname(nvcc))
    if os.path.isdir('/usr/local/cuda'):
        return '/usr/local/cuda'
    return None


def _start(argv):
    import subprocess

    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, close_fds=True)
    except OSError:
        return None


def _finish(proc):
    if proc is None:
        return None, None
    out = proc.communicate()[0]
    return proc.returncode, out.decode('utf-8', 'replace')


def parse_ldconfig(out):
    """libcudart entries of ``ldconfig -p``, in the loader's order."""
    found = []
    for line in (out or '').splitlines():
        match = re.match(r'^\s*(libcudart\.so\S*)\s+\(([^)]*)\)\s+=>\s+(.+?)\s*$', line)
        if match:
            found.append({'soname': match.group(1), 'abi': match.group(2), 'path': match.group(3)})
    return found


def parse_nvcc(out):
    match = re.search(r'release (\d+(?:\.\d+)*), V(\d+(?:\.\d+)*)', out or '')
    return match.group(2) if match else None


def format_cudnn_version(value):
    if not value:
        return None
    value = int(value)
    if value >= 90000:  # cuDNN 9: major * 10000 + minor * 100 + patch
        return '%d.%d.%d' % (value // 10000, value % 10000 // 100, value % 100)
    return '%d.%d.%d' % (value // 1000, value % 1000 // 100, value % 100)


def parse_driver_version(text):
    """Version from /proc/driver/nvidia/version (proprietary and open kernel modules)."""
    match = re.search(r'Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)', text or '')
    return match.group(1) if match else None


def driver_version():
    """NVIDIA kernel module version from procfs: no process, no GPU context."""
    try:
        with open('/proc/driver/nvidia/version') as handle:
            return parse_driver_version(handle.read())
    except (IOError, OSError):
        return None


def loaded_libraries(pattern):
    """Paths of mapped shared objects of this process matching pattern."""
    paths = []
    try:
        with open('/proc/self/maps') as handle:
            for line in handle:
                path = line.rstrip('\n').split(None, 5)[-1]
                if path.startswith('/') and pattern in os.path.basename(path) and path not in paths:
                    paths.append(path)
    except (IOError, OSError):
        pass
    return paths


def _error_text(exc):
    return '%s: %s' % (type(exc).__name__, exc)


def _version_of(module, name):
    """The module's __version__, else the version of a distribution that provides it: one named like
    it, else (Python >= 3.10) one whose files hold it, as sglang-kernel holds sgl_kernel."""
    version = getattr(module, '__version__', None)
    if version is not None:
        return str(version)
    try:
        from importlib import metadata
    except ImportError:
        return None
    providers = getattr(metadata, 'packages_distributions', lambda: {})
    for dist in (name, name.replace('_', '-')):
        try:
            return metadata.version(dist)
        except Exception:  # pylint: disable=broad-except
            continue
    try:
        provided_by = providers().get(name.split('.')[0]) or []
        return metadata.version(provided_by[0]) if provided_by else None
    except Exception:  # pylint: disable=broad-except
        return None


def import_modules(names, cuda_version=None, loaded=None):
    """name -> {ok, version, error, undefined_symbol, causes, missing_library, diagnosis};
    the imported modules go into loaded (name -> module) when it is given."""
    import importlib

    describe = helper('probe_imports').describe_exception
    results = {}
    for name in names:
        entry = {'ok': False, 'version': None, 'error': None, 'undefined_symbol': None}
        try:
            module = importlib.import_module(name)
        except Exception as exc:  # pylint: disable=broad-except
            # Extensions fail with ImportError, OSError, RuntimeError (version checks) ...
            # The outer message often hides the cause (a library built for
            # another CUDA): the whole chain is read.
            described = describe(exc, cuda_version)
            entry['error'] = described['error']
            entry['undefined_symbol'] = described['undefined_symbol']
            entry['causes'] = described['causes']
            entry['missing_library'] = described['missing_library']
            if described['diagnosis']:
                entry['diagnosis'] = described['diagnosis']
        else:
            entry['ok'] = True
            entry['version'] = _version_of(module, name)
            if loaded is not None:
                loaded[name] = module
        results[name] = entry
    return results


def requirement_conflicts():
    """Installed distributions whose pins on torch / torchvision / torchaudio
    the installed versions contradict, as sentences; [] when they agree."""
    imports = helper('probe_imports')
    dists, installed = imports.installed_distributions()
    return imports.pin_conflicts(imports.requirement_pins(dists), installed)


def flashinfer_jit(params):
    """Where flashinfer's JIT cache of this venv is, and whether the
    precompiled flashinfer-jit-cache package makes compiling unnecessary.
    Set before flashinfer is imported: the cache belongs to the venv (a
    rollback keeps its own) unless the caller set FLASHINFER_WORKSPACE_BASE."""
    if params.get('flashinfer_workspace_venv', True) and not os.environ.get('FLASHINFER_WORKSPACE_BASE'):
        os.environ['FLASHINFER_WORKSPACE_BASE'] = sys.prefix
    base = os.environ.get('FLASHINFER_WORKSPACE_BASE') or os.path.expanduser('~')
    info = {'workspace': base, 'cache_dir': os.path.join(base, '.cache', 'flashinfer'), 'jit_cache_package': None}
    try:
        from importlib import metadata

        info['jit_cache_package'] = metadata.version('flashinfer-jit-cache')
    except Exception:  # pylint: disable=broad-except
        pass
    return info


def kernel_devices(torch, facts):
    """[(index, name, (major, minor))] of the CUDA devices, or the CPU when there is none."""
    if not facts['device_count']:
        return [('cpu', 'cpu', None)]
    return [(d['index'], d['name'], tuple(int(x) for x in d['compute_capability'].split('.')))
            for d in facts['devices']]


def extension(name, facts, loaded):
    """An extension for a check set: the imported module, the text of its import
    error, or None when it is not installed. One installed but not among the
    imports is imported here (and its import reported with the rest)."""
    try:
        from importlib.util import find_spec
    except ImportError:  # Python 2 has no checks to run anyway
        find_spec = None
    entry = facts['imports'].get(name)
    if name in loaded:
        return loaded[name]
    if entry is not None:
        return entry.get('diagnosis') or entry.get('error')
    if find_spec is not None and find_spec(name) is not None:
        facts['imports'].update(import_modules([name], facts['torch_cuda_version'], loaded))
        return loaded.get(name) or facts['imports'][name]['error']
    return None


def kernel_checks(torch, params, facts, loaded):
    """Run the check sets: torch's low-precision GEMMs with the smoke test or
    the kernel checks, each extension's set with the kernel checks."""
    checks = helper('kernel_checks')
    sets = ['torch'] if params.get('smoke') or params.get('kernels') else []
    modules = {'torch': torch}
    if params.get('kernels'):
        for name in EXTENSION_SETS:
            sets.append(name)
            module = extension(name, facts, loaded)
            if module is not None:
                modules[name] = module
    jit_dirs = {}
    if 'flashinfer' in sets and facts.get('flashinfer_jit'):
        jit_dirs['flashinfer'] = facts['flashinfer_jit']['cache_dir']
    return checks.run_checks(torch, sets, modules, kernel_devices(torch, facts),
                             tolerances=params.get('kernel_tolerances') or {}, jit_dirs=jit_dirs)


def model_checks(torch, params, facts, loaded):
    """The checks at the served model's shard shapes (module_utils model_checks),
    through each serving backend the GPU supports."""
    modules = {'torch': torch, 'flashinfer': extension('flashinfer', facts, loaded)}
    return helper('model_checks').run_checks(
        torch, modules, kernel_devices(torch, facts), params['model_shapes'], params.get('model_precision') or 'none',
        tolerances=params.get('kernel_tolerances') or {}, jit=params.get('model_jit') or 'cache_only',
        fp8_block=params.get('model_fp8_block'))


def collectives_check(torch, params, facts, deadline):
    """The all-reduce check (module_utils collectives) where it was asked for:
    one rank per GPU with NCCL, or collectives_world_size CPU ranks with gloo.
    A host where it cannot run gets status skipped and the reason."""
    checks = helper('collectives')
    backend = params.get('collectives_backend') or 'nccl'
    world_size = facts['device_count'] if backend == 'nccl' else int(params.get('collectives_world_size') or 0)
    sizes = params.get('collectives_sizes_mib') or list(checks.DEFAULT_SIZES_MIB)
    reason = checks.skip_reason(facts['device_count'], backend, world_size)
    import torch.distributed

    if reason is None and backend == 'nccl' and not torch.distributed.is_nccl_available():
        reason = 'this torch has no NCCL backend'
    if reason is not None:
        result = checks.new_result(backend, world_size, sizes)
        result['reason'] = reason
        return result
    # leave the probe's own alarm a few seconds to print what it found
    timeout = min(int(params.get('collectives_timeout') or 120), int(deadline - time.time()) - 5)
    if timeout < 5:
        result = checks.new_result(backend, world_size, sizes)
        result.update(status='failed', reason='expected time left for the all-reduce check, found %d s of the '
                      'probe timeout left' % max(timeout + 5, 0))
        return result
    result = checks.run(sys.executable, backend, world_size, sizes, int(params.get('collectives_iterations') or
                        checks.DEFAULT_ITERATIONS), timeout, plant=params.get('collectives_plant'))
    result['nccl_version'] = facts.get('nccl_version') if backend == 'nccl' else None
    if backend == 'nccl':
        count = facts['device_count']
        result['p2p'] = [[None if i == j else bool(torch.cuda.can_device_access_peer(i, j)) for j in range(count)]
                         for i in range(count)]
    return result


def _finite_or_none(value):
    import math

    return value if math.isfinite(value) else None


def smoke(torch, size, iterations, dtype_names):
    """bf16/fp16 matrix products on every GPU against an fp32 reference."""
    results = []
    flops = 2.0 * size * size * size * iterations
    previous_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # the reference must be real fp32
    try:
        for index in range(torch.cuda.device_count()):
            device = torch.device('cuda', index)
            with torch.cuda.device(index):
                generator = torch.Generator(device=device)
                generator.manual_seed(20260307 + index)
                a32 = torch.randn(size, size, device=device, generator=generator)
                b32 = torch.randn(size, size, device=device, generator=generator)
                for dtype_name in dtype_names:
                    dtype = getattr(torch, dtype_name)
                    a = a32.to(dtype)
                    b = b32.to(dtype)
                    # Reference from the same rounded inputs: only the product is judged.
                    reference = torch.matmul(a.float(), b.float())
                    out = torch.matmul(a, b)  # warm-up: cuBLAS heuristics, workspace
                    torch.cuda.synchronize(device)
                    start = torch.cuda.Event(enable_timing=True)
                    end = torch.cuda.Event(enable_timing=True)
                    start.record()
                    for dummy in range(iterations):
                        torch.matmul(a, b, out=out)
                    end.record()
                    end.synchronize()
                    seconds = start.elapsed_time(end) / 1000.0
                    nonfinite = int(out.numel() - torch.isfinite(out).sum().item())
                    error = ((out.float() - reference).norm() / reference.norm()).item()
                    results.append({
                        'device': index,
                        'name': torch.cuda.get_device_name(index),
                        'dtype': dtype_name,
                        'size': size,
                        'iterations': iterations,
                        'seconds': round(seconds, 6),
                        'tflops': round(flops / seconds / 1e12, 3) if seconds > 0 else None,
                        'nonfinite': nonfinite,
                        'relative_error': _finite_or_none(error),
                    })
                    del a, b, reference, out
                del a32, b32
            torch.cuda.empty_cache()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous_tf32
    return results


def torch_facts(torch, facts):
    facts['torch_version'] = str(torch.__version__)
    facts['torch_git_version'] = getattr(torch.version, 'git_version', None)
    facts['torch_cuda_version'] = torch.version.cuda
    try:
        facts['cxx11_abi'] = bool(torch.compiled_with_cxx11_abi())
    except AttributeError:
        facts['cxx11_abi'] = bool(getattr(torch._C, '_GLIBCXX_USE_CXX11_ABI', False))
    arch_flags = getattr(torch._C, '_cuda_getArchFlags', None)
    facts['arch_list'] = (arch_flags() or '').split() if arch_flags else []
    facts['cuda_available'] = bool(torch.cuda.is_available())
    facts['device_count'] = torch.cuda.device_count() if facts['cuda_available'] else 0
    devices = []
    for index in range(facts['device_count']):
        props = torch.cuda.get_device_properties(index)
        devices.append({
            'index': index,
            'name': props.name,
            'compute_capability': '%d.%d' % (props.major, props.minor),
            'memory_total_mib': int(props.total_memory) // (1024 * 1024),
            'multiprocessor_count': int(props.multi_processor_count),
        })
    facts['devices'] = devices
    try:
        facts['cudnn_version'] = format_cudnn_version(torch.backends.cudnn.version())
    except Exception:  # pylint: disable=broad-except
        facts['cudnn_version'] = None
    try:
        from torch.cuda import nccl

        version = nccl.version()
        facts['nccl_version'] = '.'.join(str(part) for part in version) if isinstance(version, tuple) else str(version)
    except Exception:  # pylint: disable=broad-except
        facts['nccl_version'] = None
    facts['cuda_driver_version'] = None
    get_driver = getattr(torch._C, '_cuda_getDriverVersion', None)
    if torch.version.cuda and get_driver is not None:
        try:
            version = int(get_driver())
            if version:
                facts['cuda_driver_version'] = '%d.%d' % (version // 1000, version % 1000 // 10)
        except Exception:  # pylint: disable=broad-except
            pass
    facts['torch_libcudart'] = loaded_libraries('libcudart') if devices else []


def installed_packages():
    """name -> version of the interpreter's distributions, like `uv pip freeze`'s
    name==version lines: wheels installed by direct reference (a local build,
    tracked otherwise) are left out."""
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        return {}
    packages = {}
    for dist in metadata.distributions():
        name = dist.metadata['Name']
        if name and dist.read_text('direct_url.json') is None:
            packages[name] = dist.version
    return packages


def read_markers(names):
    """JSON files under sys.prefix (a venv's root): name -> content, None when absent or unreadable."""
    markers = {}
    for name in names:
        try:
            with open(os.path.join(sys.prefix, name)) as handle:
                markers[name] = json.load(handle)
        except (IOError, OSError, ValueError):
            markers[name] = None
    return markers


def empty_facts():
    return {
        'python_executable': sys.executable,
        'python_version': '%d.%d.%d' % tuple(sys.version_info[:3]),
        'torch_importable': False,
        'torch_error': None,
        'torch_import_seconds': None,
        'torch_version': None,
        'torch_git_version': None,
        'torch_cuda_version': None,
        'cuda_available': False,
        'device_count': 0,
        'devices': [],
        'cudnn_version': None,
        'nccl_version': None,
        'cxx11_abi': None,
        'arch_list': [],
        'driver_version': None,
        'cuda_driver_version': None,
        'libcudart': [],
        'torch_libcudart': [],
        'cuda_home': None,
        'nvcc_version': None,
        'imports': {},
        'smoke': [],
        'smoke_error': None,
        'kernels': [],
        'kernels_error': None,
        'model_checks': [],
        'model_checks_error': None,
        'collectives': None,
        'flashinfer_jit': None,
        'requirement_conflicts': None,
        'packages': {},
        'markers': {},
    }


def run(params):
    deadline = time.time() + int(params.get('timeout') or 3600)
    facts = empty_facts()
    ldconfig = _which('ldconfig', ('/sbin', '/usr/sbin'))
    ldconfig_proc = _start([ldconfig, '-p']) if ldconfig else None
    cuda_home = find_cuda_home()
    facts['cuda_home'] = cuda_home
    nvcc = os.path.join(cuda_home, 'bin', 'nvcc') if cuda_home else None
    nvcc_proc = _start([nvcc, '--version']) if nvcc and os.access(nvcc, os.X_OK) else None
    facts['driver_version'] = driver_version()
    # Before torch: a broken torch still shows what is installed.
    if params.get('packages'):
        facts['packages'] = installed_packages()
    facts['markers'] = read_markers(params.get('markers') or [])
    facts['flashinfer_jit'] = flashinfer_jit(params)
    if params.get('consistent'):
        facts['requirement_conflicts'] = requirement_conflicts()

    # torch numbers the GPUs fastest first unless told otherwise; in bus order,
    # cuda:i is nvidia-smi's GPU i (the report joins the two by index)
    os.environ.setdefault('CUDA_DEVICE_ORDER', 'PCI_BUS_ID')
    started = time.time()
    try:
        import torch
    except Exception as exc:  # pylint: disable=broad-except
        facts['torch_error'] = _error_text(exc)
        torch = None
    facts['torch_import_seconds'] = round(time.time() - started, 3)

    if torch is not None:
        facts['torch_importable'] = True
        torch_facts(torch, facts)
        loaded = {}
        facts['imports'] = import_modules(params.get('imports') or [], facts['torch_cuda_version'], loaded)
        if params.get('smoke'):
            if facts['device_count']:
                facts['smoke'] = smoke(torch, int(params.get('smoke_size', 8192)),
                                       int(params.get('smoke_iterations', 10)),
                                       params.get('smoke_dtypes') or ['bfloat16', 'float16'])
            else:
                facts['smoke_error'] = 'no CUDA device to run on (torch.cuda.is_available() is %s)' % facts['cuda_available']
        if params.get('smoke') or params.get('kernels'):
            try:
                facts['kernels'] = kernel_checks(torch, params, facts, loaded)
            except Exception as exc:  # pylint: disable=broad-except
                # The engine itself broke: say so, never report the checks as passed.
                import traceback

                facts['kernels_error'] = '%s\n%s' % (_error_text(exc), traceback.format_exc()[-2000:])
        if params.get('model_shapes'):
            try:
                facts['model_checks'] = model_checks(torch, params, facts, loaded)
            except Exception as exc:  # pylint: disable=broad-except
                import traceback

                facts['model_checks_error'] = '%s\n%s' % (_error_text(exc), traceback.format_exc()[-2000:])
        if params.get('collectives'):
            facts['collectives'] = collectives_check(torch, params, facts, deadline)

    facts['libcudart'] = parse_ldconfig(_finish(ldconfig_proc)[1])
    facts['nvcc_version'] = parse_nvcc(_finish(nvcc_proc)[1])
    return facts


def main():
    # Keep the document's channel; send everything else that writes to fd 1 to stderr.
    out_fd = os.dup(1)
    os.dup2(2, 1)
    params = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    if params.get('timeout'):
        import signal

        # Default SIGALRM action ends the process even inside a hung CUDA call.
        signal.alarm(int(params['timeout']))
    result = {'schema': PROBE_SCHEMA}
    try:
        result['facts'] = run(params)
    except Exception as exc:  # pylint: disable=broad-except
        import traceback

        result['error'] = _error_text(exc)
        result['traceback'] = traceback.format_exc()
    data = (json.dumps(result, sort_keys=True) + '\n').encode('ascii')
    while data:
        data = data[os.write(out_fd, data):]
    os.close(out_fd)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: CUDA and extension destructors can hang or crash at exit.
    os._exit(0)


if __name__ == '__main__':
    main()
