# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin gpufleet.inference.check_vars: types and values in one task.

The one way inputs are checked: the types, choices and required variables
of a role's argument spec (as ansible.builtin.validate_argument_spec checks
them), and the role's value rules (plugin_utils/rules/<role>.py: ranges, URL
and path shapes, rules across variables) on the same values. One task instead
of a validate_argument_spec followed by an assert: a local task costs the
controller a worker per host, and fleet verification runs this on every host
of the fleet.
"""

from __future__ import annotations

from ansible.errors import AnsibleError
from ansible.plugins.action.validate_argument_spec import ActionModule as ValidateArgumentSpec

from ansible_collections.gpufleet.inference.plugins.plugin_utils.value_rules import RULES, rule_errors


class ActionModule(ValidateArgumentSpec):
    """validate_argument_spec, plus the caller's own error messages."""

    def run(self, tmp=None, task_vars=None):
        args = dict(self._task.args)
        errors = args.pop("errors", None) or []
        rules = args.pop("rules", None)
        context = args.pop("context", None) or {}
        if not isinstance(context, dict):
            raise AnsibleError("check_vars: context must be a dict, got %s" % type(context).__name__)
        if not isinstance(errors, list) or not all(isinstance(e, str) for e in errors):
            raise AnsibleError("check_vars: errors must be a list of messages, got %s" % type(errors).__name__)
        # A message list may carry empty entries (a rule that passed renders to '').
        errors = [e.strip() for e in errors if e.strip()]
        if rules is not None:
            # a role's value rules (plugin_utils/rules/<role>.py), "<role>.<entry point>"
            key = tuple(str(rules).split(".", 1))
            if key not in RULES:
                raise AnsibleError("check_vars: rules must be one of %s, got %r"
                                   % (", ".join(".".join(k) for k in sorted(RULES)), rules))
            # the entry point's variables, then what else the rules read (another
            # role's results, such as uv_venv_dir), which has no type to check here
            values = dict(self.get_args_from_task_vars(args.get("argument_spec") or {}, task_vars or {}),
                          **(args.get("provided_arguments") or {}))
            values = dict(context, **values)
            errors = rule_errors(key[0], key[1], values) + errors
        self._task.args = args
        result = super().run(tmp, task_vars)
        type_errors = list(result.get("argument_errors") or [])
        if not type_errors and not errors:
            return result
        result["failed"] = True
        result["argument_errors"] = type_errors + errors
        # The same wording as each check alone gave: validate_argument_spec's
        # header for type errors, the rules' messages joined with '; '.
        if type_errors:
            result["msg"] = "Validation of arguments failed:\n%s" % "\n".join(type_errors + errors)
        else:
            result["msg"] = "; ".join(errors)
        return result
