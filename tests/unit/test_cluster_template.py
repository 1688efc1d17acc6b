# -*- coding: utf-8 -*-
"""The fleet inventory template (inventories/cluster): every variable it sets
is an input a role declares, and its pinned stack passes the roles' checks:
torch 2.14.1 from the release channel, flashinfer-python[cu13] 0.7.2 alone,
sgl-kernel from the published wheel where it fits."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os

import pytest
import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.flashinfer import flashinfer_main
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.torch_nightly import torch_nightly_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GROUP_VARS = os.path.join(ROOT, "inventories", "cluster", "group_vars")


def _load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle) or {}


def _options(role):
    options = {}
    for entry in _load(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"))["argument_specs"].values():
        options.update((entry or {}).get("options") or {})
    return options


def _role_values(role, template):
    """The role's defaults without the templated ones, the template's values over them."""
    defaults = _load(os.path.join(ROOT, "roles", role, "defaults", "main.yml"))
    values = dict((k, v) for k, v in defaults.items() if "{{" not in str(v))
    values.update((k, v) for k, v in template.items() if k.startswith(role + "_"))
    return values


TEMPLATE = _load(os.path.join(GROUP_VARS, "all.yml"))
# what uv_venv and torch_nightly set before flashinfer (check_vars' context)
CONTEXT = {"uv_venv_dir": "/home/deploy/ml-env-0123456789ab",
           "uv_venv_python": "/home/deploy/ml-env-0123456789ab/bin/python", "uv_venv_bin": "/opt/gpufleet/uv/bin/uv",
           "uv_venv_remote_wheelhouse_dir": None,
           "torch_nightly_constraints_file": "/home/deploy/ml-env-0123456789ab/gpufleet-constraints.txt"}


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(GROUP_VARS, "*.yml"))), ids=os.path.basename)
def test_every_variable_of_the_template_is_a_declared_input(path):
    declared = set()
    for spec in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")):
        declared.update(_options(os.path.basename(os.path.dirname(os.path.dirname(spec)))))
    unknown = sorted(name for name in _load(path) if name not in declared and not name.startswith("ansible_"))
    assert unknown == []


def test_the_stack_is_the_release_tested_together():
    assert TEMPLATE["torch_nightly_channel"] == "release" and "torch_nightly_date" not in TEMPLATE
    assert TEMPLATE["torch_nightly_versions"] == {"torch": "2.14.1", "torchvision": "0.29.1", "torchaudio": "2.11.0"}
    assert (TEMPLATE["flashinfer_version"], TEMPLATE["flashinfer_packages"], TEMPLATE["flashinfer_extras"]) == (
        "0.7.2", ["flashinfer-python"], ["cu13"])
    assert TEMPLATE["sgl_kernel_source"] == "auto"
    with open(os.path.join(GROUP_VARS, "all.yml"), encoding="utf-8") as handle:
        text = handle.read()
    assert text.count("# tested together") == 1
    # the sglang stage's input, as a comment
    assert '# sglang_version: "0.5.23"  # CHANGE:' in text and "sglang_version" not in TEMPLATE


@pytest.mark.parametrize("role", ["torch_nightly", "flashinfer", "sgl_kernel", "cuda_toolkit", "uv_venv"])
def test_the_templates_values_type_check(role):
    spec = _options(role)
    values = dict((k, v) for k, v in TEMPLATE.items() if k in spec)
    assert ArgumentSpecValidator(spec).validate(values, validate_role_argument_spec=True).error_messages == []


def test_the_templates_torch_and_flashinfer_pass_their_rules():
    torch = dict(_role_values("torch_nightly", TEMPLATE), torch_nightly_index_url="https://pypi.org/simple",
                 torch_nightly_wheelhouse="", **CONTEXT)
    assert torch_nightly_main(torch) == []
    flashinfer = dict(_role_values("flashinfer", TEMPLATE), flashinfer_wheelhouse="", **CONTEXT)
    assert flashinfer_main(flashinfer) == []
