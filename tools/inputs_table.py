#!/usr/bin/env python
"""Every input and how it is checked: the table of role variables in
docs/inputs.md (the fleet role's are the playbooks' gpufleet_* inputs), made
from the roles' argument specs and their value rules.

    .venv/bin/python tools/inputs_table.py           # print the table
    .venv/bin/python tools/inputs_table.py --write   # put it into docs/inputs.md
    .venv/bin/python tools/inputs_table.py --check   # exit 1 when docs/inputs.md is out of date

The table lives between the markers <!-- inputs-table:start --> and
<!-- inputs-table:end --> of docs/inputs.md; the text around them is kept.

Inputs are checked one way: each role's preflight checks, in one task
(gpufleet.inference.check_vars), the types of its meta/argument_specs.yml and
its value rules, plugins/plugin_utils/rules/<role>.py (the fleet role's in
validate.yml and, for the host pattern and the play keywords, hosts.yml). So
a row has one answer: the value rules that judge the variable beyond its
type, or "type only" where the type (and choices) is all there is to check.
A variable counts as judged by its role's rules when the rules module names
it.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The page that holds the table, relative to ROOT (an absolute path is taken as it is).
DOC = os.path.join("docs", "inputs.md")
START, END = "<!-- inputs-table:start -->", "<!-- inputs-table:end -->"
# Where a role's value rules are: plugins/plugin_utils/rules/<role>.py.
RULES = os.path.join("plugins", "plugin_utils", "rules", "%s.py")


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
        rules = RULES % role
        for name in sorted(options):
            rows.append((name, role, _kind(options[name]), _mentions(name, [rules]) if os.path.exists(
                os.path.join(ROOT, rules)) else []))
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
    lines = ["| variable | of | type (argument spec) | value rules beyond the type |", "|---|---|---|---|"]
    for name, owner, kind, where in role_rows():
        checked = ", ".join("`%s`" % w for w in where) if where else "type only"
        lines.append("| `%s` | %s | %s | %s |" % (name, owner, kind.replace("|", "\\|"), checked))
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="replace the table in %s" % DOC)
    group.add_argument("--check", action="store_true", help="exit 1 when the table in %s is out of date" % DOC)
    args = parser.parse_args(argv)
    want = table()
    if not (args.write or args.check):
        sys.stdout.write(want)
        return 0
    try:
        page = _read(DOC)
    except OSError as exc:
        print("%s: cannot read it (%s)" % (DOC, exc.strerror or exc), file=sys.stderr)
        return 1
    if START not in page or END not in page:
        print("%s has no %s ... %s markers" % (DOC, START, END), file=sys.stderr)
        return 1
    head, rest = page.split(START, 1)
    current, tail = rest.split(END, 1)
    if args.check:
        if current.strip("\n") != want.strip("\n"):
            print("%s: the inputs table is out of date: run tools/inputs_table.py --write" % DOC, file=sys.stderr)
            return 1
        return 0
    with open(os.path.join(ROOT, DOC), "w", encoding="utf-8") as handle:
        handle.write(head + START + "\n" + want + END + tail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
