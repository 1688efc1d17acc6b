# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.inference.plugins.filter.abi import (
    FilterModule,
    abi_builder,
    abi_canonical,
    abi_key,
)
from ansible_collections.gpufleet.inference.tests.unit.plugins.plugin_utils.key_inputs import ABI

BASE = ABI


def with_(**kw):
    d = dict(BASE)
    d.update(kw)
    return d


def test_key_is_truncated_sha256_of_canonical_json():
    assert abi_key(BASE) == hashlib.sha256(abi_canonical(BASE).encode()).hexdigest()[:16]
    assert len(abi_key(BASE, 64)) == 64


def test_stable_across_calls_and_dict_order():
    reordered = dict(reversed(list(BASE.items())))
    assert abi_key(BASE) == abi_key(reordered)


@pytest.mark.parametrize("field,value", [
    ("source_ref", "0000000000000000000000000000000000000000"),
    ("patch_rules", []),
    ("torch_version", "2.12.0.dev20260308+cu130"),
    ("cuda_version", "13.1"),
    ("arch_list", ["12.0a", "9.0a"]),
    ("python_tag", "cp311"),
])
def test_every_field_changes_the_key(field, value):
    assert abi_key(with_(**{field: value})) != abi_key(BASE)


def test_rule_content_change_changes_the_key():
    rules = [dict(BASE["patch_rules"][0], replacement="y")]
    assert abi_key(with_(patch_rules=rules)) != abi_key(BASE)


@pytest.mark.parametrize("a,b", [
    (["9.0a", "8.9"], ["8.9", "9.0a"]),
    ("9.0a;8.9", ["8.9", "9.0a"]),
    ("9.0a 8.9", "8.9,9.0a"),
    (["9.0a", "9.0a"], ["9.0a"]),
])
def test_arch_list_order_and_format_do_not_matter(a, b):
    assert abi_key(with_(arch_list=a)) == abi_key(with_(arch_list=b))


def test_build_options_are_optional_and_hashed():
    assert abi_key(with_(build_options=[])) == abi_key(BASE)
    assert abi_key(with_(build_options=["-DSGL_KERNEL_ENABLE_CUDA=OFF"])) != abi_key(BASE)


def test_empty_arch_list_is_a_cpu_build():
    assert abi_key(with_(arch_list=[], cuda_version="none")) == abi_key(with_(arch_list="", cuda_version="none"))


@pytest.mark.parametrize("data,needle", [
    ("notadict", "expected a dict"),
    ({k: v for k, v in BASE.items() if k != "torch_version"}, "missing fields ['torch_version']"),
    (with_(compiler="gcc"), "unknown fields ['compiler']"),
    (with_(torch_version=""), "torch_version must be a non-empty string"),
    (with_(python_tag=None), "python_tag must be a non-empty string"),
    (with_(patch_rules="rule"), "patch_rules must be a list"),
    (with_(arch_list=9.0), "arch_list must be a list"),
])
def test_bad_input_is_refused_with_the_field_named(data, needle):
    with pytest.raises(AnsibleFilterError) as exc:
        abi_key(data)
    assert needle in str(exc.value)


@pytest.mark.parametrize("length", [4, 65, "x"])
def test_bad_length(length):
    with pytest.raises(AnsibleFilterError):
        abi_key(BASE, length)


HV = {
    "a": {"sgl_kernel_abi_key": "k1", "sgl_kernel_needs_wheel": False},
    "b": {"sgl_kernel_abi_key": "k1", "sgl_kernel_needs_wheel": True},
    "c": {"sgl_kernel_abi_key": "k1", "sgl_kernel_needs_wheel": True},
    "d": {"sgl_kernel_abi_key": "k2", "sgl_kernel_needs_wheel": True},
    "e": {},
}


def test_builder_is_first_host_needing_the_key():
    assert abi_builder("c", HV, ["a", "b", "c", "d"]) == "b"
    assert abi_builder("b", HV, ["a", "b", "c", "d"]) == "b"


def test_builder_group_wins_when_it_has_the_key():
    assert abi_builder("b", HV, ["a", "b", "c", "d"], builders=["d", "a"]) == "a"


def test_builder_group_member_outside_the_play_is_ignored():
    assert abi_builder("b", HV, ["b", "c"], builders=["a"]) == "b"


def test_each_key_gets_its_own_builder():
    assert abi_builder("d", HV, ["a", "b", "c", "d"]) == "d"


def test_host_without_key_is_an_error():
    with pytest.raises(AnsibleFilterError, match="e has no sgl_kernel_abi_key"):
        abi_builder("e", HV, ["e"])


def test_filters_are_registered():
    assert set(FilterModule().filters()) == {"abi_key", "abi_canonical", "abi_builder"}
