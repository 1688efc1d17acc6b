#!/usr/bin/env python
"""Where every input is checked: the README's table of role variables and
playbook variables, made from the roles' argument specs and the check files.

    .venv/bin/python tools/inputs_table.py           # print the table
    .venv/bin/python tools/inputs_table.py --write   # put it into README.md
    .venv/bin/python tools/inputs_table.py --check   # exit 1 when README.md is out of date

A variable counts as checked by a file when its name appears in one of the
files that run before any change: each role's tasks/preflight.yml and the
playbooks' tasks/validate.yml, hosts.yml, preflight.yml and lock_acquire.yml.
Its type (and choices) comes from the role's argument spec, or for a playbook
variable from validate.yml's check_vars spec; both are checked in the
preflight too. A variable found in none of them is listed as not checked.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
START, END = "<!-- inputs-table:start -->", "<!-- inputs-table:end -->"
PLAYBOOK_CHECKS = ["playbooks/tasks/validate.yml", "playbooks/tasks/hosts.yml", "playbooks/tasks/preflight.yml",
                   "playbooks/tasks/lock_acquire.yml"]

# The playbooks' own inputs (deploy.yml, verify.yml, rollback.yml). Every
# gpufleet_* name a playbook reads with a default is either here or in
# RUN_STATE (facts a run sets for itself); tests/unit/test_inputs_table.py
# holds the playbooks to that.
PLAYBOOK_INPUTS = {
    "gpufleet_hosts": "host pattern the plays run on",
    "gpufleet_venv_link": "the stable venv path",
    "gpufleet_expect": "expectations for torch_verify",
    "gpufleet_rollback_expect": "expectations for the venv rolled back to",
    "gpufleet_rollback_ignore_expect": "gpufleet_expect keys rollback.yml leaves out",
    "gpufleet_verify_imports": "modules imported after torch",
    "gpufleet_verify_smoke": "GEMM smoke test on every GPU",
    "gpufleet_verify_kernels": "kernel checks of the extensions",
    "gpufleet_kernel_tolerances": "tolerance per kernel check",
    "gpufleet_verify_collectives": "all-reduce check across a host's GPUs",
    "gpufleet_collectives_sizes_mib": "all-reduce message sizes",
    "gpufleet_outlier_ratio": "share of the siblings' median that flags a GPU or host",
    "gpufleet_outliers_fail": "outliers fail their hosts instead of drift",
    "gpufleet_textfile_dir": "node_exporter textfile directory on the hosts",
    "gpufleet_gpu_required": "fail a host without a GPU",
    "gpufleet_keep_previous_venvs": "venvs kept for rollback",
    "gpufleet_min_free_gib": "free space a deploy needs",
    "gpufleet_cuda_toolkit_enabled": "run the cuda_toolkit stage",
    "gpufleet_flashinfer_enabled": "run the flashinfer stage",
    "gpufleet_sgl_kernel_enabled": "run the sgl_kernel stage",
    "gpufleet_adopt_existing_venv": "adopt a hand-built venv at the stable path",
    "gpufleet_full_run": "walk the whole chain (no fast path)",
    "gpufleet_stack": "the stack fingerprint's inputs, overridden",
    "gpufleet_report_dir": "where the fleet report goes",
    "gpufleet_lock_dir": "where the venv locks are fetched to",
    "gpufleet_serial": "hosts per batch (-e only)",
    "gpufleet_max_fail_percentage": "stop after this share failed (-e only)",
    "gpufleet_host_lock_path": "the host lock directory",
    "gpufleet_host_lock_wait": "seconds to wait for a held lock",
    "gpufleet_host_lock_stale_after": "seconds after which a lock is stale",
    "gpufleet_host_lock_break": "break the host lock",
}
RUN_STATE = {
    "gpufleet_adopt_to", "gpufleet_adopted", "gpufleet_host_lock_held", "gpufleet_host_lock_me",
    "gpufleet_host_lock_run_id", "gpufleet_play_first_stage", "gpufleet_play_report_in_check_mode",
    "gpufleet_preflight_gpu", "gpufleet_record_message", "gpufleet_stage", "gpufleet_torch", "gpufleet_venv_marked",
}


def _read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        return handle.read()


def _kind(spec):
    kind = spec.get("type", "str")
    if spec.get("elements"):
        kind += " of %s" % spec["elements"]
    if spec.get("choices"):
        kind += ": " + " / ".join(str(c) for c in spec["choices"])
    return kind


def _mentions(name, paths):
    pattern = re.compile(r"(?<![A-Za-z0-9_])%s(?![A-Za-z0-9_])" % re.escape(name))
    return [p for p in paths if pattern.search(_read(p))]


def role_rows():
    rows = []
    for spec_path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        role = spec_path.split(os.sep)[-3]
        with open(spec_path, encoding="utf-8") as handle:
            specs = yaml.safe_load(handle)["argument_specs"]
        options = {}
        for entry in specs.values():
            for name, spec in (entry.get("options") or {}).items():
                options.setdefault(name, spec)
        checks = ["roles/%s/tasks/preflight.yml" % role]
        for name in sorted(options):
            where = _mentions(name, checks)
            rows.append((name, role, _kind(options[name]), where))
    return rows


def playbook_rows():
    text = _read("playbooks/tasks/validate.yml")
    spec = yaml.safe_load(text)[0]["gpufleet.inference.check_vars"]["argument_spec"]
    rows = []
    for name in sorted(PLAYBOOK_INPUTS):
        kind = _kind(spec[name]) if name in spec else "-"
        rows.append((name, "playbooks", kind, _mentions(name, PLAYBOOK_CHECKS)))
    return rows


def playbook_defaults():
    """Every gpufleet_* name the playbooks read with a default."""
    names = set()
    for path in glob.glob(os.path.join(ROOT, "playbooks", "**", "*.yml"), recursive=True):
        with open(path, encoding="utf-8") as handle:
            names.update(re.findall(r"\b(gpufleet_[a-z0-9_]+) \| default\(", handle.read()))
    return names


def table():
    lines = ["| variable | of | type (argument spec) | value checked before any change in |", "|---|---|---|---|"]
    for name, owner, kind, where in playbook_rows() + role_rows():
        checked = ", ".join("`%s`" % w for w in where) if where else (
            "argument spec only" if kind != "-" else "**not checked**")
        lines.append("| `%s` | %s | %s | %s |" % (name, owner, kind.replace("|", "\\|"), checked))
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="replace the table in README.md")
    group.add_argument("--check", action="store_true", help="exit 1 when README.md's table is out of date")
    args = parser.parse_args(argv)
    want = table()
    if not (args.write or args.check):
        sys.stdout.write(want)
        return 0
    readme = _read("README.md")
    if START not in readme or END not in readme:
        print("README.md has no %s ... %s markers" % (START, END), file=sys.stderr)
        return 1
    head, rest = readme.split(START, 1)
    current, tail = rest.split(END, 1)
    if args.check:
        if current.strip("\n") != want.strip("\n"):
            print("README.md's inputs table is out of date: run tools/inputs_table.py --write", file=sys.stderr)
            return 1
        return 0
    with open(README, "w", encoding="utf-8") as handle:
        handle.write(head + START + "\n" + want + END + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
