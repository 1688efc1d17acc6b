"""deploy_key: the same inputs and code give the same key; any input or code
change gives another; run control and facts do not count."""
import os

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.inference.plugins.filter import deploy_key as dk

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

BASE = {
    "torch_nightly_date": "20260307",
    "flashinfer_version": "0.6.0.dev20260307",
    "gpufleet_expect": {"device_count": 8},
    "sgl_kernel_patch_rules": [{"name": "r1", "file": "CMakeLists.txt"}],
    "ansible_host": "10.0.0.1",
    "ansible_facts": {"gpufleet_gpu": {"present": True}},
}


def key(hv, root=ROOT):
    return dk.deploy_key(hv, root)


def test_same_inputs_same_key():
    assert key(dict(BASE)) == key(dict(BASE))
    assert len(key(dict(BASE))) == 24


@pytest.mark.parametrize("name,value", [
    ("torch_nightly_date", "20260308"),
    ("flashinfer_version", "0.6.0.dev20260310"),
    ("gpufleet_expect", {"device_count": 4}),
    ("sgl_kernel_patch_rules", []),
    ("sgl_kernel_cuda_arch_list", "12.0a"),
])
def test_any_input_change_changes_the_key(name, value):
    changed = dict(BASE, **{name: value})
    assert key(changed) != key(dict(BASE))


@pytest.mark.parametrize("name,value", [
    ("gpufleet_report_dir", "/tmp/elsewhere"),
    ("gpufleet_serial", 2),
    ("gpufleet_result", {"status": "running"}),
    ("gpufleet_stage", "connect"),
    ("gpufleet_full_run", True),
    ("gpufleet_gpu", {"present": True}),   # a module's fact, injected as a variable
    ("ansible_port", 2222),                # connection variables are not deploy inputs
    ("other_tool_setting", 1),
])
def test_run_control_and_facts_do_not_count(name, value):
    assert key(dict(BASE, **{name: value})) == key(dict(BASE))


def test_code_change_changes_the_key(tmp_path):
    for sub in dk.CODE_DIRS:
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "main.yml").write_text("- one\n")
    before = key(dict(BASE), str(tmp_path))
    (tmp_path / "roles" / "main.yml").write_text("- two\n")
    assert key(dict(BASE), str(tmp_path)) != before


def test_untemplatable_value_is_an_input_not_an_error():
    class Vars(dict):
        def __getitem__(self, name):
            if name == "torch_nightly_date":
                raise ValueError("undefined")
            return dict.__getitem__(self, name)
    assert key(Vars(BASE)) == key(Vars(BASE))


def test_refuses_a_root_without_code(tmp_path):
    with pytest.raises(AnsibleFilterError, match="not the collection's root"):
        key(dict(BASE), str(tmp_path))
