# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One host's result for the fleet report, from what this run left in its
variables: the verify role's output (verify_result), the activate role's
outputs, the fleet role's adoption plan and preflight GPU facts.

Used by the filter gpufleet.inference.fleet_record (the fleet role's
record.yml, a set_fact: never cached between runs) and by the report action
for a host of verify.yml that has no record of its own (its verification
passed or failed without an error: the record is built there, with no task
for it on the host).
"""

from __future__ import annotations

STATUSES = ("ok", "failed")


def _get(mapping, name, default=None):
    """mapping[name], or default when it is missing or an undefined template."""
    try:
        value = mapping.get(name, default)
    except Exception:  # an undefined variable in a lazily templated host var
        return default
    return default if value is None else value


def fleet_record(hostvars, status="ok", message=None, stage=""):
    """The record of one host: status (ok, failed, unreachable, unverified),
    stage, message, the verification's summary and what activation did.

    status "ok" means the play got through without an error: the record is
    then "ok" or "failed" by the verification (unverified when there was none,
    e.g. check mode for a venv only a real run creates). "failed" is a caught
    error; message is its text."""
    if status not in STATUSES:
        raise ValueError("fleet_record: status must be one of %s (got %r)" % (", ".join(STATUSES), status))
    verify = _get(hostvars, "verify_result", {})
    if not isinstance(verify, dict) or verify.get("skipped"):
        verify = {}
    passed = verify.get("passed")
    serving = _get(hostvars, "fleet_serving", {}) or {}
    if not isinstance(serving, dict):
        serving = {}
    if verify.get("host_unreachable"):
        outcome = "unreachable"
    elif status != "ok":
        outcome = status
    elif passed is None:
        outcome = "unverified"
    elif serving.get("error"):
        # a drain or return that failed, or GPUs still busy after the drain
        outcome = "failed"
        stage = "serving"
        message = serving["error"] if message is None else message
    elif verify.get("busy_refused") and not passed:
        # full verification refused before any CUDA work: never a failed GPU
        outcome = "busy"
    else:
        outcome = "ok" if passed else "failed"
    adopted = _get(hostvars, "fleet_adopted", {}) or {}
    if adopted:
        adopted = dict(adopted, moved=bool(_get(hostvars, "activate_adopted", "")))
    return {
        "status": outcome,
        "stage": (stage or "") if status != "ok" or outcome in ("failed", "busy") else "",
        "message": message if message is not None else verify.get("fail_message", ""),
        "mismatches": verify.get("mismatches") or [],
        "venv": verify["target"] if "target" in verify else _get(hostvars, "uv_venv_dir", ""),
        "active_venv": _get(hostvars, "activate_active_venv", verify.get("active_venv", "")),
        "previous_venv": _get(hostvars, "activate_previous_venv", verify.get("previous_venv", "")),
        "activated": bool(_get(hostvars, "activate_switched", False)),
        # deploy.yml's fast path: the active venv already carried the run's deploy key
        "fast_path": bool((_get(hostvars, "fleet_reach", {}) or {}).get("fast")),
        # the hand-built venv found at the stable path: as found, and where it went
        "adopted": adopted,
        "gpu": verify.get("gpu") or _get(hostvars, "fleet_preflight_gpu", {}) or {},
        "torch": verify.get("torch") or {},
        "packages": verify.get("packages") or {},
        "sgl_kernel_abi_key": _get(hostvars, "sgl_kernel_abi_key", "") or verify.get("sgl_kernel_abi_key", ""),
        "sgl_kernel_targets": verify.get("sgl_kernel_targets") or [],
        "sgl_kernel_choice": verify.get("sgl_kernel_choice") or _get(hostvars, "sgl_kernel_choice", {}) or {},
        # what each GPU was doing, what was skipped and why (verify_mode)
        "gpu_use": verify.get("gpu_use") or {},
        # how old the last numeric pass under this stack is, per GPU
        "proof": verify.get("proof") or {},
        # the deploy key the venv was stamped with at activation ("" for a venv the collection did not deploy)
        "deploy_key": (verify.get("deploy_stamp") or {}).get("key") or "",
        # the drain and return hooks: what ran, the reason, an error
        "serving": {k: v for k, v in serving.items() if k != "drained_before"} if serving else {},
    }
