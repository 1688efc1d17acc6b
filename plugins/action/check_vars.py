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

Rules that judge what the hosts set themselves (an attribute inventory on the
rules function: the fleet role's hosts and validate) get it from hostvars,
which hold the inventory's variables and the extra vars but no role default:
see operator_inputs and group_inputs. A type error for a float is said in the
rules' words, never with the Python class that carried the value.

The inventory check (playbooks/check_inventory.yml, the fleet role's entry
point inventory) also judges each host's own inputs as its run would, on the
controller and without connecting to it (judged_inputs): the entry points
its rules name, each variable rendered from the host's inventory and extra
vars over the roles' defaults.
"""

from __future__ import annotations

import os
import re

from ansible.errors import AnsibleError, AnsibleUndefinedVariable
from ansible.inventory.manager import InventoryManager
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action.validate_argument_spec import ActionModule as ValidateArgumentSpec
from ansible.template import Templar
from ansible.utils.vars import combine_vars
from ansible.vars.plugins import get_vars_from_inventory_sources, get_vars_from_path

from ansible_collections.gpufleet.inference.plugins.plugin_utils.internal_names import declared_names, has_prefix
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.common import quoted
from ansible_collections.gpufleet.inference.plugins.plugin_utils.value_rules import RULES, rule_errors

# the collection's root: the roles' defaults and argument specs the inventory check reads
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# a verify role's message on a playbook input it takes, "verify_x (gpufleet_x)...": the playbook's own says it
_ALIASED_RE = re.compile(r"^verify_\w+ \((gpufleet_\w+)\)")
# validate_argument_spec's words for a value that is not a float name the Python class that carries it
_FLOAT_ERROR_RE = re.compile(r"^argument '(?P<name>[^']+)' is of type \S+ and we were unable to convert to float: ")

# Read here, in ansible-playbook's own process, which imports a task's action
# plugin before it forks a worker per host: the workers share the names.
declared_names()


def worded(type_errors, errors, arguments):
    """The type errors, a float's in the words of the rules: dropped where a rule's message already names the
    variable (in its own words: "a number of GiB"), else "<variable> must be a number (got <value>)"."""
    out = []
    for error in type_errors:
        match = _FLOAT_ERROR_RE.match(error)
        name = match.group("name") if match else None
        if not match:
            out.append(error)
        elif not any(e.startswith(name + " ") for e in errors):
            out.append("%s must be a number (got %s)" % (name, quoted(arguments.get(name))))
    return out


def operator_inputs(hostvars, hosts, names):
    """What each of HOSTS set itself, from hostvars: a host's variables there are its inventory's and the extra
    vars (and what this run set or registered on it, the collection's internal names), never a role's defaults.
    The names in the collection's namespace, and the values of NAMES it sets, rendered for the host."""
    out = {}
    for host in hosts:
        if host not in hostvars:
            continue
        found = hostvars[host]
        values = {}
        for name in names:
            if name in found:
                try:
                    values[name] = found[name]
                except AnsibleError:  # a value that does not render: the host's own checks name it
                    pass
        out[host] = {"names": [n for n in found if has_prefix(n)], "values": values}
    return out


def group_inputs(loader, sources, basedir, names, hosts):
    """Which groups set which of NAMES themselves, with their ancestors, and the groups of each host of HOSTS
    (added to it): the inventory's sources read again, as ansible-inventory reads them (a group's own
    variables and its group_vars; a host's merged variables do not say which group gave a value)."""
    inventory = InventoryManager(loader=loader, sources=list(sources))
    groups = {}
    for group in inventory.groups.values():
        own = combine_vars(group.get_vars(), get_vars_from_inventory_sources(loader, list(sources), [group], "all"))
        if basedir:
            own = combine_vars(own, get_vars_from_path(loader, basedir, [group], "all"))
        groups[group.name] = {"sets": [n for n in names if n in own],
                              "ancestors": sorted(a.name for a in group.get_ancestors())}
    for host, found in hosts.items():
        entry = inventory.get_host(host)
        found["groups"] = sorted(g.name for g in entry.get_groups()) if entry else []
    return groups


def judged_inputs(loader, hostvars, hosts, judge, keep):
    """Each host of HOSTS judged as its run would judge it, on the controller: for each (role, entry point) of
    JUDGE, the types of the entry point's argument spec and the role's value rules, on the variables rendered
    from what the host has (its inventory's variables and the extra vars, hostvars.raw_get) over the roles'
    defaults. Adds to each host its "errors" and the rendered values of the names of KEEP ("inputs")."""
    defaults, options = {}, {}
    for role, entry_point in judge:
        path = os.path.join(ROOT, "roles", role, "defaults", "main.yml")
        try:
            found = loader.load_from_file(path, trusted_as_template=True) or {}
        except TypeError:  # ansible-core before 2.19: every loaded string may be a template
            found = loader.load_from_file(path) or {}
        defaults = combine_vars(defaults, found)
        spec = loader.load_from_file(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml")) or {}
        options[(role, entry_point)] = spec["argument_specs"][entry_point].get("options") or {}
    for host, found in hosts.items():
        variables = combine_vars(defaults, hostvars.raw_get(host))
        templar = Templar(loader=loader, variables=variables)
        errors, rendered = [], {}
        for key, spec in options.items():
            provided = {}
            for name in spec:
                if name not in variables:
                    continue
                if name not in rendered:
                    try:
                        rendered[name] = templar.template(variables[name])
                    except AnsibleUndefinedVariable:
                        # a name the run defines (a hook's fleet_hook_reason, a host's facts): judged there
                        continue
                    except AnsibleError as exc:
                        errors.append("%s cannot be rendered: %s" % (name, getattr(exc, "message", exc)))
                        continue
                provided[name] = rendered[name]
            rules = rule_errors(key[0], key[1], provided)
            types = [str(e) for e in ArgumentSpecValidator(spec).validate(provided).errors.messages]
            errors += [e for e in worded(types, rules, provided) + rules
                       if e not in errors and _ALIASED_RE.sub(r"\1", e) not in errors]
        found["errors"] = errors
        found["inputs"] = {name: rendered[name] for name in keep if name in rendered}


class ActionModule(ValidateArgumentSpec):
    """validate_argument_spec, plus the caller's own error messages."""

    def _inventory(self, reads, values, task_vars):
        """values' INVENTORY for rules that read it (their attribute inventory: plugin_utils/rules/fleet.py):
        for the hosts its context lists, or the task's host."""
        hostvars = task_vars.get("hostvars")
        hosts = values.get(reads["hosts"]) if reads["hosts"] else [task_vars.get("inventory_hostname")]
        if hostvars is None or not isinstance(hosts, (list, tuple)):
            return None
        found = operator_inputs(hostvars, hosts, reads["values"])
        groups = {}
        if reads["groups"] and found:
            groups = group_inputs(self._loader, task_vars.get("ansible_inventory_sources") or [],
                                  task_vars.get("playbook_dir"), reads["groups"], found)
        if reads.get("judge") and found:
            judged_inputs(self._loader, hostvars, found, reads["judge"], reads.get("keep", ()))
        return {"hosts": found, "groups": groups}

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
        # the entry point's variables, then what else the rules read (another
        # role's results, such as uv_venv_dir), which has no type to check here
        spec = args.get("argument_spec")
        arguments = dict(self.get_args_from_task_vars(spec if isinstance(spec, dict) else {}, task_vars or {}),
                         **(args.get("provided_arguments") or {}))
        not_checked = None
        if rules is not None:
            # a role's value rules (plugin_utils/rules/<role>.py), "<role>.<entry point>"
            key = tuple(str(rules).split(".", 1))
            if key not in RULES:
                raise AnsibleError("check_vars: rules must be one of %s, got %r"
                                   % (", ".join(".".join(k) for k in sorted(RULES)), rules))
            values = dict(context, **arguments)
            reads = getattr(RULES[key], "inventory", None)
            if reads:
                values[reads["name"]] = self._inventory(reads, values, task_vars or {})
            errors = rule_errors(key[0], key[1], values) + errors
            # what the rules cannot judge here (a path on a host), said apart from the errors
            notes = getattr(RULES[key], "notes", None)
            if notes is not None:
                not_checked = notes(values)
        self._task.args = args
        result = super().run(tmp, task_vars)
        type_errors = worded(result.get("argument_errors") or [], errors, arguments)
        if not_checked:
            result["not_checked_offline"] = not_checked
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
