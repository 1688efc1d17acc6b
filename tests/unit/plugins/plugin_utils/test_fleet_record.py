# -*- coding: utf-8 -*-
"""fleet_record: one host's record for the report, from what the run left in its variables."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.inference.plugins.plugin_utils.fleet_record import fleet_record

PASSED = {"passed": True, "fail_message": "", "target": "/home/deploy/ml-env-abc", "active_venv": "/home/deploy/ml-env-abc",
          "previous_venv": "/home/deploy/ml-env-old", "gpu": {"count": 8}, "torch": {"torch_version": "2.13.0"},
          "packages": {"torch": "2.13.0"}, "mismatches": [], "sgl_kernel_abi_key": "k1", "sgl_kernel_targets": ["sm_90a"],
          "host_unreachable": False}


def test_a_passed_verification_is_ok_with_its_summary():
    rec = fleet_record({"verify_result": PASSED}, "ok", None, "verify")
    assert rec["status"] == "ok"
    assert rec["stage"] == ""
    assert rec["message"] == ""
    assert rec["venv"] == "/home/deploy/ml-env-abc"
    assert rec["previous_venv"] == "/home/deploy/ml-env-old"
    assert rec["gpu"] == {"count": 8}
    assert rec["packages"] == {"torch": "2.13.0"}
    assert rec["sgl_kernel_targets"] == ["sm_90a"]
    assert rec["activated"] is False
    assert rec["adopted"] == {}


def test_a_verification_that_did_not_pass_is_failed_at_the_stage_with_its_message():
    verify = dict(PASSED, passed=False, fail_message="verification of x failed: torch 2.12 != 2.13",
                  mismatches=[{"key": "torch"}])
    rec = fleet_record({"verify_result": verify}, "ok", None, "verify")
    assert (rec["status"], rec["stage"]) == ("failed", "verify")
    assert rec["message"] == "verification of x failed: torch 2.12 != 2.13"
    assert rec["mismatches"] == [{"key": "torch"}]


def test_a_host_lost_while_verifying_is_unreachable_whatever_the_status():
    verify = dict(PASSED, passed=False, host_unreachable=True, fail_message="host unreachable while verifying: x")
    for status in ("ok", "failed"):
        assert fleet_record({"verify_result": verify}, status, None, "verify")["status"] == "unreachable"


def test_nothing_verified_is_unverified_not_ok():
    # check mode, for a venv only a real run would create
    assert fleet_record({"verify_result": dict(PASSED, passed=None)}, "ok")["status"] == "unverified"
    # the verification never ran (skipped, or not in this play)
    assert fleet_record({}, "ok")["status"] == "unverified"
    assert fleet_record({"verify_result": {"skipped": True, "changed": False}}, "ok")["status"] == "unverified"


def test_a_caught_failure_keeps_its_message_and_stage_and_the_partial_state():
    hv = {"uv_venv_dir": "/home/deploy/ml-env-new", "fleet_preflight_gpu": {"count": 2}}
    rec = fleet_record(hv, "failed", "uv failed: no space", "torch")
    assert (rec["status"], rec["stage"], rec["message"]) == ("failed", "torch", "uv failed: no space")
    # the venv the run was building and the GPUs its preflight read
    assert rec["venv"] == "/home/deploy/ml-env-new"
    assert rec["gpu"] == {"count": 2}


def test_activation_outputs_win_over_what_the_verification_read():
    hv = {"verify_result": PASSED, "activate_switched": True, "activate_active_venv": "/home/deploy/ml-env-new",
          "activate_previous_venv": "/home/deploy/ml-env-abc", "sgl_kernel_abi_key": "built-now"}
    rec = fleet_record(hv, "ok")
    assert rec["activated"] is True
    assert (rec["active_venv"], rec["previous_venv"]) == ("/home/deploy/ml-env-new", "/home/deploy/ml-env-abc")
    assert rec["sgl_kernel_abi_key"] == "built-now"


def test_the_adopted_venv_says_whether_it_was_moved():
    adopted = {"moved_from": "/home/deploy/ml-env", "moved_to": "/home/deploy/ml-env-adopted"}
    assert fleet_record({"fleet_adopted": adopted, "activate_adopted": "/home/deploy/ml-env-adopted"})["adopted"] == \
        dict(adopted, moved=True)
    assert fleet_record({"fleet_adopted": adopted})["adopted"] == dict(adopted, moved=False)


def test_an_unknown_status_is_refused():
    with pytest.raises(ValueError, match="status must be one of ok, failed"):
        fleet_record({}, "unreachable")
