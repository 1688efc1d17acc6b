"""tools/fleet_verify.py: what its options make of the playbook's variables."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import fleet_verify  # noqa: E402  pylint: disable=wrong-import-position


def test_mode_sets_the_depth_and_is_left_to_the_inventory_without_it():
    args = fleet_verify.parse_args(["-i", "inv", "--mode", "in_service", "--report-dir", "/r"])
    assert fleet_verify.extra_vars(args) == {"gpufleet_report_dir": "/r", "gpufleet_verify_mode": "in_service"}
    assert "gpufleet_verify_mode" not in fleet_verify.extra_vars(fleet_verify.parse_args(["-i", "inv"]))


def test_an_unknown_mode_is_refused_naming_the_choices(capsys):
    with pytest.raises(SystemExit):
        fleet_verify.parse_args(["-i", "inv", "--mode", "quick"])
    assert "invalid choice: 'quick' (choose from 'auto', 'in_service', 'full')" in capsys.readouterr().err


def test_extra_vars_keep_json_and_key_value_and_refuse_anything_else():
    args = fleet_verify.parse_args(["-i", "inv", "-e", '{"gpufleet_drain_hook": ["scontrol", "x"]}', "-e", "a=b",
                                    "--no-smoke"])
    out = fleet_verify.extra_vars(args)
    assert out["gpufleet_drain_hook"] == ["scontrol", "x"] and out["a"] == "b" and out["gpufleet_verify_smoke"] is False
    with pytest.raises(SystemExit):
        fleet_verify.extra_vars(fleet_verify.parse_args(["-i", "inv", "-e", "nonsense"]))
