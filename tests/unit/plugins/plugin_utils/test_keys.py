"""plugin_utils.keys: the ABI key, the stack fingerprint and the deploy key.
The same inputs give the same key, whatever order their dicts were built in;
one changed input gives another key. The pinned values are the keys hosts
already carry: a change of one of them rebuilds sgl-kernel or redeploys every
host, so it must be deliberate, never a side effect of a refactoring."""
import hashlib

import pytest

from ansible.utils.unsafe_proxy import AnsibleUnsafeText

from ansible_collections.gpufleet.inference.plugins.plugin_utils import keys
from ansible_collections.gpufleet.inference.tests.unit.plugins.plugin_utils.key_inputs import ABI, fake_root

INPUTS = {"torch_nightly": ["torch_nightly_date", "torch_nightly_packages"],
          "sgl_kernel": ["sgl_kernel_ref", "sgl_kernel_patch_rules"]}
VALUES = {"torch_nightly_date": "20260307", "torch_nightly_packages": ["torch", "torchvision"],
          "sgl_kernel_ref": "3ec6e094", "sgl_kernel_patch_rules": [{"name": "cccl", "enabled": True}]}
HOST = {"fleet_x": 1, "fleet_y": 1, "uv_venv_y": 1}


def reversed_dict(data):
    """The same dict, its keys inserted in the opposite order (nested dicts too)."""
    if isinstance(data, dict):
        return dict((k, reversed_dict(v)) for k, v in reversed(list(data.items())))
    if isinstance(data, list):
        return [reversed_dict(v) for v in data]
    return data


@pytest.fixture
def root(tmp_path):
    """A collection tree of fixed content (key_inputs.fake_root)."""
    return fake_root(tmp_path)


# ---------------------------------------------------------------- canonical form


def test_canonical_is_sorted_compact_json_of_plain_data():
    data = {"b": (1, AnsibleUnsafeText("\u00e9")), "a": {2: None, "c": [True, 1.5]}}
    # ASCII only: non-ASCII text is escaped, so the bytes hashed do not depend on an encoding
    assert keys.canonical(data) == '{"a":{"2":null,"c":[true,1.5]},"b":[1,"\\u00e9"]}'
    assert keys.canonical(data) == keys.canonical(reversed_dict(data))
    assert keys.plain(AnsibleUnsafeText("x")) == "x" and keys.plain((1, [2])) == [1, [2]]


def test_fingerprint_is_truncated_sha256_of_the_canonical_form():
    data = {"a": 1, "b": [1, 2]}
    assert keys.fingerprint(data, 64) == hashlib.sha256(keys.canonical(data).encode("utf-8")).hexdigest()
    assert keys.fingerprint(data) == keys.fingerprint({"b": [1, 2], "a": 1})
    assert keys.fingerprint({"a": 1}) != keys.fingerprint({"a": 2})


# ---------------------------------------------------------------- ABI key


def test_abi_key_same_inputs_same_key_and_dict_order_does_not_count():
    assert keys.abi_key(dict(ABI)) == keys.abi_key(dict(ABI))
    assert keys.abi_key(reversed_dict(ABI)) == keys.abi_key(ABI)
    assert keys.abi_canonical(reversed_dict(ABI)) == keys.abi_canonical(ABI)


@pytest.mark.parametrize("field,value", [
    ("source_ref", "0" * 40),
    ("patch_rules", [dict(ABI["patch_rules"][0], replacement="y")]),
    ("torch_version", "2.12.0.dev20260308+cu130"),
    ("cuda_version", "13.1"),
    ("arch_list", ["12.0a", "9.0a"]),
    ("python_tag", "cp311"),
    ("build_options", ["-DSGL_KERNEL_ENABLE_CUDA=OFF"]),
])
def test_abi_key_one_changed_input_changes_the_key(field, value):
    assert keys.abi_key(dict(ABI, **{field: value})) != keys.abi_key(ABI)


def test_abi_key_bad_input_is_a_key_input_error():
    with pytest.raises(keys.KeyInputError, match="missing fields \\['torch_version'\\]"):
        keys.abi_key({k: v for k, v in ABI.items() if k != "torch_version"})
    with pytest.raises(keys.KeyInputError, match="length must be between 8 and 64"):
        keys.abi_key(ABI, 4)


def test_abi_key_pinned():
    assert keys.abi_canonical(ABI) == (
        '{"arch_list":["12.0a"],"cuda_version":"13.0","patch_rules":[{"file":"CMakeLists.txt",'
        '"name":"cmake-policy-guard","pattern":"cmake_policy(SET CMP0169 OLD)","replacement":"x"}],'
        '"python_tag":"cp312","source_ref":"3ec6e09487cbf7424f7875cb098860a2142666a3",'
        '"torch_version":"2.12.0.dev20260307+cu130"}')
    assert keys.abi_key(ABI) == "7fb371c9ccbc17ab"
    assert keys.abi_key(ABI, 64) == "7fb371c9ccbc17abec06fec229980114bbafe574d0b006345bb5471595adbd78"
    assert keys.abi_key(dict(ABI, build_options=["-DSGL_KERNEL_ENABLE_CUDA=OFF"])) == "cbccc2fc26018ca9"
    assert keys.abi_key(dict(ABI, arch_list="", cuda_version="none")) == "0ab5ca31cb204cf8"


def test_abi_builder_prefers_the_builders_group():
    hv = {"a": {"sgl_kernel_abi_key": "k1"}, "b": {"sgl_kernel_abi_key": "k1", "sgl_kernel_needs_wheel": True}}
    assert keys.abi_builder("b", hv, ["a", "b"]) == "b"
    assert keys.abi_builder("b", hv, ["a", "b"], builders=["a"]) == "a"
    with pytest.raises(keys.KeyInputError, match="c has no sgl_kernel_abi_key"):
        keys.abi_builder("c", dict(hv, c={}), ["c"])


# ---------------------------------------------------------------- stack fingerprint


def test_stack_fingerprint_same_inputs_same_key_and_dict_order_does_not_count():
    out = keys.stack_fingerprint(INPUTS, VALUES)
    assert out == keys.stack_fingerprint(dict(INPUTS), dict(VALUES))
    assert out == keys.stack_fingerprint(reversed_dict(INPUTS), reversed_dict(VALUES))


def test_stack_fingerprint_one_changed_input_changes_its_roles_key():
    before = keys.stack_fingerprint(INPUTS, VALUES)
    after = keys.stack_fingerprint(INPUTS, dict(VALUES, sgl_kernel_ref="0000"))
    assert after["sgl_kernel"] != before["sgl_kernel"] and after["torch_nightly"] == before["torch_nightly"]


def test_stack_fingerprint_pinned():
    assert keys.stack_fingerprint(INPUTS, VALUES) == {"sgl_kernel": "fef34d7c286c773b",
                                                      "torch_nightly": "9b32b1eb3a97d9e9"}
    assert keys.stack_fingerprint(INPUTS, VALUES, roles=["torch_nightly"]) == {"sgl_kernel": "none",
                                                                               "torch_nightly": "9b32b1eb3a97d9e9"}
    assert keys.fingerprint({"a": 1, "b": [1, 2]}) == "8baa73198470c7bb"
    assert keys.fingerprint({"a": 1, "b": [1, 2]}, 24) == "8baa73198470c7bb4c3ce142"


def test_stack_fingerprint_bad_input_is_a_key_input_error():
    with pytest.raises(keys.KeyInputError, match="no value for sgl_kernel_ref"):
        keys.stack_fingerprint(INPUTS, {k: v for k, v in VALUES.items() if k != "sgl_kernel_ref"})


# ---------------------------------------------------------------- deploy key


def test_deploy_key_same_inputs_same_key_and_dict_order_does_not_count(root):
    host = dict(HOST, fleet_x={"b": [1, "\u00e9"], "a": None})
    assert keys.deploy_key(dict(host), root) == keys.deploy_key(dict(host), root)
    assert keys.deploy_key(reversed_dict(host), root) == keys.deploy_key(host, root)
    assert len(keys.deploy_key(host, root)) == 24


@pytest.mark.parametrize("name,value", [("fleet_x", 2), ("uv_venv_y", 2), ("sgl_kernel_x", "new")])
def test_deploy_key_one_changed_input_changes_the_key(root, name, value):
    assert keys.deploy_key(dict(HOST, **{name: value}), root) != keys.deploy_key(HOST, root)


def test_deploy_key_run_control_and_undeclared_variables_do_not_count(root):
    assert keys.deploy_key(dict(HOST, fleet_y=2, other=1), root) == keys.deploy_key(HOST, root)


def test_deploy_key_code_change_changes_the_key(root):
    before = keys.deploy_key(HOST, root)
    with open(root + "/plugins/main.yml", "w") as fh:
        fh.write("- two\n")
    assert keys.deploy_key(HOST, root) != before


def test_deploy_key_pinned(root):
    assert keys.deploy_key(HOST, root) == "bdc81cf77348e5a3662d9af2"
    assert keys.deploy_key(dict(HOST, fleet_x=2), root) == "1afc429319a1c2695c7f9b9a"
    assert keys.deploy_key({}, root) == "722fc2340384a1a8d4c01212"


def test_deploy_key_not_a_collection_root_is_a_key_input_error(tmp_path):
    with pytest.raises(keys.KeyInputError, match="not the collection's root"):
        keys.deploy_key(HOST, str(tmp_path))
