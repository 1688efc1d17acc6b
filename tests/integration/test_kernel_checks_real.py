"""The kernel check engine (module_utils/kernel_checks) and the probe's import
diagnosis on a real torch (the 2.13.0 CPU wheel), with fake extension modules
whose ops return NaN, zeros, zeros only for M >= 128, a wrong result, raise
"no kernel image", have a signature the engine does not know, or are missing.
The engine runs on CPU tensors here, as it does on a sandbox host."""
import json
import os
import subprocess
import sys
import textwrap

from conftest import ROOT
# the module fixtures of the real-torch tests, used here by name

sys.path.insert(0, os.path.join(ROOT, ".collections"))
from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import (  # noqa: E402
    check_expectations,
    check_kernels,
    parse_probe_output,
    probe_argv,
)

FAKES = textwrap.dedent("""\
    import json, sys, types
    sys.path.insert(0, sys.argv[1])
    import torch
    from ansible_collections.gpufleet.inference.plugins.module_utils import kernel_checks as kc

    def rms(x, w, eps=1e-6, out=None, enable_pdl=None):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)

    def silu(input, out=None):
        d = input.shape[-1] // 2
        return (torch.nn.functional.silu(input[:, :d].float()) * input[:, d:].float()).to(input.dtype)

    def fused(input, residual, weight, eps=1e-6, enable_pdl=None):
        residual.add_(input)
        input.copy_(rms(residual, weight, eps))

    def nan_rms(x, w, eps=1e-6, out=None):
        o = rms(x, w, eps)
        o.view(-1)[3] = float("nan")
        return o

    def zeros_from_128(x, w, eps=1e-6):
        return torch.zeros_like(x) if x.shape[0] >= 128 else rms(x, w, eps)

    def wrong_silu(input, out=None):
        return silu(input) * 1.3

    def no_image(x, w, eps=1e-6):
        raise RuntimeError("CUDA error: no kernel image is available for execution on the device")

    def new_signature(x, w, norm_config, eps=1e-6):
        return rms(x, w, eps)

    def fused_forgets_residual(input, residual, weight, eps=1e-6, enable_pdl=None):
        input.copy_(rms(input.float() + residual.float(), weight, eps).to(input.dtype))

    cases = {
        "right": dict(rmsnorm=rms, silu_and_mul=silu, fused_add_rmsnorm=fused),
        "nan": dict(rmsnorm=nan_rms),
        "zeros_from_128": dict(rmsnorm=zeros_from_128),
        "wrong": dict(silu_and_mul=wrong_silu),
        "no_kernel_image": dict(rmsnorm=no_image),
        "new_signature": dict(rmsnorm=new_signature),
        "fused_forgets_residual": dict(fused_add_rmsnorm=fused_forgets_residual),
    }
    out = {}
    for name, ops in cases.items():
        module = types.ModuleType("sgl_kernel")
        module.__dict__.update(ops)
        # The CPU, given the capability of an SM120 device so that the
        # "no kernel image" diagnosis has an architecture to name.
        out[name] = kc.run_checks(torch, ["torch", "sgl_kernel", "flashinfer"], {"torch": torch, "sgl_kernel": module,
                                  "flashinfer": "ImportError: libcudart.so.12: cannot open shared object file"},
                                  [("cpu", "cpu", (12, 0))], tolerances={"sgl_kernel.silu_and_mul": 0.01})
    print(json.dumps(out))
    """)


def _engine(torch_cpu_venv):
    proc = subprocess.run([os.path.join(torch_cpu_venv, "bin", "python"), "-c", FAKES, os.path.join(ROOT, ".collections")],
                          capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    return {case: {entry["check"]: entry for entry in entries} for case, entries in results.items()}


def test_engine_catches_each_failure_and_words_it(torch_cpu_venv):
    results = _engine(torch_cpu_venv)
    every = ["torch.fp8_scaled_mm", "torch.nvfp4_scaled_mm", "sgl_kernel.rmsnorm", "sgl_kernel.fused_add_rmsnorm",
             "sgl_kernel.silu_and_mul", "sgl_kernel.fp8_scaled_mm", "sgl_kernel.cutlass_scaled_fp4_mm",
             "flashinfer.rmsnorm", "flashinfer.silu_and_mul", "flashinfer.top_k_sampling", "flashinfer.mm_fp4.cudnn",
             "flashinfer.mm_fp4.cutlass", "flashinfer.mm_fp4.trtllm"]
    for case, checks in results.items():
        assert sorted(checks) == sorted(every), case  # every check listed, whatever happened

    right = results["right"]
    for name in ("sgl_kernel.rmsnorm", "sgl_kernel.fused_add_rmsnorm", "sgl_kernel.silu_and_mul"):
        entry = right[name]
        assert entry["status"] == "ok", entry
        assert entry["sizes"] == [1, 7, 128, 1024] and entry["failed_sizes"] == [] and entry["nonfinite"] == 0
        # fp16 output rounding only: far below the tolerance, but not zero (the op really ran)
        assert 0 < entry["relative_error"] < entry["tolerance"] / 5, entry
    assert right["sgl_kernel.silu_and_mul"]["tolerance"] == 0.01  # the override

    nan = results["nan"]["sgl_kernel.rmsnorm"]
    assert nan["status"] == "failed" and nan["nonfinite"] == 4 and nan["relative_error"] is None
    assert nan["reason"] == "1 NaN/Inf of 256 at M=1, 7, 128, 1024"  # the CPU runs a 256-wide hidden size

    zeros = results["zeros_from_128"]["sgl_kernel.rmsnorm"]
    assert zeros["status"] == "failed" and zeros["failed_sizes"] == [128, 1024]
    assert zeros["reason"] == "all zeros at M=128, 1024"

    wrong = results["wrong"]["sgl_kernel.silu_and_mul"]
    assert wrong["status"] == "failed" and wrong["failed_sizes"] == [1, 7, 128, 1024]
    assert wrong["reason"].startswith("relative error 0.3 > tolerance 0.01 at M=1, 7, 128, 1024"), wrong

    image = results["no_kernel_image"]["sgl_kernel.rmsnorm"]
    assert image["status"] == "failed"
    assert image["reason"].startswith("sgl_kernel has no code for sm_120 (compute capability 12.0): "
                                      "RuntimeError: CUDA error: no kernel image is available"), image

    sig = results["new_signature"]["sgl_kernel.rmsnorm"]
    assert sig["status"] == "skipped" and "required parameter 'norm_config'" in sig["reason"]

    fused = results["fused_forgets_residual"]["sgl_kernel.fused_add_rmsnorm"]
    assert fused["status"] == "failed" and "relative error" in fused["reason"]

    missing = results["nan"]
    assert missing["sgl_kernel.silu_and_mul"]["reason"] == "sgl_kernel.silu_and_mul is not in this version of sgl_kernel"
    assert missing["torch.fp8_scaled_mm"]["reason"] == "no CUDA device"
    assert missing["flashinfer.rmsnorm"]["reason"] == (
        "flashinfer did not import: ImportError: libcudart.so.12: cannot open shared object file")


# A site folder beside the venv: a fake sgl_kernel whose rmsnorm is wrong for
# M >= 128, a package that fails to import the way torchaudio 2.9.1 did beside
# torch 2.11.0+cu130 (the cause chained), and a distribution that pins another
# torch (torchvision 0.24.1 -> torch==2.9.1).
SITE = {
    "sgl_kernel/__init__.py": textwrap.dedent("""\
        import torch
        __version__ = "0.0.1+fake"

        def rmsnorm(input, weight, eps=1e-6, out=None, enable_pdl=None):
            x = input.float()
            y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.float()
            if input.shape[0] >= 128:
                y = y * 0.5
            return y.to(input.dtype)
        """),
    "gpufleet_fake_audio/__init__.py": textwrap.dedent("""\
        try:
            raise OSError("libcudart.so.12: cannot open shared object file: No such file or directory")
        except OSError as exc:
            raise OSError("Could not load this library: /x/libtorchaudio.so") from exc
        """),
    "torchvision-0.24.1.dist-info/METADATA": (
        "Metadata-Version: 2.1\nName: torchvision\nVersion: 0.24.1\nRequires-Dist: numpy\nRequires-Dist: torch==2.9.1\n"),
    "torchvision-0.24.1.dist-info/RECORD": "",
}


def test_probe_runs_the_checks_and_diagnoses_imports(torch_cpu_venv, tmp_path):
    site = tmp_path / "site"
    for path, text in SITE.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(text)
    params = {"imports": ["sgl_kernel", "gpufleet_fake_audio"], "kernels": True, "consistent": True, "timeout": 300}
    argv = probe_argv(os.path.join(torch_cpu_venv, "bin", "python"), params, isolated=False)
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600,
                          env=dict(os.environ, PYTHONPATH=str(site)))
    facts = parse_probe_output(proc.returncode, proc.stdout, 300)
    assert facts["kernels_error"] is None
    checks = {entry["check"]: entry for entry in facts["kernels"]}
    assert checks["sgl_kernel.rmsnorm"]["status"] == "failed"
    assert checks["sgl_kernel.rmsnorm"]["failed_sizes"] == [128, 1024]
    assert checks["sgl_kernel.rmsnorm"]["device"] == "cpu"
    assert check_kernels(facts)[0].startswith(
        "kernels: expected sgl_kernel.rmsnorm to match fp32 on the CPU, found relative error 0.")
    # flashinfer is not installed in this venv: listed, skipped, with the reason
    assert checks["flashinfer.rmsnorm"] == dict(checks["flashinfer.rmsnorm"], status="skipped",
                                                reason="flashinfer is not installed")
    assert facts["flashinfer_jit"]["workspace"] == torch_cpu_venv  # the venv's own JIT cache
    audio = facts["imports"]["gpufleet_fake_audio"]
    assert audio["ok"] is False
    assert audio["error"] == "OSError: Could not load this library: /x/libtorchaudio.so"
    assert audio["causes"] == ["OSError: libcudart.so.12: cannot open shared object file: No such file or directory"]
    assert audio["missing_library"] == "libcudart.so.12"
    assert audio["diagnosis"] == "libcudart.so.12 is missing: cannot open shared object file"  # a CPU torch: no CUDA to compare
    assert facts["requirement_conflicts"] == ["torchvision 0.24.1 requires torch==2.9.1, installed torch is 2.13.0+cpu"]
    failures = check_expectations({"consistent": True, "kernels": ["sgl_kernel.rmsnorm"]}, facts)
    # the failed rmsnorm is check_kernels' to report (once); the expectation adds the conflicts
    assert failures == [
        "consistent: expected the installed distributions to agree with their pins, "
        "found torchvision 0.24.1 requires torch==2.9.1, installed torch is 2.13.0+cpu"]
