"""The published sgl-kernel wheel (0.3.21 from PyPI, pinned in the role's
defaults) judged for real on the controller itself (connection local), where
the CUDA builds of torch are:

- torch 2.9.1 (the CUDA 12.8 build from the package index, installed without
  its nvidia-* wheels: the judgement reads torch's own libraries, nothing is
  run on a GPU): sgl_kernel_source wheel takes it; the arch audit for 9.0a
  passes with the role's scope, the ABI check resolves every symbol, and the
  wheel is installed with its choice recorded;
- torch 2.14.1 (the CUDA 13.0 build the suite installs for the CUDA compile):
  refused, naming the symbol the wheel needs and the one torch exports
  instead, the CUDA runtime it links, and that nothing was installed;
- the arch scope on the real shared objects: for 12.0a FlashMLA (sm_90a and
  sm_100a only) is refused without the scope and left out, with its reason,
  with it.

The import of the installed wheel (the role's ABI check through torch_verify)
needs a GPU driver and CUDA 12 libraries: it is switched off here and said so;
what is checked is the judgement before the install.
"""
import json
import os
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT, cuobjdump_home, run_playbook as plain_playbook, venv_bin
from sgl_kernel_helpers import DEPLOY, OLD_WHEEL, WHEEL_CACHE, run_playbook
from test_sgl_kernel_build import cuda_venv, local_inventory, site

TORCH_291_VENV = os.path.join(ROOT, ".cache", "torch-2.9.1-cu128-venv")
CHECK_SYMBOL = "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool)"
TORCH_2141_SYMBOL = ("c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, unsigned int, bool, "
                     "c10::cuda::CUDAErrorLogCapture*)")


def torch_291():
    """torch 2.9.1 (CUDA 12.8 build) without its nvidia-* wheels, made once under .cache/."""
    stamp = os.path.join(TORCH_291_VENV, ".gpufleet-test-ready")
    if not os.path.exists(stamp):
        subprocess.run([sys.executable, "-m", "venv", "--clear", "--without-pip", TORCH_291_VENV], check=True)
        subprocess.run([venv_bin("uv"), "pip", "install", "-q", "--python", os.path.join(TORCH_291_VENV, "bin", "python"),
                        "--no-deps", "torch==2.9.1"], check=True)
        open(stamp, "w").close()
    return TORCH_291_VENV


def venv_seeing(tmp_path, torch_venv):
    """A fresh venv whose interpreter sees torch_venv's torch (a .pth file): what the role installs stays here."""
    venv = str(tmp_path / "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    with open(os.path.join(site(venv), "gpufleet-test-torch.pth"), "w") as handle:
        handle.write(site(torch_venv) + "\n")
    return venv


def wheel_vars(tmp_path, venv, **kw):
    extra = {
        "sgl_kernel_source": "wheel",
        "sgl_kernel_venv": venv,
        "sgl_kernel_uv": venv_bin("uv"),
        "sgl_kernel_cuda": True,
        "sgl_kernel_arch_list": ["9.0a"],
        "sgl_kernel_artifact_dir": str(tmp_path / "artifacts"),
        "sgl_kernel_work_dir": str(tmp_path / "work"),
        "sgl_kernel_wheel_cache_dir": WHEEL_CACHE,
        "sgl_kernel_wheel_cuobjdump": os.path.join(cuobjdump_home(), "bin", "cuobjdump"),
        "sgl_kernel_system_packages": [],
        # importing it needs a GPU driver and CUDA 12 libraries (see the module docstring)
        "sgl_kernel_abi_check": False,
    }
    extra.update(OLD_WHEEL)
    extra.update(kw)
    return extra


def records(tmp_path):
    return [json.load(open(os.path.join(root, "build.json")))
            for root, _dirs, files in os.walk(str(tmp_path / "artifacts")) if "build.json" in files]


def test_fits_torch_2_9_1_installed_with_its_reason_then_nothing_to_do(tmp_path):
    venv = venv_seeing(tmp_path, torch_291())
    inv = local_inventory(tmp_path)
    extra = wheel_vars(tmp_path, venv)
    r = run_playbook(DEPLOY, inv, extra_vars=extra, timeout=1200)
    assert r.rc == 0, r.out[-6000:]
    # installed into the venv, not built: no build log, no compile
    assert os.path.isfile(os.path.join(site(venv), "sgl_kernel", "sm90", "common_ops.abi3.so"))
    assert not os.path.exists(tmp_path / "work" / "builds.log")
    marker = json.load(open(os.path.join(venv, "gpufleet-sgl_kernel.json")))
    assert marker["choice"]["source"] == "wheel", marker
    assert marker["choice"]["reason"].startswith("published wheel sgl-kernel 0.3.21 fits: arch audit of 9.0a passed"), marker
    assert "symbols resolved against torch 2.9.1+cu128" in marker["choice"]["reason"]
    assert marker["torch_version"] == "2.9.1" and "sm_90a" in marker["compiled_targets"]
    [record] = records(tmp_path)
    assert record["wheel"] == "sgl_kernel-0.3.21-cp310-abi3-manylinux2014_x86_64.whl"
    assert record["sha256"] == "57dfb3a2a3cd759f499c32e2bad5f6489b7c58f7f9a84ee00c53ec92d303aaab"
    assert record["abi"]["torch_version"] == "2.9.1+cu128" and record["abi"]["checked"] > 400, record["abi"]
    audit = record["arch_audit"]
    assert audit["requested"] == ["9.0a"] and audit["missing"] == [], audit
    # sgl_kernel loads sm100/common_ops on GPUs other than 9.0 only: left out for 9.0a, with the reason
    scoped = {item["file"]: item for item in audit["scoped_out"]}
    assert scoped["sgl_kernel/sm100/common_ops.abi3.so"]["targets"] == ["9.0a"]
    assert "every GPU but compute capability 9.0" in scoped["sgl_kernel/sm100/common_ops.abi3.so"]["reason"]
    assert "sgl_kernel/sm90/common_ops.abi3.so" not in scoped
    # the same key again: nothing changes, nothing is judged or installed again
    r = run_playbook(DEPLOY, inv, extra_vars=extra)
    assert r.rc == 0 and r.stats["localhost"]["changed"] == 0, r.out[-6000:]


def test_refused_against_torch_2_14_1_naming_the_symbol_and_nothing_installed(tmp_path):
    venv = venv_seeing(tmp_path, cuda_venv())
    r = run_playbook(DEPLOY, local_inventory(tmp_path), extra_vars=wheel_vars(tmp_path, venv), timeout=1200)
    assert r.rc != 0, r.out[-6000:]
    assert "sgl_kernel_source is wheel and the published wheel sgl-kernel 0.3.21 does not fit" in r.out, r.out[-6000:]
    # the symbol the wheel needs, and what torch 2.14.1 exports under that name instead
    assert "sgl_kernel/sm90/common_ops.abi3.so needs 7 symbols that torch 2.14.1+cu130 does not export" in r.out
    assert "%s (torch exports %s)" % (CHECK_SYMBOL, TORCH_2141_SYMBOL) in r.out, r.out[-6000:]
    assert "libcudart.so.12 (CUDA 12) but torch 2.14.1+cu130 is built with CUDA 13.0" in r.out
    assert "the wheel's metadata names no torch it was built for; the venv has torch 2.14.1+cu130" in r.out
    assert "Nothing was installed on any host" in r.out
    assert not os.path.exists(os.path.join(site(venv), "sgl_kernel"))
    assert not os.path.exists(os.path.join(venv, "gpufleet-sgl_kernel.json"))
    assert records(tmp_path) == []


AUDIT = """
- name: wheel_fit on the unpacked wheel, arch only
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Judge
      gpufleet.inference.wheel_fit:
        path: "{{ unpacked }}"
        targets: ["12.0a", "10.0a"]
        scope: "{{ scope }}"
        cuobjdump: "{{ cuobjdump }}"
        fail: false
      register: fit

    - name: Keep it
      ansible.builtin.copy:
        content: "{{ fit | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
"""


@pytest.mark.parametrize("scoped", [True, False], ids=["role-scope", "no-scope"])
def test_arch_scope_on_the_real_shared_objects_for_blackwell(tmp_path, scoped):
    unpacked = [os.path.join(WHEEL_CACHE, d, "unpacked") for d in sorted(os.listdir(WHEEL_CACHE))
                if os.path.isdir(os.path.join(WHEEL_CACHE, d, "unpacked"))] if os.path.isdir(WHEEL_CACHE) else []
    assert len(unpacked) == 1, "the role's first run unpacks the wheel into %s (test order)" % WHEEL_CACHE
    with open(os.path.join(ROOT, "roles", "sgl_kernel", "defaults", "main.yml"), encoding="utf-8") as handle:
        scope = yaml.safe_load(handle)["sgl_kernel_wheel_arch_scope"] if scoped else []
    playbook = tmp_path / "audit.yml"
    playbook.write_text(AUDIT)
    out = tmp_path / "fit.json"
    r = plain_playbook(str(playbook), local_inventory(tmp_path), extra_vars={
        "unpacked": unpacked[0], "scope": scope, "out": str(out),
        "cuobjdump": os.path.join(cuobjdump_home(), "bin", "cuobjdump")})
    assert r.rc == 0, r.out[-4000:]
    fit = json.load(open(str(out)))
    assert fit["judged"] == ["arch"] and fit["abi"]["judged"] is False
    missing = sorted((m["file"], m["target"]) for m in fit["arch"]["missing"])
    if scoped:
        assert missing == [], fit["reasons"]
        scoped_out = {item["file"]: item["targets"] for item in fit["arch"]["scoped_out"]}
        assert scoped_out["sgl_kernel/flashmla_ops.abi3.so"] == ["12.0a"]
        assert scoped_out["sgl_kernel/sm90/common_ops.abi3.so"] == ["12.0a", "10.0a"]
    else:
        assert ("sgl_kernel/flashmla_ops.abi3.so", "12.0a") in missing, missing
        assert ("sgl_kernel/flashmla_ops.abi3.so", "10.0a") not in missing
        assert any("sgl_kernel/flashmla_ops.abi3.so has no code for 12.0a" in reason for reason in fit["reasons"])
        # sgl_kernel's own two variants carry sm_100a and sm_120a
        assert not [m for m in missing if m[0].endswith("common_ops.abi3.so")], missing
