# -*- coding: utf-8 -*-
"""The sglang stage's expressions, rendered with the collection's and
Ansible's filters: the fleet's role list and stack fingerprint (a stack
without sglang keeps the venv name it had before the stage existed; with it,
sglang's inputs name another venv), the preflight's requirement and uv
arguments (no credentials on the command line), and the install's held
versions, read from uv's list, a kernel installed from its wheel file too."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

import pytest
import yaml
from jinja2 import Environment, StrictUndefined

from ansible.parsing.dataloader import DataLoader
from ansible.plugins.filter import core, mathstuff, urlsplit
from ansible.template import Templar, trust_as_template
from ansible_collections.gpufleet.inference.plugins.filter import fingerprint, nightly, sglang

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))


def _load(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _env():
    env = Environment(undefined=StrictUndefined)
    for module in (core, mathstuff, urlsplit):
        env.filters.update(module.FilterModule().filters())
    # Ansible's templating hands a filter a list where Jinja's selectattr gives a generator
    items2dict = core.FilterModule().filters()["items2dict"]
    env.filters["items2dict"] = lambda items, *args, **kwargs: items2dict(list(items), *args, **kwargs)
    for module in (fingerprint, nightly, sglang):
        env.filters.update(("gpufleet.inference." + name, f) for name, f in module.FilterModule().filters().items())
    return env


def value(expression, variables):
    """A "{{ expression }}" value, as the data it renders to."""
    text = _env().from_string("{{ (%s) | to_json }}" % expression.strip()[2:-2]).render(**variables)
    return yaml.safe_load(text)


def _task(role, path, name):
    def walk(items):
        for item in items:
            yield item
            for key in ("block", "always", "rescue"):
                yield from walk(item.get(key, []))
    return [t for t in walk(_load("roles", role, "tasks", path)) if t.get("name") == name][0]


FLEET = _load("roles", "fleet", "vars", "main.yml")
ENABLED = {"gpufleet_cuda_toolkit_enabled": False, "gpufleet_flashinfer_enabled": True,
           "gpufleet_sgl_kernel_enabled": True, "gpufleet_sglang_enabled": True}
# every input the fingerprint hashes, at the defaults' values of a kernel-only stack
INPUTS = {name: [] for names in FLEET["_fleet_stack_inputs"].values() for name in names}
INPUTS.update(torch_nightly_channel="nightly", sglang_version="0.5.23", sglang_extras=[], flashinfer_version="0.6.5")


def fleet(variables):
    """_fleet_roles, _fleet_stack_hashed and the stack fingerprint, as the fleet's vars render them."""
    variables = dict(variables, _fleet_stack_inputs=FLEET["_fleet_stack_inputs"],
                     _fleet_stack_unset=FLEET["_fleet_stack_unset"])
    variables["_fleet_roles"] = value(FLEET["_fleet_roles"], variables)
    variables["_fleet_stack_hashed"] = value(FLEET["_fleet_stack_hashed"], variables)
    stack = fingerprint.stack_fingerprint(variables["_fleet_stack_hashed"], INPUTS, roles=variables["_fleet_roles"],
                                          unset=FLEET["_fleet_stack_unset"])
    return variables, stack


def test_the_stage_is_a_role_of_the_chain_only_where_it_is_enabled():
    assert fleet(ENABLED)[0]["_fleet_roles"] == ["uv_venv", "torch_nightly", "flashinfer", "sgl_kernel", "sglang"]
    assert "sglang" not in fleet(dict(ENABLED, gpufleet_sglang_enabled=False))[0]["_fleet_roles"]


def test_a_stack_without_sglang_keeps_its_venv_name_and_sglangs_inputs_name_another():
    dummy, without = fleet(dict(ENABLED, gpufleet_sglang_enabled=False))
    # what the fingerprint was before the stage existed: no sglang entry at all
    before = fingerprint.stack_fingerprint(dict((role, names) for role, names in FLEET["_fleet_stack_inputs"].items()
                                                if role != "sglang"), INPUTS,
                                           roles=["uv_venv", "torch_nightly", "flashinfer", "sgl_kernel"],
                                           unset=FLEET["_fleet_stack_unset"])
    assert without == before and "sglang" not in without
    dummy, with_sglang = fleet(ENABLED)
    assert with_sglang["sglang"] != "none"
    assert dict((role, h) for role, h in with_sglang.items() if role != "sglang") == without
    INPUTS["sglang_version"] = "0.5.24"
    try:
        assert fleet(ENABLED)[1]["sglang"] != with_sglang["sglang"]
        assert fleet(dict(ENABLED, gpufleet_sglang_enabled=False))[1] == without
    finally:
        INPUTS["sglang_version"] = "0.5.23"


PREFLIGHT = {"uv_venv_python": "/home/deploy/ml-env-0123456789ab/bin/python",
             "torch_nightly_constraints_file": "/home/deploy/ml-env-0123456789ab/gpufleet-constraints.txt",
             "uv_venv_remote_wheelhouse_dir": "/home/deploy/.cache/gpufleet/wheelhouse",
             "sglang_version": "0.5.23", "sglang_extras": [], "sglang_wheelhouse": "",
             "sglang_index_urls": ["https://deploy:t0ken@mirror.example/simple"],
             "sglang_default_index_url": "https://pypi.org/simple"}


def uv_args(variables):
    """Ansible's own templating here: a Jinja string literal '\\1' is a back reference there, not chr(1)."""
    facts = _task("sglang", "preflight.yml", "Preflight | Build the uv arguments")["ansible.builtin.set_fact"]
    templar = Templar(loader=DataLoader(), variables=variables)
    return (templar.template(trust_as_template(facts["_sglang_requirement"])),
            templar.template(trust_as_template(facts["_sglang_uv_args"])))


@pytest.mark.parametrize("changes, requirement, sources", [
    ({}, "sglang==0.5.23", ["--index=https://mirror.example/simple", "--default-index", "https://pypi.org/simple"]),
    ({"sglang_extras": ["tracing", "http2"]}, "sglang[tracing,http2]==0.5.23",
     ["--index=https://mirror.example/simple", "--default-index", "https://pypi.org/simple"]),
    ({"sglang_wheelhouse": "/srv/wheels"}, "sglang==0.5.23",
     ["--no-index", "--find-links", "/home/deploy/.cache/gpufleet/wheelhouse"]),
])
def test_the_requirement_and_uvs_arguments(changes, requirement, sources):
    got_requirement, args = uv_args(dict(PREFLIGHT, **changes))
    assert got_requirement == requirement
    assert args == ["--python", PREFLIGHT["uv_venv_python"], "--constraint",
                    PREFLIGHT["torch_nightly_constraints_file"]] + sources
    assert "t0ken" not in json.dumps(args)


def test_the_held_versions_come_from_uvs_list_a_kernel_installed_from_its_file_too():
    task = _task("sglang", "install.yml", "Install | Keep the guarded packages the venv holds, at their versions")
    listed = json.dumps([{"name": "torch", "version": "2.14.1"}, {"name": "Flashinfer_Python", "version": "0.7.2"},
                         {"name": "sglang-kernel", "version": "0.4.10"}, {"name": "numpy", "version": "2.3.5"}])
    variables = {"sglang_guarded_packages": _load("roles", "sglang", "defaults", "main.yml")["sglang_guarded_packages"],
                 "__sglang_before": {"stdout": listed}}
    variables["_guarded"] = value(task["vars"]["_guarded"], variables)
    held = value(task["ansible.builtin.set_fact"]["_sglang_held"], variables)
    assert held == {"torch": "2.14.1", "flashinfer-python": "0.7.2", "sglang-kernel": "0.4.10"}
    content = _task("sglang", "install.yml", "Install | Write the held versions as constraints")["ansible.builtin.copy"]
    rendered = Templar(loader=DataLoader(), variables={"_sglang_held": held}).template(trust_as_template(content["content"]))
    assert rendered.splitlines()[1:] == [
        "flashinfer-python==0.7.2", "sglang-kernel==0.4.10", "torch==2.14.1"]
