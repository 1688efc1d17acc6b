# -*- coding: utf-8 -*-
"""The torch_nightly role's value rules (plugin_utils/rules/torch_nightly.py): each bad value gives the
message the role's preflight asserts gave, the defaults pass once uv_venv ran, a value of the wrong type
is left to the type check."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.torch_nightly import (
    nightly_date_valid, torch_nightly_main)
from ansible_collections.gpufleet.inference.plugins.plugin_utils.value_rules import rule_errors

ROLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "..", "roles", "torch_nightly")


def _load(*parts):
    with open(os.path.join(ROLE, *parts), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


DEFAULTS = {k: v for k, v in _load("defaults", "main.yml").items() if "{{" not in str(v)}
# the templated defaults as they render for a role used on its own
RENDERED = {"torch_nightly_index_url": "https://download.pytorch.org/whl/nightly/cu130", "torch_nightly_wheelhouse": ""}
# what the preflight passes as context: uv_venv's facts (None where uv_venv did not set them)
UV_VENV = {"uv_venv_dir": "/home/deploy/ml-env-0123456789ab",
           "uv_venv_python": "/home/deploy/ml-env-0123456789ab/bin/python", "uv_venv_bin": "/opt/gpufleet/uv/bin/uv",
           "uv_venv_remote_wheelhouse_dir": None}
GOOD = dict(DEFAULTS, **dict(RENDERED, **UV_VENV))
# the molecule scenario's inputs: wheelhouse mode, the CPU wheel of a release
SCENARIO = dict(GOOD, torch_nightly_cuda_variant="cpu", torch_nightly_packages=["torch"],
                torch_nightly_versions={"torch": "2.13.0+cpu"},
                torch_nightly_wheelhouse="/srv/wheelhouse-torch-nightly",
                torch_nightly_index_url="https://download.pytorch.org/whl/nightly/cpu",
                uv_venv_remote_wheelhouse_dir="/home/deploy/.cache/gpufleet/wheelhouse")
UV_VENV_MESSAGE = ("uv_venv_dir / uv_venv_python / uv_venv_bin are not set: run gpufleet.inference.uv_venv before "
                   "torch_nightly")


def test_the_defaults_pass_once_uv_venv_ran():
    assert "torch_nightly_date" in DEFAULTS and "torch_nightly_version_base" in DEFAULTS
    assert torch_nightly_main(dict(DEFAULTS, **UV_VENV)) == []
    assert torch_nightly_main(GOOD) == [] and torch_nightly_main(SCENARIO) == []
    assert rule_errors("torch_nightly", "main", GOOD) == []
    # without uv_venv's facts
    assert torch_nightly_main(DEFAULTS) == [UV_VENV_MESSAGE]


def test_the_defaults_and_the_scenarios_values_type_check():
    spec = _load("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    for values in (GOOD, SCENARIO):
        values = {k: v for k, v in values.items() if k in spec}
        assert ArgumentSpecValidator(spec).validate(values, validate_role_argument_spec=True).error_messages == []


@pytest.mark.parametrize("values, message", [
    # uv_venv's facts (context)
    ({"uv_venv_dir": None}, UV_VENV_MESSAGE),
    ({"uv_venv_dir": "ml-env-0123456789ab"}, UV_VENV_MESSAGE),
    ({"uv_venv_python": None}, UV_VENV_MESSAGE),
    ({"uv_venv_bin": None}, UV_VENV_MESSAGE),
    ({"torch_nightly_date": "2026-03-07"},
     "torch_nightly_date must be a real date written YYYYMMDD (got '2026-03-07')"),
    ({"torch_nightly_date": "20260230"}, "torch_nightly_date must be a real date written YYYYMMDD (got '20260230')"),
    ({"torch_nightly_date": "2026037"}, "torch_nightly_date must be a real date written YYYYMMDD (got '2026037')"),
    ({"torch_nightly_cuda_variant": "cu999"},
     "torch_nightly_cuda_variant must be one of cu126, cu128, cu129, cu130, cpu (got 'cu999')"),
    ({"torch_nightly_cuda_variant": "cu118", "torch_nightly_cuda_variants_allowed": ["cu130"]},
     "torch_nightly_cuda_variant must be one of cu130 (got 'cu118')"),
    ({"torch_nightly_packages": ["torchvision"]},
     "torch_nightly_packages must list torch and only torch, torchvision, torchaudio (got torchvision)"),
    ({"torch_nightly_packages": ["torch", "xformers"],
      "torch_nightly_version_base": {"torch": "2.12.0", "xformers": "1"}},
     "torch_nightly_packages must list torch and only torch, torchvision, torchaudio (got torch, xformers)"),
    ({"torch_nightly_version_base": {"torch": "2.12.0"}},
     "torch_nightly_version_base / torch_nightly_versions must give every package of torch_nightly_packages a base "
     "or a full version (got none for torchvision, torchaudio)"),
    # an empty version gives none; a full version stands for a base
    ({"torch_nightly_version_base": {"torch": "2.12.0", "torchvision": ""},
      "torch_nightly_versions": {"torchaudio": "2.12.0.dev20260307+cu130"}},
     "torch_nightly_version_base / torch_nightly_versions must give every package of torch_nightly_packages a base "
     "or a full version (got none for torchvision)"),
    # the index URL: a scheme and a host (checked even with a wheelhouse), and http(s):// or file:// as written
    ({"torch_nightly_index_url": "download.pytorch.org/whl/nightly/cu130"},
     "torch_nightly_index_url must be a URL starting with one of http://, https://, file:// "
     "(got 'download.pytorch.org/whl/nightly/cu130'); nothing was changed."),
    ({"torch_nightly_index_url": "https:///whl", "torch_nightly_wheelhouse": "/srv/wh",
      "uv_venv_remote_wheelhouse_dir": "/home/deploy/wh"},
     "torch_nightly_index_url must be a URL with a host after https:// (got 'https:///whl'); nothing was changed."),
    ({"torch_nightly_index_url": "HTTPS://download.pytorch.org/whl"},
     "torch_nightly_index_url must be an http(s):// or file:// URL (got 'HTTPS://download.pytorch.org/whl')"),
    ({"torch_nightly_extra_index_urls": "https://a.example/simple"},
     "torch_nightly_extra_index_urls must be a list (got string 'https://a.example/simple'); nothing was changed."),
    ({"torch_nightly_extra_index_urls": ["https://a.example/simple", "pypi.org/simple"]},
     "torch_nightly_extra_index_urls[1] must be a URL starting with one of http://, https://, file:// "
     "(got 'pypi.org/simple'); nothing was changed."),
    ({"torch_nightly_extra_index_urls": ["HTTPS://a.example/simple"]},
     "torch_nightly_extra_index_urls must be http(s):// or file:// URLs"),
    ({"torch_nightly_index_password": "s3cret"},
     "torch_nightly_index_username must be set when torch_nightly_index_password is"),
    ({"torch_nightly_wheelhouse": "/srv/wh"},
     "torch_nightly_wheelhouse must be '' unless gpufleet.inference.uv_venv pushed the wheelhouse "
     "(uv_venv_remote_wheelhouse_dir)"),
    ({"torch_nightly_cuda_variants_allowed": "cu130,cpu"},
     "torch_nightly_cuda_variants_allowed must be a list (got string 'cu130,cpu'); nothing was changed."),
    ({"torch_nightly_packages": "torch"},
     "torch_nightly_packages must be a list (got string 'torch'); nothing was changed."),
])
def test_each_bad_value_gives_its_message(values, message):
    assert torch_nightly_main(dict(GOOD, **values)) == [message]


@pytest.mark.parametrize("values", [
    {"torch_nightly_date": 20260307}, {"torch_nightly_date": "20240229"},
    {"torch_nightly_packages": ["torch"]}, {"torch_nightly_packages": ["torchaudio", "torch"]},
    {"torch_nightly_versions": {"torch": "2.13.0+cpu", "torchvision": "0.28.0+cpu", "torchaudio": "2.13.0+cpu"},
     "torch_nightly_version_base": {}, "torch_nightly_cuda_variant": "cpu"},
    {"torch_nightly_index_url": "file:///srv/nightly"},
    {"torch_nightly_extra_index_urls": ["https://pypi.org/simple", "file:///srv/extra"]},
    {"torch_nightly_index_password": "s3cret", "torch_nightly_index_username": "me"},
    {"torch_nightly_wheelhouse": "/srv/wh", "uv_venv_remote_wheelhouse_dir": "/home/deploy/wh"},
    # set (defined), if empty
    {"torch_nightly_wheelhouse": "/srv/wh", "uv_venv_remote_wheelhouse_dir": ""},
    # with a wheelhouse the index is not used: a scheme url_errors takes is enough
    {"torch_nightly_wheelhouse": "/srv/wh", "uv_venv_remote_wheelhouse_dir": "/home/deploy/wh",
     "torch_nightly_index_url": "HTTPS://download.pytorch.org/whl"},
    # another type: the type check's
    {"torch_nightly_versions": None}, {"torch_nightly_version_base": ["torch"]},
])
def test_good_values_and_other_types_pass(values):
    assert torch_nightly_main(dict(GOOD, **values)) == []


def test_a_variable_gets_one_message():
    # not a list: its list message alone, not the rules that read its items as well
    errors = torch_nightly_main(dict(GOOD, torch_nightly_extra_index_urls="pypi.org/simple",
                                     torch_nightly_cuda_variants_allowed="cu130", torch_nightly_packages="torch"))
    assert errors == [
        "torch_nightly_cuda_variants_allowed must be a list (got string 'cu130')",
        "torch_nightly_extra_index_urls must be a list (got string 'pypi.org/simple')",
        "torch_nightly_packages must be a list (got string 'torch'); nothing was changed."]


def test_every_message_at_once_the_url_and_list_ones_last():
    errors = torch_nightly_main(dict(GOOD, uv_venv_dir=None, torch_nightly_date="yesterday",
                                     torch_nightly_index_url="pytorch.org", torch_nightly_packages="torch"))
    assert [e.split(" ", maxsplit=1)[0] for e in errors] == [
        "uv_venv_dir", "torch_nightly_date", "torch_nightly_index_url", "torch_nightly_packages"]
    assert errors[3].endswith("; nothing was changed.") and not errors[2].endswith("nothing was changed.")


@pytest.mark.parametrize("date", ["20260307", 20260307, "20240229", "20250229", "20261301", "2026030", "202603070",
                                  "2026-03-07", "", None, "２０２６０３０７"])
def test_the_date_rule_takes_only_real_dates_written_yyyymmdd(date):
    assert nightly_date_valid(date) is (date in ("20260307", 20260307, "20240229"))


@pytest.mark.parametrize("versions, reason", [
    ({"torchvision": "0.27.0.dev20260306+cu130"},
     "nightly pins from different dates: 20260306: torchvision; 20260307: torch, torchaudio"),
    ({"torchaudio": "2.11.0.dev20260307+cu129"},
     "torchaudio==2.11.0.dev20260307+cu129: local tag +cu129 is not the CUDA variant cu130"),
    ({"torch": "2.12.0"}, "mixing nightly and release pins: torch not nightly"),
])
def test_pins_that_are_not_one_nightly_stack_are_refused_with_the_reason(versions, reason):
    errors = torch_nightly_main(dict(GOOD, torch_nightly_versions=versions))
    assert errors == ["torch_nightly_versions / torch_nightly_date / torch_nightly_version_base must pin one nightly "
                      "stack (versions, one date and the CUDA variant cu130 for every package): " + reason]


# ---------------------------------------------------------------- the release channel

# the inventory template's stack: released versions from PyPI (the channel's default index)
RELEASE = dict(GOOD, torch_nightly_channel="release", torch_nightly_index_url="https://pypi.org/simple",
               torch_nightly_versions={"torch": "2.14.1", "torchvision": "0.29.1", "torchaudio": "2.11.0"})
RELEASE_MISSING = ("torch_nightly_versions must give every package of torch_nightly_packages a full release "
                   "version when torch_nightly_channel is release (got none for %s)")
RELEASE_PINS = ("torch_nightly_versions must pin released versions when torch_nightly_channel is release (X.Y.Z, "
                "or X.Y.Z+cu130 as the variant's release index names them): ")


def test_the_channel_defaults_to_nightly_and_release_is_a_choice():
    assert DEFAULTS["torch_nightly_channel"] == "nightly"
    spec = _load("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]["torch_nightly_channel"]
    assert spec["choices"] == ["nightly", "release"]
    errors = ArgumentSpecValidator({"torch_nightly_channel": spec}).validate(
        {"torch_nightly_channel": "stable"}, validate_role_argument_spec=True).error_messages
    assert errors == ["value of torch_nightly_channel must be one of: nightly, release, got: stable"]


@pytest.mark.parametrize("values", [
    {},
    # the variant's release index names its wheels with the tag
    {"torch_nightly_versions": {"torch": "2.14.1+cu130", "torchvision": "0.29.1+cu130", "torchaudio": "2.11.0+cu130"},
     "torch_nightly_index_url": "https://download.pytorch.org/whl/cu130"},
    {"torch_nightly_packages": ["torch"], "torch_nightly_versions": {"torch": "2.14.1"}},
    {"torch_nightly_versions": {"torch": "2.15.0rc2", "torchvision": "0.30.0rc1", "torchaudio": "2.11.0"}},
    # the date and the base versions are neither read nor checked: a release has no date
    {"torch_nightly_date": ""}, {"torch_nightly_date": "20260230"}, {"torch_nightly_date": "yesterday"},
    {"torch_nightly_version_base": {}}, {"torch_nightly_version_base": {"torch": "not a version"}},
    # the wheelhouse, as the sandbox's CPU profile
    {"torch_nightly_cuda_variant": "cpu", "torch_nightly_packages": ["torch"],
     "torch_nightly_versions": {"torch": "2.13.0+cpu"}, "torch_nightly_wheelhouse": "/srv/wh",
     "uv_venv_remote_wheelhouse_dir": "/home/deploy/wh"},
    # another type: the type check's
    {"torch_nightly_versions": None},
])
def test_release_stacks_pass(values):
    assert torch_nightly_main(dict(RELEASE, **values)) == []


def test_the_release_stack_type_checks():
    spec = _load("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    values = {k: v for k, v in RELEASE.items() if k in spec}
    assert ArgumentSpecValidator(spec).validate(values, validate_role_argument_spec=True).error_messages == []


@pytest.mark.parametrize("values, message", [
    # no date to build a pin from: every package needs its full version
    ({"torch_nightly_versions": {"torch": "2.14.1"}}, RELEASE_MISSING % "torchvision, torchaudio"),
    ({"torch_nightly_versions": {}}, RELEASE_MISSING % "torch, torchvision, torchaudio"),
    ({"torch_nightly_versions": {"torch": "2.14.1", "torchvision": "", "torchaudio": "2.11.0"}},
     RELEASE_MISSING % "torchvision"),
    # the template's former nightly pins under the release channel
    ({"torch_nightly_versions": {"torch": "2.12.0.dev20260307+cu130", "torchvision": "0.29.1",
                                 "torchaudio": "2.11.0"}},
     RELEASE_PINS + "torch==2.12.0.dev20260307+cu130: .dev20260307 is a nightly or development build, not a "
     "release"),
    ({"torch_nightly_versions": {"torch": "2.14.1+cu128", "torchvision": "0.29.1", "torchaudio": "2.11.0"}},
     RELEASE_PINS + "torch==2.14.1+cu128: local tag +cu128 is not the CUDA variant cu130"),
    ({"torch_nightly_versions": {"torch": "2.14.1", "torchvision": "0.29.1", "torchaudio": "latest"}},
     RELEASE_PINS + "torchaudio: not a PEP 440 version: 'latest'"),
])
def test_each_bad_release_pin_gives_its_message(values, message):
    assert torch_nightly_main(dict(RELEASE, **values)) == [message]


def test_the_other_rules_hold_for_a_release_as_for_a_nightly():
    errors = torch_nightly_main(dict(RELEASE, uv_venv_dir=None, torch_nightly_cuda_variant="cu999",
                                     torch_nightly_index_url="pypi.org/simple"))
    # PyPI's names carry no tag: no variant to compare them with
    assert [e.split(" ", maxsplit=1)[0] for e in errors] == [
        "uv_venv_dir", "torch_nightly_cuda_variant", "torch_nightly_index_url"]


@pytest.mark.parametrize("channel", [None, "nightly"])
def test_nightly_rules_are_unchanged_with_the_channel_given_or_not(channel):
    base = dict(GOOD, torch_nightly_date="20260230")
    if channel is None:
        base.pop("torch_nightly_channel")
    else:
        base["torch_nightly_channel"] = channel
    assert torch_nightly_main(base) == [
        "torch_nightly_date must be a real date written YYYYMMDD (got '20260230')"]
    # a release version alone under the nightly channel is a full version, as before (the sandbox's CPU torch)
    assert torch_nightly_main(dict(base, torch_nightly_date="20260307", **{k: SCENARIO[k] for k in (
        "torch_nightly_cuda_variant", "torch_nightly_packages", "torch_nightly_versions")})) == []
