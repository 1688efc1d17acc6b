#!/usr/bin/env python
"""Where every input is checked: the README's table of role variables
(the fleet role's are the playbooks' gpufleet_* inputs), made from the roles'
argument specs and their check files.

    .venv/bin/python tools/inputs_table.py           # print the table
    .venv/bin/python tools/inputs_table.py --write   # put it into README.md
    .venv/bin/python tools/inputs_table.py --check   # exit 1 when README.md is out of date

A variable counts as checked by a file when its name appears in one of the
files that run before any change: each role's tasks/preflight.yml, and for
the fleet role also tasks/validate.yml, hosts.yml and lock.yml. Its type (and
choices) comes from the role's argument spec, which the preflight checks too.
A variable found in none of them is listed as not checked.
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
# Files that check a role's inputs before any change, beyond its preflight.
EXTRA_CHECKS = {"fleet": ["roles/fleet/tasks/validate.yml", "roles/fleet/tasks/hosts.yml", "roles/fleet/tasks/lock.yml"]}


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


def _spec(role):
    with open(os.path.join(ROOT, "roles", role, "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)["argument_specs"]


def role_options(role):
    """{option: spec} over all entry points of a role's argument spec."""
    options = {}
    for entry in _spec(role).values():
        for name, spec in ((entry or {}).get("options") or {}).items():
            options.setdefault(name, spec)
    return options


def role_rows():
    rows = []
    for spec_path in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml"))):
        role = spec_path.split(os.sep)[-3]
        options = role_options(role)
        checks = ["roles/%s/tasks/preflight.yml" % role] + EXTRA_CHECKS.get(role, [])
        # validate.yml type-checks every option of the fleet spec's entry point "validate"
        typed = set(((_spec(role).get("validate") or {}).get("options") or {})) if role == "fleet" else set()
        for name in sorted(options):
            where = _mentions(name, checks)
            if name in typed and "roles/fleet/tasks/validate.yml" not in where:
                where = sorted(where + ["roles/fleet/tasks/validate.yml"])
            rows.append((name, role, _kind(options[name]), where))
    # the playbooks' inputs (the fleet role's) first
    return sorted(rows, key=lambda r: (r[1] != "fleet", r[1], r[0]))


# Facts the modules return (ansible_facts.gpufleet_*), not inputs.
FACTS = {"gpufleet_gpu", "gpufleet_torch"}


def public_names_read():
    """Every gpufleet_* name the playbooks and the roles read (private _fleet_* state aside)."""
    names = set()
    for path in glob.glob(os.path.join(ROOT, "playbooks", "*.yml")) + glob.glob(
            os.path.join(ROOT, "roles", "*", "*", "*.yml")):
        with open(path, encoding="utf-8") as handle:
            names.update(re.findall(r"(?<![A-Za-z0-9_])(gpufleet_[a-z0-9_]+)(?![A-Za-z0-9_(])", handle.read()))
    return names


def table():
    lines = ["| variable | of | type (argument spec) | value checked before any change in |", "|---|---|---|---|"]
    for name, owner, kind, where in role_rows():
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
