"""stack_fingerprint: one hash per stage role of its declared inputs; another
value of one input changes that role's hash only; what does not change the
build (a rule's `enabled`) and a disabled role do not count."""
import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.inference.plugins.filter.fingerprint import stack_fingerprint
from ansible_collections.gpufleet.inference.plugins.plugin_utils.keys import fingerprint

INPUTS = {"torch_nightly": ["torch_nightly_date", "torch_nightly_packages"],
          "sgl_kernel": ["sgl_kernel_ref", "sgl_kernel_patch_rules"]}
VALUES = {"torch_nightly_date": "20260307", "torch_nightly_packages": ["torch", "torchvision"],
          "sgl_kernel_ref": "3ec6e094", "sgl_kernel_patch_rules": [{"name": "cccl", "enabled": True}]}


def test_one_hash_per_role_and_the_same_inputs_give_the_same_hashes():
    out = stack_fingerprint(INPUTS, dict(VALUES))
    assert sorted(out) == ["sgl_kernel", "torch_nightly"]
    assert all(len(v) == 16 and int(v, 16) >= 0 for v in out.values())
    assert out == stack_fingerprint(INPUTS, dict(VALUES))


def test_another_value_changes_only_its_roles_hash():
    before = stack_fingerprint(INPUTS, VALUES)
    after = stack_fingerprint(INPUTS, dict(VALUES, torch_nightly_date="20260308"))
    assert after["torch_nightly"] != before["torch_nightly"]
    assert after["sgl_kernel"] == before["sgl_kernel"]


def test_a_rules_enabled_does_not_count_but_the_rule_does():
    before = stack_fingerprint(INPUTS, VALUES)
    off = dict(VALUES, sgl_kernel_patch_rules=[{"name": "cccl", "enabled": False}])
    other = dict(VALUES, sgl_kernel_patch_rules=[{"name": "fa3"}])
    assert stack_fingerprint(INPUTS, off)["sgl_kernel"] == before["sgl_kernel"]
    assert stack_fingerprint(INPUTS, other)["sgl_kernel"] != before["sgl_kernel"]


def test_a_role_not_enabled_is_none():
    out = stack_fingerprint(INPUTS, VALUES, roles=["torch_nightly"])
    assert out["sgl_kernel"] == "none" and out["torch_nightly"] != "none"


def test_a_declared_input_without_a_value_is_an_error():
    values = dict(VALUES)
    del values["sgl_kernel_ref"]
    with pytest.raises(AnsibleFilterError, match="no value for sgl_kernel_ref"):
        stack_fingerprint(INPUTS, values)


@pytest.mark.parametrize("inputs", [["torch_nightly_date"], {"torch_nightly": "torch_nightly_date"}, {"r": [1]}])
def test_inputs_must_be_lists_of_names_per_role(inputs):
    with pytest.raises(AnsibleFilterError, match="expected {role: \\[variable names\\]}"):
        stack_fingerprint(inputs, VALUES)


def test_fingerprint_is_key_order_independent():
    assert fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": [1, 2], "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
    assert len(fingerprint({"a": 1}, 24)) == 24


def test_an_input_at_its_unset_value_hashes_as_if_not_declared():
    # torch_nightly_channel, declared after venvs were named: at nightly the venv keeps its name
    declared = dict(INPUTS, torch_nightly=INPUTS["torch_nightly"] + ["torch_nightly_channel"])
    unset = {"torch_nightly_channel": "nightly"}
    before = stack_fingerprint(INPUTS, VALUES)
    assert stack_fingerprint(declared, dict(VALUES, torch_nightly_channel="nightly"), unset=unset) == before
    release = stack_fingerprint(declared, dict(VALUES, torch_nightly_channel="release"), unset=unset)
    assert release["torch_nightly"] != before["torch_nightly"] and release["sgl_kernel"] == before["sgl_kernel"]
    # without unset, every input counts
    assert stack_fingerprint(declared, dict(VALUES, torch_nightly_channel="nightly")) != before
    # a list input at [] (flashinfer_extras)
    assert stack_fingerprint(dict(INPUTS, sgl_kernel=INPUTS["sgl_kernel"] + ["x"]), dict(VALUES, x=[]),
                             unset={"x": []}) == before


def test_unset_must_be_a_dict():
    with pytest.raises(AnsibleFilterError, match="unset must be {variable: value}"):
        stack_fingerprint(INPUTS, VALUES, unset=["torch_nightly_channel"])
