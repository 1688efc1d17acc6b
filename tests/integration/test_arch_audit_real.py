"""arch_audit against the real cuobjdump (NVIDIA's nvidia-cuda-cuobjdump wheel,
pinned and sha256-checked) on shared objects that nvcc really built: SASS for
9.0a only, plain 9.0 only, PTX compute_90 only, 9.0a plus two extra targets,
the 10.0 family (sm_100f + compute_100f), and a host-only library from g++.
The module runs through ansible-playbook on localhost.

The recorded cuobjdump outputs that the unit tests replay
(tests/unit/plugins/modules/fixtures/cuobjdump-*.txt) are compared with what
the real tool prints here; GPUFLEET_RECORD_FIXTURES=1 rewrites them."""
import concurrent.futures
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile

import pytest

from conftest import ROOT, cuobjdump_home, run_playbook

CACHE = os.path.join(ROOT, ".cache", "arch-audit")
NVCC = os.environ.get("GPUFLEET_NVCC", "/usr/local/cuda-13.0/bin/nvcc")
FIXTURES = os.path.join(ROOT, "tests", "unit", "plugins", "modules", "fixtures")
# Where the recorded stderr says the file was: the real path differs per checkout.
RECORDED_DIR = "/srv/build"

KERNEL = textwrap.dedent("""\
    __global__ void gpufleet_scale(float *x, float a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] *= a;
    }
    extern "C" void gpufleet_launch(float *x, float a, int n) { gpufleet_scale<<<(n + 255) / 256, 256>>>(x, a, n); }
    """)
HOST = 'extern "C" int gpufleet_cpu_op(int x) { return x + 1; }\n'

# name -> nvcc -gencode flags; the cubin names cuobjdump lists derive from the name.
GENCODES = {
    "sm90a": ["-gencode", "arch=compute_90a,code=sm_90a"],
    "sm90": ["-gencode", "arch=compute_90,code=sm_90"],
    "ptx90": ["-gencode", "arch=compute_90,code=compute_90"],
    "extra": ["-gencode", "arch=compute_90a,code=sm_90a", "-gencode", "arch=compute_120a,code=sm_120a",
              "-gencode", "arch=compute_100a,code=sm_100a"],
    "fam100": ["-gencode", "arch=compute_100f,code=[sm_100f,compute_100f]"],
}
# The cuobjdump runs recorded as unit fixtures: (built name, option, fixture suffix).
RECORDED = [(name, option) for name in sorted(GENCODES) + ["host"] for option in ("--list-elf", "--list-ptx")]
RECORDED += [("fam100", None), ("empty", "--list-elf")]


def _run(argv, **kwargs):
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    assert proc.returncode == 0, "%s\n%s%s" % (argv, proc.stdout, proc.stderr)
    return proc.stdout


@pytest.fixture(scope="module")
def cuda_home():
    """A CUDA-home-like directory whose bin/cuobjdump is the one from NVIDIA's pinned wheel."""
    return cuobjdump_home()


@pytest.fixture(scope="module")
def built():
    """name -> path of the shared objects, built once per nvcc/g++ and source, then reused from the cache."""
    if not os.access(NVCC, os.X_OK):
        pytest.skip("nvcc not found at %s (set GPUFLEET_NVCC)" % NVCC)
    versions = _run([NVCC, "--version"]) + _run(["g++", "--version"])
    key = hashlib.sha256(json.dumps([KERNEL, HOST, GENCODES, versions]).encode()).hexdigest()[:16]
    out = os.path.join(CACHE, "build-%s" % key)
    names = sorted(GENCODES) + ["host", "empty"]
    if not os.path.isdir(out):
        work = out + ".part"
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        with open(os.path.join(work, "k.cu"), "w") as handle:
            handle.write(KERNEL)
        with open(os.path.join(work, "host.cc"), "w") as handle:
            handle.write(HOST)
        # A truncated (empty) file: cuobjdump fails on it, unlike on a host-only ELF. (A text file of
        # more than a few bytes, such as a linker script, is "does not contain device code" to it.)
        open(os.path.join(work, "empty.so"), "w").close()
        jobs = [[NVCC, "-shared", "-Xcompiler", "-fPIC"] + flags + ["-o", name + ".so", "k.cu"]
                for name, flags in sorted(GENCODES.items())]
        jobs.append(["g++", "-shared", "-fPIC", "-o", "host.so", "host.cc"])
        with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            list(pool.map(lambda argv: _run(argv, cwd=work, timeout=300), jobs))
        os.rename(work, out)
    return {name: os.path.join(out, name + ".so") for name in names}


def _fixture_name(name, option):
    return "cuobjdump-%s-%s" % (name, (option or "--headers").lstrip("-"))


def test_recorded_fixtures_are_what_the_real_cuobjdump_prints(cuda_home, built):
    cuobjdump = os.path.join(cuda_home, "bin", "cuobjdump")
    record = os.environ.get("GPUFLEET_RECORD_FIXTURES") == "1"
    for name, option in RECORDED:
        argv = [cuobjdump] + ([option] if option else []) + [built[name]]
        proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=dict(os.environ, LC_ALL="C"))
        err = proc.stderr.replace(os.path.dirname(built[name]), RECORDED_DIR)
        recorded = {"rc": proc.returncode, "out": proc.stdout, "err": err}
        base = os.path.join(FIXTURES, _fixture_name(name, option))
        for part in ("out", "err"):
            path = "%s.%s.txt" % (base, part)
            if record:
                if recorded[part]:
                    with open(path, "w") as handle:
                        handle.write(recorded[part])
                elif os.path.exists(path):
                    os.remove(path)
            expected = open(path).read() if os.path.exists(path) else ""
            assert recorded[part] == expected, "%s %s: %s differs from %s" % (name, option, part, path)
        # The rc the unit cases replay: 0, 255 for no device code, 1 for an empty file.
        assert proc.returncode == {"host": 255, "empty": 1}.get(name, 0), (name, option, proc.returncode)


PLAYBOOK = textwrap.dedent("""\
    - name: arch_audit against the real cuobjdump
      hosts: localhost
      gather_facts: false
      tasks:
        - name: Audit
          gpufleet.inference.arch_audit:
            path: "{{ item.path }}"
            targets: "{{ item.targets }}"
            cuda_home: "{{ item.cuda_home | default(cuda_home) }}"
            fail_on_unwanted: "{{ item.fail_on_unwanted | default(false) }}"
            require_arch_specific: "{{ item.require_arch_specific | default(false) }}"
          loop: "{{ cases }}"
          loop_control:
            label: "{{ item.id }}"
          register: audits
          failed_when: false  # the test asserts on every outcome

        - name: Audit in check mode
          gpufleet.inference.arch_audit:
            path: "{{ sm90a }}"
            targets: ["9.0a"]
            cuobjdump: "{{ cuda_home }}/bin/cuobjdump"
          check_mode: true
          register: checked

        - name: Keep the results on the controller
          ansible.builtin.copy:
            content: "{{ {'audits': audits.results, 'checked': checked} | to_json }}"
            dest: "{{ out }}"
            mode: "0644"
          check_mode: false
          changed_when: false  # the test's own scratch file
    """)


def _wheel(path, members):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, source in members.items():
            if source is None:
                wheel.writestr(name, "")
            else:
                wheel.write(source, name)
    return str(path)


@pytest.fixture(scope="module")
def audits(cuda_home, built, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("arch-audit")
    plain_wheel = _wheel(tmp / "sgl_kernel-0.0.1-cp310-abi3-linux_x86_64.whl", {
        "sgl_kernel/__init__.py": None,
        "sgl_kernel/common_ops.abi3.so": built["sm90"],
        "sgl_kernel/libcpu_ops.so": built["host"],
        "sgl_kernel-0.0.1.dist-info/METADATA": None,
    })
    host_wheel = _wheel(tmp / "cpu_only-0.0.1-py3-none-linux_x86_64.whl", {
        "cpu_only/__init__.py": None, "cpu_only/_ops.so": built["host"]})
    ptx_dir = tmp / "ptx-build"
    (ptx_dir / "lib").mkdir(parents=True)
    shutil.copy(built["ptx90"], str(ptx_dir / "lib" / "common_ops.so"))
    shutil.copy(built["host"], str(ptx_dir / "lib" / "libcpu_ops.so.1"))
    cases = [
        {"id": "plain_sm90_wheel_asked_9.0a", "path": plain_wheel, "targets": ["9.0a"]},
        {"id": "plain_sm90_wheel_asked_9.0a_arch_specific", "path": plain_wheel, "targets": ["9.0a"],
         "require_arch_specific": True},
        {"id": "ptx90_dir_plain_targets", "path": str(ptx_dir), "targets": ["9.0", "12.0"]},
        {"id": "ptx90_dir_asked_12.0a", "path": str(ptx_dir), "targets": ["12.0a", "9.0"]},
        {"id": "extra_report", "path": built["extra"], "targets": ["9.0a"]},
        {"id": "extra_fail_on_unwanted", "path": built["extra"], "targets": ["9.0a"], "fail_on_unwanted": True},
        {"id": "host_only_wheel", "path": host_wheel, "targets": ["9.0a", "12.0a"]},
        {"id": "family_asked_f", "path": built["fam100"], "targets": ["10.0f", "10.3f"]},
        {"id": "family_asked_plain_and_a", "path": built["fam100"], "targets": ["10.0", "10.0a", "10.3a"],
         "require_arch_specific": True},
        {"id": "family_asked_other_major", "path": built["fam100"], "targets": ["11.0"]},
        {"id": "bad_target", "path": built["sm90a"], "targets": ["9.0a", "9.1x"]},
        {"id": "no_cuobjdump", "path": built["sm90a"], "targets": ["9.0a"], "cuda_home": str(tmp / "no-cuda")},
    ]
    inventory = tmp / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: %s\n" % sys.executable)
    playbook = tmp / "audit.yml"
    playbook.write_text(PLAYBOOK)
    out = tmp / "results.json"
    result = run_playbook(playbook, inventory, timeout=300, extra_vars={
        "cases": cases, "cuda_home": cuda_home, "sm90a": built["sm90a"], "out": str(out)})
    assert result.rc == 0, result.out
    assert result.stats["localhost"]["failed"] == 0 and result.stats["localhost"]["changed"] == 0, result.out
    data = json.loads(out.read_text())
    by_id = {entry["item"]["id"]: entry for entry in data["audits"]}
    by_id["checked"] = data["checked"]
    return by_id


def _failed(result):
    """Whether the module failed: failed_when: false keeps its msg, which a successful audit does not have."""
    return "msg" in result


def _files(result):
    return {entry["file"]: entry for entry in result["files"]}


def test_plain_sass_covers_its_a_target_with_a_note(audits):
    result = audits["plain_sm90_wheel_asked_9.0a"]
    assert not _failed(result), result
    assert result["missing"] == [] and result["unwanted"] == []
    assert result["plain_only"] == [{"file": "sgl_kernel/common_ops.abi3.so", "target": "9.0a", "sass": "sm_90"}]
    assert result["notes"] == ["sgl_kernel/common_ops.abi3.so runs on 9.0a through plain SASS sm_90, "
                               "without the arch-specific instructions of sm_90a"]


def test_missing_target_is_named_with_the_file_when_arch_specific_code_is_required(audits):
    result = audits["plain_sm90_wheel_asked_9.0a_arch_specific"]
    assert _failed(result)
    assert result["missing"] == [{"file": "sgl_kernel/common_ops.abi3.so", "target": "9.0a"}]
    assert result["msg"] == ("arch audit: sgl_kernel/common_ops.abi3.so has no code for 9.0a "
                             "(SASS sm_90a or PTX compute_90a); it has SASS sm_90 and no PTX")
    files = _files(result)
    assert files["sgl_kernel/common_ops.abi3.so"] == {
        "file": "sgl_kernel/common_ops.abi3.so", "device_code": True, "sass": ["sm_90"], "ptx": []}
    # The host-only library is listed and misses nothing.
    assert files["sgl_kernel/libcpu_ops.so"] == {
        "file": "sgl_kernel/libcpu_ops.so", "device_code": False, "sass": [], "ptx": []}
    assert result["unwanted"] == [{"file": "sgl_kernel/common_ops.abi3.so", "target": "sm_90"}]


def test_ptx_covers_a_newer_plain_target_but_not_an_a_target(audits):
    result = audits["ptx90_dir_plain_targets"]
    assert not _failed(result), result
    assert result["missing"] == [] and result["unwanted"] == []
    assert result["compiled"] == ["compute_90"]
    assert _files(result)["lib/libcpu_ops.so.1"]["device_code"] is False
    refused = audits["ptx90_dir_asked_12.0a"]
    assert _failed(refused)
    assert refused["missing"] == [{"file": "lib/common_ops.so", "target": "12.0a"}]
    assert refused["msg"] == ("arch audit: lib/common_ops.so has no code for 12.0a (SASS sm_120a, sm_120f or sm_120, "
                              "or PTX compute_120a); it has no SASS and PTX compute_90")


def test_unwanted_extra_targets_are_reported_and_can_fail(audits):
    result = audits["extra_report"]
    assert not _failed(result), result
    assert result["missing"] == []
    assert result["unwanted"] == [{"file": "extra.so", "target": "sm_100a"}, {"file": "extra.so", "target": "sm_120a"}]
    assert result["compiled"] == ["sm_90a", "sm_100a", "sm_120a"]
    refused = audits["extra_fail_on_unwanted"]
    assert _failed(refused)
    assert refused["msg"] == "arch audit: extra.so has code that no requested target needs: sm_100a, sm_120a (requested: 9.0a)"


def test_no_device_code_anywhere_misses_every_target_for_the_artifact(audits):
    result = audits["host_only_wheel"]
    assert _failed(result)
    assert result["missing"] == [{"file": "*", "target": "9.0a"}, {"file": "*", "target": "12.0a"}]
    assert result["files"] == [{"file": "cpu_only/_ops.so", "device_code": False, "sass": [], "ptx": []}]
    assert result["msg"].startswith("arch audit: %s has no code for 9.0a (SASS sm_90a or sm_90, or PTX compute_90a), 12.0a "
                                    % result["item"]["path"])
    assert result["msg"].endswith("; no shared object in it has device code (host-only: cpu_only/_ops.so)")


def test_family_cubin_is_read_as_f_from_the_fatbin_headers(audits):
    result = audits["family_asked_f"]
    assert not _failed(result), result
    assert result["files"] == [{"file": "fam100.so", "device_code": True, "sass": ["sm_100f"], "ptx": ["compute_100f"]}]
    assert result["missing"] == [] and result["unwanted"] == []
    # sm_100f runs on every GPU of the 10.x family, an a target included
    family = audits["family_asked_plain_and_a"]
    assert not _failed(family), family
    assert family["missing"] == [] and family["plain_only"] == []
    assert family["unwanted"] == [{"file": "fam100.so", "target": "compute_100f"}]
    refused = audits["family_asked_other_major"]
    assert _failed(refused)
    assert refused["msg"] == ("arch audit: fam100.so has no code for 11.0 (SASS sm_110 or sm_110f, or PTX compute_110 "
                              "or lower); it has SASS sm_100f and PTX compute_100f")


def test_bad_input_fails_with_the_allowed_values(audits):
    assert _failed(audits["bad_target"])
    assert audits["bad_target"]["msg"].startswith("targets: '9.1x' is not a CUDA target; allowed: 7.5, 8.0, 8.6, ")
    missing = audits["no_cuobjdump"]
    assert missing["msg"] == ("cuobjdump: not found at %s/bin/cuobjdump; it comes with the CUDA toolkit the build used: "
                              "point sgl_kernel_cuda_home at that toolkit, or sgl_kernel_cuobjdump at a cuobjdump of "
                              "the same CUDA version or newer (NVIDIA's nvidia-cuda-cuobjdump wheel carries one)"
                              % missing["item"]["cuda_home"])


def test_check_mode_audits_the_same(audits):
    checked = audits["checked"]
    assert checked["changed"] is False and not checked.get("failed")
    assert checked["missing"] == [] and checked["unwanted"] == [] and checked["compiled"] == ["sm_90a"]
