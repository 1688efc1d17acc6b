# -*- coding: utf-8 -*-
"""The sgl_kernel role's value rules (plugin_utils/rules/sgl_kernel.py): each bad value gives
its message, word for word as the preflight's Jinja asserts gave it, then "nothing was
changed."; the role's defaults pass; a value of the wrong type (sgl_kernel_source's choices
included) is left to the type check."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.gpufleet.inference.plugins.module_utils.cuda_arch import arch_target_errors
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.sgl_kernel import (
    ENTRY_POINTS, arch_entries, sgl_kernel_main)
from ansible_collections.gpufleet.inference.plugins.plugin_utils.value_rules import rule_errors
from ansible_collections.gpufleet.inference.tests.unit.plugins.plugin_utils.rules.role_files import ROOT, role_defaults

NOTHING = "; nothing was changed."


DEFAULTS = role_defaults("sgl_kernel")
# the arch list's default comes from gpu_facts (templated): an H200's; the inventory's groups (check_vars' context)
GOOD = dict(DEFAULTS, sgl_kernel_arch_list=["9.0a"], groups=["all", "ungrouped", "h200", "rtx_pro_6000"])
ARCH_FORM = "sgl_kernel_arch_list entries must be MAJOR.MINOR with an optional a or f suffix and +PTX, like 9.0a, " \
            "12.0a or 8.9 (got %s)"
PATCH_RULE = {"name": "bad-rule", "file": "CMakeLists.txt", "reason": "bad input test", "pattern": "project(",
              "replacement": "project("}


def test_the_defaults_pass():
    # the template-free defaults hold what the rules read, the reference patch rules among them
    assert {"sgl_kernel_source", "sgl_kernel_repo", "sgl_kernel_ref", "sgl_kernel_subdir", "sgl_kernel_gb_per_job",
            "sgl_kernel_builders_group", "sgl_kernel_cmake_args"} <= set(DEFAULTS)
    assert len(DEFAULTS["sgl_kernel_patch_rules"]) >= 5
    assert sgl_kernel_main(GOOD) == []
    for entry_point in ("main",):
        assert rule_errors("sgl_kernel", entry_point, GOOD) == []
    assert sorted(ENTRY_POINTS) == ["main"]


@pytest.mark.parametrize("changes, messages", [
    # URLs and lists, whatever the source
    ({"sgl_kernel_repo": "github.com/sgl-project/sglang"},
     ["sgl_kernel_repo must be a URL starting with one of https://, http://, ssh://, git://, file:// "
      "(got 'github.com/sgl-project/sglang')"]),
    ({"sgl_kernel_archive_url": "https:///sglang.tar.gz"},
     ["sgl_kernel_archive_url must be a URL with a host after https:// (got 'https:///sglang.tar.gz')"]),
    ({"sgl_kernel_archive_url": "https://mirror:s3cret@files.example/sglang.tar.gz"},
     ["sgl_kernel_archive_url must not carry credentials (user:password@): it is written where others can read it "
      "(got 'https://***@files.example/sglang.tar.gz')"]),
    ({"sgl_kernel_cmake_args": "-DX=1"}, ["sgl_kernel_cmake_args must be a list (got string '-DX=1')"]),
    ({"sgl_kernel_pip_args": ["--no-index", 1]}, ["sgl_kernel_pip_args must be a list of strings (got number 1)"]),
    # what each source needs
    ({"sgl_kernel_ref": ""}, ["sgl_kernel_repo and sgl_kernel_ref must be set when sgl_kernel_source is git"]),
    ({"sgl_kernel_source": "archive"},
     ["sgl_kernel_archive_url must be set when sgl_kernel_source is archive",
      "sgl_kernel_archive_sha256 must be 64 hex digits when sgl_kernel_source is archive (got '')"]),
    ({"sgl_kernel_source": "archive", "sgl_kernel_archive_url": "https://files.example/sglang.tar.gz",
      "sgl_kernel_archive_sha256": "abc"},
     ["sgl_kernel_archive_sha256 must be 64 hex digits when sgl_kernel_source is archive (got 'abc')"]),
    ({"sgl_kernel_source": "local"},
     ["sgl_kernel_local_dir and sgl_kernel_ref (a label for the key) must be set when sgl_kernel_source is local"]),
    ({"sgl_kernel_subdir": "/srv/sglang/sgl-kernel"},
     ["sgl_kernel_subdir must be a relative path without '..' (got '/srv/sglang/sgl-kernel')"]),
    ({"sgl_kernel_subdir": "python/../sgl-kernel"},
     ["sgl_kernel_subdir must be a relative path without '..' (got 'python/../sgl-kernel')"]),
    # the arch list
    ({"sgl_kernel_arch_list": []},
     ["sgl_kernel_arch_list must name at least one architecture like 9.0a or 12.0a when sgl_kernel_cuda is true (got "
      "none: the default comes from gpu_facts, so a host without GPU needs it set or sgl_kernel_cuda false)"]),
    ({"sgl_kernel_arch_list": ["12.0b"]}, [ARCH_FORM % "12.0b"]),
    # a string: split at ; , and spaces, deduplicated, sorted
    ({"sgl_kernel_arch_list": "9.0a; 12.0b,sm_90 , 9.0a"}, [ARCH_FORM % "12.0b, sm_90"]),
    # a malformed entry is refused for a CPU build too
    ({"sgl_kernel_cuda": False, "sgl_kernel_arch_list": ["12.0b", 9.0]}, [ARCH_FORM % "12.0b"]),
    ({"sgl_kernel_arch_list": ["9.0a", "9.1a"]}, arch_target_errors(["9.1a"])),
    ({"sgl_kernel_arch_list": ["9.1a+PTX", "12.0a"]}, arch_target_errors(["9.1a"])),
    # the build's sizes and times
    ({"sgl_kernel_gb_per_job": 0}, ["sgl_kernel_gb_per_job must be a number of GB > 0 (got 0)"]),
    ({"sgl_kernel_reserve_gb": -1}, ["sgl_kernel_reserve_gb must be a number of GB >= 0 (got -1)"]),
    ({"sgl_kernel_compile_threads": 0}, ["sgl_kernel_compile_threads must be an integer >= 1 (got 0)"]),
    ({"sgl_kernel_max_jobs": -1},
     ["sgl_kernel_max_jobs must be an integer >= 0, 0 sizing the jobs from memory and cores (got -1)"]),
    ({"sgl_kernel_build_timeout": 0}, ["sgl_kernel_build_timeout must be a number of seconds > 0 (got 0)"]),
    ({"sgl_kernel_poll_interval": "0"}, ["sgl_kernel_poll_interval must be a number of seconds > 0 (got 0)"]),
    ({"sgl_kernel_abi_check_timeout": -300}, ["sgl_kernel_abi_check_timeout must be a number of seconds > 0 (got -300)"]),
    ({"sgl_kernel_log_tail_lines": 0}, ["sgl_kernel_log_tail_lines must be an integer > 0 (got 0)"]),
    ({"sgl_kernel_build_env": "MAX_JOBS=4"},
     ["sgl_kernel_build_env must be a dict of environment variables (got str)"]),
    # the builders' group: one of the inventory's
    ({"sgl_kernel_builders_group": "gpu_builders"},
     ["sgl_kernel_builders_group must name a group of the inventory, one of h200, rtx_pro_6000 (got 'gpu_builders')"]),
    ({"sgl_kernel_builders_group": "gpu_builders", "groups": {"all": [], "ungrouped": ["localhost"]}},
     ["sgl_kernel_builders_group must name a group of the inventory, one of none (got 'gpu_builders')"]),
    # the patch rules
    ({"sgl_kernel_patch_rules_extra": [dict(PATCH_RULE, pattern="^(project[", regex=True)]},
     ["sgl_kernel_patch_rules_extra[0] (bad-rule).pattern must be a valid Python regular expression when regex is "
      "true (got '^(project[': unterminated character set at position 9)"]),
    ({"sgl_kernel_patch_rules_extra": [dict(PATCH_RULE, insert_after="x")]},
     ["sgl_kernel_patch_rules_extra[0] (bad-rule) must have exactly one of replacement, insert_after, insert_before "
      "(got replacement, insert_after)"]),
    ({"sgl_kernel_patch_rules": [dict(PATCH_RULE, file="../CMakeLists.txt")]},
     ["sgl_kernel_patch_rules[0] (bad-rule).file must be a path relative to the source folder, without .. "
      "(got '../CMakeLists.txt')"]),
])
def test_each_rule_names_the_variable_and_the_value(changes, messages):
    assert sgl_kernel_main(dict(GOOD, **changes)) == messages[:-1] + [messages[-1] + NOTHING]


@pytest.mark.parametrize("changes", [
    # the wrong type, or a value the choices refuse: the type check reports it, not a rule
    {"sgl_kernel_source": "svn"}, {"sgl_kernel_gb_per_job": "lots"}, {"sgl_kernel_compile_threads": "x"},
    {"sgl_kernel_build_timeout": 2.5}, {"sgl_kernel_poll_interval": None}, {"sgl_kernel_build_env": [1]},
    {"sgl_kernel_patch_rules": "notalist"},
    # right
    {"sgl_kernel_repo": "git@github.com:sgl-project/sglang.git"}, {"sgl_kernel_repo": "/srv/git/sglang"},
    {"sgl_kernel_repo": "ssh://git@git.example/sglang.git"},
    {"sgl_kernel_source": "archive", "sgl_kernel_archive_url": "file:///srv/sglang.tar.gz",
     "sgl_kernel_archive_sha256": "A" * 64},
    {"sgl_kernel_source": "local", "sgl_kernel_local_dir": "/srv/fixtures", "sgl_kernel_subdir": "sgl_kernel_fixture"},
    {"sgl_kernel_arch_list": "12.0a;9.0a+PTX"}, {"sgl_kernel_arch_list": ["10.0f", "8.9"]},
    # a CPU build: no arch list needed, and none checked against the targets
    {"sgl_kernel_cuda": False, "sgl_kernel_arch_list": []},
    {"sgl_kernel_cuda": False, "sgl_kernel_arch_list": ["9.1a"]},
    {"sgl_kernel_compile_threads": "4"}, {"sgl_kernel_max_jobs": 0}, {"sgl_kernel_reserve_gb": 0},
    # the default group may be absent; another must be in the inventory
    {"sgl_kernel_builders_group": "sgl_kernel_builders", "groups": ["all", "ungrouped"]},
    {"sgl_kernel_builders_group": "h200"}, {"sgl_kernel_builders_group": "h200", "groups": {"all": [], "h200": []}},
])
def test_a_value_of_another_type_or_a_good_one_passes(changes):
    assert sgl_kernel_main(dict(GOOD, **changes)) == []


def test_every_group_of_rules_in_the_order_of_the_old_tasks_and_nothing_changed_once():
    assert sgl_kernel_main(dict(GOOD, sgl_kernel_cmake_args="-DX=1", sgl_kernel_subdir="/abs", sgl_kernel_max_jobs=-1,
                                sgl_kernel_patch_rules_extra=[dict(PATCH_RULE, insert_after="x")])) == [
        "sgl_kernel_cmake_args must be a list (got string '-DX=1')",
        "sgl_kernel_subdir must be a relative path without '..' (got '/abs')",
        "sgl_kernel_max_jobs must be an integer >= 0, 0 sizing the jobs from memory and cores (got -1)",
        "sgl_kernel_patch_rules_extra[0] (bad-rule) must have exactly one of replacement, insert_after, insert_before "
        "(got replacement, insert_after)" + NOTHING]


def _preflight_arch_list(arch_list):
    """_sgl_kernel_arch_list as the preflight's set_fact renders it."""
    with open(os.path.join(ROOT, "roles", "sgl_kernel", "tasks", "preflight.yml"), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    expression = [t for t in tasks if t["name"] == "Normalise the arch list"][0][
        "ansible.builtin.set_fact"]["_sgl_kernel_arch_list"]
    templar = Templar(loader=DataLoader(), variables={"sgl_kernel_arch_list": arch_list})
    return templar.template(trust_as_template(expression))


@pytest.mark.parametrize("arch_list", [
    [], ["9.0a"], "9.0a; 12.0A,12.0a , 8.9", ["12.0a", " 9.0a", "", 8.9, "10.0f+PTX"], "sm_90;;9.0a+PTX",
])
def test_the_rules_judge_the_arch_list_the_build_reads(arch_list):
    assert arch_entries(arch_list) == _preflight_arch_list(arch_list)
