# -*- coding: utf-8 -*-
"""The house rules, read from the tree: what one step hands to the next is a
named result documented in the fleet role's README; a private name never
leaves its file (registered) or its role (set); nothing imports a filter; the
route table of docs/architecture.md names real files, each step a real call."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SET_FACT = ("ansible.builtin.set_fact", "set_fact")


def _yaml_files():
    out = []
    for base in ("roles", "playbooks"):
        for folder, _dirs, names in os.walk(os.path.join(ROOT, base)):
            out.extend(os.path.join(folder, n) for n in names if n.endswith(".yml"))
    return sorted(os.path.relpath(f, ROOT) for f in out)


def _owner(path):
    """The role a file belongs to, or 'playbooks'."""
    parts = path.split("/")
    return parts[1] if parts[0] == "roles" else parts[0]


def _setters():
    """name -> {file: 'register' | 'set_fact'} for every task file."""
    found = {}

    def walk(node, path):
        if isinstance(node, dict):
            if isinstance(node.get("register"), str):
                found.setdefault(node["register"], {})[path] = "register"
            for key in SET_FACT:
                if isinstance(node.get(key), dict):
                    for name in node[key]:
                        if name != "cacheable":
                            found.setdefault(name, {}).setdefault(path, "set_fact")
            for value in node.values():
                walk(value, path)
        elif isinstance(node, list):
            for value in node:
                walk(value, path)

    for path in _yaml_files():
        if "/tasks/" in path or path.startswith("playbooks/"):
            with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
                walk(yaml.safe_load(handle), path)
    return found


def _texts():
    texts = {}
    for path in _yaml_files():
        with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
            texts[path] = "\n".join(line.split(" #", 1)[0] for line in handle.read().splitlines()
                                    if not line.lstrip().startswith("#"))
    return texts


def _readers(name, texts, setters):
    pattern = re.compile(r"(?<![\w.])" + re.escape(name) + r"\b")
    return sorted(p for p, t in texts.items() if p not in setters and pattern.search(t))


SETTERS = _setters()
TEXTS = _texts()


def _named_results():
    """The fleet README's table of named results: name -> the row's text."""
    with open(os.path.join(ROOT, "roles", "fleet", "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    section = text.split("## Named results", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 3:
            for name in re.findall(r"`([a-z_][a-z0-9_]*)`", cells[0]):
                rows[name] = line
    return rows


def test_a_registered_result_is_read_only_in_its_own_file_unless_named():
    named = _named_results()
    leaks = []
    for name, files in sorted(SETTERS.items()):
        registered = [p for p, how in files.items() if how == "register"]
        if not registered or name in named:
            continue
        readers = _readers(name, TEXTS, files)
        if readers:
            leaks.append("%s (registered in %s) is read in %s" % (name, ", ".join(registered), ", ".join(readers)))
    assert leaks == []


def test_a_private_name_never_leaves_its_role():
    leaks = []
    for name, files in sorted(SETTERS.items()):
        if not name.startswith("_"):
            continue
        owners = {_owner(p) for p in files}
        outside = [p for p in _readers(name, TEXTS, files) if _owner(p) not in owners]
        if outside:
            leaks.append("%s (set in %s) is read in %s" % (name, ", ".join(sorted(files)), ", ".join(outside)))
    assert leaks == []


def test_what_one_role_hands_another_is_in_the_named_results_table_with_its_writer_and_readers():
    named = _named_results()
    missing = []
    for name, files in sorted(SETTERS.items()):
        if name.startswith("_"):
            continue
        owners = {_owner(p) for p in files}
        readers = [p for p in _readers(name, TEXTS, files) if _owner(p) not in owners]
        if not readers:
            continue
        row = named.get(name)
        if row is None:
            missing.append("%s: no row" % name)
            continue
        for path in sorted(files):
            if path.split("/", 1)[-1] not in row and path not in row:
                missing.append("%s: the row does not name its writer %s" % (name, path))
        for owner in sorted({_owner(p) for p in readers}):
            if owner not in row:
                missing.append("%s: the row does not name its reader %s (%s)"
                               % (name, owner, ", ".join(p for p in readers if _owner(p) == owner)))
    assert missing == []


def test_the_named_results_table_lists_only_names_that_are_set():
    assert sorted(n for n in _named_results() if n not in SETTERS) == []


def test_nothing_imports_a_filter():
    importers = []
    for folder, _dirs, names in os.walk(os.path.join(ROOT, "plugins")):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as handle:
                    if re.search(r"^\s*from\s+\S*plugins\.filter\b|^\s*import\s+\S*plugins\.filter\b",
                                 handle.read(), re.M):
                        importers.append(os.path.relpath(path, ROOT))
    assert importers == []


def _routes():
    with open(os.path.join(ROOT, "docs", "architecture.md"), encoding="utf-8") as handle:
        text = handle.read()
    section = text.split("## Where each behaviour lives", 1)[1].split("\n## ", 1)[0]
    routes = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 3 and "->" in cells[1]:
            routes.append((cells[0], [s.strip().strip("`") for s in cells[1].split("->")]))
    return routes


def test_the_route_table_has_the_main_behaviours():
    names = " ".join(n for n, _r in _routes()).lower()
    for behaviour in ("venv switch", "sgl-kernel build", "kernel checks", "host lock", "fast path", "report"):
        assert behaviour in names


@pytest.mark.parametrize("behaviour, route", _routes(), ids=[n for n, _r in _routes()])
def test_each_route_is_real_and_at_most_three_steps(behaviour, route):
    assert route[0].startswith("playbooks/") and len(route) - 1 <= 3, behaviour
    for here, there in zip(route, route[1:]):
        assert os.path.isfile(os.path.join(ROOT, here)), here
        assert os.path.isfile(os.path.join(ROOT, there)), there
        with open(os.path.join(ROOT, here), encoding="utf-8") as handle:
            text = handle.read()
        # a step is a file the one before names: a task file, a role's entry
        # point (roles/<role>/tasks/<entry>.yml) or the plugin a task calls
        parts = there.split("/")
        if parts[0] == "roles":
            named = (parts[-1] in text or "tasks_from: " + parts[-1][:-4] in text
                     or ("gpufleet.inference." + parts[1] in text and parts[-1] == "main.yml"))
        else:
            named = "gpufleet.inference." + parts[-1][:-3] in text
        assert named, "%s does not name %s" % (here, there)
