# -*- coding: utf-8 -*-
"""Action plugin sglang_requirements: the pinned sglang's requirements (read
from a wheel of the hand-written fixture METADATA, in a wheelhouse) against
the stack's pins, on the controller - the stack that meets them passes, the
inventory template's old pins fail with each contradiction named, the extras
asked for must be the release's."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar

from ansible_collections.gpufleet.inference.plugins.action.sglang_requirements import WAY_OUT, ActionModule
from ansible_collections.gpufleet.inference.tests.unit.plugins.plugin_utils.test_sglang_pins import make_wheel

# the stack sglang 0.5.23 requires, as the roles hand it over
STACK = {"torch": {"torch": "2.14.1+cu130", "torchvision": "0.29.1", "torchaudio": "2.11.0"},
         "flashinfer_version": "0.7.2", "flashinfer_packages": ["flashinfer-python"],
         "kernel_package": "sglang-kernel", "kernel_version": "0.4.10"}


def judge(args):
    task = MagicMock()
    task.args = dict(args)
    task.action = "gpufleet.inference.sglang_requirements"
    task.async_val = 0
    task.check_mode = False
    task.diff = False
    loader = DataLoader()
    act = ActionModule(task, MagicMock(), PlayContext(), loader, Templar(loader=loader), None)
    return act.run(task_vars={})


@pytest.fixture(name="wheelhouse")
def wheelhouse_fixture(tmp_path):
    make_wheel(tmp_path, "0.5.23")
    return {"version": "0.5.23", "wheelhouse": str(tmp_path), "cache_dir": str(tmp_path / "cache"),
            "pythons": ["3.12"]}


def test_the_stack_sglang_requires_passes_and_says_what_was_compared(wheelhouse):
    res = judge(dict(wheelhouse, **STACK))
    assert not res.get("failed") and res["changed"] is False and res["problems"] == []
    assert res["sglang"] == {"name": "sglang", "version": "0.5.23"} and res["source"] == "wheelhouse"
    assert res["requirements"] == {"flashinfer-python": ["flashinfer_python[cu13]==0.7.2"],
                                   "sglang-kernel": ["sglang-kernel==0.4.10"], "torch": ["torch==2.14.1"],
                                   "torchaudio": ["torchaudio==2.11.0"], "torchvision": ["torchvision"]}
    assert res["msg"].startswith("sglang 0.5.23 (sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl, from the "
                                 "wheelhouse) meets the stack's pins: flashinfer-python 0.7.2, sglang-kernel 0.4.10, "
                                 "torch 2.14.1+cu130")


def test_each_contradiction_is_named_with_both_sides_and_nothing_changed(wheelhouse):
    res = judge(dict(wheelhouse, torch={"torch": "2.13.0+cpu", "torchvision": "0.29.1", "torchaudio": "2.11.0"},
                     flashinfer_version="0.7.2.post1",
                     flashinfer_packages=["flashinfer-python"], kernel_package="sgl-kernel", kernel_version="0.3.21"))
    assert res["failed"] is True
    assert len(res["problems"]) == 3
    assert res["problems"][0] == ("sglang 0.5.23 requires torch==2.14.1; torch_nightly_versions.torch is 2.13.0+cpu: "
                                  "set it to 2.14.1 (the release index's CUDA 13.0 build), or pin an sglang whose "
                                  "requirements it meets")
    assert "flashinfer_version is 0.7.2.post1 (PEP 440 == 0.7.2 excludes its post releases)" in res["problems"][1]
    assert "set sgl_kernel_wheel_package to sglang-kernel and sgl_kernel_wheel_version to 0.4.10" in res["problems"][2]
    assert res["msg"] == "; ".join(res["problems"]) + "; " + WAY_OUT


def test_per_package_flashinfer_versions_name_their_variable(wheelhouse):
    res = judge(dict(wheelhouse, **dict(STACK, flashinfer_versions={"flashinfer-python": "0.7.1"})))
    assert [p.split(": set")[0] for p in res["problems"]] == [
        "sglang 0.5.23 requires flashinfer_python[cu13]==0.7.2; flashinfer_versions.flashinfer-python is 0.7.1"]


def test_stages_that_do_not_run_pin_nothing(wheelhouse):
    res = judge(dict(wheelhouse, torch=STACK["torch"]))
    assert res["problems"] == [] and res["pins"] == STACK["torch"]


def test_a_torch_package_sglang_requires_must_be_the_torch_stages(wheelhouse):
    res = judge(dict(wheelhouse, **dict(STACK, torch={"torch": "2.14.1", "torchaudio": "2.11.0"})))
    assert res["problems"] == [
        "sglang 0.5.23 requires torchvision; the torch stage pins no torchvision (torch_nightly_packages): add it, "
        "with the torchvision built for the torch you pin in torch_nightly_versions.torchvision, so that it is "
        "installed and kept with torch, not added by sglang's install"]
    # without the torch stage's pins (the role on its own) nothing is said of them
    assert judge(dict(wheelhouse, **dict(STACK, torch={})))["problems"] == []


def test_a_python_the_release_does_not_take_is_refused(wheelhouse):
    res = judge(dict(wheelhouse, pythons=["3.10"], **STACK))
    assert res["problems"][0].startswith("sglang 0.5.23 requires Python >=3.11; uv_venv_python_version is 3.10")


def test_the_extras_must_be_the_releases(wheelhouse):
    assert judge(dict(wheelhouse, extras=["test", "DEV"], **STACK))["problems"] == []
    res = judge(dict(wheelhouse, extras=["tracing"], **STACK))
    assert res["problems"] == ["sglang_extras: sglang 0.5.23 declares no extra tracing (its extras: dev, test)"]


def test_metadata_that_cannot_be_had_fails_before_any_change(tmp_path):
    with pytest.raises(AnsibleActionFail, match="sglang 0.5.23: its requirements could not be read on the controller: "
                       "sglang_wheelhouse %s holds no wheel of sglang 0.5.23" % tmp_path):
        judge({"version": "0.5.23", "wheelhouse": str(tmp_path), "cache_dir": str(tmp_path / "cache")})
