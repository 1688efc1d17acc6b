"""The real flashinfer-python 0.7.2.post1 (PyPI), installed on one sandbox host
by the roles the way deploy does it: uv_venv (wheelhouse pushed, no index),
torch_nightly (the CPU profile's torch 2.13.0+cpu, whose pins become the
venv's constraints file) and flashinfer (uv resolves flashinfer-python AND its
whole dependency tree from the wheelhouse under those constraints). Then
torch_verify with imports [flashinfer] and kernels: true on a host with no GPU.

What must hold: the real package imports, at its version; torch did not move;
every flashinfer.* kernel check is listed and skipped with "no CUDA device"
(none ran, none is ok).

The wheelhouse is every wheel the install needs, at exact versions (PINS):
uv resolves flashinfer-python's full dependency list, so nothing can be left
out without changing the role's path. About 530 MB in all; the big ones are
torch (192 MB), nvidia-cutlass-dsl-libs-cu13 and -cu12 (92 MB each; cu13 comes
in through nvidia-cudnn-frontend's nvidia-cutlass-dsl[cu13]), flashinfer-python
itself (62 MB), nccl-extensions (23 MB), numpy (17 MB) and
nvidia-cudnn-frontend (12 MB). They are downloaded once into
.cache/flashinfer-real/wheelhouse (pip's own configuration says from where).

One host, one playbook run: about 60-70 s on a fresh sandbox host (2 shared
cores), most of it pushing the wheelhouse and uv installing it.

The same run places prebuilt flashinfer modules (flashinfer_aot_modules) from
the controller's artifact cache, where the key's folder is seeded as a
builder leaves it (the modules and build.json; their bytes are not loaded on
a host without a GPU, so any bytes do: compiling them needs nvcc, which the
H200 evidence h200-flashinfer-aot runs). Three short runs of the role's aot
tasks follow: again (no change), a narrower list whose artifact has a changed
byte (refused, nothing already placed lost), and an empty list (removed).
"""
import glob
import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import ROOT, run_playbook

sys.path.insert(0, os.path.join(ROOT, ".collections"))
from ansible_collections.gpufleet.inference.plugins.module_utils import flashinfer_aot, kernel_checks  # noqa: E402

FLASHINFER = "0.7.2.post1"
TORCH = "2.13.0+cpu"
CACHE = os.path.join(ROOT, ".cache", "flashinfer-real")
WHEELHOUSE = os.path.join(CACHE, "wheelhouse")

# Every wheel of the install, pinned: flashinfer-python's dependency tree as
# resolved for CPython 3.11 on manylinux x86_64 (Debian 12's python3), torch
# 2.13.0 (CPU) with its own dependencies, and uv for uv_venv.
FLASHINFER_DEPS = {
    "apache-tvm-ffi": "0.1.15.post2",        # imported by flashinfer at import time
    "click": "8.5.1",
    "cuda-python": "13.4.4",
    "cuda-bindings": "13.4.4",               # cuda-python
    "cuda-core": "1.2.2",                    # cuda-python, nccl4py
    "cuda-pathfinder": "1.9.1",              # cuda-python, cuda-core
    "cuda-tile": "1.7.0",
    "einops": "0.8.2",
    "nccl-extensions": "0.1.0",
    "nccl4py": "0.6.0",
    "ninja": "1.13.2",
    "numpy": "2.4.6",
    "nvidia-cudnn-frontend": "1.32.0",
    "nvidia-cutlass-dsl": "4.8.1",
    "nvidia-cutlass-dsl-libs-base": "4.8.1",
    "nvidia-cutlass-dsl-libs-core": "4.8.1",
    "nvidia-cutlass-dsl-libs-cu12": "4.8.1",
    "nvidia-cutlass-dsl-libs-cu13": "4.8.1",  # nvidia-cudnn-frontend wants nvidia-cutlass-dsl[cu13]
    "nvidia-ml-py": "13.615.71",
    "packaging": "26.4",
    "protobuf": "7.36.2",                    # nvidia-cutlass-dsl-libs-base
    "requests": "2.34.2",
    "certifi": "2026.10.19.post1",           # requests
    "charset-normalizer": "3.5.3",           # requests
    "idna": "3.20",                          # requests
    "urllib3": "2.8.0",                      # requests
    "tabulate": "0.10.0",
    "tqdm": "4.70.1",
    "typing-extensions": "4.16.0",           # apache-tvm-ffi, cuda-tile, torch
}
TORCH_DEPS = {
    "torch": TORCH,
    "filelock": "4.3.1",
    "fsspec": "2026.9.0",
    "jinja2": "3.1.6",
    "markupsafe": "3.0.4",
    "mpmath": "1.3.0",
    "networkx": "3.6.1",
    "setuptools": "84.2.1",
    "sympy": "1.14.0",
}
PINS = dict({"flashinfer-python": FLASHINFER, "uv": "0.13.9"}, **FLASHINFER_DEPS, **TORCH_DEPS)

PLAYBOOK = textwrap.dedent("""\
    - name: The real flashinfer-python through the roles, then torch_verify
      hosts: "{{ target }}"
      gather_facts: false
      tasks:
        - name: Create the venv (wheelhouse pushed, no index)
          ansible.builtin.include_role:
            name: gpufleet.inference.uv_venv

        - name: Install torch and write the constraints file
          ansible.builtin.include_role:
            name: gpufleet.inference.torch_nightly

        - name: What torch_nightly left
          ansible.builtin.set_fact:
            torch_before: "{{ torch_nightly_installed }}"

        - name: Read the constraints file
          ansible.builtin.slurp:
            path: "{{ torch_nightly_constraints_file }}"
          register: constraints_file

        - name: Install flashinfer-python under the constraints
          ansible.builtin.include_role:
            name: gpufleet.inference.flashinfer

        - name: Verify with the flashinfer kernel checks
          gpufleet.inference.torch_verify:
            python: "{{ uv_venv_python }}"
            imports: [flashinfer]
            kernels: true
          register: verified

        - name: What is placed as prebuilt
          gpufleet.inference.flashinfer_aot:
            python: "{{ uv_venv_python }}"
            action: status
          register: aot_status

        - name: The venv's packages after
          ansible.builtin.command:
            argv: ["{{ uv_venv_bin }}", pip, freeze, --python, "{{ uv_venv_python }}"]
          register: freeze
          changed_when: false
          check_mode: false

        - name: Keep it all on the controller
          ansible.builtin.copy:
            content: "{{ {'verified': verified, 'torch_before': torch_before,
                          'flashinfer_installed': flashinfer_installed, 'aot_status': aot_status,
                          'aot_key': flashinfer_aot_key,
                          'constraints': constraints_file.content | b64decode,
                          'freeze': freeze.stdout_lines, 'venv': uv_venv_dir} | to_json }}"
            dest: "{{ out }}"
            mode: "0644"
          delegate_to: localhost
          check_mode: false
          changed_when: false  # the test's own scratch file, not host state
    """)


AOT_PLAYBOOK = textwrap.dedent("""\
    - name: The flashinfer role's prebuilt modules alone, on the venv of the first run
      hosts: "{{ target }}"
      gather_facts: false
      tasks:
        - name: Place or remove
          ansible.builtin.include_role:
            name: gpufleet.inference.flashinfer
            tasks_from: aot.yml

        - name: What is placed as prebuilt
          gpufleet.inference.flashinfer_aot:
            python: "{{ uv_venv_python }}"
            action: status
          register: aot_status
          when: always_status

        - name: Keep it on the controller
          ansible.builtin.copy:
            content: "{{ aot_status | to_json }}"
            dest: "{{ out }}"
            mode: "0644"
          delegate_to: localhost
          changed_when: false  # the test's own scratch file, not host state
    """)
AOT_ARCH = ["9.0a"]
AOT_CUDA = "13.0"


def seed_artifact(cache, modules, corrupt=None):
    """The controller cache's folder of the key of MODULES, as a builder leaves
    it; CORRUPT: a module whose file differs from its record by one byte."""
    data = flashinfer_aot.key_data(FLASHINFER, AOT_CUDA, AOT_ARCH, modules)
    key = flashinfer_aot.aot_key(data)
    folder = os.path.join(cache, key)
    os.makedirs(folder)
    record = dict(data, schema=flashinfer_aot.SCHEMA, modules={}, seconds=1.0)
    for name in modules:
        blob = os.urandom(4096) + name.encode()
        record["modules"][name] = {"sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob), "seconds": 1.0}
        if name == corrupt:
            blob = bytes([blob[0] ^ 1]) + blob[1:]
        with open(os.path.join(folder, name + ".so"), "wb") as handle:
            handle.write(blob)
    with open(os.path.join(folder, flashinfer_aot.RECORD), "w") as handle:
        json.dump(record, handle)
    return key, record


def _have_all(dest):
    have = {tuple(os.path.basename(p).split("-")[:2]) for p in glob.glob(os.path.join(dest, "*.whl"))}
    return all((name.replace("-", "_"), version) in have for name, version in PINS.items())


@pytest.fixture(scope="module")
def wheelhouse():
    """The pinned wheels for CPython 3.11 manylinux x86_64, each without its
    dependencies (the pins are the whole tree), downloaded once."""
    if not _have_all(WHEELHOUSE):
        os.makedirs(WHEELHOUSE, exist_ok=True)
        argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--abi", "abi3",
                "--abi", "none", "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_27_x86_64",
                "--platform", "manylinux_2_24_x86_64", "--platform", "manylinux_2_17_x86_64",
                "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_5_x86_64",
                "--platform", "manylinux1_x86_64", "-d", WHEELHOUSE]
        argv += ["%s==%s" % item for item in sorted(PINS.items())]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    assert _have_all(WHEELHOUSE), sorted(os.listdir(WHEELHOUSE))
    return WHEELHOUSE


def test_real_flashinfer_installed_by_the_role_and_verified_without_gpu(sandbox, wheelhouse, tmp_path):
    inventory = sandbox(1)
    playbook = tmp_path / "flashinfer-real.yml"
    playbook.write_text(PLAYBOOK)
    out = tmp_path / "result.json"
    cache = str(tmp_path / "aot-cache")
    key, record = seed_artifact(cache, ["norm", "silu_and_mul"])
    aot_vars = {"flashinfer_aot_modules": ["silu_and_mul", "norm"], "flashinfer_aot_arch_list": AOT_ARCH,
                "flashinfer_aot_cuda_version": AOT_CUDA, "flashinfer_aot_artifact_dir": cache}
    started = time.monotonic()
    result = run_playbook(playbook, inventory, limit="sbx1", timeout=1800, extra_vars=dict(aot_vars, **{
        "target": "sbx1",
        "out": str(out),
        # This test's own wheelhouse (controller and host) and venv, beside the fleet's.
        "gpufleet_wheelhouse": wheelhouse,
        "gpufleet_remote_wheelhouse": "~/.cache/gpufleet/wheelhouse-flashinfer-real",
        "gpufleet_venv_link": "~/flashinfer-real-env",
        "uv_venv_freeze_dir": str(tmp_path / "freezes"),
        "uv_venv_stack": {"torch": TORCH, "flashinfer-python": FLASHINFER},
        # The sandbox's CPU profile for torch (inventories/sandbox/group_vars/all.yml).
        "torch_nightly_cuda_variant": "cpu",
        "torch_nightly_packages": ["torch"],
        "torch_nightly_versions": {"torch": TORCH},
        # Only flashinfer-python, the real one.
        "flashinfer_packages": ["flashinfer-python"],
        "flashinfer_version": FLASHINFER,
        "flashinfer_versions": {"flashinfer-python": FLASHINFER},
    }))
    seconds = time.monotonic() - started
    print("playbook wall time: %.1f s" % seconds)
    assert result.rc == 0, result.out[-20000:]
    assert result.stats["sbx1"]["failed"] == 0, result.out[-20000:]
    data = json.loads(out.read_text())

    # torch: pinned by torch_nightly, in the constraints file, unmoved by flashinfer.
    assert data["torch_before"] == {"torch": TORCH}
    assert "torch==%s" % TORCH in data["constraints"].splitlines()
    freeze = dict(line.split("==", 1) for line in data["freeze"] if "==" in line)
    assert freeze["torch"] == TORCH
    assert data["flashinfer_installed"] == {"flashinfer-python": FLASHINFER}
    # The role resolved the whole dependency tree from the wheelhouse: exactly the pins.
    expected = {name: version for name, version in PINS.items() if name != "uv"}
    assert {name.lower(): version for name, version in freeze.items()} == expected

    verified = data["verified"]
    facts = verified["ansible_facts"]["gpufleet_torch"]
    assert verified.get("failed", False) is False and verified["changed"] is False
    assert verified["mismatches"] == []
    assert facts["torch_version"] == TORCH
    assert facts["device_count"] == 0
    assert facts["imports"]["flashinfer"]["ok"] is True, facts["imports"]["flashinfer"]
    assert facts["imports"]["flashinfer"]["version"] == FLASHINFER
    assert facts["kernels_error"] is None

    for entry in facts["kernels"]:
        print("%-28s %-8s %s" % (entry["check"], entry["status"], entry["reason"]))

    # Every flashinfer check is listed, once, on the CPU, skipped for want of a GPU.
    wanted = [name for name in kernel_checks.check_names() if name.startswith("flashinfer.")]
    flashinfer = [entry for entry in facts["kernels"] if entry["set"] == "flashinfer"]
    assert sorted(entry["check"] for entry in flashinfer) == sorted(wanted)
    for entry in flashinfer:
        assert entry["device"] == "cpu", entry
        assert entry["status"] == "skipped", entry
        assert entry["reason"] == "no CUDA device", entry
    assert [entry for entry in facts["kernels"] if entry["status"] == "ok" and entry["set"] == "flashinfer"] == []

    # The prebuilt modules: the seeded key was this host's, taken from the cache and placed, checked.
    status = data["aot_status"]
    assert data["aot_key"] == key
    assert status["intact"] is True and status["marker"]["key"] == key
    assert status["marker"]["sha256"] == {name: entry["sha256"] for name, entry in record["modules"].items()}
    assert status["aot_dir"] == data["venv"] + "/lib/python3.11/site-packages/flashinfer/data/aot"

    def aot_run(name, **changes):
        dest = tmp_path / ("aot-%s.json" % name)
        run = run_playbook(tmp_path / "aot.yml", inventory, limit="sbx1", timeout=600, extra_vars=dict(
            aot_vars, target="sbx1", out=str(dest), always_status=True, uv_venv_python=data["venv"] + "/bin/python",
            uv_venv_dir=data["venv"], uv_venv_become=False, uv_venv_user="unused", **changes))
        return run, (json.loads(dest.read_text()) if dest.exists() else None)

    (tmp_path / "aot.yml").write_text(AOT_PLAYBOOK)
    again, status = aot_run("again")
    assert again.rc == 0, again.out[-6000:]
    assert again.stats["sbx1"]["changed"] == 0, again.out[-6000:]
    assert status["marker"]["key"] == key and status["intact"] is True

    # A narrower list whose cached artifact has one changed byte: refused before anything moves.
    seed_artifact(cache, ["norm"], corrupt="norm")
    refused, dummy = aot_run("refused", flashinfer_aot_modules=["norm"])
    assert refused.rc != 0 and "norm: expected sha256 " in refused.out, refused.out[-6000:]
    kept, status = aot_run("kept")
    assert kept.rc == 0 and status["marker"]["key"] == key and status["intact"] is True
    assert sorted(status["present"]) == ["norm", "silu_and_mul"]

    # An empty list takes away what an earlier run placed.
    removed, status = aot_run("removed", flashinfer_aot_modules=[])
    assert removed.rc == 0, removed.out[-6000:]
    assert removed.stats["sbx1"]["changed"] == 1, removed.out[-6000:]
    assert status["marker"] is None and status["present"] == {}
