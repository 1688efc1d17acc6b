# -*- coding: utf-8 -*-
"""The sgl_kernel role's patch rules applied to the lines of upstream's
CMakeLists that decide what is compiled, for both layouts of the kernel:
sgl-kernel/ before sglang moved it (sgl_kernel_upstream_arch.cmake, written
from the facts of the pinned ref 3ec6e09) and python/sglang/kernels/aot after
(sgl_kernel_aot_arch.cmake, from the facts of the default ref 086ab8b),
evaluated by a real cmake (-P): for 12.0a, 9.0a, 10.0a and a mix the flags hold
exactly the wanted targets. Without the rules the same lines compile other
targets (no sm_120a at all before the move; after it no SM100 code in
infllm_ops), which is the trap. Each layout gets its own rules: the ones
written for the other do not match, or match where they do not help."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import shutil
import subprocess

import pytest
import yaml
from jinja2 import Environment

from ansible_collections.gpufleet.inference.plugins.filter.cuda_arch import gencode_flags
from ansible_collections.gpufleet.inference.plugins.modules.patch_rules import RuleError, ref_matches, run as plan_rules

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PINNED = "3ec6e09487cbf7424f7875cb098860a2142666a3"
CMAKE = shutil.which("cmake")


def role_rules(arch_list, cuda=True, layout=None):
    """The role's default rules, their `enabled` rendered as the role renders it (LAYOUT: the
    _sgl_kernel_layout the source step sets, None before it)."""
    with open(os.path.join(ROOT, "roles", "sgl_kernel", "defaults", "main.yml")) as handle:
        rules = yaml.safe_load(handle)["sgl_kernel_patch_rules"]
    out = []
    for rule in rules:
        enabled = str(rule.get("enabled", True))
        if "{{" in enabled:
            env = Environment()
            env.filters["bool"] = bool
            facts = {"sgl_kernel_cuda": cuda, "_sgl_kernel_arch_list": arch_list}
            if layout is not None:
                facts["_sgl_kernel_layout"] = layout
            enabled = env.from_string(enabled).render(**facts).strip()
        if enabled in ("True", "true"):
            out.append(dict((k, v) for k, v in rule.items() if k != "enabled"))
    return out


def apply_rules(root, ref, rules):
    """What the patch_rules module does: plan the changes, then write them."""
    result, changes = plan_rules(root, ref, rules)
    for name, (dummy_old, new) in changes.items():
        with open(os.path.join(root, name), "w") as handle:
            handle.write(new)
    return result


def evaluate(tmp_path, arch_list, rules, cuda_version="13.0"):
    """Apply the rules to the upstream lines, then let cmake compute the flag lists."""
    tree = tmp_path / "src"
    tree.mkdir()
    shutil.copy(os.path.join(HERE, "sgl_kernel_upstream_arch.cmake"), str(tree / "CMakeLists.txt"))
    # only the rules for this file's lines (the C++20 / CCCL / policy rules need the whole file)
    wanted = [r for r in rules if r["name"] in ("gencode-exactly-the-arch-list", "fa3-off-without-sm90a")]
    result = apply_rules(str(tree), PINNED, wanted)
    with open(str(tree / "CMakeLists.txt"), "a") as handle:
        handle.write('\nmessage("COMMON=${SGL_KERNEL_CUDA_FLAGS}")\nmessage("FA3=${SGL_KERNEL_ENABLE_FA3}")\n')
    proc = subprocess.run([CMAKE, "-DCUDA_VERSION=%s" % cuda_version,
                           "-DGPUFLEET_GENCODE_FLAGS=%s" % ";".join(gencode_flags(arch_list)),
                           "-P", str(tree / "CMakeLists.txt")], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    common = re.search(r"^COMMON=(.*)$", proc.stderr, re.M).group(1).split(";")
    targets = sorted(f.rsplit("code=", 1)[1] for f in common if f.startswith("-gencode="))
    fa3 = re.search(r"^FA3=(.*)$", proc.stderr, re.M).group(1)
    return targets, fa3, common, result


needs_cmake = pytest.mark.skipif(CMAKE is None, reason="no cmake on PATH")


@needs_cmake
@pytest.mark.parametrize("arch_list, expected, fa3", [
    (["12.0a"], ["sm_120a"], "OFF"),
    (["9.0a"], ["sm_90a"], "ON"),
    (["9.0a", "12.0a"], ["sm_120a", "sm_90a"], "ON"),
    (["8.9+PTX"], ["compute_89", "sm_89"], "OFF"),
], ids=["reference-cluster-12.0a", "h200-9.0a", "mixed", "ptx"])
def test_rules_compile_exactly_the_arch_list(tmp_path, arch_list, expected, fa3):
    targets, fa3_on, common, result = evaluate(tmp_path, arch_list, role_rules(arch_list))
    assert targets == expected, common
    assert fa3_on == fa3  # FA3 is sm_90a code: built only when 9.0a is asked for
    assert "gencode-exactly-the-arch-list" in result["applied"]
    # the other flags of the list survive
    assert "-DFLASHINFER_ENABLE_BF16" in common and "-DENABLE_NVFP4=1" in common and "-O3" in common


@needs_cmake
def test_without_the_rule_a_cuda_13_build_has_no_sm_120a(tmp_path):
    """The trap itself: what the pinned ref compiles for 12.0a with CUDA 13."""
    rules = [r for r in role_rules(["12.0a"]) if r["name"] != "gencode-exactly-the-arch-list"]
    targets, dummy_fa3, dummy_common, dummy_result = evaluate(tmp_path, ["12.0a"], rules)
    assert targets == ["sm_110", "sm_110a", "sm_75", "sm_80", "sm_89", "sm_90", "sm_90a"]
    assert "sm_120a" not in targets


@needs_cmake
def test_the_rule_refuses_to_build_without_the_flags(tmp_path):
    tree = tmp_path / "src"
    tree.mkdir()
    shutil.copy(os.path.join(HERE, "sgl_kernel_upstream_arch.cmake"), str(tree / "CMakeLists.txt"))
    apply_rules(str(tree), PINNED, [r for r in role_rules(["12.0a"]) if r["name"] == "gencode-exactly-the-arch-list"])
    proc = subprocess.run([CMAKE, "-DCUDA_VERSION=13.0", "-P", str(tree / "CMakeLists.txt")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and "GPUFLEET_GENCODE_FLAGS is not set" in proc.stderr


@needs_cmake
def test_the_rule_is_idempotent(tmp_path):
    rules = role_rules(["12.0a"])
    targets, dummy_fa3, dummy_common, dummy_result = evaluate(tmp_path, ["12.0a"], rules)
    again = apply_rules(str(tmp_path / "src"), PINNED,
                        [r for r in rules if r["name"] == "gencode-exactly-the-arch-list"])
    assert again["applied"] == [] and "gencode-exactly-the-arch-list" in again["present"]


# ---------------------------------------------------------------- after the move: python/sglang/kernels/aot

AOT_REF = "086ab8b7d78483759363246077c01b76285f720b"
AOT_FIXTURE = os.path.join(HERE, "sgl_kernel_aot_arch.cmake")
AOT_ONLY = ["cmake-policy-cmp0177-guard", "fa3-off-without-sm90a-aot", "cxx-standard-20-aot",
            "gencode-exactly-the-arch-list-aot", "gencode-infllm-exactly-the-arch-list", "distribution-sglang-kernel"]
OLD_ONLY = ["fa3-off-without-sm90a", "cxx-standard-20", "gencode-exactly-the-arch-list"]
# find_package is not scriptable (cmake -P): the CUDA toolkit is not looked for here
STUB = "macro(find_package)\nendmacro()\n"


def aot_tree(tmp_path, name='sglang-kernel'):
    """The aot folder as the role patches it: the CMakeLists lines and the pyproject's name."""
    tree = tmp_path / "aot"
    tree.mkdir()
    shutil.copy(AOT_FIXTURE, str(tree / "CMakeLists.txt"))
    (tree / "pyproject.toml").write_text('[project]\nname = "%s"\nversion = "0.4.10"\n' % name)
    return tree


def aot_rules(arch_list, cuda=True):
    """The rules the role applies to the aot folder at its ref (cuda-std-cxx20 is for 3ec6e09 alone)."""
    return [r for r in role_rules(arch_list, cuda, layout="aot") if ref_matches(r, AOT_REF)]


def guards():
    """A cmake older than 3.31 reads the aot lines only with the policy guards."""
    return [r for r in aot_rules(["12.0a"]) if r["name"].startswith("cmake-policy-")]


def targets(flags):
    return sorted(f.rsplit("code=", 1)[1] for f in flags if f.startswith("-gencode="))


def evaluate_aot(tmp_path, arch_list, rules, cuda_version="13.0", gencode=True):
    """Apply RULES to the aot lines, then let cmake compute the flag lists."""
    tree = aot_tree(tmp_path)
    result = apply_rules(str(tree), AOT_REF, rules)
    text = (tree / "CMakeLists.txt").read_text()
    (tree / "CMakeLists.txt").write_text(STUB + text + "\n".join([
        'message("COMMON=${SGL_KERNEL_CUDA_FLAGS}")', 'message("INFLLM=${INFLLM_FLASH_CUDA_FLAGS}")',
        'message("FA3=${SGL_KERNEL_ENABLE_FA3}")', 'message("FA3FLAGS=${SGL_FLASH_KERNEL_CUDA_FLAGS}")',
        'message("CXX=${CMAKE_CXX_STANDARD}")', ""]))
    args = [CMAKE, "-DCUDA_VERSION=%s" % cuda_version]
    if gencode:
        args.append("-DGPUFLEET_GENCODE_FLAGS=%s" % ";".join(gencode_flags(arch_list)))
    proc = subprocess.run(args + ["-P", str(tree / "CMakeLists.txt")], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    out = dict(re.findall(r"^([A-Z0-9]+)=(.*)$", proc.stderr, re.M))
    return {"common": out["COMMON"].split(";"), "infllm": out["INFLLM"].split(";"), "fa3": out["FA3"],
            "fa3_flags": out["FA3FLAGS"].split(";") if out["FA3FLAGS"] else [], "cxx": out["CXX"],
            "result": result, "pyproject": (tree / "pyproject.toml").read_text()}


@pytest.mark.parametrize("layout, enabled, disabled", [
    (None, OLD_ONLY, AOT_ONLY),
    ("sgl-kernel", OLD_ONLY, AOT_ONLY),
    # a folder of no known layout (a fixture, a fork's) keeps the rules of before the move
    ("", OLD_ONLY, AOT_ONLY),
    ("aot", AOT_ONLY, OLD_ONLY),
], ids=["before-the-source-step", "sgl-kernel", "another-folder", "aot"])
def test_each_layout_gets_its_own_rules(layout, enabled, disabled):
    for arch_list in (["12.0a"], ["9.0a"]):
        names = [r["name"] for r in role_rules(arch_list, layout=layout)]
        # the layout's FA3 fallback switches FA3 off unless 9.0a is asked for
        assert [n for n in names if n in enabled] == [
            n for n in enabled if arch_list == ["12.0a"] or not n.startswith("fa3-")]
        assert [n for n in names if n in disabled] == []
        # both layouts guard CMP0169 and add CCCL's include folder
        assert {"cmake-policy-cmp0169-guard", "cuda13-cccl-include"} <= set(names)


def test_a_cpu_build_of_the_aot_layout_has_no_gencode_rules():
    names = [r["name"] for r in role_rules([], cuda=False, layout="aot")]
    assert "gencode-exactly-the-arch-list-aot" not in names and "gencode-infllm-exactly-the-arch-list" not in names
    assert "fa3-off-without-sm90a-aot" in names


@needs_cmake
@pytest.mark.parametrize("arch_list, expected, fa3", [
    (["12.0a"], ["sm_120a"], "OFF"),
    (["9.0a"], ["sm_90a"], "ON"),
    (["9.0a", "12.0a"], ["sm_120a", "sm_90a"], "ON"),
    (["10.0a"], ["sm_100a"], "OFF"),
    (["8.9+PTX"], ["compute_89", "sm_89"], "OFF"),
], ids=["reference-cluster-12.0a", "h200-9.0a", "mixed", "b200-10.0a", "ptx"])
def test_aot_rules_compile_exactly_the_arch_list(tmp_path, arch_list, expected, fa3):
    got = evaluate_aot(tmp_path, arch_list, aot_rules(arch_list))
    assert targets(got["common"]) == expected, got["common"]
    assert targets(got["infllm"]) == expected, got["infllm"]
    assert got["fa3"] == fa3
    # FA3's own list is sm_90a code, left alone: built only when 9.0a is asked for
    assert targets(got["fa3_flags"]) == (["sm_90a"] if fa3 == "ON" else [])
    # the other flags of the lists survive, C++20 everywhere
    assert "-DFLASHINFER_ENABLE_BF16" in got["common"] and "-DENABLE_NVFP4=1" in got["common"]
    assert "--compress-mode=size" in got["common"] and "-O3" in got["infllm"]
    assert got["cxx"] == "20" and "-std=c++20" in got["common"] and "-std=c++20" in got["infllm"]
    assert got["result"]["applied"] == [r["name"] for r in aot_rules(arch_list) if r["name"] != "distribution-sglang-kernel"]
    assert got["result"]["present"] == ["distribution-sglang-kernel"]


@needs_cmake
@pytest.mark.parametrize("cuda_version, common, infllm", [
    ("13.0", ["sm_100f", "sm_120a", "sm_80", "sm_89", "sm_90"], ["sm_120a", "sm_80", "sm_90"]),
    ("12.8", ["sm_100a", "sm_120a", "sm_80", "sm_89", "sm_90"], ["sm_120a", "sm_80", "sm_90"]),
], ids=["cuda-13", "cuda-12.8"])
def test_without_the_rules_the_aot_layout_compiles_its_own_list(tmp_path, cuda_version, common, infllm):
    """The trap after the move: for 10.0a the hard-coded lists compile five targets in common_ops and
    none of SM100 in infllm_ops."""
    rules = [r for r in aot_rules(["10.0a"]) if not r["name"].startswith("gencode-")]
    got = evaluate_aot(tmp_path, ["10.0a"], rules, cuda_version=cuda_version, gencode=False)
    assert targets(got["common"]) == common
    assert targets(got["infllm"]) == infllm


@needs_cmake
def test_the_rule_of_the_old_layout_misses_the_aot_list(tmp_path):
    """The sgl-kernel layout's anchor (before the BF16 flags) is in the aot file too, but there the
    hard-coded -gencode entries are appended after it: what is asked plus what upstream adds."""
    old = [r for r in role_rules(["9.0a"]) if r["name"] == "gencode-exactly-the-arch-list"]
    got = evaluate_aot(tmp_path, ["9.0a"], guards() + old)
    assert targets(got["common"]) == ["sm_100f", "sm_120a", "sm_80", "sm_89", "sm_90a", "sm_90a"]


def test_the_rules_of_the_old_layout_do_not_match_the_aot_file(tmp_path):
    tree = aot_tree(tmp_path)
    for name in ("cxx-standard-20", "fa3-off-without-sm90a"):
        [rule] = [r for r in role_rules(["12.0a"]) if r["name"] == name]
        with pytest.raises(RuleError, match="patch rule '%s' no longer matches source ref %s" % (name, AOT_REF)):
            apply_rules(str(tree), AOT_REF, [rule])


@needs_cmake
def test_the_policy_guards_let_an_older_cmake_read_the_aot_file(tmp_path):
    version = tuple(int(x) for x in re.search(r"(\d+)\.(\d+)", subprocess.run(
        [CMAKE, "--version"], capture_output=True, text=True, check=True).stdout).groups())
    assert [r["name"] for r in guards()] == ["cmake-policy-cmp0169-guard", "cmake-policy-cmp0177-guard"]
    got = evaluate_aot(tmp_path, ["12.0a"], guards())
    assert got["result"]["applied"] == ["cmake-policy-cmp0169-guard", "cmake-policy-cmp0177-guard"]
    if version >= (3, 31):
        pytest.skip("cmake %d.%d knows both policies" % version)
    bare = tmp_path / "bare.cmake"
    bare.write_text(STUB + open(AOT_FIXTURE).read())
    proc = subprocess.run([CMAKE, "-DCUDA_VERSION=13.0", "-P", str(bare)], capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and "is not known to this version of CMake" in proc.stderr


@needs_cmake
def test_the_aot_rules_are_idempotent_and_refuse_a_build_without_the_flags(tmp_path):
    rules = aot_rules(["12.0a"])
    evaluate_aot(tmp_path, ["12.0a"], rules)
    again = apply_rules(str(tmp_path / "aot"), AOT_REF, rules)
    assert again["applied"] == [] and again["present"] == [r["name"] for r in rules]
    proc = subprocess.run([CMAKE, "-DCUDA_VERSION=13.0", "-P", str(tmp_path / "aot" / "CMakeLists.txt")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and "GPUFLEET_GENCODE_FLAGS is not set" in proc.stderr


@pytest.mark.parametrize("name, after, state", [
    ("sglang-kernel", "sglang-kernel", "present"),
    # a tree that still named the old distribution is built under the one sglang checks for
    ("sgl-kernel", "sglang-kernel", "applied"),
], ids=["sglang-kernel", "renamed"])
def test_the_aot_wheel_is_built_as_sglang_kernel(tmp_path, name, after, state):
    tree = aot_tree(tmp_path, name)
    [rule] = [r for r in role_rules(["12.0a"], layout="aot") if r["name"] == "distribution-sglang-kernel"]
    result = apply_rules(str(tree), AOT_REF, [rule])
    assert result[state] == ["distribution-sglang-kernel"]
    assert 'name = "%s"' % after in (tree / "pyproject.toml").read_text()


def test_a_pyproject_that_names_another_distribution_is_refused_by_the_rule(tmp_path):
    tree = aot_tree(tmp_path, "my-kernels")
    [rule] = [r for r in role_rules(["12.0a"], layout="aot") if r["name"] == "distribution-sglang-kernel"]
    with pytest.raises(RuleError, match="patch rule 'distribution-sglang-kernel' no longer matches"):
        apply_rules(str(tree), AOT_REF, [rule])
