# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whose variable is it: the collection's inputs, its own internal names, the operator's.

A variable whose name starts with one of the collection's prefixes (PREFIXES)
is either an input, declared by an argument spec (roles/*/meta/
argument_specs.yml, any entry point), or one of the collection's own names
(INTERNAL: what a role sets, registers or passes on, and the facts its
modules return). Anything else with such a prefix, set in the inventory or
with -e, is a typo until the operator says otherwise: the fleet rules
(plugin_utils/rules/fleet.py) refuse it before anything runs, naming the
nearest input, unless gpufleet_allowed_variables lists it.

INTERNAL is the one list of the collection's own names; tests/unit/
plugins/plugin_utils/test_internal_names.py holds it to what the roles and
playbooks really set.
"""

from __future__ import annotations

import difflib
import functools
import glob
import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# gpufleet_ for the playbooks' inputs (the fleet role's), then each role's own
PREFIXES = ("gpufleet_", "activate_", "cuda_toolkit_", "flashinfer_", "sgl_kernel_", "sglang_", "torch_nightly_",
            "uv_venv_", "verify_")

INTERNAL = frozenset((
    # the named results one step hands the next (roles/fleet/README.md, "Named results")
    "fleet_reach", "fleet_lock", "fleet_stage", "fleet_preflight_done", "fleet_preflight_gpu", "fleet_adopt_to",
    "fleet_adopted", "fleet_venv_marked", "fleet_serving", "fleet_result", "fleet_report",
    "uv_venv_dir", "uv_venv_python", "uv_venv_bin", "uv_venv_user", "uv_venv_become", "uv_venv_base_python",
    "uv_venv_link_path", "uv_venv_remote_wheelhouse_dir", "uv_venv_netrc_env",
    "cuda_toolkit_home", "cuda_toolkit_nvcc_version",
    "torch_nightly_constraints_file", "torch_nightly_installed", "torch_nightly_freeze",
    "verify_result",
    "activate_active_venv", "activate_previous_venv", "activate_switched", "activate_adopted",
    "sgl_kernel_abi_key",
    # set or registered by a role for its own later tasks
    "activate_history",
    "cuda_toolkit_libcudart_all", "cuda_toolkit_libcudart_path",
    "flashinfer_aot_key", "flashinfer_installed", "flashinfer_pins",
    "sgl_kernel_build_jobs", "sgl_kernel_choice",
    "sglang_installed",
    "torch_nightly_pins",
    "uv_venv_fingerprint", "uv_venv_home", "uv_venv_netrc_dir", "uv_venv_python_version_selected",
    "uv_venv_python_versions_found",
    "verify_xid_root",
    # a role's constants (vars/main.yml)
    "cuda_toolkit_apt_arches", "cuda_toolkit_apt_distros", "cuda_toolkit_apt_key_file", "cuda_toolkit_apt_repo_base",
    "cuda_toolkit_driver_minimums", "cuda_toolkit_pip_marker", "cuda_toolkit_target_dirs",
    "fleet_hook_reason", "fleet_hook_action",
    # what a playbook or a task passes to the step it runs (play and task vars)
    "fleet_mode", "fleet_first_stage", "fleet_report_in_check_mode",
    "fleet_record_status", "fleet_record_stage", "fleet_record_message",
    "uv_venv_netrc_entries", "uv_venv_netrc_urls",
    # host facts the modules return (gpu_facts, torch_verify), kept in the fact cache between runs
    "gpufleet_gpu", "gpufleet_torch",
))


def has_prefix(name):
    """Whether NAME is in the collection's namespace (one of PREFIXES)."""
    return isinstance(name, str) and name.startswith(PREFIXES)


@functools.lru_cache(maxsize=None)
def declared_names():
    """Every option of every entry point of the roles' argument specs, sorted."""
    names = set()
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")):
        with open(path, encoding="utf-8") as handle:
            specs = (yaml.safe_load(handle) or {}).get("argument_specs") or {}
        for entry in specs.values():
            names.update(((entry or {}).get("options") or {}))
    return tuple(sorted(names))


def unknown_names(names, allowed=()):
    """The names among NAMES in the collection's namespace that are neither an input, nor internal, nor ALLOWED."""
    declared = set(declared_names())
    return [n for n in names if has_prefix(n) and n not in declared and n not in INTERNAL and n not in allowed]


def nearest(name):
    """The declared input of NAME's prefix nearest to it (difflib, on what follows the prefix: the prefix they
    share would make any two names look alike), or None where none is near."""
    prefix = next((p for p in PREFIXES if name.startswith(p)), "")
    rests = [n[len(prefix):] for n in declared_names() if n.startswith(prefix)]
    found = difflib.get_close_matches(name[len(prefix):], rests, n=1)
    return prefix + found[0] if found else None
