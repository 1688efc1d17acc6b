"""The real sglang 0.5.23 wheel (PyPI, cp312 manylinux x86_64, 39 MB), read on
the controller the way a deploy stage will read it before anything is
installed: its requirements from the wheel's METADATA, the inventory
template's pins refused with each contradiction named, the stack that meets
them accepted, and the choices of its backend flags read from its source
(never imported) against the collection's table of backend names.

The wheel is fetched once by the exact URL and sha256 pinned in
plugins/plugin_utils/sglang_pins.py (SGLANG_WHEELS) into .cache/sglang-wheels,
where the unit test of the backend table finds it too. It is fetched by URL:
pip's configuration on a controller may not reach that file."""
import json
import os
import sys
import urllib.request

import pytest

from conftest import ROOT, cache_lock

sys.path.insert(0, os.path.join(ROOT, ".collections"))
from ansible_collections.gpufleet.inference.plugins.module_utils import backends  # noqa: E402
from ansible_collections.gpufleet.inference.plugins.plugin_utils import sglang_pins  # noqa: E402

VERSION = "0.5.23"
WAY_OUT = "or pin an sglang whose requirements it meets"
# The inventory template's pins today (inventories/cluster/group_vars/all.yml;
# the kernel: roles/sgl_kernel/defaults/main.yml) and the stack that meets
# sglang 0.5.23, shared with the unit tests.
with open(os.path.join(ROOT, "tests", "fixtures", "sglang_pins", "stacks.json"), encoding="utf-8") as _handle:
    STACKS = json.load(_handle)
TEMPLATE = STACKS["template"]
STACK = STACKS["sglang_0.5.23"]


@pytest.fixture(name="wheel", scope="module")
def wheel_fixture():
    path = sglang_pins.cached_wheel(os.path.join(ROOT, ".cache"), VERSION)
    with cache_lock("sglang-wheels"):
        if os.path.exists(path):
            sglang_pins.verify_wheel(path, VERSION)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with urllib.request.urlopen(sglang_pins.SGLANG_WHEELS[VERSION]["url"], timeout=600) as response, \
                    open(path + ".part", "wb") as handle:
                while True:
                    block = response.read(1 << 20)
                    if not block:
                        break
                    handle.write(block)
            try:
                sglang_pins.verify_wheel(path + ".part", VERSION)
            except ValueError:
                os.unlink(path + ".part")
                raise
            os.rename(path + ".part", path)
    return path


@pytest.fixture(name="meta", scope="module")
def meta_fixture(wheel):
    return sglang_pins.read_wheel_metadata(wheel)


def test_its_requirements(meta):
    assert (meta["name"], meta["version"], meta["requires_python"]) == ("sglang", VERSION, ">=3.11")
    applicable = sglang_pins.applicable(meta)
    wanted = {
        "torch": "torch==2.14.1",
        "sglang-kernel": "sglang-kernel==0.4.10",
        "flashinfer-python": "flashinfer_python[cu13]==0.7.2",
        "transformers": "transformers==5.19.0",
        "torchaudio": "torchaudio==2.11.0",
        "sgl-deep-gemm": "sgl-deep-gemm==0.2.3.post2",
        "sgl-flash-mla": "sgl-flash-mla==1.0.0",
        "nvidia-cutlass-dsl": "nvidia-cutlass-dsl[cu13]==4.8.0",
        "flash-attn-4": "flash-attn-4>=4.0.0b18",
        "apache-tvm-ffi": "apache-tvm-ffi==0.1.11",
        "cuda-python": "cuda-python>=13.0",
        "torchvision": "torchvision",
    }
    for name, text in wanted.items():
        assert [(r["text"], r["pythons"]) for r in applicable[name]] == [(text, list(sglang_pins.HOST_PYTHONS))], name
    # the old kernel name is not asked for; aarch64-only and extras' dependencies do not apply
    assert "sgl-kernel" not in applicable
    assert "av" not in applicable and "pytest" not in applicable


def test_template_pins_refused(meta):
    problems = sglang_pins.check_pins(meta, sglang_pins.stack_pins(**TEMPLATE))
    assert [(p["package"], p["variable"]) for p in problems] == [
        ("torch", "torch_nightly_versions.torch"),
        ("torchaudio", "torch_nightly_versions.torchaudio"),
        ("flashinfer-python", "flashinfer_version"),
        ("sglang-kernel", "sgl_kernel_wheel_package"),
    ]
    assert problems[0]["message"] == (
        "sglang 0.5.23 requires torch==2.14.1; torch_nightly_versions.torch is 2.12.0.dev20260307+cu130: "
        "set it to 2.14.1 (the release index's CUDA 13.0 build), " + WAY_OUT)
    assert problems[2]["message"].startswith(
        "sglang 0.5.23 requires flashinfer_python[cu13]==0.7.2; flashinfer_version is 0.6.5.dev20260307: "
        "set it to 0.7.2")
    assert "sgl-kernel was renamed sglang-kernel at 0.4.0" in problems[3]["message"]
    assert "set sgl_kernel_wheel_package to sglang-kernel and sgl_kernel_wheel_version to 0.4.10" in problems[3]["message"]


def test_the_stack_accepted(meta):
    assert sglang_pins.pin_errors(meta, sglang_pins.stack_pins(**STACK)) == []
    # the version torch reports of that build meets the pin too; a post release of flashinfer does not
    assert sglang_pins.pin_errors(meta, sglang_pins.stack_pins({"torch": "2.14.1+cu130"})) == []
    assert len(sglang_pins.pin_errors(meta, sglang_pins.stack_pins(flashinfer_version="0.7.2.post1"))) == 1


def test_flag_choices_and_the_backend_table(wheel):
    read = sglang_pins.read_wheel_flags(wheel)
    flags = read["flags"]
    assert list(flags) == list(sglang_pins.FLAGS)
    for flag in ("--moe-runner-backend", "--fp8-gemm-backend", "--fp4-gemm-backend", "--attention-backend"):
        assert flags[flag]["file"] == "sglang/srt/arg_groups/fields/exec_.py", flag
    assert flags["--quantization"]["from"] == "QUANTIZATION_CHOICES"
    assert flags["--fp4-gemm-backend"]["from"] == "FP4_GEMM_RUNNER_BACKEND_CHOICES"
    assert {"flashinfer", "fa3", "fa4", "triton", "trtllm_mha"} <= set(flags["--attention-backend"]["choices"])
    assert {"fp8", "modelopt_fp4", "mxfp4"} <= set(flags["--quantization"]["choices"])
    assert sglang_pins.backend_table_errors(read) == []
    for family, spec in backends.families_of(VERSION).items():
        assert tuple(flags[spec["flag"]]["choices"]) == spec["choices"], family
    assert sglang_pins.choice_errors(read, {"--moe-runner-backend": "flashinfer_cutlass",
                                            "--fp4-gemm-backend": "flashinfer_cudnn"}) == []
