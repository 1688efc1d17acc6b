# -*- coding: utf-8 -*-
"""model_checks' sglang triton MoE runner: how sglang is found, imported and
handed to the checks, with sglang and torch faked (the numbers are checked on a
CPU torch by tests/integration/test_model_checks_real.py and on a GPU in
evidence/)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import sys
import types

from ansible_collections.gpufleet.inference.plugins.module_utils import backends, model_checks as mc

SHAPES = {'tp': 1, 'hidden': 64, 'gemms': [],
          'moe': {'experts': 16, 'top_k': 4, 'hidden': 64, 'intermediate': 32, 'renormalize': True}}


def _find_spec(found):
    return lambda name: object() if found else None


def _fake_sglang(monkeypatch, broken=None):
    seen = {'contexts': 0, 'entered': 0}
    for name in ('sglang', 'sglang.srt', 'sglang.srt.layers', 'sglang.srt.layers.moe',
                 'sglang.srt.layers.moe.moe_runner.triton_utils'):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    fused = types.ModuleType(mc.SGLANG_TRITON_MOE)
    fused.fused_experts = lambda *args, **kwargs: 'out'
    monkeypatch.setitem(sys.modules, mc.SGLANG_TRITON_MOE, fused)
    monkeypatch.setitem(sys.modules, 'sglang.srt.layers.moe.moe_runner', types.SimpleNamespace(MoeRunnerConfig=dict))
    monkeypatch.setitem(sys.modules, 'sglang.srt.layers.moe.topk', types.SimpleNamespace(StandardTopKOutput=tuple))
    monkeypatch.setitem(sys.modules, 'sglang.srt.server_args', types.SimpleNamespace(ServerArgs=lambda **kw: kw))

    def create_context(args, role):
        seen['contexts'] += 1
        seen.update(args=args, role=role)
        return args

    @contextlib.contextmanager
    def use_context(context):
        seen['entered'] += 1
        yield
    monkeypatch.setitem(sys.modules, 'sglang.srt.runtime_context',
                        types.SimpleNamespace(create_context=create_context, use_context=use_context))
    if broken:
        real = __import__('importlib').import_module

        def fail(name, package=None):
            if name.startswith('sglang'):
                raise ImportError('libcudart.so.12: cannot open shared object file: No such file or directory')
            return real(name, package)
        monkeypatch.setattr('importlib.import_module', fail)
    return seen


def test_the_checks_and_their_backend():
    assert mc.applicable('none')[-1] == 'moe.triton.bf16' and mc.applicable('fp8')[-1] == 'moe.triton.fp8'
    assert mc.default_tolerances()['moe.triton.bf16'] == mc.default_tolerances()['moe.flashinfer_cutlass.bf16']
    assert mc.default_tolerances()['moe.triton.fp8'] == mc.default_tolerances()['moe.flashinfer_cutlass.fp8']
    assert backends.CHECK_BACKENDS['moe.triton.bf16'] == backends.CHECK_BACKENDS['moe.triton.fp8'] == ('moe_runner', 'triton')
    assert backends.DEFAULT_PREFERENCE['moe_runner'] == ['flashinfer_cutlass', 'flashinfer_trtllm', 'triton']


def test_no_sglang_is_none(monkeypatch):
    monkeypatch.setattr('importlib.util.find_spec', _find_spec(False))
    assert mc.sglang_runner('13.0') is None


def test_an_sglang_that_does_not_import_is_explained(monkeypatch):
    monkeypatch.setattr('importlib.util.find_spec', _find_spec(True))
    _fake_sglang(monkeypatch, broken=True)
    assert mc.sglang_runner('13.0') == 'libcudart.so.12 is missing: built for CUDA 12, the stack is CUDA 13.0'


def test_the_runner_publishes_its_context_once_and_enters_it_per_call(monkeypatch):
    monkeypatch.setattr('importlib.util.find_spec', _find_spec(True))
    seen = _fake_sglang(monkeypatch)
    runner = mc.sglang_runner('13.0')
    assert runner.fused_experts() == 'out' and runner.MoeRunnerConfig is dict and runner.StandardTopKOutput is tuple
    assert seen['contexts'] == 0  # nothing is made before a check runs
    for dummy in range(3):
        with runner.context():
            pass
    assert seen['contexts'] == 1 and seen['entered'] == 3
    assert seen['args'] == {'model_path': 'dummy', 'moe_runner_backend': 'triton'} and seen['role'] == 'scheduler'


def _torch():
    backends_ = types.SimpleNamespace(cuda=types.SimpleNamespace(matmul=types.SimpleNamespace()),
                                      cudnn=types.SimpleNamespace())
    return types.SimpleNamespace(backends=backends_, version=types.SimpleNamespace(cuda='13.0'))


def test_run_checks_resolves_sglang_once_and_only_for_a_moe_model(monkeypatch):
    asked = []
    monkeypatch.setattr(mc, 'sglang_runner', asked.append)
    devices = [('cpu', 'cpu', None)]
    results = mc.run_checks(_torch(), {'torch': None}, devices, SHAPES, 'none', only=['moe.triton.bf16'])
    assert asked == ['13.0']
    assert [(e['check'], e['status'], e['reason']) for e in results] == [
        ('moe.triton.bf16', 'skipped', 'sglang is not installed')]
    dense = dict(SHAPES, moe=None)
    results = mc.run_checks(_torch(), {'torch': None}, devices, dense, 'none', only=['moe.triton.bf16'])
    assert asked == ['13.0'] and results[0]['reason'] == mc.NO_MOE
    # an import that failed is the reason, as for flashinfer
    monkeypatch.setattr(mc, 'sglang_runner', lambda cuda: 'ImportError: x')
    results = mc.run_checks(_torch(), {'torch': None}, devices, SHAPES, 'fp8', only=['moe.triton.fp8'])
    assert results[0]['reason'] == 'sglang did not import: ImportError: x'


def test_block_scaled_experts_must_be_whole_blocks():
    assert mc._block_fits({'intermediate': 768, 'hidden': 2048}, [128, 128]) is None
    assert mc._block_fits({'intermediate': 192, 'hidden': 2048}, [128, 128]) == (
        'the experts (intermediate 192, hidden 2048 per GPU) are not whole FP8 weight blocks [128, 128]: sglang '
        'refuses a partial block')
