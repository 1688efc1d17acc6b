# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet role's value rules: the playbooks' inputs (entry points hosts and
validate), what the argument spec's types cannot express."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.common import (
    expect_errors, is_list, number, part_name_error, show, tolerance_errors)
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


def fleet_hosts(values):
    """On the controller before a fleet play (entry point hosts): the host pattern, then the play keywords."""
    return host_pattern_errors(values) + play_keywords(values) + slice_errors(values)


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
    errors += serving_errors(values)
    errors += expect_errors(expect, "gpufleet_expect")
    errors += expect_errors(values.get("gpufleet_rollback_expect") or {}, "gpufleet_rollback_expect")
    errors += tolerance_errors(values.get("gpufleet_kernel_tolerances"), "gpufleet_kernel_tolerances")
    ignore = values.get("gpufleet_rollback_ignore_expect")
    errors += expect_errors(dict.fromkeys(ignore if is_list(ignore) else []), "gpufleet_rollback_ignore_expect")
    return errors


# the fleet role's entry points that have value rules
ENTRY_POINTS = {"hosts": fleet_hosts, "validate": fleet_validate}
