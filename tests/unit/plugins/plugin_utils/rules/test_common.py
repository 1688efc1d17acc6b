# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.inference.plugins.filter.inputs import FilterModule
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.common import (
    expect_errors,
    list_errors,
    patch_rule_errors,
    tolerance_errors,
    url_errors,
)

GOOD_RULE = {"name": "cxx20", "file": "CMakeLists.txt", "reason": "torch needs C++20",
             "pattern": "set(CMAKE_CXX_STANDARD 17)", "replacement": "set(CMAKE_CXX_STANDARD 20)"}


@pytest.mark.parametrize("expect", [
    None,
    {},
    {"torch_version": "2.13.0+cpu", "python_version": "3.11", "device_count": 0, "imports": ["flashinfer"]},
    {"device_count": "8", "min_smoke_tflops": "1.5", "cxx11_abi": "yes", "compute_capability": "12.0",
     "device_name": "RTX PRO 6000|H200", "imports": "sgl_kernel", "min_driver_version": 590},
    {"device_count": None},
    {"kernels": ["sgl_kernel.rmsnorm", "torch.fp8_scaled_mm"], "consistent": True},
], ids=["none", "empty", "sandbox", "strings_the_module_converts", "unset_key", "kernels"])
def test_expect_accepted(expect):
    assert expect_errors(expect) == []


@pytest.mark.parametrize("expect, fragment", [
    ("many", "gpufleet_expect must be a dict of expectations with keys among allreduce_size_mib, compute_capability"),
    (["device_count"], "gpufleet_expect must be a dict"),
    ({"device_count": "many"}, "gpufleet_expect.device_count must be an integer >= 0 (got 'many')"),
    ({"device_count": -1}, "gpufleet_expect.device_count must be an integer >= 0 (got -1)"),
    ({"device_count": True}, "gpufleet_expect.device_count must be an integer >= 0"),
    ({"min_smoke_tflops": "fast"}, "gpufleet_expect.min_smoke_tflops must be a number"),
    ({"cxx11_abi": "maybe"}, "gpufleet_expect.cxx11_abi must be true or false"),
    ({"imports": [1, 2]}, "gpufleet_expect.imports must be a list of module names"),
    ({"torch_version": {"a": 1}}, "gpufleet_expect.torch_version must be a string"),
    ({"compute_capability": "sm_120"}, "gpufleet_expect.compute_capability must be MAJOR.MINOR"),
    ({"device_name": "H200("}, "gpufleet_expect.device_name must be a regular expression"),
    ({"devices": 8}, "gpufleet_expect keys must be among allreduce_size_mib, compute_capability, consistent, cuda_version"),
    ({"kernels": ["sgl_kernel.rmsnorm", "sgl_kernel.moe"]},
     "gpufleet_expect.kernels must be a list of kernel checks among torch.fp8_scaled_mm"),
    ({"kernels": "sgl_kernel.rmsnorm"}, "gpufleet_expect.kernels must be a list of kernel check names"),
    ({"consistent": "sure"}, "gpufleet_expect.consistent must be true or false"),
], ids=["string", "list", "count_word", "count_negative", "count_bool", "tflops_word", "abi_word",
        "imports_numbers", "version_dict", "capability_sm", "name_bad_regex", "unknown_key",
        "kernels_unknown", "kernels_not_list", "consistent_word"])
def test_expect_refused(expect, fragment):
    errors = expect_errors(expect)
    assert len(errors) == 1 and fragment in errors[0], errors


def test_unknown_kernel_is_named():
    assert "unknown: 'sgl_kernel.moe'" in expect_errors({"kernels": ["sgl_kernel.moe"]})[0]


@pytest.mark.parametrize("tolerances, fragment", [
    (None, None),
    ({}, None),
    ({"sgl_kernel.rmsnorm": 0.01, "torch.fp8_scaled_mm": "0.05"}, None),
    ([0.01], "gpufleet_kernel_tolerances must be a dict of kernel check name -> positive number"),
    ({"sgl_kernel.rmsnorm": 0}, "gpufleet_kernel_tolerances.sgl_kernel.rmsnorm must be a positive number (got 0)"),
    ({"sgl_kernel.rmsnorm": -1e-3}, "must be a positive number (got -0.001)"),
    ({"sgl_kernel.rmsnorm": "tight"}, "must be a positive number (got 'tight')"),
    ({"sgl_kernel.rmsnorm": True}, "must be a positive number (got True)"),
    ({"moe": 0.1}, "gpufleet_kernel_tolerances keys must be kernel checks among"),
], ids=["none", "empty", "good", "list", "zero", "negative", "word", "bool", "unknown"])
def test_kernel_tolerances(tolerances, fragment):
    errors = tolerance_errors(tolerances)
    if fragment is None:
        assert errors == []
    else:
        assert len(errors) == 1 and fragment in errors[0], errors


def test_expect_names_the_variable_given():
    assert expect_errors({"device_count": "x"}, "verify_expect")[0].startswith("verify_expect.device_count must be")


@pytest.mark.parametrize("rules", [None, [], [GOOD_RULE],
                                   [dict(GOOD_RULE, regex=True, pattern=r"^(\s*)set\(X ON\)$", enabled="false",
                                         refs=["v1.*"])]],
                         ids=["none", "empty", "literal", "regex_disabled"])
def test_patch_rules_accepted(rules):
    assert patch_rule_errors(rules) == []


@pytest.mark.parametrize("rules, fragment", [
    ("rule", "sgl_kernel_patch_rules must be a list of patch rules (got string 'rule')"),
    (["rule"], "sgl_kernel_patch_rules[0] must be a dict with name, file, reason, pattern"),
    ([dict(GOOD_RULE, regex=True, pattern="([")],
     "sgl_kernel_patch_rules[0] (cxx20).pattern must be a valid Python regular expression when regex is true (got '(['"),
    ([{k: v for k, v in GOOD_RULE.items() if k != "reason"}], "must have name, file, reason, pattern as non-empty strings "
                                                              "(missing or empty: reason)"),
    ([dict(GOOD_RULE, insert_after="x")], "must have exactly one of replacement, insert_after, insert_before "
                                          "(got replacement, insert_after)"),
    ([{k: v for k, v in GOOD_RULE.items() if k != "replacement"}], "must have exactly one of replacement, insert_after, "
                                                                   "insert_before (got none)"),
    ([dict(GOOD_RULE, enabled="sometimes")], "(cxx20).enabled must be true or false (got 'sometimes')"),
    ([dict(GOOD_RULE, regex=[1])], "(cxx20).regex must be true or false"),
    ([dict(GOOD_RULE, file="../CMakeLists.txt")], "(cxx20).file must be a path relative to the source folder"),
    ([dict(GOOD_RULE, refs="main")], "(cxx20).refs must be a list of ref globs (got 'main')"),
], ids=["not_a_list", "not_a_dict", "bad_regex", "missing_reason", "two_actions", "no_action", "enabled_word",
        "regex_list", "file_parent", "refs_string"])
def test_patch_rules_refused(rules, fragment):
    errors = patch_rule_errors(rules)
    assert len(errors) == 1 and fragment in errors[0], errors


def test_a_literal_pattern_is_not_compiled():
    assert patch_rule_errors([dict(GOOD_RULE, pattern="([")]) == []


def test_patch_rules_name_the_variable_given():
    errors = patch_rule_errors([GOOD_RULE, dict(GOOD_RULE, name="x", regex="yes", pattern="(")], "sgl_kernel_patch_rules_extra")
    assert errors and errors[0].startswith("sgl_kernel_patch_rules_extra[1] (x).pattern must be")


def test_registered_under_contract_names():
    filters = FilterModule().filters()
    assert filters["expect_errors"] is expect_errors
    assert filters["patch_rule_errors"] is patch_rule_errors


@pytest.mark.parametrize("expect, fragment", [
    ({"min_smoke_tflops": -1}, "gpufleet_expect.min_smoke_tflops must be a number >= 0 (got -1)"),
    ({"min_smoke_tflops": "nan"}, "gpufleet_expect.min_smoke_tflops must be a number >= 0"),
    ({"min_driver_version": "latest"}, "gpufleet_expect.min_driver_version must be a version of dot-separated numbers"),
    ({"min_cudnn_version": "9.x"}, "gpufleet_expect.min_cudnn_version must be a version of dot-separated numbers"),
], ids=["tflops_negative", "tflops_nan", "driver_word", "cudnn_x"])
def test_expect_thresholds_out_of_range(expect, fragment):
    errors = expect_errors(expect)
    assert len(errors) == 1 and errors[0].startswith(fragment), errors


@pytest.mark.parametrize("value, kwargs", [
    ("https://download.pytorch.org/whl/nightly/cu130", {}),
    ("https://user:token@index.example/simple", {}),
    ("file:///srv/wheels", {}),
    (["https://a.example/simple", "http://10.0.0.1:8080/simple"], {}),
    ("", {"empty": True}),
    ("ssh://git@git.example/sglang.git", {"schemes": ["ssh", "https"]}),
], ids=["https", "credentials_allowed", "file", "list", "empty_allowed", "ssh"])
def test_url_accepted(value, kwargs):
    assert url_errors(value, "v", **kwargs) == []


@pytest.mark.parametrize("value, kwargs, message", [
    ("download.pytorch.org/whl", {}, "v must be a URL starting with one of http://, https://, file:// (got 'download.pytorch.org/whl')"),
    ("https:///simple", {}, "v must be a URL with a host after https:// (got 'https:///simple')"),
    ("file://relative/dir", {}, "v must be a file:// URL with an absolute path, file:///like/this (got 'file://relative/dir')"),
    ("https://a.example/ simple", {}, "v must be a URL without spaces"),
    ("", {}, "v must be a URL starting with one of"),
    (["https://ok.example/", "ftp://old.example/"], {}, "v[1] must be a URL starting with one of"),
    (42, {}, "v must be a URL (http://, https://, file://) (got number 42)"),
    ("https://user:s3cret@repo.example/cuda/", {"credentials": False},
     "v must not carry credentials (user:password@): it is written where others can read it (got 'https://***@repo.example/cuda/')"),
], ids=["no_scheme", "no_host", "file_relative", "space", "empty", "list_item", "number", "credentials_refused"])
def test_url_refused(value, kwargs, message):
    errors = url_errors(value, "v", **kwargs)
    assert len(errors) == 1 and errors[0].startswith(message), errors
    # a credential never reaches the message
    assert all("s3cret" not in e for e in errors)


def test_list_errors_refuse_strings_and_wrong_items():
    assert list_errors({"a": ["x"], "b": [], "c": None}) == []
    assert list_errors({"pkgs": "flashinfer-python,flashinfer-cubin"}) == [
        "pkgs must be a list (got string 'flashinfer-python,flashinfer-cubin')"]
    assert list_errors({"args": ["-DX=1", 3]}) == ["args must be a list of strings (got number 3)"]
    assert list_errors({"wheels": [{"name": "x"}, "y"]}, "dict") == ["wheels must be a list of dicts (got string 'y')"]
    assert list_errors({"m": {"a": 1}}) == ["m must be a list (got dict {'a': 1})"]


def test_url_and_list_filters_are_registered():
    filters = FilterModule().filters()
    assert filters["url_errors"] is url_errors and filters["list_errors"] is list_errors
