# -*- coding: utf-8 -*-
"""The sgl_kernel role's arch rules applied to the lines of upstream's
CMakeLists that decide what is compiled (sgl_kernel_upstream_arch.cmake, written
from the facts of the pinned ref), evaluated by a real cmake (-P): for 12.0a and
for 9.0a the flags hold exactly the wanted targets. Without the rule the same
lines compile no sm_120a at all, which is the trap."""
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
from ansible_collections.gpufleet.inference.plugins.modules.patch_rules import run as plan_rules

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
PINNED = "3ec6e09487cbf7424f7875cb098860a2142666a3"
CMAKE = shutil.which("cmake")


def role_rules(arch_list, cuda=True):
    """The role's default rules, their `enabled` rendered as the role renders it."""
    with open(os.path.join(ROOT, "roles", "sgl_kernel", "defaults", "main.yml")) as handle:
        rules = yaml.safe_load(handle)["sgl_kernel_patch_rules"]
    out = []
    for rule in rules:
        enabled = str(rule.get("enabled", True))
        if "{{" in enabled:
            env = Environment()
            env.filters["bool"] = bool
            enabled = env.from_string(enabled).render(sgl_kernel_cuda=cuda, _sgl_kernel_arch_list=arch_list).strip()
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


pytestmark = pytest.mark.skipif(CMAKE is None, reason="no cmake on PATH")


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


def test_without_the_rule_a_cuda_13_build_has_no_sm_120a(tmp_path):
    """The trap itself: what the pinned ref compiles for 12.0a with CUDA 13."""
    rules = [r for r in role_rules(["12.0a"]) if r["name"] != "gencode-exactly-the-arch-list"]
    targets, dummy_fa3, dummy_common, dummy_result = evaluate(tmp_path, ["12.0a"], rules)
    assert targets == ["sm_110", "sm_110a", "sm_75", "sm_80", "sm_89", "sm_90", "sm_90a"]
    assert "sm_120a" not in targets


def test_the_rule_refuses_to_build_without_the_flags(tmp_path):
    tree = tmp_path / "src"
    tree.mkdir()
    shutil.copy(os.path.join(HERE, "sgl_kernel_upstream_arch.cmake"), str(tree / "CMakeLists.txt"))
    apply_rules(str(tree), PINNED, [r for r in role_rules(["12.0a"]) if r["name"] == "gencode-exactly-the-arch-list"])
    proc = subprocess.run([CMAKE, "-DCUDA_VERSION=13.0", "-P", str(tree / "CMakeLists.txt")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and "GPUFLEET_GENCODE_FLAGS is not set" in proc.stderr


def test_the_rule_is_idempotent(tmp_path):
    rules = role_rules(["12.0a"])
    targets, dummy_fa3, dummy_common, dummy_result = evaluate(tmp_path, ["12.0a"], rules)
    again = apply_rules(str(tmp_path / "src"), PINNED,
                        [r for r in rules if r["name"] == "gencode-exactly-the-arch-list"])
    assert again["applied"] == [] and "gencode-exactly-the-arch-list" in again["present"]
