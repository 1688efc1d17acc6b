"""plugin_utils.sglang_plan (filters uv_list_parse and sglang_plan_errors):
what uv's package list holds, and the sglang install's plan refused where it
would reinstall, replace or double a guarded package."""
import json

import pytest

from ansible_collections.gpufleet.inference.plugins.filter.sglang import FilterModule
from ansible_collections.gpufleet.inference.plugins.plugin_utils.nightly import uv_dry_run_changes
from ansible_collections.gpufleet.inference.plugins.plugin_utils.sglang_plan import sglang_plan_errors, uv_list_parse

GUARDED = ["torch", "torchvision", "torchaudio", "flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache",
           "sglang-kernel", "sgl-kernel"]
HELD = {"torch": "2.14.1", "torchaudio": "2.11.0", "flashinfer-python": "0.7.2", "sglang-kernel": "0.4.10"}


def plan(text):
    return uv_dry_run_changes("Resolved 60 packages in 1.2s\nWould download 40 packages\n" + text)


def test_the_list_gives_every_distribution_a_file_install_too():
    listed = json.dumps([{"name": "Flashinfer_Python", "version": "0.7.2"},
                         {"name": "sglang-kernel", "version": "0.4.10"},
                         {"name": "torch", "version": "2.14.1+cu130", "editable_project_location": None}])
    assert uv_list_parse(listed) == {"flashinfer-python": "0.7.2", "sglang-kernel": "0.4.10", "torch": "2.14.1+cu130"}
    assert uv_list_parse("") == {}
    assert FilterModule().filters()["uv_list_parse"] is uv_list_parse


def test_a_plan_that_only_adds_may_run():
    changes = plan(" + sglang==0.5.23\n + transformers==5.19.0\n + sglang-kernel==0.4.10\n")
    # the kernel is guarded but was not there (no kernel stage): sglang may bring it
    held = dict((name, version) for name, version in HELD.items() if name != "sglang-kernel")
    assert sglang_plan_errors(changes, held, GUARDED) == []
    assert sglang_plan_errors(plan("Would make no changes\n"), HELD, GUARDED) == []


def test_a_torch_package_the_torch_stage_does_not_pin_may_not_be_added():
    changes = plan(" + sglang==0.5.23\n + torchvision==0.29.2\n")
    assert sglang_plan_errors(changes, HELD, GUARDED) == [
        "torchvision 0.29.2 would be added, which the torch stage does not pin: add it to torch_nightly_packages with "
        "its version in torch_nightly_versions.torchvision"]


@pytest.mark.parametrize("text, message", [
    (" - sglang-kernel==0.4.10\n + sglang-kernel==0.4.10\n + sglang==0.5.23\n",
     "sglang-kernel 0.4.10 would be reinstalled (another build of the same version)"),
    (" - torch==2.14.1\n + torch==2.14.2\n + sglang==0.5.23\n", "torch 2.14.1 would become 2.14.2"),
    (" - flashinfer-python==0.7.2\n + sglang==0.5.23\n", "flashinfer-python 0.7.2 would be removed"),
])
def test_a_held_package_may_not_move(text, message):
    assert sglang_plan_errors(plan(text), HELD, GUARDED) == [message]


def test_the_kernel_under_its_other_name_is_refused_beside_the_held_one():
    held = dict(HELD, **{"sgl-kernel": "0.3.21"})
    del held["sglang-kernel"]
    errors = sglang_plan_errors(plan(" + sglang-kernel==0.4.10\n + sglang==0.5.23\n"), held, GUARDED)
    assert errors == ["sglang-kernel 0.4.10 would be installed beside sgl-kernel 0.3.21: one distribution under two "
                      "names (renamed at 0.4.0), both installing sgl_kernel, the second over the first's files"]
    assert FilterModule().filters()["sglang_plan_errors"] is sglang_plan_errors


def test_names_are_compared_in_one_spelling():
    assert sglang_plan_errors(plan(" - Flashinfer_Python==0.7.2\n"), {"flashinfer-python": "0.7.2"},
                              ["FLASHINFER_PYTHON"]) == ["flashinfer-python 0.7.2 would be removed"]
