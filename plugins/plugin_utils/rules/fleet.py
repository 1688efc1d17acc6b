# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet role's value rules: the playbooks' inputs (entry points hosts and
validate), what the argument spec's types cannot express, and what the hosts
set themselves in the inventory or with -e (unknown variables, a host in two
GPU models' groups, a nightly date its pins contradict, the report directory)."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping

from ansible.module_utils.parsing.convert_bool import BOOLEANS_TRUE

from ansible_collections.gpufleet.inference.plugins.plugin_utils import internal_names
from ansible_collections.gpufleet.inference.plugins.plugin_utils.nightly import (
    NightlyInputError, nightly_date_valid, nightly_version_parse)
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.common import (
    expect_errors, is_list, list_errors, number, part_name_error, passes_type, quoted, show, tolerance_errors)
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.defaults import given

# absolute or under ~/, no whitespace, not ending in /
LINK_RE = re.compile(r"^(/|~/)\S*[^/\s]$")
_ABSOLUTE_NO_SPACE_RE = re.compile(r"^/\S*$")

_SERIAL_RE = re.compile(r"^([1-9][0-9]*|([1-9][0-9]?|100)%)$")
_PERCENT_RE = re.compile(r"^([0-9]{1,2}|100)$")


def play_keyword_errors(serial, max_fail):
    """gpufleet_serial and gpufleet_max_fail_percentage, the play keywords."""
    errors = []
    batches = serial if is_list(serial) else [serial]
    if not batches or any(isinstance(b, bool) or not _SERIAL_RE.match(str(b)) for b in batches):
        errors.append("gpufleet_serial must be a number of hosts >= 1, a percentage 1%-100% or a list of them "
                      "(got " + json.dumps(serial) + ")")
    if isinstance(max_fail, bool) or not _PERCENT_RE.match(str(max_fail)):
        errors.append("gpufleet_max_fail_percentage must be an integer 0-100 (got '" + str(max_fail) + "')")
    return errors


def play_serial(serial="100%"):
    """The play's serial: gpufleet_serial when play_keyword_errors takes it,
    else 100%. The keyword is templated before any host is known, so a bad
    value must not break the play before the checks that name it have run
    (the hosts check on the controller, each host's validation under --limit)."""
    batches = serial if is_list(serial) else [serial]
    if not batches or any(isinstance(b, bool) or not _SERIAL_RE.match(str(b)) for b in batches):
        return "100%"
    return serial


def play_max_fail(max_fail=100):
    """The play's max_fail_percentage: gpufleet_max_fail_percentage when it is
    an integer 0-100, else 100 (which stops a batch only when all of its hosts
    failed, as an unset keyword does)."""
    if isinstance(max_fail, bool) or not _PERCENT_RE.match(str(max_fail)):
        return 100
    return int(max_fail)


def host_pattern_errors(values):
    """gpufleet_hosts matches no host: a play would skip with "no hosts matched" and exit 0 having done nothing.

    The context (hosts.yml) gives the hosts the pattern matched (fleet_hosts_matched), the inventory's groups
    and sources and its number of hosts; without them there is nothing to judge."""
    matched = values.get("fleet_hosts_matched")
    if matched is None or (is_list(matched) and matched):
        return []
    groups = values.get("fleet_inventory_groups") or []
    return ["gpufleet_hosts must be a host pattern that matches at least one host of the inventory (got '%s'); "
            "the inventory %s has %s host(s)%s. Nothing was changed."
            % (show(values.get("gpufleet_hosts")), ", ".join(values.get("fleet_inventory_sources") or []),
               show(values.get("fleet_inventory_size", 0)), (" in the groups " + ", ".join(groups)) if groups else "")]


def slice_errors(values):
    """A sliced run: gpufleet_run_id and gpufleet_report_part, both or neither, each a plain name."""
    run_id, part = given(values, "fleet", "gpufleet_run_id"), given(values, "fleet", "gpufleet_report_part")
    if run_id in (None, "") and part in (None, ""):
        return []
    if run_id in (None, "") or part in (None, ""):
        return ["gpufleet_run_id and gpufleet_report_part go together: a slice of a sliced run needs both (got %r and %r)"
                % (run_id, part)]
    return [e for e in (part_name_error("gpufleet_run_id", run_id), part_name_error("gpufleet_report_part", part)) if e]


# What the hosts of a run have set themselves, in the inventory or with -e (never a role's default), as
# check_vars hands it to the rules below: values[INVENTORY] = {"hosts": {host: {"names": [the names set in
# the collection's namespace], "values": {name: value, for the names of HOST_VALUES it sets}, "groups": [its
# groups]}}, "groups": {group: {"sets": [the names of MODEL_GROUP_VARIABLES the group itself sets],
# "ancestors": [its parent groups, up to all]}}}. Without it (a rule called with the variables alone, as
# verify_host calls fleet_validate) these rules have nothing to judge.
INVENTORY = "fleet_inventory"
# what a GPU model's group sets, whole, for its hosts (inventories/cluster/hosts.yml)
MODEL_GROUP_VARIABLES = ("gpufleet_expect", "sgl_kernel_arch_list")
HOST_VALUES = ("gpufleet_allowed_variables", "gpufleet_report_dir", "torch_nightly_channel", "torch_nightly_date",
               "torch_nightly_versions")


def words(items, most=5):
    """'a', 'a and b', 'a, b and c'; beyond MOST items the first ones and how many more."""
    items = [str(i) for i in items]
    if len(items) > most:
        return "%s and %d more" % (", ".join(items[:most]), len(items) - most)
    return " and ".join(filter(None, (", ".join(items[:-1]), items[-1] if items else "")))


def _inventory_hosts(values):
    return ((values.get(INVENTORY) or {}).get("hosts") or {}).items()


def _unrendered(found, name):
    """Whether the host sets NAME to a value that did not render (its own validation names it): nothing to
    judge by, rather than the default it does not have."""
    return name in found["names"] and name not in found["values"]


def unknown_variable_errors(values):
    """A variable in the collection's namespace that no argument spec declares and the collection does not set
    itself (plugin_utils/internal_names.py): a typo, which would leave the input it meant at its default. One
    message per name, with the hosts that have it and the nearest input."""
    hosts_of, errors = {}, []
    for host, found in _inventory_hosts(values):
        if _unrendered(found, "gpufleet_allowed_variables"):
            continue
        allowed = found["values"].get("gpufleet_allowed_variables", [])
        bad = list_errors({"gpufleet_allowed_variables": allowed})
        errors += [e for e in bad if e not in errors]
        for name in internal_names.unknown_names(found["names"], allowed if not bad else ()):
            hosts_of.setdefault(name, []).append(host)
    for name in sorted(hosts_of):
        near = internal_names.nearest(name)
        errors.append("%s is not an input of this collection; %s (set for %s; a variable of your own goes into "
                      "gpufleet_allowed_variables)" % (name, "did you mean %s?" % near if near else
                                                       "none is near it (docs/inputs.md lists them)",
                                                       words(hosts_of[name])))
    return errors


def model_group_errors(values):
    """A host in two groups that each set a GPU model's gpufleet_expect or sgl_kernel_arch_list: Ansible takes
    one group's value whole and drops the other's. A group that is the parent of the other is not a contradiction
    (the child's value wins, as meant)."""
    groups = (values.get(INVENTORY) or {}).get("groups") or {}
    hosts_of = {}
    for host, found in _inventory_hosts(values):
        clashes = {}
        for name in MODEL_GROUP_VARIABLES:
            setting = [g for g in found.get("groups") or [] if name in groups.get(g, {}).get("sets", ())]
            setting = [g for g in setting if not any(g in groups[other]["ancestors"] for other in setting)]
            if len(setting) > 1:
                clashes.setdefault(tuple(sorted(setting)), []).append(name)
        for setting, names in clashes.items():
            hosts_of.setdefault((setting, tuple(names)), []).append(host)
    return ["%s %s in %s, which %s set %s: a host takes one GPU model's group"
            % (words(hosts), "is" if len(hosts) == 1 else "are", words(setting, len(setting)),
               "both" if len(setting) == 2 else "all", words(names))
            for (setting, names), hosts in hosts_of.items()]


def nightly_date_errors(values):
    """A torch_nightly_date the hosts set that is not the date of their pinned nightly versions: the full
    versions win over the date, which would be ignored. A version without a nightly date (a release) is no
    contradiction, nor is a stack of the release channel, which reads no date."""
    hosts_of = {}
    for host, found in _inventory_hosts(values):
        given_values = found["values"]
        date, versions = show(given_values.get("torch_nightly_date")), given_values.get("torch_nightly_versions")
        if ("torch_nightly_date" not in given_values or not nightly_date_valid(date)
                or given_values.get("torch_nightly_channel") == "release" or not isinstance(versions, Mapping)):
            continue
        other = []
        for package in sorted(versions, key=str):
            try:
                version = nightly_version_parse(versions[package])
            except NightlyInputError:  # the torch_nightly role's own rules name it
                continue
            if version["nightly"] and version["date"] != date:
                other.append("%s %s" % (package, version["version"]))
        if other:
            hosts_of.setdefault((date, tuple(other)), []).append(host)
    return ["torch_nightly_date must be the date of the nightly versions pinned in torch_nightly_versions, which "
            "win over it (got '%s'; pinned: %s; on %s)" % (date, ", ".join(other), words(hosts))
            for (date, other), hosts in hosts_of.items()]


def unwritable(path):
    """Why the controller cannot make or write the directory PATH ('' where it can): tried for real, with a
    directory made and removed in the nearest one that exists (permissions alone do not say it for root, a
    read-only mount or /proc)."""
    there = path
    while not os.path.lexists(there) and os.path.dirname(there) != there:
        there = os.path.dirname(there)
    if not os.path.isdir(there):
        return "%s is not a directory" % there
    try:
        made = tempfile.mkdtemp(prefix=".gpufleet-check-", dir=there)
    except OSError as exc:
        return "cannot make a directory in %s: %s" % (there, exc.strerror or exc)
    os.rmdir(made)
    return ""


def report_dir_errors(values):
    """gpufleet_report_dir as the report resolves it (roles/fleet/vars/main.yml): a directory the controller
    can make and write, judged before the run rather than by the report at its end."""
    errors = []
    for host, found in _inventory_hosts(values):
        report_dir = found["values"].get("gpufleet_report_dir") or ""
        # a value of another type: the type check of each host's validation names it
        if not isinstance(report_dir, str) or _unrendered(found, "gpufleet_report_dir"):
            continue
        path = os.path.realpath(os.path.expanduser(report_dir or "reports"))
        reason = unwritable(path)
        message = ("gpufleet_report_dir must be a directory the controller can make and write (got '%s'%s: %s)"
                   % (report_dir, "" if path == report_dir else ", that is " + path, reason))
        if reason and message not in errors:
            errors.append(message)
    return errors


def fleet_hosts(values):
    """On the controller before a fleet play (entry point hosts): the host pattern, then the play keywords, then
    what the hosts have set: unknown variables, a host in two GPU models' groups, a nightly date the pins
    contradict, the report directory."""
    return (host_pattern_errors(values) + play_keywords(values) + slice_errors(values)
            + unknown_variable_errors(values) + model_group_errors(values) + nightly_date_errors(values)
            + report_dir_errors(values))


def host_input_errors(values, said=()):
    """Each host's own inputs as its run judges them (check_vars' judged_inputs: the types and value rules of
    JUDGED), each message once with the hosts it concerns; not again a message SAID already."""
    hosts_of = {}
    for host, found in _inventory_hosts(values):
        for error in found.get("errors") or []:
            if error not in said:
                hosts_of.setdefault(error, []).append(host)
    return ["%s (on %s)" % (error, words(hosts)) for error, hosts in hosts_of.items()]


def fleet_inventory(values):
    """The inventory check (playbooks/check_inventory.yml, entry point inventory) and the runs' hosts check
    (hosts.yml, before any host is touched): fleet_hosts, then every host's own inputs, on the controller, without
    connecting to any host."""
    said = fleet_hosts(values)
    return said + host_input_errors(values, said)


# What only a host can tell, by the rendered inputs it takes (check_vars keeps them for the hosts'
# "inputs"): (input, when it applies, what the offline check cannot say, which step of the host's run does).
NOT_CHECKED_OFFLINE = (
    ("gpufleet_model", lambda i: str(i.get("verify_model") or "").startswith(("/", "~/"))
     and not i.get("verify_model_config"), "the config.json at {verify_model}",
     "deploy's preflight reads it before the install"),
    ("gpufleet_textfile_dir", lambda i: bool(i.get("gpufleet_textfile_dir")),
     "the directory {gpufleet_textfile_dir}", "each run's validation looks at it first"),
    ("gpufleet_venv_link", lambda i: bool(i.get("gpufleet_venv_link")),
     "the folder of {gpufleet_venv_link} and its free space", "deploy's preflight looks at them first"),
)


def not_checked_offline(values):
    """What the inventory check cannot judge without the host, once for the hosts it concerns. Said by the
    offline check alone (its context's fleet_offline): a run's hosts check leaves it to the hosts' own steps."""
    if not values.get("fleet_offline"):
        return []
    hosts_of = {}
    for host, found in _inventory_hosts(values):
        inputs = found.get("inputs") or {}
        for name, applies, what, where in NOT_CHECKED_OFFLINE:
            if applies(inputs):
                hosts_of.setdefault((name, what.format(**inputs), where), []).append(host)
    return ["%s: not checked offline: %s on %s (%s)" % (name, what, words(hosts), where)
            for (name, what, where), hosts in hosts_of.items()]


def play_keywords(values):
    """play_keyword_errors on the values' play keywords."""
    return play_keyword_errors(given(values, "fleet", "gpufleet_serial"),
                               given(values, "fleet", "gpufleet_max_fail_percentage"))


def hook_errors(hook, name):
    """A drain or return hook: [] (none), a command as a non-empty list of non-empty strings, or the path of an
    existing task file (.yml, .yaml) on the controller."""
    if hook in (None, "", []):
        return []
    allowed = ("%s must be a command as a list of strings (argv, run without a shell), the path of a task file "
               "ending in .yml or .yaml, or [] for none" % name)
    if isinstance(hook, str):
        if not hook.endswith((".yml", ".yaml")):
            return ["%s (got the string '%s': a command must be a list of strings)" % (allowed, hook)]
        if not os.path.isfile(os.path.expanduser(hook)):
            return ["%s: the task file %s does not exist on the controller" % (name, hook)]
        return []
    if is_list(hook) and all(isinstance(part, str) and part.strip() for part in hook):
        return []
    return ["%s (got %s)" % (allowed, json.dumps(hook, default=str))]


def serving_errors(values):
    """The serving fleet's inputs: busy threshold, drain and return hooks, the wait after a drain."""
    errors = []
    memory = given(values, "fleet", "gpufleet_busy_memory_mib")
    if number(memory, 0, int) < 1:
        errors.append("gpufleet_busy_memory_mib must be a number of MiB > 0 (got %s)" % show(memory))
    wait = given(values, "fleet", "gpufleet_drain_wait_seconds")
    if isinstance(wait, bool) or number(wait, -1.0) < 0:
        errors.append("gpufleet_drain_wait_seconds must be a number of seconds >= 0 (got %s)" % show(wait))
    errors += hook_errors(values.get("gpufleet_drain_hook"), "gpufleet_drain_hook")
    errors += hook_errors(values.get("gpufleet_return_hook"), "gpufleet_return_hook")
    served = given(values, "fleet", "gpufleet_served_timeout")
    if isinstance(served, bool) or number(served, 0, int) < 1:
        errors.append("gpufleet_served_timeout must be a number of seconds > 0 (got %s)" % show(served))
    model_path = values.get("gpufleet_serving_model_path")
    if model_path not in ("", None) and not (isinstance(model_path, str) and _ABSOLUTE_NO_SPACE_RE.match(model_path)):
        errors.append("gpufleet_serving_model_path must be '' or the absolute path of the model's folder on the host, "
                      "without spaces (got '%s')" % show(model_path))
    unit = values.get("gpufleet_serving_unit")
    if (unit.lower() if isinstance(unit, str) else unit) in BOOLEANS_TRUE and not (
            values.get("gpufleet_model") or values.get("gpufleet_model_config")):
        # the unit reads the serving flags from the env file, which the verification writes for a model only
        errors.append("gpufleet_serving_unit needs gpufleet_model (or gpufleet_model_config): the unit's flags come "
                      "from the env file the verification writes for the served model, and none is set")
    return errors


def fleet_validate(values):
    """The playbooks' inputs (the fleet role's entry point validate); the play
    keywords again, for runs under --limit, where the hosts check is skipped."""
    errors = play_keywords(values)
    errors += slice_errors(values)
    link = values.get("gpufleet_venv_link")
    if isinstance(link, str) and not LINK_RE.match(link):
        errors.append("gpufleet_venv_link must be an absolute or ~/ path without spaces, not ending in / (got '%s')"
                      % link)
    keep = values.get("gpufleet_keep_previous_venvs")
    if number(keep, 0, int) < 0:
        errors.append("gpufleet_keep_previous_venvs must be an integer >= 0 (got %s)" % show(keep))
    sizes = values.get("gpufleet_collectives_sizes_mib")
    if isinstance(sizes, str) or (is_list(sizes) and not (
            sizes and min(number(s, 0, int) for s in sizes) > 0
            and len(set(number(s, 0, int) for s in sizes)) == len(sizes))):
        errors.append("gpufleet_collectives_sizes_mib must be a non-empty list of different positive sizes in MiB "
                      "(got %s)" % json.dumps(sizes))
    expect = values.get("gpufleet_expect")
    size = expect.get("allreduce_size_mib") if isinstance(expect, Mapping) else None
    if size is not None and is_list(sizes) and str(size) not in [str(s) for s in sizes]:
        errors.append("gpufleet_expect.allreduce_size_mib must be one of gpufleet_collectives_sizes_mib %s (got %s)"
                      % (show(list(sizes)), show(size)))
    textfile = values.get("gpufleet_textfile_dir")
    if textfile != "" and not (isinstance(textfile, str) and _ABSOLUTE_NO_SPACE_RE.match(textfile)):
        errors.append("gpufleet_textfile_dir must be an absolute path without spaces "
                      "(node_exporter's --collector.textfile.directory) (got '%s')" % show(textfile))
    lock = values.get("gpufleet_host_lock_path")
    if isinstance(lock, str) and (not lock.startswith("/") or any(c.isspace() for c in lock) or lock.rstrip("/") == ""):
        # the same words as the host_lock action's own check, which runs first on deploy.yml and rollback.yml
        errors.append("gpufleet_host_lock_path must be an absolute path without spaces, not / itself (got %r); "
                      "the lock directory is made there as root (default /var/lock/gpufleet, on tmpfs)" % lock)
    ratio = values.get("gpufleet_outlier_ratio")
    if not 0 < number(ratio, -1.0) <= 1:
        errors.append("gpufleet_outlier_ratio must be a number > 0 and <= 1 (got %s)" % show(ratio))
    free = values.get("gpufleet_min_free_gib")
    if number(free, 0.0) < 0:
        errors.append("gpufleet_min_free_gib must be a number of GiB >= 0 (got %s)" % show(free))
    elif free is not None and not passes_type(free, "float"):
        # said here, in the variable's own words: the type check's would name a Python class
        errors.append("gpufleet_min_free_gib must be a number of GiB (got %s)" % quoted(free))
    errors += serving_errors(values)
    errors += expect_errors(expect, "gpufleet_expect")
    errors += expect_errors(values.get("gpufleet_rollback_expect") or {}, "gpufleet_rollback_expect")
    errors += tolerance_errors(values.get("gpufleet_kernel_tolerances"), "gpufleet_kernel_tolerances")
    ignore = values.get("gpufleet_rollback_ignore_expect")
    errors += expect_errors(dict.fromkeys(ignore if is_list(ignore) else []), "gpufleet_rollback_ignore_expect")
    # what the host set itself: under --limit the hosts check, which judges it for every host, is skipped
    errors += unknown_variable_errors(values) + nightly_date_errors(values)
    return errors


# What check_vars reads of the inventory for these rules, into values[INVENTORY]: the hosts check for every
# host of the pattern, with their groups (the inventory's sources are read once more for the groups' own
# variables); each host's validation for its host alone, without groups.
fleet_hosts.inventory = {"name": INVENTORY, "hosts": "fleet_hosts_matched", "values": HOST_VALUES,
                         "groups": MODEL_GROUP_VARIABLES}
fleet_validate.inventory = {"name": INVENTORY, "hosts": None, "values": HOST_VALUES, "groups": ()}
# The inventory check: the hosts check's reading, and each host's own inputs judged as its run judges them
# (the playbooks' and the verification's: the stage roles' need the host and the roles before them).
JUDGED = (("fleet", "validate"), ("verify", "main"))
fleet_inventory.inventory = dict(fleet_hosts.inventory, judge=JUDGED,
                                 keep=("verify_model", "verify_model_config", "gpufleet_textfile_dir",
                                       "gpufleet_venv_link"))
fleet_inventory.notes = not_checked_offline

# the fleet role's entry points that have value rules
ENTRY_POINTS = {"hosts": fleet_hosts, "validate": fleet_validate, "inventory": fleet_inventory}
