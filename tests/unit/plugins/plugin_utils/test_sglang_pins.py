"""plugin_utils.sglang_pins: the pinned sglang's requirements read from its
wheel's METADATA (or an index entry), the stack's pins judged against them by
PEP 440, and the choices of its flags read from its source with ast, against
the collection's table of backend names.

The fixtures are hand-written (tests/fixtures/sglang_pins/README.md says
which lines are sglang's own); the real wheel is read by the last test when
the integration test has put it in the cache, and by
tests/integration/test_sglang_pins_real.py."""
import hashlib
import json
import os
import zipfile

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import backends
from ansible_collections.gpufleet.inference.plugins.plugin_utils import sglang_pins

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "sglang_pins")
WAY_OUT = "or pin an sglang whose requirements it meets"


def fixture_text(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


# The inventory template's pins and the stack that meets sglang 0.5.23 (stacks.json).
STACKS = json.loads(fixture_text("stacks.json"))
TEMPLATE = STACKS["template"]
STACK = STACKS["sglang_0.5.23"]


def make_wheel(tmp_path, version="0.5.23", tree=None, metadata=None, filename=None):
    """A .whl of the fixture METADATA of that version and the files of tests/fixtures/sglang_pins/<tree>."""
    path = tmp_path / (filename or "sglang-%s-cp312-cp312-manylinux_2_34_x86_64.whl" % version)
    with zipfile.ZipFile(path, "w") as wheel:
        if metadata is not False:
            wheel.writestr("sglang-%s.dist-info/METADATA" % version,
                           metadata if metadata is not None else fixture_text("sglang-%s.METADATA" % version))
        if tree:
            base = os.path.join(FIXTURES, tree)
            for folder, dummy, names in os.walk(base):
                for name in names:
                    full = os.path.join(folder, name)
                    wheel.write(full, os.path.relpath(full, base).replace(os.sep, "/"))
    return str(path)


@pytest.fixture(name="meta")
def meta_fixture():
    return sglang_pins.parse_metadata(fixture_text("sglang-0.5.23.METADATA"), "sglang-0.5.23.METADATA")


@pytest.fixture(name="meta_old")
def meta_old_fixture():
    return sglang_pins.parse_metadata(fixture_text("sglang-0.5.9.METADATA"))


def errors(metadata, **stack):
    return sglang_pins.pin_errors(metadata, sglang_pins.stack_pins(**stack))


# ---------------------------------------------------------------- reading the metadata


def test_parse_metadata_reads_the_headers_only(meta):
    assert (meta["name"], meta["version"], meta["requires_python"]) == ("sglang", "0.5.23", ">=3.11")
    assert meta["requires_dist"][0] == "aiohttp"
    assert "torch==2.14.1" in meta["requires_dist"]
    assert 'pytest; extra == "test"' in meta["requires_dist"]
    # neither the folded License header's continuation nor the description is a requirement
    assert not any("not-a-requirement" in line or "0.0.1" in line for line in meta["requires_dist"])
    assert len(meta["requires_dist"]) == 17


def test_read_wheel_metadata_from_the_zip(tmp_path, meta):
    read = sglang_pins.read_wheel_metadata(make_wheel(tmp_path))
    assert read["source"] == "sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl!sglang-0.5.23.dist-info/METADATA"
    assert dict(read, source=None) == dict(meta, source=None)


@pytest.mark.parametrize("kwargs, message", [
    ({"metadata": False}, "no .dist-info/METADATA"),
    ({"filename": "sglang-0.5.22-cp312-cp312-manylinux_2_34_x86_64.whl"}, "its METADATA says sglang 0.5.23, its file name sglang 0.5.22"),
    ({"filename": "sglang-0.5.23.zip"}, "not a wheel file name"),
    ({"metadata": "Name: sglang\nVersion: 0.5.23\nRequires-Dist: torch===\n"}, "Requires-Dist 'torch==='"),
    ({"metadata": "Name: sglang\n"}, "no Name or Version"),
    ({"metadata": "Name: sglang\nVersion: 0.5.23\nRequires-Python: >=three\n"}, "Requires-Python '>=three'"),
])
def test_read_wheel_metadata_refuses(tmp_path, kwargs, message):
    with pytest.raises(ValueError) as caught:
        sglang_pins.read_wheel_metadata(make_wheel(tmp_path, **kwargs))
    assert message in str(caught.value)


def test_several_metadata_files_refused(tmp_path):
    path = make_wheel(tmp_path)
    with zipfile.ZipFile(path, "a") as wheel:
        wheel.writestr("other-1.0.dist-info/METADATA", "Name: other\nVersion: 1.0\n")
    with pytest.raises(ValueError, match="several .dist-info/METADATA"):
        sglang_pins.read_wheel_metadata(path)


def test_pypi_json_gives_the_same_requirements(meta):
    document = {"info": {"name": "sglang", "version": "0.5.23", "requires_python": ">=3.11",
                         "requires_dist": meta["requires_dist"]}}
    read = sglang_pins.metadata_from_pypi_json(document, "0.5.23")
    assert dict(read, source=None) == dict(meta, source=None)
    assert read["source"] == "PyPI JSON sglang 0.5.23"
    # the project document describes the latest release: never read as another one
    with pytest.raises(ValueError, match="describes sglang 0.5.23, not 0.5.22"):
        sglang_pins.metadata_from_pypi_json(document, "0.5.22")


def test_simple_entry_without_metadata_gives_requires_python_only(meta):
    entry = {"filename": "sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl", "requires-python": ">=3.11",
             "url": "https://files.example/sglang.whl", "hashes": {"sha256": "ab" * 32}, "size": 10}
    read = sglang_pins.metadata_from_simple_entry(entry)
    assert (read["name"], read["version"], read["requires_python"], read["requires_dist"]) == \
        ("sglang", "0.5.23", ">=3.11", None)
    with pytest.raises(ValueError, match="the requirements of sglang 0.5.23 are not known"):
        sglang_pins.check_pins(read, [])
    assert sglang_pins.simple_entry_wheel(entry) == {
        "filename": entry["filename"], "url": entry["url"], "sha256": "ab" * 32, "size": 10}


def test_simple_entry_with_its_metadata_file(meta):
    text = fixture_text("sglang-0.5.23.METADATA")
    entry = {"filename": "sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl", "requires-python": ">=3.11",
             "core-metadata": {"sha256": hashlib.sha256(text.encode()).hexdigest()}}
    read = sglang_pins.metadata_from_simple_entry(entry, text)
    assert read["requires_dist"] == meta["requires_dist"]
    with pytest.raises(ValueError, match="the index says"):
        sglang_pins.metadata_from_simple_entry(dict(entry, **{"core-metadata": {"sha256": "0" * 64}}), text)
    with pytest.raises(ValueError, match="Requires-Python '>=3.11' in its METADATA, '>=3.12' in the index entry"):
        sglang_pins.metadata_from_simple_entry(dict(entry, **{"requires-python": ">=3.12"}), text)


def test_pinned_wheel_table():
    for version, wheel in sglang_pins.SGLANG_WHEELS.items():
        assert sglang_pins.wheel_name_version(wheel["filename"]) == ("sglang", version)
        assert wheel["url"].startswith("https://") and wheel["url"].endswith("/" + wheel["filename"])
        assert len(wheel["sha256"]) == 64 and int(wheel["sha256"], 16) >= 0
        assert "-cp312-" in wheel["filename"] and wheel["filename"].endswith("_x86_64.whl")
    assert backends.DEFAULT_SGLANG_VERSION in sglang_pins.SGLANG_WHEELS


def test_cached_wheel_and_its_check(tmp_path):
    path = sglang_pins.cached_wheel(str(tmp_path), "0.5.23")
    assert path == os.path.join(str(tmp_path), "sglang-wheels", "sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl")
    with pytest.raises(ValueError, match="no pinned sglang wheel for '0.5.1'; pinned: 0.5.23"):
        sglang_pins.cached_wheel(str(tmp_path), "0.5.1")
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as handle:
        handle.write(b"not the wheel")
    with pytest.raises(ValueError, match="the pinned sglang 0.5.23 wheel is 8d257a31"):
        sglang_pins.verify_wheel(path, "0.5.23")


# ---------------------------------------------------------------- requirements and markers


def test_requirements_canonical_names_extras_and_markers(meta):
    reqs = dict((r["name"], r) for r in sglang_pins.requirements(meta))
    flashinfer = reqs["flashinfer-python"]
    assert (flashinfer["text"], flashinfer["specifier"], flashinfer["extras"], flashinfer["marker"]) == \
        ("flashinfer_python[cu13]==0.7.2", "==0.7.2", ["cu13"], "")
    # an aarch64-only dependency, one for every other platform, an extra's
    assert reqs["av"]["pythons"] == []
    assert reqs["torchcodec"]["pythons"] == ["3.11", "3.12"]
    assert reqs["torchcodec"]["text"] == "torchcodec==0.17.0"
    assert reqs["pytest"]["pythons"] == [] and reqs["sglang"]["pythons"] == []
    applicable = sglang_pins.applicable(meta)
    assert "av" not in applicable and "pytest" not in applicable and "torchcodec" in applicable


def test_marker_environment():
    env = sglang_pins.marker_environment("3.12.3")
    assert (env["python_version"], env["python_full_version"], env["extra"]) == ("3.12", "3.12.3", "")
    assert (env["sys_platform"], env["platform_machine"]) == ("linux", "x86_64")
    assert sglang_pins.marker_environment("3.11")["python_full_version"] == "3.11.0"


METADATA_MARKERS = (
    "Name: sglang\nVersion: 9.9\n"
    'Requires-Dist: torch==2.14.1; python_version < "3.12"\n'
    'Requires-Dist: torch==2.15.0; python_version >= "3.12"\n'
)


def test_markers_per_host_python():
    meta = sglang_pins.parse_metadata(METADATA_MARKERS)
    assert [r["pythons"] for r in sglang_pins.requirements(meta)] == [["3.11"], ["3.12"]]
    assert errors(meta, torch_nightly_versions={"torch": "2.14.1"}) == [
        "sglang 9.9 requires torch==2.15.0 on Python 3.12; torch_nightly_versions.torch is 2.14.1: "
        "set it to 2.15.0, " + WAY_OUT]
    assert sglang_pins.pin_errors(meta, sglang_pins.stack_pins({"torch": "2.14.1"}), pythons=("3.11",)) == []


# ---------------------------------------------------------------- the stack's pins


def test_stack_pins_name_their_variables():
    pins = sglang_pins.stack_pins({"torch": "2.14.1"}, "0.7.2", "sglang-kernel", "0.4.10",
                                  flashinfer_versions={"flashinfer-jit-cache": "0.7.2+cu130"})
    assert [(p["name"], p["version"], p["variable"], p["name_variable"]) for p in pins] == [
        ("torch", "2.14.1", "torch_nightly_versions.torch", None),
        ("flashinfer-python", "0.7.2", "flashinfer_version", None),
        ("flashinfer-cubin", "0.7.2", "flashinfer_version", None),
        ("flashinfer-jit-cache", "0.7.2+cu130", "flashinfer_versions.flashinfer-jit-cache", None),
        ("sglang-kernel", "0.4.10", "sgl_kernel_wheel_version", "sgl_kernel_wheel_package"),
    ]
    assert sglang_pins.stack_pins(kernel_package="sgl-kernel") == []


def test_template_pins_refused_with_each_contradiction(meta):
    problems = sglang_pins.check_pins(meta, sglang_pins.stack_pins(**TEMPLATE))
    assert [p["message"] for p in problems] == [
        "sglang 0.5.23 requires torch==2.14.1; torch_nightly_versions.torch is 2.12.0.dev20260307+cu130: "
        "set it to 2.14.1 (the release index's CUDA 13.0 build), " + WAY_OUT,
        "sglang 0.5.23 requires torchaudio==2.11.0; torch_nightly_versions.torchaudio is 2.12.0.dev20260307+cu130: "
        "set it to 2.11.0, " + WAY_OUT,
        "sglang 0.5.23 requires flashinfer_python[cu13]==0.7.2; flashinfer_version is 0.6.5.dev20260307: "
        "set it to 0.7.2, " + WAY_OUT,
        "sglang 0.5.23 requires sglang-kernel==0.4.10; sgl_kernel_wheel_package is sgl-kernel "
        "(sgl_kernel_wheel_version 0.3.21), which does not meet it: sgl-kernel was renamed sglang-kernel at 0.4.0 "
        "(the import stays sgl_kernel) and a distribution under one name never meets a requirement on the other: "
        "set sgl_kernel_wheel_package to sglang-kernel and sgl_kernel_wheel_version to 0.4.10, " + WAY_OUT,
    ]
    assert [(p["package"], p["variable"], p["pinned"], p["requirement"]) for p in problems] == [
        ("torch", "torch_nightly_versions.torch", "torch 2.12.0.dev20260307+cu130", "torch==2.14.1"),
        ("torchaudio", "torch_nightly_versions.torchaudio", "torchaudio 2.12.0.dev20260307+cu130", "torchaudio==2.11.0"),
        ("flashinfer-python", "flashinfer_version", "flashinfer-python 0.6.5.dev20260307",
         "flashinfer_python[cu13]==0.7.2"),
        ("sglang-kernel", "sgl_kernel_wheel_package", "sgl-kernel 0.3.21", "sglang-kernel==0.4.10"),
    ]
    assert {p["sglang"] for p in problems} == {"sglang 0.5.23"}


def test_the_stack_that_meets_it(meta):
    assert errors(meta, **STACK) == []
    # torchvision: sglang names it without a version
    assert errors(meta, torch_nightly_versions={"torchvision": "0.27.0.dev20260307+cu130"}) == []


@pytest.mark.parametrize("version, ok", [
    ("2.14.1", True),
    ("2.14.1+cu130", True),  # a local label is ignored by a specifier without one
    ("2.14.1+cpu", True),
    ("2.14.1.post1", False),  # == excludes post releases
    ("2.14.1.dev20260307+cu130", False),
    ("2.12.0.dev20260307+cu130", False),  # a nightly
    ("2.14.1rc1", False),
    ("2.14.10", False),
])
def test_pep440_exact_pin(meta, version, ok):
    assert (errors(meta, torch_nightly_versions={"torch": version}) == []) is ok


def test_post_release_named(meta):
    assert errors(meta, flashinfer_version="0.7.2.post1") == [
        "sglang 0.5.23 requires flashinfer_python[cu13]==0.7.2; flashinfer_version is 0.7.2.post1 "
        "(PEP 440 == 0.7.2 excludes its post releases): set it to 0.7.2, " + WAY_OUT]
    # sglang's own post-release pin is met by that one only
    pins = [sglang_pins.pin("sgl-deep-gemm", v, "deep_gemm") for v in ("0.2.3.post2", "0.2.3", "0.2.3.post3")]
    assert [p["pinned"] for p in sglang_pins.check_pins(meta, pins)] == ["sgl-deep-gemm 0.2.3", "sgl-deep-gemm 0.2.3.post3"]


@pytest.mark.parametrize("version, ok", [
    ("4.0.0b18", True),  # a pre-release the stack pins is judged by its version alone
    ("4.0.0", True),
    ("4.0.0b17", False),
    ("3.9", False),
])
def test_lower_bound(meta, version, ok):
    found = sglang_pins.pin_errors(meta, [sglang_pins.pin("flash-attn-4", version, "flash_attn_version")])
    assert (found == []) is ok
    if not ok:
        assert found == ["sglang 0.5.23 requires flash-attn-4>=4.0.0b18; flash_attn_version is %s: "
                         "set it to a version that meets >=4.0.0b18, %s" % (version, WAY_OUT)]


def test_names_compared_canonically_and_extras_ignored(meta):
    pins = [sglang_pins.pin("FlashInfer_Python", "0.7.2", "x"), sglang_pins.pin("nvidia.cutlass-dsl", "4.8.0", "y"),
            sglang_pins.pin("flashinfer-python", "0.7.1", "z")]
    assert [p["variable"] for p in sglang_pins.check_pins(meta, pins)] == ["z"]


def test_a_package_sglang_does_not_name_passes(meta):
    pins = [sglang_pins.pin("flashinfer-cubin", "0.0.1", "a"), sglang_pins.pin("numpy", "not a version", "b")]
    assert sglang_pins.check_pins(meta, pins) == []
    assert errors(meta, flashinfer_version="0.7.2", flashinfer_versions={"flashinfer-jit-cache": "0.1+cu130"}) == []


def test_not_a_pep440_version(meta):
    assert errors(meta, torch_nightly_versions={"torch": "latest"}) == [
        "sglang 0.5.23 requires torch==2.14.1; torch_nightly_versions.torch is 'latest', not a PEP 440 version: "
        "set it to 2.14.1 (the release index's CUDA 13.0 build), " + WAY_OUT]


def test_kernel_under_its_name_at_another_version(meta):
    assert errors(meta, kernel_package="sglang-kernel", kernel_version="0.4.9") == [
        "sglang 0.5.23 requires sglang-kernel==0.4.10; sgl_kernel_wheel_version is 0.4.9: set it to 0.4.10, " + WAY_OUT]
    # the rename is named even where the version would do
    found = sglang_pins.check_pins(meta, sglang_pins.stack_pins(kernel_package="sgl_kernel", kernel_version="0.4.10"))
    assert [p["variable"] for p in found] == ["sgl_kernel_wheel_package"]
    assert "sgl_kernel_wheel_package is sgl_kernel (sgl_kernel_wheel_version 0.4.10)" in found[0]["message"]


def test_kernel_renamed_the_other_way(meta_old):
    """An sglang from before the rename asks for sgl-kernel: sglang-kernel does not meet it."""
    assert errors(meta_old, torch_nightly_versions={"torch": "2.9.1"}, kernel_package="sglang-kernel",
                  kernel_version="0.4.10") == [
        "sglang 0.5.9 requires sgl-kernel==0.3.21; sgl_kernel_wheel_package is sglang-kernel "
        "(sgl_kernel_wheel_version 0.4.10), which does not meet it: sgl-kernel was renamed sglang-kernel at 0.4.0 "
        "(the import stays sgl_kernel) and a distribution under one name never meets a requirement on the other: "
        "set sgl_kernel_wheel_package to sgl-kernel and sgl_kernel_wheel_version to 0.3.21, " + WAY_OUT]
    assert errors(meta_old, torch_nightly_versions={"torch": "2.9.1+cu128"}, kernel_package="sgl-kernel",
                  kernel_version="0.3.21") == []


def test_renamed_pin_without_a_name_variable(meta):
    found = sglang_pins.pin_errors(meta, [sglang_pins.pin("sgl-kernel", "0.4.10", "kernel")])
    assert found == [
        "sglang 0.5.23 requires sglang-kernel==0.4.10; kernel is sgl-kernel (at 0.4.10), which does not meet it: "
        "sgl-kernel was renamed sglang-kernel at 0.4.0 (the import stays sgl_kernel) and a distribution under one "
        "name never meets a requirement on the other: set kernel to sglang-kernel, " + WAY_OUT]


def test_both_kernel_names_pinned_only_the_required_one_counts(meta):
    pins = [sglang_pins.pin("sgl-kernel", "0.3.21", "old"), sglang_pins.pin("sglang-kernel", "0.4.10", "new")]
    assert sglang_pins.check_pins(meta, pins) == []


def test_requires_python(meta):
    found = sglang_pins.check_pins(meta, [], pythons=("3.10", "3.12"))
    assert [(p["package"], p["variable"], p["pinned"]) for p in found] == [("python", "uv_venv_python_version", "python 3.10")]
    assert found[0]["message"] == ("sglang 0.5.23 requires Python >=3.11; uv_venv_python_version is 3.10: "
                                   "set it to a Python that meets >=3.11, " + WAY_OUT)
    assert sglang_pins.check_pins(meta, [], pythons=("3.11", "3.12", "3.13")) == []


def test_check_pins_is_json_serialisable(meta):
    json.dumps(sglang_pins.check_pins(meta, sglang_pins.stack_pins(**TEMPLATE)))


# ---------------------------------------------------------------- flag choices


def test_module_constants_of_string_literals():
    found = sglang_pins.module_constants(
        fixture_text("wheel_0.5.23/sglang/srt/arg_groups/choices.py"))
    assert found == {
        "ATTENTION_BACKEND_CHOICES": ["triton", "flashinfer", "fa3"],
        "QUANTIZATION_CHOICES": ["fp8", "modelopt_fp4", "w8a8_fp8"],
        "MOE_RUNNER_BACKEND_CHOICES": ["auto", "triton", "flashinfer_trtllm", "flashinfer_cutlass", "made_up_runner"],
        "FP8_GEMM_RUNNER_BACKEND_CHOICES": ["auto", "deep_gemm", "cutlass"],
        "FP4_GEMM_RUNNER_BACKEND_CHOICES": ["auto", "flashinfer_cudnn", "flashinfer_cutlass"],
        "BUILT_IN_SAMPLING_BACKENDS": ["flashinfer", "pytorch"],
        "SAMPLING_BACKEND_CHOICES": ["flashinfer", "pytorch"],
    }


def test_module_constants_more_forms():
    source = ('A: list = ["x"]\nB = tuple(A) + ("y",)\nC = sorted({"b", "a"})\nD = [1, 2]\nE = ["x", f()]\n'
              'F, G = ["p"], ["q"]\nH = A\n')
    assert sglang_pins.module_constants(source) == {"A": ["x"], "B": ["x", "y"], "C": ["a", "b"], "H": ["x"]}


def test_flags_of_the_0_5_23_layout(tmp_path):
    read = sglang_pins.read_wheel_flags(make_wheel(tmp_path, tree="wheel_0.5.23"))
    assert read["version"] == "0.5.23"
    assert read["source"] == "sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl"
    flags = read["flags"]
    assert list(flags) == list(sglang_pins.FLAGS)
    assert flags["--moe-runner-backend"] == {
        "choices": ["auto", "triton", "flashinfer_trtllm", "flashinfer_cutlass", "made_up_runner"],
        "from": "MOE_RUNNER_BACKEND_CHOICES", "file": "sglang/srt/arg_groups/fields/exec_.py",
        "field": "moe_runner_backend"}
    assert flags["--fp8-gemm-backend"]["choices"] == ["auto", "deep_gemm", "cutlass"]
    assert flags["--fp8-gemm-backend"]["field"] == "fp8_gemm_runner_backend"
    assert flags["--fp4-gemm-backend"]["choices"] == ["auto", "flashinfer_cudnn", "flashinfer_cutlass"]
    assert flags["--attention-backend"]["choices"] == ["triton", "flashinfer", "fa3"]
    assert flags["--quantization"]["file"] == "sglang/srt/arg_groups/fields/model.py"
    every = sglang_pins.read_wheel_flags(make_wheel(tmp_path, tree="wheel_0.5.23"), flags=None)["flags"]
    assert every["--moe-runner"]["field"] == "moe_runner_backend"
    assert every["--linear-attn-backend"]["choices"] == ["triton", "cutedsl"]
    assert every["--computed-backend"] == {"choices": None, "from": "COMPUTED_CHOICES",
                                           "file": "sglang/srt/arg_groups/fields/exec_.py", "field": "computed_backend"}
    assert "--enable-something" not in every


def test_flags_of_the_server_args_layout(tmp_path):
    flags = sglang_pins.read_wheel_flags(make_wheel(tmp_path, version="0.5.9", tree="wheel_0.5.9"))["flags"]
    assert flags == {
        "--attention-backend": {"choices": ["triton", "flashinfer"], "from": "ATTENTION_BACKEND_CHOICES",
                                "file": "sglang/srt/server_args.py", "field": "attention_backend"},
        "--moe-runner-backend": {"choices": ["auto", "triton", "flashinfer_cutlass"],
                                 "from": "MOE_RUNNER_BACKEND_CHOICES", "file": "sglang/srt/server_args.py",
                                 "field": "moe_runner_backend"},
        "--fp4-gemm-backend": {"choices": ["auto", "flashinfer_cutlass"], "from": "FP4_GEMM_RUNNER_BACKEND_CHOICES",
                               "file": "sglang/srt/server_args.py", "field": "fp4_gemm_backend"},
        "--quantization": {"choices": ["fp8", "awq"], "from": "['fp8', 'awq']", "file": "sglang/srt/server_args.py",
                           "field": "quantization"},
    }


def test_a_wheel_without_flag_sources(tmp_path):
    with pytest.raises(ValueError, match="none of sglang/srt/arg_groups/choices.py"):
        sglang_pins.read_wheel_flags(make_wheel(tmp_path))


def test_choice_errors(tmp_path):
    read = sglang_pins.read_wheel_flags(make_wheel(tmp_path, tree="wheel_0.5.23"))
    assert sglang_pins.choice_errors(read, {"--moe-runner-backend": "flashinfer_cutlass"}) == []
    assert sglang_pins.choice_errors(read, {"--fp4-gemm-backend": "marlin", "--no-such-backend": "x"}) == [
        "--fp4-gemm-backend marlin: not a choice of sglang 0.5.23; allowed: auto, flashinfer_cudnn, flashinfer_cutlass",
        "--no-such-backend: sglang 0.5.23 has no such flag with choices"]


def test_backend_table_against_the_fixture(tmp_path):
    read = sglang_pins.read_wheel_flags(make_wheel(tmp_path, tree="wheel_0.5.23"))
    rows = dict((row["family"], row) for row in sglang_pins.compare_backend_table(read))
    assert list(rows) == list(backends.families_of("0.5.23"))
    assert rows["fp4_gemm"] == {"family": "fp4_gemm", "flag": "--fp4-gemm-backend", "flag_in_wheel": True,
                                "table_only": ["flashinfer_cutedsl", "flashinfer_trtllm", "marlin"],
                                "wheel_only": [], "same_order": False}
    assert rows["moe_runner"]["wheel_only"] == ["made_up_runner"]
    assert "flashinfer_cutlass" not in rows["moe_runner"]["table_only"]
    assert "deep_gemm" in rows["moe_runner"]["table_only"]
    assert rows["fp8_gemm"]["wheel_only"] == []
    messages = sglang_pins.backend_table_errors(read)
    where = "backends.SGLANG_SERVER_ARGS['0.5.23'] moe_runner (--moe-runner-backend)"
    assert "%s lacks what sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl offers: made_up_runner" % where \
        in messages
    assert ("backends.SGLANG_SERVER_ARGS['0.5.23'] fp4_gemm (--fp4-gemm-backend) names what "
            "sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl lacks: flashinfer_cutedsl, flashinfer_trtllm, marlin") \
        in messages


def test_backend_table_flag_missing_from_the_wheel(tmp_path):
    read = sglang_pins.read_wheel_flags(make_wheel(tmp_path, version="0.5.9", tree="wheel_0.5.9"))
    rows = dict((row["family"], row) for row in sglang_pins.compare_backend_table(read, "0.5.23"))
    assert rows["fp8_gemm"]["flag_in_wheel"] is False
    assert ("backends.SGLANG_SERVER_ARGS['0.5.23'] fp8_gemm (--fp8-gemm-backend): sglang 0.5.9 "
            "(sglang-0.5.9-cp312-cp312-manylinux_2_34_x86_64.whl) has no flag --fp8-gemm-backend") \
        in sglang_pins.backend_table_errors(read, "0.5.23")
    with pytest.raises(ValueError, match="unknown sglang version '0.5.9'"):
        sglang_pins.compare_backend_table(read)


REAL_WHEEL = sglang_pins.cached_wheel(os.path.join(ROOT, ".cache"), backends.DEFAULT_SGLANG_VERSION)


@pytest.mark.skipif(not os.path.exists(REAL_WHEEL),
                    reason="the real sglang wheel is not in .cache/ (tests/integration/test_sglang_pins_real.py fetches it)")
def test_backend_table_against_the_real_wheel():
    sglang_pins.verify_wheel(REAL_WHEEL, backends.DEFAULT_SGLANG_VERSION)
    read = sglang_pins.read_wheel_flags(REAL_WHEEL)
    assert read["version"] == backends.DEFAULT_SGLANG_VERSION
    assert sglang_pins.backend_table_errors(read) == []
    assert all(row["same_order"] for row in sglang_pins.compare_backend_table(read))
