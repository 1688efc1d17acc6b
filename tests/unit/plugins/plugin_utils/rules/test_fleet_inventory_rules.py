# -*- coding: utf-8 -*-
"""The fleet rules on what the hosts set themselves (plugin_utils/rules/fleet.py, values[INVENTORY] as
check_vars reads it): unknown variables, a host in two GPU models' groups, a nightly date its pins contradict,
a report directory the controller cannot make or write. Each said once, with the hosts it concerns."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.fleet import (
    INVENTORY, fleet_hosts, fleet_validate, model_group_errors, nightly_date_errors, not_checked_offline,
    report_dir_errors, unknown_variable_errors, words)
from ansible_collections.gpufleet.inference.tests.unit.plugins.plugin_utils.rules.test_fleet_verify_rules import FLEET


def host(names=(), groups=(), **values):
    """One host's entry: the names it sets (its values' names too) and its groups."""
    return {"names": sorted(set(names) | set(values)), "values": values, "groups": list(groups)}


def inventory(hosts, groups=None):
    return {INVENTORY: {"hosts": hosts, "groups": groups or {}}}


# inventories/cluster's two GPU model groups, under gpu_nodes
CLUSTER_GROUPS = {
    "all": {"sets": [], "ancestors": []},
    "gpu_nodes": {"sets": [], "ancestors": ["all"]},
    "rtx_pro_6000": {"sets": ["gpufleet_expect", "sgl_kernel_arch_list"], "ancestors": ["all", "gpu_nodes"]},
    "h200": {"sets": ["gpufleet_expect", "sgl_kernel_arch_list"], "ancestors": ["all", "gpu_nodes"]},
    "sgl_kernel_builders": {"sets": [], "ancestors": ["all"]},
}


@pytest.mark.parametrize("items, text", [
    ([], ""), (["a"], "a"), (["a", "b"], "a and b"), (["a", "b", "c"], "a, b and c"),
    (["h%d" % i for i in range(8)], "h0, h1, h2, h3, h4 and 3 more"),
])
def test_words(items, text):
    assert words(items) == text


def test_an_unknown_variable_is_named_once_with_its_hosts_and_the_nearest_input():
    values = inventory({"gpu01": host(["gpufleet_expext", "gpufleet_venv_link"]),
                        "gpu02": host(["gpufleet_expext"]), "h200-01": host(["gpufleet_expect"])})
    assert unknown_variable_errors(values) == [
        "gpufleet_expext is not an input of this collection; did you mean gpufleet_expect? (set for gpu01 and gpu02; "
        "a variable of your own goes into gpufleet_allowed_variables)"]


@pytest.mark.parametrize("name, near", [
    ("verify_tiemout", "verify_timeout"), ("torch_nightly_dates", "torch_nightly_date"),
    ("cuda_toolkit_versoin", "cuda_toolkit_version"), ("gpufleet_min_free_gb", "gpufleet_min_free_gib"),
    ("sgl_kernel_arch", "sgl_kernel_arch_list"),
])
def test_the_nearest_input_shares_the_prefix(name, near):
    assert "did you mean %s?" % near in unknown_variable_errors(inventory({"h": host([name])}))[0]


def test_a_name_near_no_input_says_where_the_inputs_are():
    assert unknown_variable_errors(inventory({"h": host(["gpufleet_sandbox_container"])})) == [
        "gpufleet_sandbox_container is not an input of this collection; none is near it (docs/inputs.md lists them) "
        "(set for h; a variable of your own goes into gpufleet_allowed_variables)"]


def test_inputs_internal_names_foreign_names_and_allowed_ones_pass():
    names = ["gpufleet_expect", "sgl_kernel_arch_list", "uv_venv_dir", "verify_result", "fleet_reach", "fleet_mode",
             "gpufleet_gpu", "ansible_user", "my_own", "_fleet_private", "gpufleet_mine"]
    assert unknown_variable_errors(inventory({"h": host(names, gpufleet_allowed_variables=["gpufleet_mine"])})) == []


def test_the_allow_list_is_a_hosts_own_and_must_be_a_list():
    values = inventory({"a": host(["gpufleet_mine"], gpufleet_allowed_variables=["gpufleet_mine"]),
                        "b": host(["gpufleet_mine"]),
                        "c": host(["gpufleet_mine"], gpufleet_allowed_variables="gpufleet_mine")})
    assert unknown_variable_errors(values) == [
        "gpufleet_allowed_variables must be a list (got string 'gpufleet_mine')",
        "gpufleet_mine is not an input of this collection; none is near it (docs/inputs.md lists them) "
        "(set for b and c; a variable of your own goes into gpufleet_allowed_variables)"]


def test_a_value_that_did_not_render_is_not_judged_by_the_default_it_does_not_have():
    # check_vars leaves out a value that does not render; the host's own validation names it
    values = inventory({"a": host(["gpufleet_mine", "gpufleet_allowed_variables", "gpufleet_report_dir"])})
    assert unknown_variable_errors(values) == [] and report_dir_errors(values) == []


def test_a_host_in_two_gpu_model_groups_is_refused_naming_them():
    values = inventory({"gpu01": host(groups=["all", "gpu_nodes", "h200", "rtx_pro_6000", "sgl_kernel_builders"]),
                        "gpu02": host(groups=["all", "gpu_nodes", "rtx_pro_6000"]),
                        "gpu03": host(groups=["all", "gpu_nodes", "h200", "rtx_pro_6000"])}, CLUSTER_GROUPS)
    assert model_group_errors(values) == [
        "gpu01 and gpu03 are in h200 and rtx_pro_6000, which both set gpufleet_expect and sgl_kernel_arch_list: "
        "a host takes one GPU model's group"]


def test_one_variable_of_two_groups_and_three_groups():
    groups = dict(CLUSTER_GROUPS, h100={"sets": ["gpufleet_expect"], "ancestors": ["all"]})
    values = inventory({"gpu01": host(groups=["all", "h100", "rtx_pro_6000"]),
                        "gpu02": host(groups=["all", "h100", "h200", "rtx_pro_6000"])}, groups)
    assert model_group_errors(values) == [
        "gpu01 is in h100 and rtx_pro_6000, which both set gpufleet_expect: a host takes one GPU model's group",
        "gpu02 is in h100, h200 and rtx_pro_6000, which all set gpufleet_expect: a host takes one GPU model's group",
        "gpu02 is in h200 and rtx_pro_6000, which both set sgl_kernel_arch_list: a host takes one GPU model's group"]


def test_a_child_group_overrides_its_parent_as_meant():
    groups = dict(CLUSTER_GROUPS, all={"sets": ["gpufleet_expect"], "ancestors": []},
                  gpu_nodes={"sets": ["gpufleet_expect", "sgl_kernel_arch_list"], "ancestors": ["all"]})
    values = inventory({"gpu01": host(groups=["all", "gpu_nodes", "rtx_pro_6000", "sgl_kernel_builders"])}, groups)
    assert model_group_errors(values) == []
    # without the groups (each host's own validation) there is nothing to judge
    assert model_group_errors(inventory({"gpu01": host(groups=["h200", "rtx_pro_6000"])})) == []


PINS = {"torch": "2.12.0.dev20260307+cu130", "torchvision": "0.27.0.dev20260307+cu130",
        "torchaudio": "2.12.0.dev20260307+cu130"}


def test_a_nightly_date_its_pins_contradict_is_refused():
    values = inventory({"gpu01": host(torch_nightly_date="20260310", torch_nightly_versions=PINS),
                        "gpu02": host(torch_nightly_date="20260310", torch_nightly_versions=PINS),
                        "h200-01": host(torch_nightly_date="20260307", torch_nightly_versions=PINS)})
    assert nightly_date_errors(values) == [
        "torch_nightly_date must be the date of the nightly versions pinned in torch_nightly_versions, which win over "
        "it (got '20260310'; pinned: torch 2.12.0.dev20260307+cu130, torchaudio 2.12.0.dev20260307+cu130, "
        "torchvision 0.27.0.dev20260307+cu130; on gpu01 and gpu02)"]


@pytest.mark.parametrize("given", [
    # the date left at the role's default: the full versions are the pins, as documented
    {"torch_nightly_versions": PINS},
    # release versions have no date to contradict
    {"torch_nightly_date": "20260310", "torch_nightly_versions": {"torch": "2.13.0+cpu"}},
    {"torch_nightly_date": "20260310", "torch_nightly_channel": "release", "torch_nightly_versions": PINS},
    # a malformed date or version: the torch_nightly role's rules name it
    {"torch_nightly_date": "2026-03-10", "torch_nightly_versions": PINS},
    {"torch_nightly_date": "20260310", "torch_nightly_versions": {"torch": "two.thirteen"}},
    {"torch_nightly_date": "20260310", "torch_nightly_versions": "torch"},
    {"torch_nightly_date": "20260310"},
], ids=["no-date", "release-versions", "release-channel", "date-malformed", "version-malformed", "versions-string",
        "no-versions"])
def test_no_contradiction(given):
    assert nightly_date_errors(inventory({"h": host(**given)})) == []


def test_a_report_dir_the_controller_can_make_or_write_passes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    values = inventory({"a": host(gpufleet_report_dir=str(tmp_path / "new" / "reports")), "b": host(),
                        "c": host(gpufleet_report_dir=str(tmp_path))})
    assert report_dir_errors(values) == []
    # nothing is left behind by the check
    assert sorted(os.listdir(str(tmp_path))) == []


def test_a_report_dir_the_controller_cannot_make_is_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("")
    values = inventory({"a": host(gpufleet_report_dir=str(tmp_path / "file" / "reports")),
                        "b": host(gpufleet_report_dir=str(tmp_path / "file" / "reports")),
                        "c": host(gpufleet_report_dir=5)})
    assert report_dir_errors(values) == [
        "gpufleet_report_dir must be a directory the controller can make and write (got '%s': %s is not a directory)"
        % (tmp_path / "file" / "reports", tmp_path / "file")]
    os.mkdir("reports", 0o500)
    if os.access("reports", os.W_OK):  # root writes anyway: the check tries for real, as the report would
        return
    assert report_dir_errors(inventory({"a": host()})) == [
        "gpufleet_report_dir must be a directory the controller can make and write (got '', that is %s: cannot make "
        "a directory in %s: Permission denied)" % (tmp_path / "reports", tmp_path / "reports")]


def test_proc_is_no_report_dir_even_for_root():
    assert report_dir_errors(inventory({"a": host(gpufleet_report_dir="/proc/gpufleet")})) == [
        "gpufleet_report_dir must be a directory the controller can make and write (got '/proc/gpufleet': cannot "
        "make a directory in /proc: No such file or directory)"]


HOSTS_INPUTS = {"gpufleet_hosts": "all", "gpufleet_serial": "100%", "gpufleet_max_fail_percentage": 100,
                "fleet_hosts_matched": ["gpu01"]}


def test_the_hosts_check_says_all_of_it_after_the_play_keywords(tmp_path):
    values = dict(HOSTS_INPUTS, gpufleet_serial=0, **inventory(
        {"gpu01": host(["gpufleet_expext"], ["h200", "rtx_pro_6000"], torch_nightly_date="20260310",
                       torch_nightly_versions={"torch": PINS["torch"]}, gpufleet_report_dir="/proc/x")},
        CLUSTER_GROUPS))
    assert [e.split(" ", 1)[0] for e in fleet_hosts(values)] == [
        "gpufleet_serial", "gpufleet_expext", "gpu01", "torch_nightly_date", "gpufleet_report_dir"]
    # without what the hosts set (a rule called with the variables alone) the rules before are all there is
    assert fleet_hosts(HOSTS_INPUTS) == []


def test_each_hosts_validation_says_what_it_set_itself():
    values = dict(FLEET, **inventory({"gpu01": host(["gpufleet_expext"], torch_nightly_date="20260310",
                                                    torch_nightly_versions={"torch": PINS["torch"]})}))
    assert [e.split(" ", 1)[0] for e in fleet_validate(values)] == ["gpufleet_expext", "torch_nightly_date"]
    assert fleet_validate(FLEET) == []


def test_what_only_the_host_can_tell_is_said_by_the_offline_check_alone():
    model = {"verify_model": "/models/m", "verify_model_config": {}}
    values = inventory({"gpu01": dict(host(), inputs=model), "gpu02": dict(host(), inputs=model),
                        "gpu03": dict(host(), inputs=dict(model, verify_model_config={"hidden_size": 1}))})
    assert not_checked_offline(dict(values, fleet_offline=True)) == [
        "gpufleet_model: not checked offline: the config.json at /models/m on gpu01 and gpu02 "
        "(deploy's preflight reads it before the install)"]
    # a run's hosts check leaves it to the hosts' own steps, unsaid
    assert not_checked_offline(values) == []
