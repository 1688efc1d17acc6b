# -*- coding: utf-8 -*-
"""The kernel check catalogue and wording, without torch (the engine on a real
torch, with fake extension modules, is tests/integration/test_kernel_checks_real.py)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import types

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import kernel_checks as kc
from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import check_kernels


def test_catalogue_names_are_unique_and_every_check_has_a_runner():
    names = kc.check_names()
    assert len(names) == len(set(names))
    assert set(names) == set(kc.RUNNERS)
    for name, set_name, dummy_path, dummy_cc, dummy_cpu, tolerance in kc.CHECKS:
        assert name.startswith(set_name + ".") and set_name in kc.SETS
        assert tolerance >= 0


def test_sm120_relevant_checks_need_blackwell_and_the_rest_run_anywhere():
    min_cc = dict((entry[0], entry[3]) for entry in kc.CHECKS)
    assert min_cc["torch.fp8_scaled_mm"] == (8, 9)
    for name in ("torch.nvfp4_scaled_mm", "sgl_kernel.cutlass_scaled_fp4_mm", "flashinfer.mm_fp4.cutlass"):
        assert min_cc[name] == (10, 0)
    assert min_cc["sgl_kernel.rmsnorm"] is None


@pytest.mark.parametrize("text, capability, expected", [
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", (12, 0),
     "sgl_kernel has no code for sm_120 (compute capability 12.0): RuntimeError: CUDA error: no kernel image"),
    ("RuntimeError: CUDA error: no kernel image is available for execution on the device", (9, 0),
     "sgl_kernel has no code for sm_90 (compute capability 9.0)"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", (9, 0),
     "RuntimeError: CUDA error: an illegal memory access was encountered"),
], ids=["sm120", "sm90", "other_error_unchanged"])
def test_no_kernel_image_names_the_missing_architecture(text, capability, expected):
    assert kc.diagnose_error(text, "sgl_kernel", capability).startswith(expected)


def test_failures_are_grouped_with_their_sizes_and_the_worst_error():
    reason = kc._summarise([
        (128, "error_tol", "relative error 0.2 > tolerance 0.005", 0.2),
        (1024, "error_tol", "relative error 0.41 > tolerance 0.005", 0.41),
        (7, "nonfinite", "3 NaN/Inf of 14336", None),
    ])
    assert reason == "relative error 0.41 > tolerance 0.005 at M=128, 1024 / 3 NaN/Inf of 14336 at M=7"


def test_resolve_op_walks_submodules_and_reports_missing_ops():
    norm = types.SimpleNamespace(rmsnorm=lambda x: x)
    module = types.SimpleNamespace(__name__="fake_flashinfer", norm=norm, activation=types.SimpleNamespace())
    assert kc.resolve_op(module, "norm.rmsnorm") is norm.rmsnorm
    assert kc.resolve_op(module, "activation.silu_and_mul") is None
    assert kc.resolve_op(module, "sampling.top_k_sampling_from_probs") is None


def test_call_passes_only_what_the_signature_has_and_skips_unknown_required_parameters():
    seen = {}

    def old(x, w, eps=1e-6):
        seen["old"] = eps

    def new(x, w, eps=1e-6, *, enable_pdl=None):
        seen["new"] = (eps, enable_pdl)

    def changed(x, w, norm_config, eps=1e-6):
        raise AssertionError("must not be called")

    kc.call(old, (1, 2), {"eps": 1e-5, "enable_pdl": False})
    kc.call(new, (1, 2), {"eps": 1e-5, "enable_pdl": False})
    assert seen == {"old": 1e-5, "new": (1e-5, False)}
    with pytest.raises(kc.Skip, match="required parameter 'norm_config'"):
        kc.call(changed, (1, 2), {"eps": 1e-5})


def test_check_kernels_fails_on_failed_entries_and_engine_errors_only():
    facts = {"kernels": [
        {"check": "sgl_kernel.rmsnorm", "device": 0, "device_name": "NVIDIA H200", "status": "failed",
         "reason": "all zeros at M=128, 1024"},
        {"check": "sgl_kernel.silu_and_mul", "device": "cpu", "device_name": "cpu", "status": "failed",
         "reason": "relative error 0.3 > tolerance 0.005 at M=1"},
        {"check": "flashinfer.rmsnorm", "device": "cpu", "status": "skipped", "reason": "no CUDA device"},
        {"check": "torch.fp8_scaled_mm", "device": 0, "status": "ok"}]}
    assert check_kernels(facts) == [
        "kernels: expected sgl_kernel.rmsnorm to match fp32 on device 0 (NVIDIA H200), found all zeros at M=128, 1024",
        "kernels: expected sgl_kernel.silu_and_mul to match fp32 on the CPU, found relative error 0.3 > tolerance 0.005 at M=1"]
    assert check_kernels({"kernels": [], "kernels_error": "KeyError: 'x'\ntraceback"}) == [
        "kernels: expected the kernel checks to run, found KeyError: 'x'"]
    assert check_kernels({}) == []
