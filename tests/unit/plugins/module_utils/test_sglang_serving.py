# -*- coding: utf-8 -*-
"""sglang_serving (the serving stack asked in the venv after the probe) and
verify_steps.serving_stack (its answer judged on the host), with sglang, torch
and the probe's helpers faked: the unit tests run without them."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import contextlib
import json
import os
import subprocess
import sys
import types

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import backends, sglang_serving as ss, verify_steps

H200 = 'NVIDIA H200'
FAMILIES = backends.families_of('0.5.23')
MOE = {'experts': 128, 'top_k': 8, 'hidden': 2048, 'intermediate': 768, 'renormalize': True}


# --- installed ---------------------------------------------------------------

def test_installed_from_the_package_list_or_the_venv_prefix(tmp_path):
    venv = tmp_path / 'ml-env'
    (venv / 'bin').mkdir(parents=True)
    python = str(venv / 'bin' / 'python')
    assert not ss.installed(python)
    assert ss.installed(python, {'SGLang': '0.5.23'}) and not ss.installed(python, {'sglang-router': '1'})
    (venv / 'lib' / 'python3.12' / 'site-packages' / 'sglang').mkdir(parents=True)
    (venv / 'lib' / 'python3.12' / 'site-packages' / 'sglang' / '__init__.py').write_text('')
    assert ss.installed(python)


# --- the flags through sglang's parser ----------------------------------------

def _fake_server_args(monkeypatch, field='moe_runner_backend'):
    class ServerArgs(object):
        @staticmethod
        def add_cli_args(parser):
            parser.add_argument('--model-path', required=True)
            parser.add_argument('--moe-runner-backend', dest=field, default='auto',
                                choices=FAMILIES['moe_runner']['choices'])
            parser.add_argument('--fp4-gemm-backend', dest='fp4_gemm_runner_backend', default='auto',
                                choices=FAMILIES['fp4_gemm']['choices'])
    module = types.ModuleType('sglang.srt.server_args')
    module.ServerArgs = ServerArgs
    for name in ('sglang', 'sglang.srt'):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, 'sglang.srt.server_args', module)
    return ServerArgs


def test_flags_the_parser_takes_are_ok(monkeypatch):
    _fake_server_args(monkeypatch)
    check = ss.check_flags({'moe_runner': 'triton', 'fp4_gemm': 'flashinfer_cudnn'}, FAMILIES)
    assert check == {'status': 'ok', 'reason': None,
                     'argv': ['--fp4-gemm-backend', 'flashinfer_cudnn', '--moe-runner-backend', 'triton']}


def test_a_flag_the_parser_refuses_fails_with_its_words(monkeypatch):
    _fake_server_args(monkeypatch)
    check = ss.check_flags({'moe_runner': 'tritonn'}, FAMILIES)
    assert check['status'] == 'failed' and check['argv'] == ['--moe-runner-backend', 'tritonn']
    assert check['reason'].startswith("sglang serve: error: argument --moe-runner-backend: invalid choice: 'tritonn'")


def test_a_flag_parsed_into_another_field_fails(monkeypatch):
    _fake_server_args(monkeypatch, field='moe_backend')
    check = ss.check_flags({'moe_runner': 'triton'}, FAMILIES)
    assert check['status'] == 'failed' and check['reason'] == "parsed, but moe_runner_backend=None"


# --- what sglang's auto would run --------------------------------------------

class _Backend(object):
    def __init__(self, value):
        self.value = value

    def __getattr__(self, name):
        if name.startswith('is_'):
            return lambda: self.value == name[3:]
        raise AttributeError(name)


def _fake_sglang_auto(monkeypatch, resolved='auto', chosen='triton'):
    seen = {}
    modules = {}
    for name in ('sglang', 'sglang.srt', 'sglang.srt.layers', 'sglang.srt.layers.moe', 'sglang.srt.layers.quantization'):
        modules[name] = types.ModuleType(name)

    def server_args(**kwargs):
        seen['server_args'] = kwargs
        return kwargs
    modules['sglang.srt.server_args'] = types.SimpleNamespace(ServerArgs=server_args)
    runtime = types.ModuleType('sglang.srt.runtime_context')
    runtime.create_context = lambda args, role: seen.update(role=role) or args

    @contextlib.contextmanager
    def use_context(context):
        seen['active'] = context
        yield
        seen['active'] = None
    runtime.use_context = use_context
    modules['sglang.srt.runtime_context'] = runtime
    modules['sglang.srt'].runtime_context = runtime
    modules['sglang.srt.layers.moe.moe_runner'] = types.SimpleNamespace(MoeRunnerConfig=lambda **kw: kw)
    modules['sglang.srt.layers.moe.utils'] = types.SimpleNamespace(
        get_moe_runner_backend=lambda: _Backend(seen['active']['moe_runner_backend'] if resolved == 'auto' else resolved))

    class Method(object):
        def __init__(self, *args):
            seen['method'] = (type(self).__name__, args)

        def create_moe_runner(self, layer, config):
            seen['config'] = config

        def get_moe_runner_backend(self, layer):
            return _Backend(chosen)
    modules['sglang.srt.layers.quantization.unquant'] = types.SimpleNamespace(
        UnquantizedFusedMoEMethod=type('UnquantizedFusedMoEMethod', (Method,), {}))
    modules['sglang.srt.layers.quantization.fp8'] = types.SimpleNamespace(
        Fp8MoEMethod=type('Fp8MoEMethod', (Method,), {}), Fp8Config=lambda **kw: kw)
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return seen


def _torch(devices=1):
    cuda = types.SimpleNamespace(is_available=lambda: devices > 0, device_count=lambda: devices,
                                 get_device_name=lambda index=0: H200)
    return types.SimpleNamespace(cuda=cuda, nn=types.SimpleNamespace(Module=object))


def test_auto_asks_the_quantization_method_sglang_would_use(monkeypatch):
    seen = _fake_sglang_auto(monkeypatch)
    auto = ss.auto_moe_runner(_torch(), '0.5.23', 'none', MOE, None)
    assert auto == {'gpu': H200, 'moe_runner': 'triton', 'how': ss.AUTO_HOW % ('0.5.23', 'UnquantizedFusedMoEMethod', H200)}
    # FusedMoE's flags for auto: no triton_kernels, no trtllm, no deep_gemm
    assert seen['method'] == ('UnquantizedFusedMoEMethod', (False, False, False)) and seen['role'] == 'scheduler'
    assert seen['server_args'] == {'model_path': 'dummy', 'moe_runner_backend': 'auto', 'quantization': None}
    assert seen['config']['num_experts'] == 128 and seen['config']['top_k'] == 8 and seen['active'] is None
    seen = _fake_sglang_auto(monkeypatch, chosen='deep_gemm')
    auto = ss.auto_moe_runner(_torch(), '0.5.23', 'fp8', MOE, [128, 128])
    assert auto['moe_runner'] == 'deep_gemm' and seen['method'][0] == 'Fp8MoEMethod'
    assert seen['server_args']['quantization'] == 'fp8'


def test_auto_resolved_by_server_args_is_reported_as_such(monkeypatch):
    _fake_sglang_auto(monkeypatch, resolved='flashinfer_trtllm')
    auto = ss.auto_moe_runner(_torch(), '0.5.23', 'fp8', MOE, None)
    assert auto['moe_runner'] == 'flashinfer_trtllm' and 'resolved by ServerArgs' in auto['how']


@pytest.mark.parametrize('precision, moe, devices, reason', [
    ('none', None, 1, 'the model has no MoE layer'),
    ('nvfp4', MOE, 1, 'asked for BF16 and FP8 experts only'),
    ('none', MOE, 0, 'no CUDA device visible'),
])
def test_auto_is_unknown_where_sglang_cannot_be_asked(precision, moe, devices, reason):
    assert ss.auto_moe_runner(_torch(devices), '0.5.23', precision, moe, None) == {
        'gpu': None, 'moe_runner': 'unknown', 'reason': reason}


# --- run: the answer ----------------------------------------------------------

def _helpers(monkeypatch, entries, pins=()):
    def import_modules(names, cuda_version, loaded):
        assert cuda_version == '13.0'
        for name in names:
            if entries[name]['ok']:
                loaded[name] = object()
        return dict((name, entries[name]) for name in names)
    monkeypatch.setitem(sys.modules, 'gpufleet_torch_probe', types.SimpleNamespace(import_modules=import_modules))
    from ansible_collections.gpufleet.inference.plugins.module_utils import probe_imports
    fake = types.SimpleNamespace(installed_distributions=lambda: ([], {}), requirement_pins=lambda dists: [],
                                 pin_conflicts=lambda found, versions: list(pins), canonical_name=probe_imports.canonical_name)
    monkeypatch.setitem(sys.modules, 'gpufleet_probe_imports', fake)
    monkeypatch.setitem(sys.modules, 'torch', types.SimpleNamespace(version=types.SimpleNamespace(cuda='13.0')))


def _entries(failed=()):
    return dict((name, {'ok': name not in failed, 'version': None if name in failed else '0.5.23',
                        'error': 'ImportError: x' if name in failed else None})
                for name in ss.SERVER_IMPORTS)


def test_run_answers_the_imports_the_flags_and_auto(monkeypatch):
    _helpers(monkeypatch, _entries())
    monkeypatch.setattr(ss, 'check_flags', lambda flags, families: {'status': 'ok', 'reason': None, 'argv': ['x']})
    monkeypatch.setattr(ss, 'auto_moe_runner', lambda *args: {'gpu': H200, 'moe_runner': 'triton', 'how': 'asked'})
    answer = ss.run({'imports': list(ss.SERVER_IMPORTS), 'flags': {'moe_runner': 'triton'}, 'families': FAMILIES,
                     'auto': True, 'precision': 'none', 'moe': MOE})
    assert answer['version'] == '0.5.23' and answer['flags_check']['status'] == 'ok'
    assert answer['auto']['moe_runner'] == 'triton' and 'pin_conflicts' not in answer


def test_run_explains_a_failed_import_with_the_stacks_torch_pins_only(monkeypatch):
    pins = ['sglang 0.5.23 requires torch==2.14.1, installed torch is 2.11.0+cu130',
            'torchaudio 2.11.0 requires torch==2.11.0, installed torch is 2.14.1']
    _helpers(monkeypatch, _entries(failed=('sglang',)), pins)
    answer = ss.run({'imports': list(ss.SERVER_IMPORTS), 'flags': {'moe_runner': 'triton'}, 'auto': True})
    assert answer['pin_conflicts'] == pins[:1]
    # sglang itself did not import: nothing more is asked of it
    assert answer['version'] is None and answer['flags_check'] is None and answer['auto'] is None


def test_the_program_answers_one_json_document_even_without_torch(tmp_path):
    sent = {'imports': list(ss.SERVER_IMPORTS), 'timeout': 60, 'flags': None, 'auto': False}
    argv = verify_steps.sglang_argv(sys.executable, sent)
    assert argv[:3] == [sys.executable, '-I', '-c'] and json.loads(argv[-1]) == sent
    env = dict(os.environ, PYTHONPATH='')
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60, env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer['error'].startswith('torch did not import: ModuleNotFoundError')


# --- verify_steps.serving_stack: the answer judged ------------------------------

class _Module(object):
    def __init__(self, answer):
        self.answer = answer
        self.calls = []

    def run_command(self, argv, environ_update=None, errors=None):
        self.calls.append((argv, environ_update))
        return 0, json.dumps(self.answer) + '\n', ''

    def get_bin_path(self, name):
        return None


def _case(monkeypatch, answer, installed=True, status='selected', numeric=True, mask=None):
    monkeypatch.setattr(ss, 'installed', lambda python, packages=None: installed)
    module = _Module(answer)
    params = {'timeout': 600, 'isolated': True, 'environment': {}, 'sglang_version': '0.5.23'}
    facts = {'torch_importable': True, 'torch_version': '2.14.1+cu130', 'imports': {}, 'packages': {},
             'backends': {'status': status, 'flags': {'moe_runner': 'triton'} if status == 'selected' else {},
                          'qualification': {H200: {'moe_runner': {'triton': {'status': 'qualified'}}}}}}
    model = {'precision': 'none', 'shapes': {'moe': MOE}, 'profile': {'quantization': {'method': 'none'}}}
    use = {'numeric': numeric, 'mask': mask}
    ran = {'cmd': ['/home/deploy/ml-env/bin/python', '-I', '-c', '<probe>', '{}']}
    mismatches = verify_steps.serving_stack(module, params, facts, ran, use, model)
    return mismatches, facts, module


def _answer(**extra):
    answer = {'imports': _entries(), 'version': '0.5.23',
              'flags_check': {'status': 'ok', 'reason': None, 'argv': ['--moe-runner-backend', 'triton']},
              'auto': {'gpu': H200, 'moe_runner': 'triton', 'how': 'asked'}}
    answer.update(extra)
    return answer


def test_sglang_not_installed_leaves_the_flags_not_checked(monkeypatch):
    mismatches, facts, module = _case(monkeypatch, None, installed=False)
    assert mismatches == [] and not module.calls and 'sglang' not in facts
    assert facts['backends']['flags_check'] == 'not checked: sglang not installed'
    assert facts['backends']['sglang_auto'] == {H200: 'unknown'}


def test_a_stack_that_imports_and_takes_the_flags_passes_with_auto_beside(monkeypatch):
    mismatches, facts, module = _case(monkeypatch, _answer(), mask='1')
    assert mismatches == []
    (argv, environ), = module.calls
    assert environ == {'CUDA_VISIBLE_DEVICES': '1'}
    sent = json.loads(argv[-1])
    assert sent['flags'] == {'moe_runner': 'triton'} and sent['auto'] is True and sent['moe'] == MOE
    assert sent['imports'] == list(ss.SERVER_IMPORTS) and sent['precision'] == 'none' and sent['fp8_block'] is None
    assert facts['backends']['flags_check'] == "ok: sglang 0.5.23's argument parser took '--moe-runner-backend triton'"
    assert facts['backends']['sglang_auto'] == {H200: 'triton'} and facts['backends']['sglang_auto_how'] == 'asked'
    assert facts['imports']['sglang.srt.entrypoints.http_server']['ok'] and 'imports' not in facts['sglang']


def test_refused_flags_and_a_failed_server_import_are_mismatches(monkeypatch):
    answer = _answer(imports=_entries(failed=('sglang.srt.entrypoints.http_server',)),
                     pin_conflicts=['sglang 0.5.23 requires torch==2.14.1, installed torch is 2.11.0'],
                     flags_check={'status': 'failed', 'reason': "invalid choice: 'triton'",
                                  'argv': ['--moe-runner-backend', 'triton']})
    mismatches, facts, module = _case(monkeypatch, answer)
    assert mismatches == [
        'sglang: expected sglang.srt.entrypoints.http_server to import (the server imports it at start), found '
        'ImportError: x; sglang 0.5.23 requires torch==2.14.1, installed torch is 2.11.0',
        "backends: expected sglang 0.5.23's argument parser to take '--moe-runner-backend triton', found invalid "
        "choice: 'triton'"]
    assert facts['backends']['flags_check'] == "failed: invalid choice: 'triton'"


def test_without_selected_flags_or_worked_gpus_nothing_is_parsed_or_asked(monkeypatch):
    mismatches, facts, module = _case(monkeypatch, _answer(flags_check=None, auto=None), status='skipped', numeric=False)
    sent = json.loads(module.calls[0][0][-1])
    assert sent['flags'] is None and sent['auto'] is False and mismatches == []
    assert facts['backends']['flags_check'] == 'not checked: no flags selected'
    assert facts['backends']['sglang_auto'] == {H200: 'unknown'}
    assert facts['backends']['sglang_auto_how'] == 'not asked: no GPU was worked for the model'


def test_a_program_without_an_answer_is_a_mismatch(monkeypatch):
    monkeypatch.setattr(ss, 'installed', lambda python, packages=None: True)
    module = _Module(None)
    module.run_command = lambda argv, environ_update=None, errors=None: (1, 'Segmentation fault', '')
    facts = {'torch_importable': True, 'imports': {}}
    mismatches = verify_steps.serving_stack(module, {'timeout': 60, 'isolated': True, 'environment': {}}, facts,
                                            {'cmd': ['/x/bin/python']}, {'numeric': False, 'mask': None}, None)
    assert mismatches == ["sglang: expected the serving stack to answer, found expected a JSON answer, found rc 1 and "
                          "'Segmentation fault'"]


def test_the_parser_is_the_one_argparse_gives(monkeypatch):
    # the fake above behaves as argparse does for a refused choice: exit 2 with the message on stderr
    server_args = _fake_server_args(monkeypatch)
    parser = argparse.ArgumentParser(prog='sglang serve')
    server_args.add_cli_args(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(['--model-path', 'x', '--moe-runner-backend', 'nonsense'])
