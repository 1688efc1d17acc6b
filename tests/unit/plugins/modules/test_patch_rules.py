# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil

import pytest
import yaml
from jinja2 import Environment

from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpufleet.inference.plugins.modules import patch_rules

REF = "0123456789abcdef0123456789abcdef01234567"
CMAKE = """cmake_minimum_required(VERSION 3.26 FATAL_ERROR)
project(fixture LANGUAGES CXX)

cmake_policy(SET CMP0169 OLD)
find_package(CUDAToolkit REQUIRED)
if (SGL_KERNEL_ENABLE_SM90A)
    set(SGL_KERNEL_ENABLE_FA3 ON)
endif()
"""

POLICY = {
    "name": "cmake-policy-cmp0169-guard", "file": "CMakeLists.txt", "reason": "r1",
    "pattern": "cmake_policy(SET CMP0169 OLD)",
    "replacement": "if(POLICY CMP0169)\n  cmake_policy(SET CMP0169 OLD)\nendif()",
}
CCCL = {
    "name": "cuda13-cccl-include", "file": "CMakeLists.txt", "reason": "r2",
    "pattern": "find_package(CUDAToolkit REQUIRED)",
    "insert_after": "include_directories(SYSTEM \"${CUDAToolkit_INCLUDE_DIRS}/cccl\")  # gpufleet",
}
FA3 = {
    "name": "fa3-off-without-sm90a", "file": "CMakeLists.txt", "reason": "r3",
    "pattern": r"^(\s*)set\(SGL_KERNEL_ENABLE_FA3 ON\)$", "regex": True,
    "replacement": "    set(SGL_KERNEL_ENABLE_FA3 OFF)  # gpufleet: no 9.0a",
}


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "CMakeLists.txt").write_text(CMAKE)
    return tmp_path


def run_module(args, check=False, diff=False):
    if check:
        args = dict(args, _ansible_check_mode=True)
    if diff:
        args = dict(args, _ansible_diff=True)
    with patch_module_args(args):
        with pytest.raises(SystemExit) as exc:
            patch_rules.main()
    return exc.value.code


def result_of(capsys):
    return json.loads(capsys.readouterr().out)


def test_applies_all_three_kinds(tree):
    res, changed = patch_rules.run(str(tree), REF, [POLICY, CCCL, FA3])
    assert res["applied"] == ["cmake-policy-cmp0169-guard", "cuda13-cccl-include", "fa3-off-without-sm90a"]
    after = changed["CMakeLists.txt"][1]
    assert "if(POLICY CMP0169)\n  cmake_policy(SET CMP0169 OLD)\nendif()\n" in after
    assert "find_package(CUDAToolkit REQUIRED)\ninclude_directories(SYSTEM" in after
    assert "set(SGL_KERNEL_ENABLE_FA3 ON)" not in after and "FA3 OFF)  # gpufleet" in after


def test_insert_before(tree):
    rule = dict(CCCL, name="before", insert_after=None, insert_before="# before-policy")
    changed = patch_rules.run(str(tree), REF, [rule])[1]
    assert "\n# before-policy\nfind_package(CUDAToolkit REQUIRED)" in changed["CMakeLists.txt"][1]


def test_second_run_changes_nothing(tree, capsys):
    args = dict(path=str(tree), ref=REF, rules=[POLICY, CCCL, FA3])
    assert run_module(args) == 0
    first = result_of(capsys)
    assert first["changed"] is True and first["files"] == ["CMakeLists.txt"]
    content = (tree / "CMakeLists.txt").read_text()
    assert run_module(args) == 0
    second = result_of(capsys)
    assert second["changed"] is False
    assert "skipped" not in second  # a result key Ansible reads as the task's own status
    assert second["present"] == ["cmake-policy-cmp0169-guard", "cuda13-cccl-include", "fa3-off-without-sm90a"]
    assert (tree / "CMakeLists.txt").read_text() == content
    assert content.count("cmake_policy(SET CMP0169 OLD)") == 1


def test_check_mode_shows_diff_and_writes_nothing(tree, capsys):
    assert run_module(dict(path=str(tree), ref=REF, rules=[POLICY]), check=True, diff=True) == 0
    res = result_of(capsys)
    assert res["changed"] is True
    assert res["diff"][0]["before"] == CMAKE
    assert "if(POLICY CMP0169)" in res["diff"][0]["after"]
    assert (tree / "CMakeLists.txt").read_text() == CMAKE


def test_rule_that_no_longer_matches_fails_with_name_and_ref(tree, capsys):
    (tree / "CMakeLists.txt").write_text(CMAKE.replace("CMP0169", "CMP0170"))
    assert run_module(dict(path=str(tree), ref=REF, rules=[CCCL, POLICY])) == 1
    res = result_of(capsys)
    assert res["failed"] is True
    assert "patch rule 'cmake-policy-cmp0169-guard' no longer matches source ref " + REF in res["msg"]
    # nothing written when any rule fails, not even the rules before it
    assert "gpufleet" not in (tree / "CMakeLists.txt").read_text()


def test_missing_file_fails_with_name_and_ref(tree):
    with pytest.raises(patch_rules.RuleError, match="patch rule 'x' no longer matches source ref %s: file nope.txt" % REF):
        patch_rules.run(str(tree), REF, [dict(POLICY, name="x", file="nope.txt")])


def test_refs_select_the_rule(tree):
    res, changed = patch_rules.run(str(tree), REF, [dict(POLICY, refs=["v0.3.*"])])
    assert res["not_applicable"] == ["cmake-policy-cmp0169-guard"] and not changed
    res, changed = patch_rules.run(str(tree), "v0.3.9", [dict(POLICY, refs=["v0.3.*"])])
    assert res["applied"] == ["cmake-policy-cmp0169-guard"] and changed


def test_disabled_rule_is_skipped_even_if_it_would_fail(tree):
    res, changed = patch_rules.run(str(tree), REF, [dict(FA3, pattern="absent", regex=False, enabled=False)])
    assert res["not_applicable"] == ["fa3-off-without-sm90a"] and not changed


@pytest.mark.parametrize("rule,needle", [
    (dict(POLICY, insert_after="x"), "set exactly one of"),
    (dict(POLICY, replacement=None), "set exactly one of"),
    (dict(FA3, pattern="(unclosed"), "invalid regex"),
    (dict(POLICY, file="../etc/passwd"), "must be relative"),
    (dict(POLICY, file="/etc/passwd"), "must be relative"),
])
def test_bad_rules(tree, rule, needle):
    with pytest.raises(patch_rules.RuleError, match=needle):
        patch_rules.run(str(tree), REF, [rule])


def test_duplicate_names(tree):
    with pytest.raises(patch_rules.RuleError, match="duplicate names"):
        patch_rules.run(str(tree), REF, [POLICY, dict(CCCL, name=POLICY["name"])])


def test_missing_tree_fails(tmp_path, capsys):
    assert run_module(dict(path=str(tmp_path / "nope"), ref=REF, rules=[POLICY])) == 1
    assert "does not exist (ref %s)" % REF in result_of(capsys)["msg"]


def test_file_mode_is_kept(tree, capsys):
    (tree / "CMakeLists.txt").chmod(0o640)
    assert run_module(dict(path=str(tree), ref=REF, rules=[POLICY])) == 0
    assert (tree / "CMakeLists.txt").stat().st_mode & 0o777 == 0o640


# The role's own rules against the project's sgl-kernel-shaped fixture.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
ROLE = os.path.join(ROOT, "roles", "sgl_kernel")
FIXTURE_CMAKE = os.path.join(ROOT, "tests", "fixtures", "sgl_kernel_fixture", "CMakeLists.txt")


def role_rules(fa3_enabled):
    """The role's rules for a CUDA build of a folder of no known layout (the fixture's): `enabled`
    rendered as the role renders it, FA3 off for 12.0a, on for 9.0a."""
    with open(os.path.join(ROLE, "defaults", "main.yml")) as f:
        rules = yaml.safe_load(f)["sgl_kernel_patch_rules"]
    env = Environment()
    env.filters["bool"] = bool
    facts = {"sgl_kernel_cuda": True, "_sgl_kernel_arch_list": ["12.0a"] if fa3_enabled else ["9.0a"],
             "_sgl_kernel_layout": ""}
    for rule in rules:
        if "enabled" in rule:  # a template in the role: decided per build and per layout
            rule["enabled"] = env.from_string(rule["enabled"]).render(**facts).strip() == "True"
    return rules


@pytest.mark.parametrize("fa3_off", [True, False])
def test_role_rules_apply_to_the_fixture_once(tmp_path, fa3_off):
    shutil.copy(FIXTURE_CMAKE, str(tmp_path / "CMakeLists.txt"))
    rules = role_rules(fa3_off)
    res, changed = patch_rules.run(str(tmp_path), REF, rules)
    # cuda-std-cxx20 is for the upstream ref only
    assert "cuda-std-cxx20" in res["not_applicable"]
    expected = ["cmake-policy-cmp0169-guard", "cuda13-cccl-include", "cxx-standard-20", "gencode-exactly-the-arch-list"]
    if fa3_off:
        expected.insert(2, "fa3-off-without-sm90a")
    assert res["applied"] == expected
    (tmp_path / "CMakeLists.txt").write_text(changed["CMakeLists.txt"][1])
    res, changed = patch_rules.run(str(tmp_path), REF, rules)
    assert res["present"] == expected and not changed


def test_role_defaults_and_argument_specs_agree():
    with open(os.path.join(ROLE, "defaults", "main.yml")) as f:
        defaults = yaml.safe_load(f)
    with open(os.path.join(ROLE, "meta", "argument_specs.yml")) as f:
        options = yaml.safe_load(f)["argument_specs"]["main"]["options"]
    assert sorted(defaults) == sorted(options)
    for name, spec in options.items():
        if "default" in spec:
            assert spec["default"] == defaults[name], name
