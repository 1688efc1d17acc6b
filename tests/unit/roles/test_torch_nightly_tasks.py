# -*- coding: utf-8 -*-
"""The torch_nightly role's expressions for both channels, rendered with the
collection's and Ansible's filters: the pins the preflight computes, uv's
arguments and the check that the venv holds the pins. A nightly stack renders
what it rendered before the release channel; a release stack's pins are its
full versions, uv gets no --prerelease, and 2.14.1 is met by 2.14.1+cu130."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml
from jinja2 import Environment, StrictUndefined

from ansible.plugins.filter import core, mathstuff, urlsplit
from ansible_collections.gpufleet.inference.plugins.filter import nightly

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
TASKS = os.path.join(ROOT, "roles", "torch_nightly", "tasks")

NIGHTLY = {"torch_nightly_channel": "nightly", "torch_nightly_date": "20260307", "torch_nightly_cuda_variant": "cu130",
           "torch_nightly_packages": ["torch", "torchvision", "torchaudio"],
           "torch_nightly_version_base": {"torch": "2.12.0", "torchvision": "0.27.0", "torchaudio": "2.12.0"},
           "torch_nightly_versions": {}, "torch_nightly_wheelhouse": "", "torch_nightly_extra_index_urls": [],
           "torch_nightly_index_strategy": "unsafe-best-match", "uv_venv_dir": "/home/deploy/ml-env-0123456789ab",
           "uv_venv_python": "/home/deploy/ml-env-0123456789ab/bin/python", "uv_venv_bin": "/opt/uv/bin/uv",
           "uv_venv_remote_wheelhouse_dir": "/home/deploy/.cache/gpufleet/wheelhouse"}
RELEASE = dict(NIGHTLY, torch_nightly_channel="release",
               torch_nightly_versions={"torch": "2.14.1", "torchvision": "0.29.1", "torchaudio": "2.11.0"})


def _env():
    env = Environment(undefined=StrictUndefined)
    for module in (core, mathstuff, urlsplit):
        env.filters.update(module.FilterModule().filters())
    env.filters.update(("gpufleet.inference." + name, f) for name, f in nightly.FilterModule().filters().items())
    return env


def render(expression, variables):
    return _env().from_string("{{ (%s) | to_json }}" % expression.strip()[2:-2]).render(**variables)


def value(expression, variables):
    return yaml.safe_load(render(expression, variables))


def _task(name, *keys, path="preflight.yml"):
    with open(os.path.join(TASKS, path), encoding="utf-8") as handle:
        tasks = yaml.safe_load(handle)

    def walk(items):
        for item in items:
            yield item
            yield from walk(item.get("block", []))
    task = [t for t in walk(tasks) if t.get("name") == name][0]
    for key in keys:
        task = task[key]
    return task


def preflight(variables):
    """The facts the preflight sets, in its order."""
    variables = dict(variables)
    pins = _task("Preflight | Compute the pins")
    variables.update((k, value(v, variables)) for k, v in pins["vars"].items())
    variables["torch_nightly_pins"] = value(pins["ansible.builtin.set_fact"]["torch_nightly_pins"], variables)
    args = _task("Preflight | Build the uv source arguments")
    variables["_wheelhouse"] = value(args["vars"]["_wheelhouse"], variables)
    for name in ("_torch_nightly_source_args", "_torch_nightly_requirements", "_torch_nightly_prerelease_args"):
        variables[name] = value(args["ansible.builtin.set_fact"][name], variables)
    return variables


def test_nightly_pins_and_arguments_are_as_before():
    facts = preflight(NIGHTLY)
    assert facts["torch_nightly_pins"] == {"torch": "2.12.0.dev20260307+cu130",
                                           "torchvision": "0.27.0.dev20260307+cu130",
                                           "torchaudio": "2.12.0.dev20260307+cu130"}
    argv = value(_task("Install | Plan the change (uv pip install --dry-run)", "ansible.builtin.command", "argv",
                       path="install.yml"), facts)
    assert argv == ["/opt/uv/bin/uv", "pip", "install", "--python", "/home/deploy/ml-env-0123456789ab/bin/python",
                    "--dry-run", "--prerelease", "allow", "torch==2.12.0.dev20260307+cu130",
                    "torchaudio==2.12.0.dev20260307+cu130", "torchvision==0.27.0.dev20260307+cu130"]


@pytest.mark.parametrize("changes", [{}, {"torch_nightly_date": ""}, {"torch_nightly_version_base": {}}])
def test_release_pins_are_the_full_versions_and_uv_keeps_its_prerelease_rule(changes):
    facts = preflight(dict(RELEASE, **changes))
    assert facts["torch_nightly_pins"] == RELEASE["torch_nightly_versions"]
    assert facts["_torch_nightly_prerelease_args"] == []
    assert facts["_torch_nightly_requirements"] == ["torch==2.14.1", "torchaudio==2.11.0", "torchvision==0.29.1"]
    for name in ("Install | Plan the change (uv pip install --dry-run)",
                 "Install | Install {{ _torch_nightly_requirements | join(' ') }}"):
        argv = value(_task(name, "ansible.builtin.command", "argv", path="install.yml"), facts)
        assert "--prerelease" not in argv and argv[-3:] == facts["_torch_nightly_requirements"]
    compile_argv = value(_task("Install | Plan a venv that does not exist yet (uv pip compile)",
                               "ansible.builtin.command", "argv", path="install.yml"),
                         dict(facts, uv_venv_base_python="/usr/bin/python3.12"))
    assert "--prerelease" not in compile_argv


def test_the_wheelhouse_serves_a_release_as_a_nightly():
    facts = preflight(dict(RELEASE, torch_nightly_wheelhouse="/srv/wh"))
    assert facts["_torch_nightly_source_args"] == ["--no-index", "--find-links",
                                                   "/home/deploy/.cache/gpufleet/wheelhouse"]


@pytest.mark.parametrize("variables, installed, met", [
    (RELEASE, {"torch": "2.14.1", "torchvision": "0.29.1", "torchaudio": "2.11.0"}, True),
    # the cu130 index's names for the same builds
    (RELEASE, {"torch": "2.14.1+cu130", "torchvision": "0.29.1+cu130", "torchaudio": "2.11.0+cu130"}, True),
    (RELEASE, {"torch": "2.14.0", "torchvision": "0.29.1", "torchaudio": "2.11.0"}, False),
    (NIGHTLY, {"torch": "2.12.0.dev20260307+cu130", "torchvision": "0.27.0.dev20260307+cu130",
               "torchaudio": "2.12.0.dev20260307+cu130"}, True),
    (NIGHTLY, {"torch": "2.12.0.dev20260307+cu130", "torchvision": "0.27.0.dev20260307+cu130"}, False),
])
def test_the_install_check(variables, installed, met):
    facts = preflight(variables)
    that = _task("Install | Check that the venv holds exactly the pins", "ansible.builtin.assert", "that",
                 path="install.yml")
    assert value("{{ %s }}" % that, dict(facts, torch_nightly_installed=installed)) is met
