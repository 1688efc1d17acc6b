# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The serving stack itself, asked in the venv after the probe when sglang is installed there.

torch_verify runs this file's source in the interpreter under test (like the
probe, one ``-c`` program, with probe_imports and torch_probe built before it),
so it uses the standard library at module level only. It answers three
questions the kernel checks cannot:

- do sglang and the modules its server imports at start import (each reported
  like the probe's imports: the error, its causes, the ABI / CUDA / version
  diagnosis)? ``sglang.launch_server`` imports the argument groups and
  ServerArgs; its run_server imports ``sglang.srt.entrypoints.http_server``
  for the default HTTP mode (sglang 0.5.23);
- does the installed sglang's own argument parser (ServerArgs.add_cli_args,
  what ``sglang serve`` parses with) take the serving flags the verification
  selected, with each field set to the backend named? Nothing is started;
- what would sglang's ``--moe-runner-backend auto`` run for the model's
  experts on the first visible GPU? ServerArgs is resolved without the
  model's files (an architecture override that reads them is not applied),
  then the MoE quantization method sglang would use creates its runner.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import json
import os
import re
import sys

SERVER_IMPORTS = ('sglang', 'sglang.launch_server', 'sglang.srt.entrypoints.http_server')
NOT_INSTALLED = 'not checked: sglang not installed'
UNKNOWN = 'unknown'
# The distributions whose torch pins explain an import failure of the server.
STACK = ('sglang', 'sglang-kernel', 'flashinfer-python')
# How the auto answer was read, for the record.
AUTO_HOW = ('sglang %s: ServerArgs(--moe-runner-backend auto) resolved without the model\'s files, then '
            '%s.create_moe_runner on %s')
# Where a venv (or a Python prefix) keeps its packages.
SITE_PATTERNS = ('lib/python3*/site-packages/sglang/__init__.py', 'lib64/python3*/site-packages/sglang/__init__.py',
                 'lib/python3*/dist-packages/sglang/__init__.py')


def installed(python, packages=None):
    """Whether sglang is installed for this interpreter: in the probe's package
    list, or under its prefix (the venv's bin/python is never resolved: the
    link points at the base interpreter)."""
    if any(re.sub(r'[-_.]+', '-', name).lower() == 'sglang' for name in packages or {}):
        return True
    prefix = os.path.dirname(os.path.dirname(python))
    return any(glob.glob(os.path.join(prefix, pattern)) for pattern in SITE_PATTERNS)


# --- in the venv -------------------------------------------------------------

def _helper(name):
    return sys.modules['gpufleet_' + name]


def check_flags(flags, families):
    """The selected flags through sglang's own parser: {'status': 'ok' | 'failed', 'reason', 'argv'}.

    flags: {family: backend}; families: backends' table for the sglang version
    ({family: {'flag', 'field'}})."""
    import argparse
    import contextlib
    import io

    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog='sglang serve')
    ServerArgs.add_cli_args(parser)
    argv = []
    for family in sorted(flags):
        argv.extend([families[family]['flag'], flags[family]])
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parsed = parser.parse_args(['--model-path', 'dummy'] + argv)
    except SystemExit:
        lines = err.getvalue().strip().splitlines()
        return {'status': 'failed', 'reason': lines[-1] if lines else 'the parser exited', 'argv': argv}
    wrong = ['%s=%r' % (families[family]['field'], getattr(parsed, families[family]['field'], None))
             for family in sorted(flags) if getattr(parsed, families[family]['field'], None) != flags[family]]
    if wrong:
        return {'status': 'failed', 'reason': 'parsed, but %s' % ', '.join(wrong), 'argv': argv}
    return {'status': 'ok', 'reason': None, 'argv': argv}


def auto_moe_runner(torch, version, precision, moe, fp8_block):
    """{'gpu', 'moe_runner' (the backend or 'unknown'), 'how' or 'reason'} for the first visible GPU."""
    if not moe:
        return {'gpu': None, 'moe_runner': UNKNOWN, 'reason': 'the model has no MoE layer'}
    if precision not in ('none', 'fp8'):
        return {'gpu': None, 'moe_runner': UNKNOWN, 'reason': 'asked for BF16 and FP8 experts only'}
    if not torch.cuda.is_available() or not torch.cuda.device_count():
        return {'gpu': None, 'moe_runner': UNKNOWN, 'reason': 'no CUDA device visible'}
    from sglang.srt import runtime_context
    from sglang.srt.layers.moe.moe_runner import MoeRunnerConfig
    from sglang.srt.layers.moe.utils import get_moe_runner_backend
    from sglang.srt.server_args import ServerArgs

    gpu = torch.cuda.get_device_name(0)
    args = ServerArgs(model_path='dummy', moe_runner_backend='auto', quantization='fp8' if precision == 'fp8' else None)
    with runtime_context.use_context(runtime_context.create_context(args, role='scheduler')):
        backend = get_moe_runner_backend()
        if not backend.is_auto():
            return {'gpu': gpu, 'moe_runner': backend.value,
                    'how': 'sglang %s: resolved by ServerArgs without the model\'s files' % version}
        if precision == 'fp8':
            from sglang.srt.layers.quantization.fp8 import Fp8Config, Fp8MoEMethod

            method = Fp8MoEMethod(Fp8Config(is_checkpoint_fp8_serialized=True,
                                            weight_block_size=list(fp8_block) if fp8_block else None))
        else:
            from sglang.srt.layers.quantization.unquant import UnquantizedFusedMoEMethod

            # the flags FusedMoE derives from the backend (layers/moe/fused_moe_triton/layer.py)
            method = UnquantizedFusedMoEMethod(
                backend.is_triton_kernels(), backend.is_flashinfer_trtllm() or backend.is_flashinfer_trtllm_routed(),
                backend.is_deep_gemm() or backend.is_lora())
        layer = torch.nn.Module()
        method.create_moe_runner(layer, MoeRunnerConfig(
            num_experts=moe['experts'], num_local_experts=moe['experts'], hidden_size=moe['hidden'],
            intermediate_size_per_partition=moe['intermediate'], top_k=moe['top_k']))
        chosen = method.get_moe_runner_backend(layer)
    return {'gpu': gpu, 'moe_runner': getattr(chosen, 'value', None) or UNKNOWN,
            'how': AUTO_HOW % (version, type(method).__name__, gpu)}


def run(params):
    """The answer: imports (name -> the probe's import entry), version, flags_check, auto."""
    answer = {'imports': {}, 'version': None, 'flags_check': None, 'auto': None}
    try:
        import torch
    except Exception as exc:  # pylint: disable=broad-except
        answer['error'] = 'torch did not import: %s: %s' % (type(exc).__name__, exc)
        return answer
    loaded = {}
    answer['imports'] = _helper('torch_probe').import_modules(list(params['imports']), torch.version.cuda, loaded)
    if not all(entry['ok'] for entry in answer['imports'].values()):
        # a torch pin of the serving stack that the installed torch breaks explains many import failures
        imports = _helper('probe_imports')
        dists, versions = imports.installed_distributions()
        answer['pin_conflicts'] = [conflict for conflict in imports.pin_conflicts(imports.requirement_pins(dists), versions)
                                   if imports.canonical_name(conflict.split(' ', 1)[0]) in STACK]
    if 'sglang' not in loaded:
        return answer
    answer['version'] = answer['imports']['sglang'].get('version')
    if params.get('flags') is not None:
        try:
            answer['flags_check'] = check_flags(params['flags'], params['families'])
        except Exception as exc:  # pylint: disable=broad-except
            answer['flags_check'] = {'status': 'failed', 'reason': '%s: %s' % (type(exc).__name__, exc), 'argv': None}
    if params.get('auto'):
        try:
            answer['auto'] = auto_moe_runner(torch, answer['version'], params['precision'], params.get('moe'),
                                             params.get('fp8_block'))
        except Exception as exc:  # pylint: disable=broad-except
            answer['auto'] = {'gpu': None, 'moe_runner': UNKNOWN, 'reason': 'sglang could not be asked: %s: %s'
                              % (type(exc).__name__, str(exc).strip().splitlines()[0] if str(exc).strip() else '')}
    return answer


def main():
    # one JSON document on the stdout it was started with; whatever sglang prints goes to stderr
    out_fd = os.dup(1)
    os.dup2(2, 1)
    params = json.loads(sys.argv[1])
    if params.get('timeout'):
        import signal

        signal.alarm(int(params['timeout']))
    try:
        result = run(params)
    except Exception as exc:  # pylint: disable=broad-except
        result = {'error': '%s: %s' % (type(exc).__name__, exc)}
    data = (json.dumps(result, sort_keys=True) + '\n').encode('ascii')
    while data:
        data = data[os.write(out_fd, data):]
    os.close(out_fd)
    sys.stderr.flush()
    # as the probe: CUDA and extension destructors can hang at exit
    os._exit(0)
