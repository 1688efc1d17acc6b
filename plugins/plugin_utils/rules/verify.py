# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The verify role's value rules (every entry point shares the main one's)."""

from __future__ import annotations

import re

from ansible_collections.gpufleet.inference.plugins.module_utils import backends, model_profile, model_verify
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.common import (
    expect_errors, is_list, number, show, tolerance_errors, type_name)
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.defaults import given, role_default
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.fleet import LINK_RE

_DIGITS_RE = re.compile(r"^[0-9]+$")


def verify_main(values):
    """The verify role's inputs (every entry point shares the main one's)."""
    errors = []
    link = values.get("verify_venv_link")
    if not (isinstance(link, str) and LINK_RE.match(link)):
        errors.append("verify_venv_link (gpufleet_venv_link) must be an absolute or ~/ path without spaces, "
                      "not ending in / (got '%s')" % show(link))
    venv = values.get("verify_venv")
    if not (isinstance(venv, str) and (venv == "" or venv.startswith(("/", "~/")))):
        errors.append("verify_venv must be '' (the active venv) or an absolute or ~/ path (got '%s')" % show(venv))
    imports = values.get("verify_imports")
    if not is_list(imports):
        errors.append("verify_imports (gpufleet_verify_imports) must be a list of module names (got %s)"
                      % type_name(imports))
    timeout = values.get("verify_timeout")
    if not (_DIGITS_RE.match(show(timeout)) and number(timeout, 0, int) > 0):
        errors.append("verify_timeout must be a number of seconds > 0 (got %s)" % show(timeout))
    served = given(values, "verify", "verify_served_timeout")
    if not (_DIGITS_RE.match(show(served)) and number(served, 0, int) > 0):
        errors.append("verify_served_timeout (gpufleet_served_timeout) must be a number of seconds > 0 (got %s)"
                      % show(served))
    memory = given(values, "verify", "verify_busy_memory_mib")
    if number(memory, 0, int) < 1:
        errors.append("verify_busy_memory_mib (gpufleet_busy_memory_mib) must be a number of MiB > 0 (got %s)"
                      % show(memory))
    errors += expect_errors(values.get("verify_expect"), "verify_expect (gpufleet_expect)")
    errors += tolerance_errors(values.get("verify_kernel_tolerances"),
                               "verify_kernel_tolerances (gpufleet_kernel_tolerances)")
    errors += model_errors(values)
    return errors


def model_errors(values):
    """The served model's inputs: what the controller can judge before any
    change (a shipped profile or a config.json given as a dict, the TP size,
    the backend names); a config.json path on the host is judged there."""
    model = given(values, "verify", "verify_model")
    config = values.get("verify_model_config") or {}
    tp = given(values, "verify", "verify_tp_size")
    if not isinstance(model, str):
        return ["verify_model (gpufleet_model) must be a shipped profile name or a path (got %s)" % type_name(model)]
    if not isinstance(config, dict):
        return ["verify_model_config (gpufleet_model_config) must be a dict, the model's config.json (got %s)"
                % type_name(config)]
    if not (_DIGITS_RE.match(show(tp)) and number(tp, 0, int) > 0):
        return ["verify_tp_size (gpufleet_tp_size) must be a positive integer (got %s)" % show(tp)]
    if model and not config and model not in model_profile.PROFILES and not model.startswith(("/", "~/")):
        return ["gpufleet_model: %r is neither a shipped profile (%s) nor an absolute or ~/ path of a config.json"
                % (model, ", ".join(sorted(model_profile.PROFILES)))]
    params = {"model": model if (config or model in model_profile.PROFILES) else "", "model_config": config or None,
              "tp_size": int(number(tp, 1, int)), "backend_preference": values.get("verify_backend_preference") or {},
              "backend_required": values.get("verify_backend_required") or {},
              "sglang_version": values.get("verify_sglang_version") or backends.DEFAULT_SGLANG_VERSION,
              "model_jit": given(values, "verify", "verify_model_jit"),
              "model_quant_config": values.get("verify_model_quant_config") or None,
              "backend_families": values.get("verify_backend_families"),
              "timeout": int(number(values.get("verify_timeout"), role_default("verify", "verify_timeout"), int))}
    return model_verify.resolve(params)[1]


ENTRY_POINTS = {"main": verify_main}
