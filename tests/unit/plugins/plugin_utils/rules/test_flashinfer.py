# -*- coding: utf-8 -*-
"""The flashinfer role's value rules (plugin_utils/rules/flashinfer.py): each bad value gives
its message, word for word as the preflight's Jinja asserts gave it, then "nothing was
changed."; the role's defaults pass; a value of the wrong type is left to the type check."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.flashinfer import (
    ENTRY_POINTS, flashinfer_main, flashinfer_pins)
from ansible_collections.gpufleet.inference.plugins.plugin_utils.value_rules import rule_errors
from ansible_collections.gpufleet.inference.tests.unit.plugins.plugin_utils.rules.role_files import ROOT, role_defaults

NOTHING = "; nothing was changed."


DEFAULTS = role_defaults("flashinfer")
# what uv_venv and torch_nightly set before (check_vars' context)
CONTEXT = {"uv_venv_dir": "/home/deploy/ml-env-0a1b2c3d", "uv_venv_python": "/home/deploy/ml-env-0a1b2c3d/bin/python",
           "uv_venv_bin": "/home/deploy/.local/bin/uv", "uv_venv_remote_wheelhouse_dir": None,
           "torch_nightly_constraints_file": "/home/deploy/ml-env-0a1b2c3d/gpufleet-constraints.txt"}
GOOD = dict(DEFAULTS, **CONTEXT)
# the three wheels of one nightly, as flashinfer's index publishes them
THREE = dict(GOOD, flashinfer_packages=["flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache"])
PINS = "{'flashinfer-python': '%s', 'flashinfer-cubin': '%s', 'flashinfer-jit-cache': '%s'}"


def test_the_defaults_pass():
    # the template-free defaults hold what the rules read
    assert {"flashinfer_version", "flashinfer_packages", "flashinfer_versions", "flashinfer_index_urls",
            "flashinfer_default_index_url", "flashinfer_guarded_packages",
            "flashinfer_jit_warm_timeout"} <= set(DEFAULTS)
    assert flashinfer_main(GOOD) == []
    for entry_point in ("main",):
        assert rule_errors("flashinfer", entry_point, GOOD) == []
    assert sorted(ENTRY_POINTS) == ["main"]


@pytest.mark.parametrize("changes, message", [
    # URLs and lists
    ({"flashinfer_index_urls": ["ftp://mirror.example/whl"]},
     "flashinfer_index_urls[0] must be a URL starting with one of http://, https://, file:// "
     "(got 'ftp://mirror.example/whl')"),
    ({"flashinfer_index_urls": ["https:///whl"]}, "flashinfer_index_urls[0] must be a URL with a host after https:// "
                                                  "(got 'https:///whl')"),
    ({"flashinfer_index_urls": "https://a.example/simple"},
     "flashinfer_index_urls must be a list (got string 'https://a.example/simple')"),
    ({"flashinfer_default_index_url": "pypi.org/simple"},
     "flashinfer_default_index_url must be a URL starting with one of http://, https://, file:// "
     "(got 'pypi.org/simple')"),
    ({"flashinfer_packages": "flashinfer-python,flashinfer-cubin"},
     "flashinfer_packages must be a list (got string 'flashinfer-python,flashinfer-cubin')"),
    ({"flashinfer_guarded_packages": ["torch", 1]},
     "flashinfer_guarded_packages must be a list of strings (got number 1)"),
    # uv_venv and torch_nightly ran first
    ({"uv_venv_dir": None}, "uv_venv_* / torch_nightly_constraints_file are not set: run gpufleet.inference.uv_venv "
                            "and torch_nightly before flashinfer"),
    ({"torch_nightly_constraints_file": None}, "uv_venv_* / torch_nightly_constraints_file are not set: run "
                                               "gpufleet.inference.uv_venv and torch_nightly before flashinfer"),
    # the pins
    ({"flashinfer_version": "latest"}, "flashinfer_version / flashinfer_versions must be versions like "
                                       "0.6.5.dev20260307 (got " + PINS % (("latest",) * 3) + ")"),
    ({"flashinfer_versions": {"flashinfer-cubin": "0.6.1.dev20260308"}},
     "flashinfer_version / flashinfer_versions must give the flashinfer packages one version (a mismatched jit-cache "
     "fails at import); got " + PINS % ("0.6.5.dev20260307", "0.6.1.dev20260308", "0.6.5.dev20260307")),
    ({"flashinfer_packages": []}, "flashinfer_version / flashinfer_versions must give the flashinfer packages one "
                                  "version (a mismatched jit-cache fails at import); got {}"),
    # the index URLs' schemes as uv takes them
    ({"flashinfer_index_urls": ["HTTPS://flashinfer.ai/whl", "https://flashinfer.ai/whl/nightly/"]},
     "flashinfer_index_urls must be http(s):// or file:// URLs (got HTTPS://flashinfer.ai/whl)"),
    ({"flashinfer_index_urls": ["file:/srv/wheels"]}, "flashinfer_index_urls must be http(s):// or file:// URLs "
                                                      "(got file:/srv/wheels)"),
    # the warm-up
    ({"flashinfer_jit_warm_timeout": 0}, "flashinfer_jit_warm_timeout must be a number of seconds > 0 (got 0)"),
    ({"flashinfer_jit_warm_timeout": -5}, "flashinfer_jit_warm_timeout must be a number of seconds > 0 (got -5)"),
    ({"flashinfer_jit_warm_timeout": True}, "flashinfer_jit_warm_timeout must be a number of seconds > 0 (got True)"),
    # a string the dict type would convert
    ({"flashinfer_jit_environment": "CUDA_HOME=/usr/local/cuda"},
     "flashinfer_jit_environment must be a dict of environment variables (got str)"),
    # the prebuilt modules
    ({"flashinfer_aot_modules": ["fused_moe_90", "fused_moe_91"], "flashinfer_aot_arch_list": ["9.0a"]},
     "flashinfer_aot_modules: expected flashinfer JIT module names from fp4_gemm_cutlass, fp4_gemm_cutlass_sm103, "
     "fp4_gemm_cutlass_sm120, fused_moe_100, fused_moe_103, fused_moe_120, fused_moe_89, fused_moe_90, norm, "
     "sampling, silu_and_mul, topk, found 'fused_moe_91'"),
    ({"flashinfer_aot_modules": ["norm", "norm"], "flashinfer_aot_arch_list": ["9.0a"]},
     "flashinfer_aot_modules: expected each module once, found norm, norm"),
    ({"flashinfer_aot_modules": ["fused_moe_90"], "flashinfer_aot_arch_list": []},
     "flashinfer_aot_arch_list: expected a non-empty list of CUDA architectures such as 9.0a or 12.0f, found []"),
    ({"flashinfer_aot_modules": ["fused_moe_90"], "flashinfer_aot_arch_list": ["sm_90a"]},
     "flashinfer_aot_arch_list: expected CUDA architectures as major.minor with an optional a or f "
     "(9.0a, 10.0a, 12.0f), found sm_90a"),
    ({"flashinfer_aot_build_timeout": 0}, "flashinfer_aot_build_timeout must be a number of seconds > 0 (got 0)"),
    # the wheelhouse
    ({"flashinfer_wheelhouse": "/srv/wheelhouse"}, "flashinfer_wheelhouse must be '' unless gpufleet.inference.uv_venv "
                                                   "pushed the wheelhouse (uv_venv_remote_wheelhouse_dir)"),
])
def test_each_rule_names_the_variable_and_the_value(changes, message):
    assert flashinfer_main(dict(THREE, **changes)) == [message + NOTHING]


@pytest.mark.parametrize("changes", [
    # the wrong type: the type check reports it, not a rule
    {"flashinfer_jit_warm_timeout": "abc"}, {"flashinfer_jit_warm_timeout": 2.5}, {"flashinfer_jit_warm_timeout": None},
    {"flashinfer_jit_environment": [1]}, {"flashinfer_jit_environment": None},
    # right
    {"flashinfer_jit_warm_timeout": "1800"}, {"flashinfer_index_urls": []},
    {"flashinfer_versions": {"flashinfer-jit-cache": "0.6.5.dev20260307+cu130"}},
    {"flashinfer_default_index_url": "https://user:token@pypi.example/simple"},
    {"flashinfer_wheelhouse": "/srv/wheelhouse", "uv_venv_remote_wheelhouse_dir": "/home/deploy/.cache/gpufleet/wh"},
    {"uv_venv_bin": ""},
    # no module: the arch list is not read (a host without a GPU has none)
    {"flashinfer_aot_modules": [], "flashinfer_aot_arch_list": []},
    {"flashinfer_aot_modules": ["fused_moe_90", "norm"], "flashinfer_aot_arch_list": ["9.0a", "12.0f"]},
    {"flashinfer_aot_modules": "fused_moe_90"},
])
def test_a_value_of_another_type_or_a_good_one_passes(changes):
    assert flashinfer_main(dict(GOOD, **changes)) == []
    assert flashinfer_main(dict(THREE, **changes)) == []


def test_every_message_in_the_order_of_the_old_tasks_and_nothing_changed_once():
    assert flashinfer_main(dict(THREE, flashinfer_default_index_url="pypi.org/simple", uv_venv_bin=None,
                                flashinfer_version="latest", flashinfer_jit_warm_timeout=0)) == [
        "flashinfer_default_index_url must be a URL starting with one of http://, https://, file:// "
        "(got 'pypi.org/simple')",
        "uv_venv_* / torch_nightly_constraints_file are not set: run gpufleet.inference.uv_venv and torch_nightly "
        "before flashinfer",
        "flashinfer_version / flashinfer_versions must be versions like 0.6.5.dev20260307 (got "
        + PINS % (("latest",) * 3) + ")",
        "flashinfer_jit_warm_timeout must be a number of seconds > 0 (got 0)" + NOTHING]


def _preflight_pins(values):
    """flashinfer_pins as the preflight's set_fact renders it."""
    with open(os.path.join(ROOT, "roles", "flashinfer", "tasks", "preflight.yml"), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    expression = [t for t in tasks if t["name"] == "Preflight | Compute the flashinfer pins"][0][
        "ansible.builtin.set_fact"]["flashinfer_pins"]
    return Templar(loader=DataLoader(), variables=values).template(trust_as_template(expression))


@pytest.mark.parametrize("changes", [
    {}, {"flashinfer_versions": {"flashinfer-jit-cache": "0.6.5.dev20260307+cu130", "other": "1.0"}},
    {"flashinfer_packages": ["flashinfer-python", "flashinfer-python"]}, {"flashinfer_packages": []},
])
def test_the_rules_judge_the_pins_the_install_reads(changes):
    values = dict(GOOD, **changes)
    pins = flashinfer_pins(values)
    assert pins == _preflight_pins(values) and list(pins) == list(_preflight_pins(values))


# ---------------------------------------------------------------- flashinfer-python alone, with its extras

def test_the_default_is_flashinfer_python_alone_without_extras():
    assert DEFAULTS["flashinfer_packages"] == ["flashinfer-python"] and DEFAULTS["flashinfer_extras"] == []
    assert flashinfer_pins(GOOD) == {"flashinfer-python": "0.6.5.dev20260307"}


# the inventory template's flashinfer: sglang's flashinfer_python[cu13]==0.7.2 from PyPI
RELEASE = dict(GOOD, flashinfer_version="0.7.2", flashinfer_extras=["cu13"], flashinfer_index_urls=[])


@pytest.mark.parametrize("changes", [
    {}, {"flashinfer_extras": ["cu13", "b12x"]}, {"flashinfer_extras": []},
    {"flashinfer_packages": ["flashinfer_python"]}, {"flashinfer_packages": ["FlashInfer-Python"]},
    {"flashinfer_extras": None},  # the type check's
])
def test_extras_pass(changes):
    assert flashinfer_main(dict(RELEASE, **changes)) == []


@pytest.mark.parametrize("changes, message", [
    ({"flashinfer_extras": "cu13"}, "flashinfer_extras must be a list (got string 'cu13')"),
    ({"flashinfer_extras": ["cu13", 13]}, "flashinfer_extras must be a list of strings (got number 13)"),
    ({"flashinfer_extras": ["[cu13]"]}, "flashinfer_extras must be extra names of flashinfer-python (letters, "
                                        "digits and . _ - inside, as cu13; got [cu13])"),
    ({"flashinfer_extras": ["cu13,b12x", "-x"]}, "flashinfer_extras must be extra names of flashinfer-python "
                                                 "(letters, digits and . _ - inside, as cu13; got cu13,b12x, -x)"),
    ({"flashinfer_packages": ["flashinfer-cubin"]}, "flashinfer_extras must be [] unless flashinfer_packages lists "
                                                    "flashinfer-python, whose extras they are (got cu13)"),
])
def test_each_bad_extra_gives_its_message(changes, message):
    assert flashinfer_main(dict(RELEASE, **changes)) == [message + NOTHING]


def _preflight_args(values):
    """The preflight's uv arguments, as its set_fact renders them."""
    with open(os.path.join(ROOT, "roles", "flashinfer", "tasks", "preflight.yml"), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)
    task = [t for t in tasks if t["name"] == "Preflight | Build the uv arguments"][0]
    # the templated default as it renders for a role used on its own
    values = dict(values, flashinfer_pins=flashinfer_pins(values), flashinfer_wheelhouse="")
    templar = Templar(loader=DataLoader(), variables=values)
    for name in ("_extras", "_prerelease"):
        values[name] = templar.template(trust_as_template(task["vars"][name]))
    return Templar(loader=DataLoader(), variables=values).template(
        trust_as_template(task["ansible.builtin.set_fact"]["_flashinfer_uv_args"]))


def _preflight_requirements(values):
    return [arg for arg in _preflight_args(values) if "==" in arg]


@pytest.mark.parametrize("changes, requirements", [
    ({}, ["flashinfer-python[cu13]==0.7.2"]),
    ({"flashinfer_extras": ["cu13", "b12x"]}, ["flashinfer-python[cu13,b12x]==0.7.2"]),
    ({"flashinfer_extras": []}, ["flashinfer-python==0.7.2"]),
    ({"flashinfer_packages": ["flashinfer_python"]}, ["flashinfer_python[cu13]==0.7.2"]),
    # the extras go on flashinfer-python only
    ({"flashinfer_packages": ["flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache"],
      "flashinfer_versions": {"flashinfer-jit-cache": "0.7.2+cu130"}},
     ["flashinfer-cubin==0.7.2", "flashinfer-jit-cache==0.7.2+cu130", "flashinfer-python[cu13]==0.7.2"]),
])
def test_the_install_requires_flashinfer_python_with_its_extras(changes, requirements):
    assert _preflight_requirements(dict(RELEASE, **changes)) == requirements


@pytest.mark.parametrize("values, prerelease", [
    (RELEASE, False),
    (dict(RELEASE, flashinfer_versions={"flashinfer-python": "0.7.2.post1"}), False),
    (dict(RELEASE, flashinfer_packages=["flashinfer-python", "flashinfer-jit-cache"],
          flashinfer_versions={"flashinfer-jit-cache": "0.7.2+cu130"}), False),
    (dict(RELEASE, flashinfer_version="0.7.2rc6"), True),
    (dict(GOOD, flashinfer_wheelhouse=""), True),  # the nightly default
    (dict(THREE, flashinfer_versions={"flashinfer-jit-cache": "0.6.5.dev20260307+cu130"}), True),
])
def test_pre_releases_are_allowed_where_a_pin_is_one(values, prerelease):
    args = _preflight_args(values)
    assert args[:4] == ["--python", CONTEXT["uv_venv_python"],
                        "--constraint", CONTEXT["torch_nightly_constraints_file"]]
    assert (args[4:6] == ["--prerelease", "allow"]) is prerelease and args.count("--prerelease") == int(prerelease)
