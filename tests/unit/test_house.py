# -*- coding: utf-8 -*-
"""The house rules, read from the tree: what one step hands to the next is a
named result documented in the fleet role's README; a private name never
leaves its file (registered) or its role (set); nothing imports a filter; the
route table of docs/architecture.md names real files, each step a real call,
from the playbook through the task files and the plugin's Python to the
function that does the work."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ast
import os
import re

import jinja2
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


# ---------------------------------------------------------------- the route table
# docs/architecture.md, "Where each behaviour lives": one row per behaviour,
# | behaviour | YAML route | Python route | steps | what it does |.

ROUTE_SECTION = "## Where each behaviour lives"
# task files after the playbook; Python files after the plugin the last one calls
MAX_YAML_STEPS = 3
MAX_PYTHON_STEPS = 2
FQCN = "gpufleet.inference."
PACKAGE = "ansible_collections.gpufleet.inference."
BUILTIN = "ansible.builtin."
# The module-level table of module_utils that the probe loads by name (the
# venv's interpreter runs it as one program, with no collection to import
# from): a file that lists another there reaches it.
PROBE_TABLE = "PROBE_HELPERS"


def _read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as handle:
        return handle.read()


def _routes():
    """(behaviour, YAML files, Python steps, steps, what it does) of each row."""
    section = _read(os.path.join("docs", "architecture.md")).split(ROUTE_SECTION, 1)[1].split("\n## ", 1)[0]
    routes = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 5 and cells[1].startswith("`playbooks/"):
            yaml_route, python_route = ([s.strip().strip("`") for s in cell.split("->")] for cell in cells[1:3])
            routes.append((cells[0], yaml_route, python_route, cells[3], cells[4]))
    return routes


def _role_entry(name, entry):
    name = name[len(FQCN):] if name.startswith(FQCN) else name
    return "roles/%s/tasks/%s.yml" % (name, re.sub(r"\.ya?ml$", "", entry))


def _yaml_targets(path):
    """The files PATH hands over to, in its tasks and plays (never in a comment)."""
    here = os.path.dirname(path)
    targets = []

    def walk(node):
        if isinstance(node, list):
            for item in node:
                walk(item)
            return
        if not isinstance(node, dict):
            return
        if "hosts" in node:  # a play's roles
            for role in node.get("roles") or []:
                name = role if isinstance(role, str) else role.get("role") or role.get("name")
                targets.append(_role_entry(name, "main"))
        for key, value in node.items():
            action = key[len(BUILTIN):] if key.startswith(BUILTIN) else key
            if action in ("import_tasks", "include_tasks", "import_playbook"):
                name = value.get("file") if isinstance(value, dict) else value
                if isinstance(name, str):
                    targets.append(os.path.normpath(os.path.join(here, name)))
            elif action in ("import_role", "include_role") and isinstance(value, dict):
                targets.append(_role_entry(value.get("name") or "", value.get("tasks_from") or "main"))
            walk(value)

    walk(yaml.safe_load(_read(path)))
    return targets


def _skeleton_files(playbook):
    """The task files a playbook reaches through the run skeleton, which its
    import of playbooks/fleet_run.yml stands for: the steps its fleet_mode
    takes (roles/fleet/vars/main.yml, _fleet_modes), the skeleton's fixed ones
    (roles/fleet/tasks/run.yml), and the files its body names (the body,
    roles/fleet/tasks/<mode>.yml, is what the playbook's own task list was).
    The skeleton is the same two files for every playbook: a route counts
    from the playbook to such a file as one step."""
    files = set()
    for play in yaml.safe_load(_read(playbook)) or []:
        if not (isinstance(play, dict) and str(play.get(BUILTIN + "import_playbook", "")) == "fleet_run.yml"):
            continue
        mode = (play.get("vars") or {}).get("fleet_mode")
        steps = yaml.safe_load(_read(os.path.join("roles", "fleet", "vars", "main.yml")))["_fleet_modes"][mode]
        files.update("roles/fleet/tasks/" + name for name in steps.values() if name != "none.yml")
        # the skeleton playbook's own role calls (tasks_from rendered for this mode), and what they import
        for skeleton_play in yaml.safe_load(_read(os.path.join("playbooks", "fleet_run.yml"))):
            for task in skeleton_play.get("tasks") or []:
                call = task.get(BUILTIN + "import_role") or {}
                if call.get("name") == FQCN + "fleet":
                    entry = jinja2.Template(call.get("tasks_from", "main")).render(fleet_mode=mode)
                    path = _role_entry("fleet", entry)
                    files.update([path] + [t for t in _yaml_targets(path) if "{{" not in t])
        # the body is what the playbook's own task list was: the files it names are its steps too
        body = "roles/fleet/tasks/" + steps["body"]
        files.update(t for t in _yaml_targets(body) if "{{" not in t)
    return files


def _names_file(target, there):
    """TARGET names THERE; a template ({{ fleet_mode }}.yml) stands for any name in its folder."""
    parts = re.split(r"\{\{.*?\}\}", target)
    return re.match("^" + "[^/]+".join(re.escape(p) for p in parts) + "$", there) is not None


def _task_actions(path):
    """The action of every task of PATH (each key of a dict in a task list)."""
    actions = set()

    def walk(node, in_list=False):
        if isinstance(node, list):
            for item in node:
                walk(item, True)
        elif isinstance(node, dict):
            if in_list:
                actions.update(node)
            for value in node.values():
                walk(value)

    walk(yaml.safe_load(_read(path)))
    return actions


def _plugin(name):
    """The plugin a task named NAME runs: its action plugin where there is one, else its module."""
    action = "plugins/action/%s.py" % name
    return action if os.path.isfile(os.path.join(ROOT, action)) else "plugins/modules/%s.py" % name


def _python_imports(path):
    """The collection's files that PATH imports (absolute imports, as AnsiballZ needs)."""
    found = set()
    for node in ast.walk(ast.parse(_read(path), path)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [node.module + "." + alias.name for alias in node.names]
        else:
            continue
        found.update(n[len(PACKAGE):].replace(".", "/") + ".py" for n in names if n.startswith(PACKAGE))
    return found


def _strings(path):
    return {n.value for n in ast.walk(ast.parse(_read(path), path))
            if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _probe_table(path):
    """The names and paths in PATH's module-level PROBE_TABLE (empty where it has none)."""
    entries = set()
    for node in ast.parse(_read(path), path).body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == PROBE_TABLE for t in targets):
            entries.update(n.value for n in ast.walk(node.value)
                           if isinstance(n, ast.Constant) and isinstance(n.value, str))
    return entries


def _python_link(here, there):
    """How HERE reaches THERE: 'imports', 'runs' (a module, by its FQCN, as an
    action does on the host), 'loads' (named in the probe's table), or None."""
    stem = os.path.splitext(os.path.basename(there))[0]
    if there in _python_imports(here):
        return "imports"
    if there.startswith("plugins/modules/") and FQCN + stem in _strings(here):
        return "runs"
    if there in _probe_table(here) or stem in _probe_table(here):
        return "loads"
    return None


def _defines(path, name):
    """PATH defines NAME: a function, a class, or Class.method."""
    body = ast.parse(_read(path), path).body
    for part in name.split("."):
        found = [n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                 and n.name == part]
        if not found:
            return False
        body = found[0].body
    return True


ROUTES = _routes()


def test_the_route_table_has_the_main_behaviours():
    names = " ".join(route[0] for route in ROUTES).lower()
    for behaviour in ("venv switch", "sgl-kernel build", "kernel checks", "host lock", "fast path", "report"):
        assert behaviour in names


@pytest.mark.parametrize("behaviour, yaml_route, python_route, steps, what", ROUTES, ids=[r[0] for r in ROUTES])
def test_each_route_is_real_and_short(behaviour, yaml_route, python_route, steps, what):
    # YAML: the playbook, then each file named by a task or play of the one before
    assert yaml_route[0].startswith("playbooks/") and len(yaml_route) - 1 <= MAX_YAML_STEPS, behaviour
    for path in yaml_route:
        assert os.path.isfile(os.path.join(ROOT, path)), path
    for here, there in zip(yaml_route, yaml_route[1:]):
        named = there in _skeleton_files(here) if here == yaml_route[0] else \
            any(_names_file(t, there) for t in _yaml_targets(here))
        assert named, "%s does not name %s" % (here, there)
    actions = _task_actions(yaml_route[-1])
    if python_route[0].startswith(BUILTIN):
        # an ansible-core module acts: no Python of the collection to count
        assert len(python_route) == 1 and python_route[0] in actions | {BUILTIN + a for a in actions}, python_route
        python_steps = 0
    else:
        # Python: the plugin the last task file calls, then each file the one
        # before reaches, to the function that does the work
        files = [step.split(":", 1)[0] for step in python_route]
        assert ":" in python_route[-1], "%s: the last Python step names no function" % behaviour
        name = os.path.splitext(os.path.basename(files[0]))[0]
        assert files[0] == _plugin(name), "%s: the task's plugin is %s" % (files[0], _plugin(name))
        assert FQCN + name in actions or name in actions, "%s calls no %s" % (yaml_route[-1], name)
        assert len(files) - 1 <= MAX_PYTHON_STEPS, behaviour
        for here, there in zip(files, files[1:]):
            assert os.path.isfile(os.path.join(ROOT, there)), there
            assert _python_link(here, there), "%s does not import, run or load %s" % (here, there)
        assert _defines(files[-1], python_route[-1].split(":", 1)[1]), python_route[-1]
        python_steps = len(files) - 1
    assert steps == "%d + %d" % (len(yaml_route) - 1, python_steps), behaviour
    for path in re.findall(r"`((?:playbooks|roles|plugins)/[^`:\s]+)", what):
        assert os.path.exists(os.path.join(ROOT, path)), path


def test_the_probe_loads_its_helpers_from_one_declared_table():
    declaring = []
    for folder, _dirs, names in os.walk(os.path.join(ROOT, "plugins", "module_utils")):
        declaring.extend(os.path.relpath(os.path.join(folder, n), ROOT) for n in names
                         if n.endswith(".py") and _probe_table(os.path.relpath(os.path.join(folder, n), ROOT)))
    assert len(declaring) == 1, declaring
    # names or paths, as the table holds them: each a file of the collection
    helpers = {e if e.endswith(".py") else "plugins/module_utils/%s.py" % e for e in _probe_table(declaring[0])}
    assert [h for h in sorted(helpers) if not os.path.isfile(os.path.join(ROOT, h))] == []
    assert "plugins/module_utils/kernel_checks.py" in helpers


@pytest.mark.parametrize("text, linked", [
    ("- name: A comment\n  # import_tasks: b.yml\n  ansible.builtin.debug: {}\n", False),
    ("- name: Import\n  ansible.builtin.import_tasks: b.yml\n", True),
    ("- name: Include\n  include_tasks:\n    file: b.yml\n", True),
    ("- name: By mode\n  ansible.builtin.include_tasks: \"{{ mode }}.yml\"\n", True),
    ("- name: By step\n  ansible.builtin.import_tasks: \"{{ steps.body }}\"\n", True),
    ("- name: Elsewhere\n  ansible.builtin.import_tasks: \"sub/{{ steps.body }}\"\n", False),
    ("- name: Other\n  ansible.builtin.include_tasks: c.yml\n", False),
])
def test_a_yaml_step_is_a_task_that_names_the_file(tmp_path, text, linked):
    (tmp_path / "a.yml").write_text(text)
    there = str(tmp_path / "b.yml")
    assert any(_names_file(t, there) for t in _yaml_targets(str(tmp_path / "a.yml"))) is linked


@pytest.mark.parametrize("text, link", [
    ("# from ansible_collections.gpufleet.inference.plugins.module_utils import kernel_checks\n", None),
    ("from ansible_collections.gpufleet.inference.plugins.module_utils import kernel_checks\n", "imports"),
    ("from ansible_collections.gpufleet.inference.plugins.module_utils.kernel_checks import run_checks\n", "imports"),
    ("PROBE_HELPERS = {'kernel_checks': 'plugins/module_utils/kernel_checks.py'}\n", "loads"),
    ("PROBE_HELPERS = (('kernel_checks', None),)\n", "loads"),
    ("OTHER = ('kernel_checks',)\n", None),
])
def test_a_python_step_is_an_import_or_the_probe_table(tmp_path, text, link):
    (tmp_path / "a.py").write_text(text)
    assert _python_link(str(tmp_path / "a.py"), "plugins/module_utils/kernel_checks.py") == link


def test_an_action_runs_its_module_by_name(tmp_path):
    (tmp_path / "a.py").write_text("MODULE = 'gpufleet.inference.torch_verify'\n")
    assert _python_link(str(tmp_path / "a.py"), "plugins/modules/torch_verify.py") == "runs"
    assert _python_link(str(tmp_path / "a.py"), "plugins/modules/gpu_facts.py") is None


# A role's inputs are checked once, by its own task (check_vars, verify_host):
# the entry points the collection calls have no argument spec of their own, so
# a call needs no rolespec_validate: false. It stays only where a call cannot
# avoid it (the hosts check of playbooks/fleet_run.yml, whose entry point's
# spec is what that check reads).
MAX_ROLESPEC_VALIDATE_FALSE = 1


def _rolespec_validate_false():
    """Every role call in roles/ and playbooks/ that turns Ansible's argument spec check off."""
    calls = []

    def walk(node, path):
        if isinstance(node, list):
            for item in node:
                walk(item, path)
        elif isinstance(node, dict):
            for key, value in node.items():
                action = key[len(BUILTIN):] if key.startswith(BUILTIN) else key
                if action in ("import_role", "include_role") and isinstance(value, dict) \
                        and value.get("rolespec_validate") is False:
                    calls.append("%s (%s)" % (path, value.get("name")))
                walk(value, path)

    for path in _yaml_files():
        walk(yaml.safe_load(_read(path)), path)
    return calls


def test_rolespec_validate_false_only_where_a_role_call_cannot_avoid_it():
    calls = _rolespec_validate_false()
    assert len(calls) <= MAX_ROLESPEC_VALIDATE_FALSE, calls
