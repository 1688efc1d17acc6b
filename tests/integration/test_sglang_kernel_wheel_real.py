"""The published sglang-kernel 0.4.10 wheel (the renamed sgl-kernel, import name
still sgl_kernel: one x86_64 wheel, cp310-abi3, CUDA 13, its metadata pins
torch==2.14.1) judged for real by wheel_fit on the controller, for 9.0a, 10.0a
and 12.0a, with the sgl_kernel role's default arch scope, against torch 2.14.1
(the CUDA 13.0 build the suite installs for the CUDA compile; the judgement
reads torch's own libraries, nothing runs on a GPU). cuobjdump is NVIDIA's
pinned wheel.

What its shared objects carry (no PTX anywhere): sm90/ and sm100/common_ops
sm_80, sm_89, sm_90, sm_90a, sm_100f, sm_120a; flashmla_ops sm_90a, sm_100f,
sm_103a; infllm_ops sm_80, sm_90, sm_120a. So:

- 12.0a fits;
- 9.0a fits, with a note that infllm_ops runs there on plain sm_90, without the
  arch-specific instructions; refused for infllm_ops with require_arch_specific;
- 10.0a is refused for infllm_ops alone (no SM100 code at all), while the
  sm_100f code of common_ops, spatial_ops and flashmla_ops runs there;
- the metadata's torch==2.14.1 is met by 2.14.1+cu130: never named as a reason.

Each judgement is printed (pytest -s shows it).
"""
import json
import os
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT, cache_lock, cuobjdump_home, run_playbook
from test_sgl_kernel_build import cuda_venv, local_inventory

sys.path.insert(0, os.path.join(ROOT, ".collections"))
from ansible_collections.gpufleet.inference.plugins.module_utils.flashinfer_aot import sha256_file  # noqa: E402

PACKAGE, VERSION = "sglang-kernel", "0.4.10"
WHEEL = "sglang_kernel-0.4.10-cp310-abi3-manylinux2014_x86_64.whl"
WHEEL_SHA256 = "043cbe4a10e7887ea1b25599b729ff1ce115a0d5217b2c177aff9f9ae5327724"
CACHE = os.path.join(ROOT, ".cache", "arch-audit")
# The wheel's shared objects, unpacked once by wheel_fit (unpack_dir) and reused while the sha256 is the same.
UNPACKED = os.path.join(CACHE, "sglang-kernel-%s-unpacked" % VERSION)
INFLLM = "sgl_kernel/infllm_ops.cpython-310-x86_64-linux-gnu.so"
NO_SM100 = ("%s has no code for 10.0a (SASS sm_100a, sm_100f or sm_100, or PTX compute_100a); "
            "it has SASS sm_80, sm_90, sm_120a and no PTX" % INFLLM)
PLAIN_NOTE = "%s runs on 9.0a through plain SASS sm_90, without the arch-specific instructions of sm_90a" % INFLLM


def published_wheel():
    """The x86_64 wheel in .cache/arch-audit/wheels, downloaded once by pip by its exact version and
    sha256 (pip checks the hash before it writes the file; the cached file is checked again here)."""
    wheels = os.path.join(CACHE, "wheels")
    path = os.path.join(wheels, WHEEL)
    with cache_lock("sglang-kernel-wheel"):
        if not os.path.exists(path):
            os.makedirs(wheels, exist_ok=True)
            requirements = os.path.join(wheels, "sglang-kernel-%s.txt" % VERSION)
            with open(requirements, "w", encoding="utf-8") as handle:
                handle.write("%s==%s --hash=sha256:%s\n" % (PACKAGE, VERSION, WHEEL_SHA256))
            proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                                   "--platform", "manylinux2014_x86_64", "--python-version", "3.10",
                                   "--implementation", "cp", "--abi", "abi3", "-d", wheels, "-r", requirements],
                                  capture_output=True, text=True, timeout=1800, check=False)
            assert proc.returncode == 0, proc.stdout + proc.stderr
    digest = sha256_file(path)
    assert digest == WHEEL_SHA256, "%s: sha256 %s, expected %s (delete it to download again)" % (path, digest, WHEEL_SHA256)
    return path


JUDGE = """
- name: wheel_fit on the published sglang-kernel wheel
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Judge
      gpufleet.inference.wheel_fit:
        path: "{{ wheel }}"
        targets: "{{ item.targets }}"
        scope: "{{ scope }}"
        require_arch_specific: "{{ item.require_arch_specific | default(false) }}"
        cuobjdump: "{{ cuobjdump }}"
        python: "{{ python }}"
        unpack_dir: "{{ unpacked }}"
        fail: false
      loop: "{{ cases }}"
      loop_control:
        label: "{{ item.id }}"
      register: fits

    - name: Keep them
      ansible.builtin.copy:
        content: "{{ fits.results | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
"""

CASES = [
    {"id": "9.0a", "targets": ["9.0a"]},
    {"id": "10.0a", "targets": ["10.0a"]},
    {"id": "12.0a", "targets": ["12.0a"]},
    {"id": "9.0a-arch-specific", "targets": ["9.0a"], "require_arch_specific": True},
]


def _summary(fit):
    arch = fit["arch"]
    return "\n".join([
        "wheel_fit %s on %s %s against torch %s:" % (fit["item"]["id"], fit["wheel"]["name"], fit["wheel"]["version"],
                                                     fit["abi"]["torch_version"]),
        "  fits: %s" % fit["fits"],
        "  reasons: %s" % (fit["reasons"] or "none"),
        "  notes: %s" % (fit["notes"] or "none"),
        "  scoped out: %s" % ", ".join("%s (%s)" % (s["file"], ", ".join(s["targets"])) for s in arch["scoped_out"]),
        "  abi: %d symbols checked, %d missing" % (fit["abi"]["checked"], len(fit["abi"]["missing"])),
    ])


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    wheel = published_wheel()
    tmp = tmp_path_factory.mktemp("sglang-kernel")
    with open(os.path.join(ROOT, "roles", "sgl_kernel", "defaults", "main.yml"), encoding="utf-8") as handle:
        scope = yaml.safe_load(handle)["sgl_kernel_wheel_arch_scope"]
    playbook = tmp / "judge.yml"
    playbook.write_text(JUDGE)
    out = tmp / "fits.json"
    r = run_playbook(str(playbook), local_inventory(tmp), timeout=1800, extra_vars={
        "wheel": wheel, "scope": scope, "cases": CASES, "unpacked": UNPACKED, "out": str(out),
        "cuobjdump": os.path.join(cuobjdump_home(), "bin", "cuobjdump"),
        "python": os.path.join(cuda_venv(), "bin", "python")})
    assert r.rc == 0, r.out[-4000:]
    fits = {fit["item"]["id"]: fit for fit in json.loads(out.read_text())}
    for case in CASES:
        print(_summary(fits[case["id"]]))
    return fits


def _missing(fit):
    return sorted((m["file"], m["target"]) for m in fit["arch"]["missing"])


def test_wheel_and_abi_fit_torch_2_14_1_and_its_met_pin_is_never_named(judged):
    for fit in judged.values():
        assert fit["wheel"]["name"] == PACKAGE and fit["wheel"]["version"] == VERSION
        assert fit["wheel"]["requires_torch"] == "torch==2.14.1"
        assert fit["judged"] == ["arch", "abi"]
        assert fit["abi"]["torch_version"] == "2.14.1+cu130", fit["abi"]
        assert fit["abi"]["checked"] == 436 and fit["abi"]["missing"] == [] and fit["abi"]["libraries"] == []
        assert not [reason for reason in fit["reasons"] if "metadata" in reason], fit["reasons"]


def test_the_listings_are_what_the_wheel_carries(judged):
    files = {item["file"]: item for item in judged["12.0a"]["arch"]["files"]}
    for common in ("sgl_kernel/sm90/common_ops.abi3.so", "sgl_kernel/sm100/common_ops.abi3.so"):
        assert files[common]["sass"] == ["sm_80", "sm_89", "sm_90", "sm_90a", "sm_100f", "sm_120a"], files[common]
    assert files["sgl_kernel/flashmla_ops.abi3.so"]["sass"] == ["sm_90a", "sm_100f", "sm_103a"]
    assert files[INFLLM]["sass"] == ["sm_80", "sm_90", "sm_120a"]
    assert not [item for item in files.values() if item["ptx"]]


def test_12_0a_fits(judged):
    fit = judged["12.0a"]
    assert fit["fits"] is True, fit["reasons"]
    assert fit["reasons"] == [] and fit["notes"] == []


def test_9_0a_fits_with_a_note_on_infllm_plain_sm_90(judged):
    fit = judged["9.0a"]
    assert fit["fits"] is True, fit["reasons"]
    assert fit["arch"]["plain_only"] == [{"file": INFLLM, "target": "9.0a", "sass": "sm_90"}]
    assert fit["notes"] == [PLAIN_NOTE]
    strict = judged["9.0a-arch-specific"]
    assert strict["fits"] is False
    assert _missing(strict) == [(INFLLM, "9.0a")]
    assert strict["reasons"] == ["%s has no code for 9.0a (SASS sm_90a or PTX compute_90a); "
                                 "it has SASS sm_80, sm_90, sm_120a and no PTX" % INFLLM]


def test_10_0a_is_refused_for_infllm_alone(judged):
    fit = judged["10.0a"]
    assert fit["fits"] is False
    assert _missing(fit) == [(INFLLM, "10.0a")]
    assert fit["reasons"] == [NO_SM100]
    assert fit["notes"] == []
