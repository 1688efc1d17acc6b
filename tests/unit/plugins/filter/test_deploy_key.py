"""deploy_key: the same inputs and code give the same key; any input or code
change gives another; run control and facts do not count."""
import os

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpufleet.inference.plugins.filter import deploy_key as dk
from ansible_collections.gpufleet.inference.plugins.plugin_utils import keys
from ansible_collections.gpufleet.inference.tests.unit.plugins.plugin_utils.key_inputs import fake_root

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
    ("sgl_kernel_arch_list", "12.0a"),
    ("gpufleet_wheelhouse", "/srv/wheels"),
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
    ("gpufleet_host_lock_wait", 60),
    ("gpufleet_outlier_ratio", 0.5),
    # the fleet role's named results: what a run hands its next step, not an input
    ("fleet_reach", {"fast": True, "deploy_key": "abc"}),
    ("fleet_stage", "torch"),
    ("verify_result", {"passed": True}),
    ("gpufleet_not_declared_anywhere", 1),
    ("gpufleet_gpu", {"present": True}),   # a module's fact, injected as a variable
    ("ansible_port", 2222),                # connection variables are not deploy inputs
    ("other_tool_setting", 1),
])
def test_run_control_and_facts_do_not_count(name, value):
    assert key(dict(BASE, **{name: value})) == key(dict(BASE))


def _fake_root(tmp_path):
    return fake_root(tmp_path)


def test_code_change_changes_the_key(tmp_path):
    _fake_root(tmp_path)
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


def test_inputs_come_from_the_argument_specs(tmp_path):
    _fake_root(tmp_path)
    base = key({"fleet_x": 1, "fleet_y": 1, "uv_venv_y": 1}, str(tmp_path))
    # fleet's "preflight" options and every option of a stage role count ...
    assert key({"fleet_x": 2, "fleet_y": 1, "uv_venv_y": 1}, str(tmp_path)) != base
    assert key({"fleet_x": 1, "fleet_y": 1, "uv_venv_y": 2}, str(tmp_path)) != base
    # ... fleet's other entry points are run control
    assert key({"fleet_x": 1, "fleet_y": 2, "uv_venv_y": 1}, str(tmp_path)) == base


def test_every_fleet_preflight_option_is_an_input():
    names = keys.input_names(ROOT)
    assert {"gpufleet_expect", "gpufleet_venv_link", "gpufleet_wheelhouse", "torch_nightly_date"} <= names
    assert not names & {"gpufleet_hosts", "gpufleet_serial", "gpufleet_report_dir", "gpufleet_host_lock_wait"}
