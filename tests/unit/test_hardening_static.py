"""Static hardening checks over the collection's own files.

- Downloads: apt repositories only with signed-by and a keyring whose key is
  checked against a pinned fingerprint; every get_url has a checksum (or is a
  key download checked by fingerprint in a scratch directory); every pip/uv
  install or download is hash-pinned, version-pinned or a local wheel whose
  sha256 was checked; no uri or unarchive download; no installer script piped
  into a shell anywhere in the tree.
- become: no play, role or include with become; every task that runs as root
  is one of an allow-listed set of purposes (system packages, the loader
  cache, files under system locations); every other escalation drops to the
  deploy user; an action plugin that escalates for a module run of its own
  is allow-listed with its purpose.
- ansible-lint runs the production profile with no skipped rules and no noqa,
  and one waiver for one file (LINT_WAIVERS, with its reason); ansible-test
  sanity runs with no ignore files.

Each scanner is a plain function over parsed YAML or text, and each has a
self-test that plants a bad snippet and expects it to be caught.
"""
import configparser
import glob
import os
import re
import subprocess

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Task keywords (everything else on a task is its module).
TASK_KEYWORDS = {
    "name", "when", "register", "loop", "loop_control", "vars", "tags", "notify", "listen",
    "become", "become_user", "become_method", "become_flags", "become_exe", "changed_when",
    "failed_when", "check_mode", "diff", "no_log", "ignore_errors", "ignore_unreachable",
    "delegate_to", "delegate_facts", "run_once", "environment", "args", "async", "poll",
    "until", "retries", "delay", "module_defaults", "any_errors_fatal", "throttle", "timeout",
    "collections", "debugger", "connection", "remote_user", "port", "local_action",
}
BLOCK_KEYS = ("block", "rescue", "always")
INCLUDE_MODULES = {"include_role", "import_role", "include_tasks", "import_tasks", "import_playbook"}
# Actions that run on the controller only: become on them changes nothing.
CONTROLLER_ONLY = {"assert", "debug", "set_fact", "meta", "fail", "include_vars", "fleet_report"}


# ---------------------------------------------------------------- loading

def tree_files():
    """Tracked and new (not ignored) files of the checkout."""
    out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return sorted(p for p in out.splitlines() if p and not p.startswith(".collections/")
                  and os.path.isfile(os.path.join(ROOT, p)))


def load_yaml(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def short_module(name):
    for prefix in ("ansible.builtin.", "ansible.legacy.", "gpufleet.inference."):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def module_of(task):
    """(short module name, its arguments) of a task, or (None, None) for a block."""
    if any(k in task for k in BLOCK_KEYS):
        return None, None
    for key, value in task.items():
        if key not in TASK_KEYWORDS and not key.startswith("with_"):
            return short_module(key), value
    return None, None


def iter_tasks(tasks, ctx=None):
    """Yield (task, ctx) for every task, blocks flattened. ctx carries what
    a block gives its tasks: become, become_user, vars, and the block's own
    task list (siblings)."""
    ctx = dict(ctx or {"become": None, "become_user": None, "vars": {}, "siblings": tasks or []})
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        if any(k in task for k in BLOCK_KEYS):
            inner = dict(ctx)
            if "become" in task:
                inner["become"] = task["become"]
            if "become_user" in task:
                inner["become_user"] = task["become_user"]
            inner["vars"] = dict(ctx["vars"], **(task.get("vars") or {}))
            inner["block"] = task
            for key in BLOCK_KEYS:
                inner["siblings"] = task.get(key) or []
                yield from iter_tasks(task.get(key), inner)
            continue
        yield task, ctx


def is_play(item):
    return isinstance(item, dict) and ("hosts" in item or "import_playbook" in item
                                       or "ansible.builtin.import_playbook" in item)


def collection_yaml():
    """{path: parsed} for the YAML that Ansible runs: roles (tasks, handlers,
    tests), playbooks, molecule scenarios."""
    out = {}
    for path in tree_files():
        if not path.endswith((".yml", ".yaml")):
            continue
        if path.startswith(("roles/", "playbooks/", "molecule/")) and "/meta/" not in path \
                and "/defaults/" not in path and "/vars/" not in path and not path.endswith("molecule.yml"):
            out[path] = load_yaml(path)
    return out


def task_lists(doc):
    """Every task list in a task file or a playbook, with its play."""
    if not isinstance(doc, list):
        return
    if doc and all(is_play(p) for p in doc):
        for play in doc:
            for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                if play.get(key):
                    yield play, play[key]
    else:
        yield None, doc


def all_tasks(docs=None):
    """(path, play, task, ctx) for every task of the collection."""
    docs = collection_yaml() if docs is None else docs
    for path, doc in sorted(docs.items()):
        for play, tasks in task_lists(doc):
            for task, ctx in iter_tasks(tasks):
                yield path, play, task, ctx


def dump(value):
    return value if isinstance(value, str) else yaml.safe_dump(value, default_flow_style=True, width=10 ** 6)


# ---------------------------------------------------------------- pipe to shell

PIPE_TO_SHELL = [
    # a download (curl or wget) piped into sh, into sudo bash, or into python3
    re.compile(r"\b(curl|wget)\b[^\n;&]*?\|\s*(sudo\s+(-\S+\s+)*)?(env\s+(\S+=\S*\s+)*)?"
               r"(/usr)?(/local)?(/bin/)?(ba|da|z|k|c|fi)?sh\b"),
    re.compile(r"\b(curl|wget)\b[^\n;&]*?\|\s*(sudo\s+(-\S+\s+)*)?(/usr)?(/bin/)?(python[0-9.]*|perl|ruby)\b"),
    # sh <(curl ...), bash -c "$(curl ...)"
    re.compile(r"\b(ba|da|z|k)?sh\s+<\(\s*(curl|wget)\b"),
    re.compile(r"\b(ba|da|z|k)?sh\s+-c\s+[\"']?\$\(\s*(curl|wget)\b"),
]


def pipe_to_shell(text):
    """Lines of text that pipe a download into an interpreter."""
    # Join shell and YAML continuation lines first.
    joined = re.sub(r"\\\n\s*", " ", text)
    hits = []
    for line in joined.splitlines():
        if any(p.search(line) for p in PIPE_TO_SHELL):
            hits.append(line.strip())
    return hits


def scanned_for_pipes():
    """Text files of the tree: YAML, templates, shell scripts, Makefiles,
    Python, docs. This file is left out (its self-tests plant the pattern)."""
    me = os.path.relpath(os.path.abspath(__file__), ROOT)
    for path in tree_files():
        if path == me or path.startswith("tests/fixtures/wheels/") and path.endswith(".whl"):
            continue
        full = os.path.join(ROOT, path)
        if os.path.getsize(full) > 2 * 1024 * 1024:
            continue
        with open(full, "rb") as fh:
            data = fh.read()
        if b"\0" in data:
            continue
        yield path, data.decode("utf-8", "replace")


# ---------------------------------------------------------------- downloads

DEB_LINE = re.compile(r"^\s*deb(-src)?\s", re.M)
PINNED_REQ = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?==[^=<>~!*\s]+$")
INSECURE = [
    (re.compile(r"trusted\s*=\s*yes"), "apt source marked trusted=yes"),
    (re.compile(r"--allow-(unauthenticated|insecure-repositories)"), "apt without signature checks"),
    (re.compile(r"--trusted-host"), "pip --trusted-host"),
    (re.compile(r"--no-check-certificate|curl\s+(-\w*k|--insecure)\b"), "TLS verification off"),
]


def deb_lines_unsigned(text):
    return [line.strip() for line in text.splitlines()
            if DEB_LINE.match(line) and "signed-by=" not in line]


def fingerprint_checked(task, ctx):
    """A download into a scratch directory (tempfile) that a task of the same
    block checks against a pinned fingerprint before anything uses it."""
    args = module_of(task)[1] or {}
    siblings = ctx.get("siblings") or []
    temps = [t.get("register") for t in siblings if module_of(t)[0] == "tempfile" and t.get("register")]
    dest = str(args.get("dest", ""))
    in_scratch = any(re.search(r"\b%s\.path\b" % re.escape(r), dest) for r in temps)
    checked = any(module_of(t)[0] == "assert" and "fingerprint" in dump(module_of(t)[1].get("that"))
                  for t in siblings)
    return in_scratch and checked


def pip_like(text):
    """True when a command line installs or downloads Python packages."""
    return bool(re.search(r"\bpip\b[^\n]*?\b(install|download)\b", text))


def pip_pinned(task, text, defs, siblings):
    """A pip/uv install is hash-pinned, version-pinned, or installs a local
    wheel whose sha256 a task before it checked."""
    if "--require-hashes" in text:
        return True
    # The requirements may come through variables: follow them one level.
    names = set(re.findall(r"\b[a-z_][a-z0-9_]*\b", text))
    seen = text + "\n" + "\n".join(dump(d) for n in names for d in defs.get(n, []))
    if "==" in seen:
        return True
    wheels = [n for n in names if n.endswith("wheel")]
    checked = any(module_of(t)[0] == "stat" and "checksum_algorithm" in dump(module_of(t)[1])
                  and re.search(r"\.checksum\s*!=", dump(t.get("failed_when", ""))) for t in siblings)
    return bool(wheels) and checked


def download_problems(tasks_with_ctx, defs=None):
    """Problems of download tasks: [(where, message)]."""
    defs = defs or {}
    problems = []
    for where, task, ctx in tasks_with_ctx:
        mod, args = module_of(task)
        if mod is None:
            continue
        text = dump(args)
        label = "%s: %s" % (where, task.get("name", mod))
        for pattern, message in INSECURE:
            if pattern.search(text):
                problems.append((label, message))
        if isinstance(args, dict) and str(args.get("validate_certs", "true")).lower() in ("false", "no", "0"):
            problems.append((label, "validate_certs off"))
        if mod == "get_url":
            if not args.get("checksum") and not fingerprint_checked(task, ctx):
                problems.append((label, "get_url without checksum"))
        elif mod == "uri":
            if isinstance(args, dict) and args.get("dest"):
                problems.append((label, "uri download (use get_url with a checksum)"))
        elif mod == "unarchive":
            if isinstance(args, dict) and re.match(r"^\w+://", str(args.get("src", ""))):
                problems.append((label, "unarchive of a URL (no checksum)"))
        elif mod in ("apt_key", "rpm_key"):
            problems.append((label, "%s: keys go to a keyring named by signed-by, checked by fingerprint" % mod))
        elif mod == "apt_repository":
            if "signed-by=" not in text:
                problems.append((label, "apt repository without signed-by"))
        elif mod == "deb822_repository":
            if not (isinstance(args, dict) and args.get("signed_by")):
                problems.append((label, "deb822 repository without signed_by"))
        elif mod == "apt":
            if isinstance(args, dict) and str(args.get("allow_unauthenticated", "false")).lower() in ("true", "yes"):
                problems.append((label, "apt allow_unauthenticated"))
            if isinstance(args, dict) and re.match(r"^\w+://", str(args.get("deb", ""))):
                problems.append((label, "apt deb= URL (no checksum)"))
        elif mod == "pip":
            names = args.get("name", []) if isinstance(args, dict) else []
            names = [names] if isinstance(names, str) else names
            if args.get("requirements") if isinstance(args, dict) else False:
                problems.append((label, "pip module with a requirements file (use --require-hashes)"))
            for name in names:
                if not PINNED_REQ.match(str(name)) and "==" not in str(name):
                    problems.append((label, "pip module: %s is not pinned" % name))
        elif mod in ("command", "shell", "raw"):
            if pip_like(text) and not pip_pinned(task, text, defs, ctx.get("siblings") or []):
                problems.append((label, "pip/uv install that is neither hash- nor version-pinned"))
        elif mod == "git":
            version = str(args.get("version", "")) if isinstance(args, dict) else ""
            ref = version
            match = re.match(r"^\{\{\s*([A-Za-z_]\w*)\s*\}\}$", version)
            if match:
                ref = " ".join(str(d) for d in defs.get(match.group(1), []))
            if not re.search(r"\b[0-9a-f]{40}\b", ref):
                problems.append((label, "git checkout not pinned to a commit (version %r)" % version))
        if mod in ("copy", "template", "lineinfile", "blockinfile") and isinstance(args, dict):
            for line in deb_lines_unsigned(str(args.get("content", "")) + "\n" + str(args.get("line", ""))
                                           + "\n" + str(args.get("block", ""))):
                problems.append((label, "apt source line without signed-by: %s" % line))
    return problems


def role_defs():
    """{variable: [definitions]} from role defaults and vars, set_fact, task and
    block vars of every role (used to follow a variable to what it holds)."""
    defs = {}
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "defaults", "main.yml")) \
            + glob.glob(os.path.join(ROOT, "roles", "*", "vars", "main.yml")):
        with open(path, encoding="utf-8") as fh:
            for key, value in (yaml.safe_load(fh) or {}).items():
                defs.setdefault(key, []).append(value)
    for path, doc in collection_yaml().items():
        if path.startswith("playbooks/") and isinstance(doc, list):
            for play in doc:
                if is_play(play):
                    for key, value in (play.get("vars") or {}).items():
                        defs.setdefault(key, []).append(value)
    for path, _play, task, ctx in all_tasks():
        if not path.startswith("roles/"):
            continue
        mod, args = module_of(task)
        if mod == "set_fact" and isinstance(args, dict):
            for key, value in args.items():
                defs.setdefault(key, []).append(value)
        for key, value in list((task.get("vars") or {}).items()) + list(ctx["vars"].items()):
            defs.setdefault(key, []).append(value)
    return defs


def collection_download_problems():
    docs = collection_yaml()
    tasks = [("%s" % path, task, ctx) for path, _play, task, ctx in all_tasks(docs)]
    return download_problems(tasks, role_defs())


# ---------------------------------------------------------------- become

# Where a task may write or run as root: the purposes that need it.
ROOT_LOCATIONS = {
    "/etc/ld.so.conf.d/": "loader path",
    "/etc/profile.d/": "login shell environment",
    "/etc/apt/": "apt sources",
    "/usr/share/keyrings/": "apt keyrings",
    "/usr/local/": "CUDA toolkit prefix and its stable link",
    "/opt/": "root-owned tool prefixes (uv)",
    "/var/cache/gpufleet/": "root-owned work area of system installs",
    "/var/lock/gpufleet": "per-host run lock",
    "/etc/systemd/system/": "the serving unit, where the operator asks for one (gpufleet_serving_unit)",
}
# Commands that may run as root, with what they are for. Their path
# arguments must still lie in ROOT_LOCATIONS.
ROOT_COMMANDS = {
    "/sbin/ldconfig": "rebuild the loader cache",
    "python3": "python3 -m venv for a root-owned tool prefix",
    "cp": "assemble the toolkit prefix",
    "mv": "put the assembled toolkit prefix in place",
}
# The collection's own scripts that may run as root (ansible.builtin.script),
# with what they are for; their --path arguments must lie in ROOT_LOCATIONS.
# None: the host lock is a module (host_lock, its path in PATH_KEYS).
ROOT_SCRIPTS = {}
# Modules whose whole purpose needs root.
ROOT_MODULES = {"apt": "system packages", "package": "system packages",
                "systemd_service": "enable the serving unit (gpufleet_serving_unit); it is never started here"}
# Tasks that run a command the operator wrote, as root by the operator's choice.
OPERATOR_ROOT_TASKS = {
    "roles/fleet/tasks/hook.yml: Serving | Run the hook command as root ({{ fleet_hook_action }})":
        "the drain/return hook (gpufleet_drain_hook, a scheduler's admin command), only with gpufleet_hook_become",
    "roles/verify/tasks/xid_root.yml: Verify | Read the Xid errors of the kernel log as root":
        "the kernel log where only root may read it (read-only gpu_facts xid: true), only with gpufleet_xid: become",
}
# Action plugins that escalate for one module run of their own (they set a
# become plugin on the task's connection, then put back what it had), with
# what for: none (a read as root is a task of its own, above).
ROOT_ACTIONS = {}
# Modules that act on paths as root; the keys that name the paths.
PATH_KEYS = {"copy": ("dest",), "template": ("dest",), "file": ("path", "dest"), "find": ("paths",),
             "stat": ("path",), "command": ("creates", "removes", "chdir"), "script": ("creates", "removes", "chdir"),
             "host_lock": ("path",)}
# Facts built in several steps from a find's results: the register of that find.
FACT_ORIGINS = {"_cuda_toolkit_stale_files": "__cuda_toolkit_ld_confs"}


def truthy(value):
    return value is True or str(value).strip().lower() in ("true", "yes", "1")


def templated(value):
    return isinstance(value, str) and "{{" in value


class Resolver:
    """Follows a path expression to the literal it starts with, through role
    defaults, set_fact, block and task vars, loop items and find registers."""

    def __init__(self, defs, registers):
        self.defs = defs
        self.registers = registers

    def roots(self, expr, scope, depth=0):
        if depth > 12:
            return ["<too deep>"]
        if isinstance(expr, list):
            return [r for item in expr for r in self.roots(item, scope, depth + 1)]
        expr = str(expr).strip()
        if not expr.startswith("{{"):
            return [expr]
        inner = expr[2:].split("}}", 1)[0].strip().lstrip("-").strip()
        if inner.startswith("["):
            # A list expression (argv): its first element is the program.
            return self.term(inner[1:].split(",", 1)[0], scope, depth)
        cond = re.match(r"^\(?\s*(.+?)\s+if\s+.+?\s+else\s+(.+?)\)?\s*(\|[^()]*)?$", inner, re.S)
        if cond:
            found = [r for alt in cond.groups()[:2] for r in self.term(alt, scope, depth) if r]
            return found or [""]
        return self.term(inner, scope, depth)

    def term(self, term, scope, depth):
        term = term.strip().lstrip("(").strip()
        quoted = re.match(r"^(['\"])(.*?)\1", term)
        if quoted:
            return [quoted.group(2)]
        match = re.match(r"^([A-Za-z_]\w*)((?:\.\w+)*)", term)
        if not match:
            return ["<%s>" % term]
        name, attrs = match.groups()
        if name == "item":
            return self.roots(scope.get("item", "<item>"), dict(scope, item="<item>"), depth + 1)
        if name in FACT_ORIGINS:
            name, attrs = FACT_ORIGINS[name], ".files"
        if name in self.registers and attrs.startswith(".files"):
            task = self.registers[name]
            return self.roots(module_of(task)[1].get("paths"), scope, depth + 1)
        if name in self.registers and attrs == ".path" and module_of(self.registers[name])[0] == "tempfile":
            return ["/tmp/"]
        if name in scope.get("vars", {}):
            return self.roots(scope["vars"][name], scope, depth + 1)
        if name in self.defs:
            found = [r for d in self.defs[name] if isinstance(d, str) for r in self.roots(d, scope, depth + 1)]
            return [r for r in found if r] or [""]
        fallback = re.search(r"\|\s*default\(\s*(['\"])(.*?)\1", term)
        if fallback:
            return [fallback.group(2)]
        return ["<%s>" % name]


def under_root_location(root):
    return any(root.startswith(prefix) or root == prefix.rstrip("/") for prefix in ROOT_LOCATIONS)


def task_paths(mod, args):
    """The paths a task acts on (its write or read targets)."""
    if not isinstance(args, dict):
        return [], None
    paths = [args[k] for k in PATH_KEYS.get(mod, ()) if args.get(k)]
    program = None
    if mod == "command":
        argv = args.get("argv")
        if isinstance(argv, list):
            program = argv[0]
            paths += [a for a in argv[1:] if isinstance(a, str) and (a.startswith("/") or a.startswith("{{"))]
        elif isinstance(argv, str):
            program = argv
        else:
            cmd = str(args.get("cmd", ""))
            program = cmd.split()[0] if cmd.split() else ""
    if mod == "script":
        cmd = str(args.get("cmd", ""))
        program = re.split(r"\s+(?![^{]*\}\})", cmd.strip(), maxsplit=1)[0]
        paths += re.findall(r"--path\s+(\{\{.*?\}\}|\S+)", cmd)
    return paths, program


def become_problems(entries, resolver):
    """entries: (where, play, task, ctx). Problems with privilege escalation."""
    problems = []
    for where, play, task, ctx in entries:
        mod, args = module_of(task)
        label = "%s: %s" % (where, task.get("name", mod))
        become = task.get("become", ctx.get("become"))
        become_user = task.get("become_user", ctx.get("become_user"))
        if mod in INCLUDE_MODULES or (mod and mod.endswith(("include_role", "import_role"))):
            if become is not None and truthy(become) or templated(become):
                problems.append((label, "become on an include or role: escalate single tasks instead"))
            continue
        if become is None or (not templated(become) and not truthy(become)):
            continue
        if templated(become):
            # A switch to the deploy user (uv_venv_become), never to root.
            if not become_user or str(become_user).strip() == "root":
                problems.append((label, "templated become without a non-root become_user"))
            continue
        if become_user and str(become_user).strip() != "root":
            continue
        if mod in ROOT_MODULES or mod in CONTROLLER_ONLY or label in OPERATOR_ROOT_TASKS:
            continue
        if mod not in PATH_KEYS:
            problems.append((label, "runs %s as root: not an allow-listed purpose" % mod))
            continue
        scope = {"vars": dict(ctx.get("vars") or {}, **(task.get("vars") or {})),
                 "item": task.get("loop", task.get("with_items", "<item>"))}
        paths, program = task_paths(mod, args)
        if mod == "command":
            prog_roots = resolver.roots(program, scope) if program is not None else ["<none>"]
            if not all(r in ROOT_COMMANDS or under_root_location(r) for r in prog_roots):
                problems.append((label, "runs %s as root: not an allow-listed command" % prog_roots))
                continue
        if mod == "script" and not any(str(program).replace(" ", "").find(s) >= 0 for s in ROOT_SCRIPTS):
            problems.append((label, "runs the script %s as root: not an allow-listed script" % program))
            continue
        if mod != "command" and not paths:
            problems.append((label, "%s as root without a path" % mod))
        for path in paths:
            for root in resolver.roots(path, scope):
                if not under_root_location(root):
                    problems.append((label, "%s as root on %s (from %s): not a system location"
                                     % (mod, root or "''", path)))
    return problems


def play_become_problems(docs):
    problems = []
    for path, doc in sorted(docs.items()):
        if not isinstance(doc, list):
            continue
        for play in doc:
            if not is_play(play):
                continue
            if "become" in play and (truthy(play["become"]) or templated(play["become"])):
                problems.append((path, "play %r has become" % play.get("name")))
            for role in play.get("roles") or []:
                if isinstance(role, dict) and "become" in role and (truthy(role["become"]) or templated(role["become"])):
                    problems.append((path, "role %r with become" % role.get("role", role.get("name"))))
    return problems


def collection_resolver():
    registers = {}
    for _path, _play, task, _ctx in all_tasks():
        if task.get("register"):
            registers[task["register"]] = task
    return Resolver(role_defs(), registers)


def collection_become_problems():
    docs = collection_yaml()
    entries = list(all_tasks(docs))
    problems = become_problems(entries, collection_resolver()) + play_become_problems(docs)
    for meta in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "main.yml")):
        for dep in (load_yaml(os.path.relpath(meta, ROOT)) or {}).get("dependencies") or []:
            if isinstance(dep, dict) and "become" in dep:
                problems.append((meta, "role dependency with become"))
    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(ROOT, "ansible.cfg"))
    if cfg.has_option("privilege_escalation", "become") and truthy(cfg.get("privilege_escalation", "become")):
        problems.append(("ansible.cfg", "become = True for every task"))
    for path in tree_files():
        if path.startswith("inventories/") and path.endswith((".yml", ".yaml", ".ini")):
            with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
                if re.search(r"^\s*ansible_become\s*[:=]\s*(true|yes|1)\b", fh.read(), re.M | re.I):
                    problems.append((path, "ansible_become for a whole group or host"))
    return problems


# ---------------------------------------------------------------- the tree

def test_no_download_piped_into_a_shell():
    hits = [(path, line) for path, text in scanned_for_pipes() for line in pipe_to_shell(text)]
    assert hits == []


def test_downloads_are_verified():
    assert collection_download_problems() == []


def test_apt_sources_are_signed_by_a_fingerprint_checked_keyring():
    # Every deb line in tasks and templates names its keyring...
    lines = []
    for path in tree_files():
        if path.startswith(("roles/", "playbooks/", "molecule/")) and path.endswith((".yml", ".j2")):
            with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
                text = fh.read()
            lines += [(path, line) for line in text.splitlines() if DEB_LINE.match(line)]
    assert lines, "the scan found no apt source line at all: it would pass vacuously"
    assert [(p, l) for p, l in lines if "signed-by=" not in l] == []
    # ... and the keyring is written only from a key whose fingerprint was asserted against the pinned one.
    tasks = yaml.safe_load(open(os.path.join(ROOT, "roles/cuda_toolkit/tasks/install_apt.yml"), encoding="utf-8"))
    flat = [t for t, _ctx in iter_tasks(tasks)]
    names = [module_of(t)[0] for t in flat]
    writes = [i for i, t in enumerate(flat) if module_of(t)[0] == "copy"
              and "cuda_toolkit_apt_keyring" in str(module_of(t)[1].get("dest"))]
    asserts = [i for i, t in enumerate(flat) if module_of(t)[0] == "assert"
               and "_cuda_toolkit_apt_fingerprint in" in dump(module_of(t)[1].get("that"))]
    assert writes and asserts and max(asserts) < min(writes), names
    defaults = load_yaml("roles/cuda_toolkit/defaults/main.yml")
    assert re.match(r"^[0-9A-F]{40}$", defaults["cuda_toolkit_apt_key_fingerprint"])


def test_pip_requirement_lists_are_pinned():
    """Lists of requirements in role defaults (build requirements, pins)."""
    loose = []
    for path in glob.glob(os.path.join(ROOT, "roles", "*", "defaults", "main.yml")):
        for key, value in (yaml.safe_load(open(path, encoding="utf-8")) or {}).items():
            if key.endswith("requirements") and isinstance(value, list):
                loose += [(key, v) for v in value if not PINNED_REQ.match(str(v))]
            if key.endswith("pip_packages") and isinstance(value, list):
                loose += [(key, v) for v in value if not re.match(r"^[0-9a-f]{64}$", str(v.get("sha256", "")))]
    assert loose == []
    template = open(os.path.join(ROOT, "roles/cuda_toolkit/templates/pip-requirements.txt.j2"), encoding="utf-8").read()
    reqs = [line for line in template.splitlines() if line.strip() and not line.lstrip().startswith(("#", "{%"))]
    assert reqs and all("==" in line and "--hash=sha256:" in line for line in reqs), reqs


def test_become_only_where_root_is_needed():
    assert collection_become_problems() == []


def escalating_actions(root):
    """The action plugins under root that set a become plugin themselves."""
    found = set()
    for path in sorted(glob.glob(os.path.join(root, "plugins", "action", "*.py"))):
        with open(path, encoding="utf-8") as handle:
            if "set_become_plugin(" in handle.read():
                found.add(os.path.relpath(path, root))
    return found


def test_actions_escalate_only_where_listed():
    assert escalating_actions(ROOT) == set(ROOT_ACTIONS)


def test_self_escalating_action_is_caught(tmp_path):
    (tmp_path / "plugins" / "action").mkdir(parents=True)
    (tmp_path / "plugins" / "action" / "quiet.py").write_text("x = 1\n")
    (tmp_path / "plugins" / "action" / "sneaky.py").write_text("self._connection.set_become_plugin(plugin)\n")
    assert escalating_actions(str(tmp_path)) == {"plugins/action/sneaky.py"}


def test_the_become_allow_list_is_in_use():
    """Every allow-listed location and command is used by some task: the list
    is derived from the code, not a wish list."""
    resolver = collection_resolver()
    used_locations, used_commands, used_scripts = set(), set(), set()
    for _path, _play, task, ctx in all_tasks():
        mod, args = module_of(task)
        become = task.get("become", ctx.get("become"))
        if not truthy(become) or templated(become) or mod not in PATH_KEYS:
            continue
        scope = {"vars": dict(ctx.get("vars") or {}, **(task.get("vars") or {})), "item": task.get("loop", "<item>")}
        paths, program = task_paths(mod, args)
        for root in [r for p in paths for r in resolver.roots(p, scope)] + (
                resolver.roots(program, scope) if program else []):
            used_commands.update(c for c in ROOT_COMMANDS if root == c)
            used_locations.update(p for p in ROOT_LOCATIONS if root.startswith(p))
        if mod == "script":
            used_scripts.update(s for s in ROOT_SCRIPTS if s in str(program).replace(" ", ""))
    assert set(ROOT_COMMANDS) - used_commands == set()
    assert set(ROOT_SCRIPTS) - used_scripts == set()
    assert set(ROOT_LOCATIONS) - used_locations == set()


# ansible-lint waivers: "<file> <rule> skip" and why. The fleet role's defaults
# are the playbooks' public inputs, named gpufleet_* (the collection's prefix,
# in every inventory) rather than fleet_*.
LINT_WAIVERS = {
    "roles/fleet/defaults/main.yml var-naming[no-role-prefix] skip": "the playbooks' gpufleet_* inputs",
}


def test_ansible_lint_production_profile_skips_nothing():
    config = load_yaml(".config/ansible-lint.yml")
    assert config.get("profile") == "production"
    assert config.get("strict") is True
    for key in ("skip_list", "warn_list", "mock_modules", "mock_roles"):
        assert not config.get(key), "%s in .config/ansible-lint.yml: %s" % (key, config.get(key))
    assert not [p for p in tree_files() if os.path.basename(p) in (".ansible-lint", ".ansible-lint-ignore")]
    # the one ignore file holds exactly the allow-listed waivers, nothing more
    ignores = [p for p in tree_files() if os.path.basename(p) in ("ansible-lint-ignore.txt", ".ansible-lint-ignore")]
    assert ignores == [".config/ansible-lint-ignore.txt"]
    with open(os.path.join(ROOT, ignores[0]), encoding="utf-8") as fh:
        waivers = {line.split("#", 1)[0].strip() for line in fh} - {""}
    assert waivers == set(LINT_WAIVERS), waivers
    # ansible-lint reads YAML (and Jinja templates): no noqa in any of it.
    noqa = []
    for path in tree_files():
        if path.endswith((".yml", ".yaml", ".j2")):
            with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
                noqa += ["%s:%d" % (path, n) for n, line in enumerate(fh, 1) if re.search(r"#\s*noqa\b", line)]
    assert noqa == []


def test_ansible_test_sanity_ignores_nothing():
    ignores = glob.glob(os.path.join(ROOT, "tests", "sanity", "ignore-*.txt"))
    assert [p for p in ignores if open(p, encoding="utf-8").read().strip()] == []
    # The sanity script runs without ignore or skip switches.
    with open(os.path.join(ROOT, "scripts", "sanity.sh"), encoding="utf-8") as fh:
        script = fh.read()
    calls = [line for line in script.splitlines() if re.search(r"^\s*(exec\s+)?ansible-test sanity", line)]
    assert calls, "scripts/sanity.sh does not run ansible-test sanity"
    assert [c for c in calls if re.search(r"--(skip-test|allow-disabled|exclude|test)\b", c)] == []


# ---------------------------------------------------------------- self-tests

def _curl(*parts):
    # Built at run time so that the tree scan never sees the planted pattern.
    return " ".join(parts)


@pytest.mark.parametrize("snippet", [
    _curl("curl", "-fsSL", "https://example.invalid/install.sh", "|", "sh"),
    _curl("wget", "-qO-", "https://example.invalid/x", "|", "sudo", "-E", "bash"),
    _curl("curl", "-LsSf", "https://astral.sh/uv/install.sh", "|", "env", "UV_INSTALL_DIR=/opt", "sh"),
    _curl("curl", "https://example.invalid/get-pip.py", "|", "python3"),
    _curl("bash", "<(curl", "-s", "https://example.invalid/x)"),
    _curl('sh -c "$(curl', '-fsSL', 'https://example.invalid/x)"'),
    "cmd: |\n  " + _curl("curl", "-fsSL", "https://example.invalid/x", "\\\n    |", "bash") + "\n",
])
def test_self_pipe_to_shell_is_caught(snippet):
    assert pipe_to_shell(snippet)


@pytest.mark.parametrize("snippet", [
    "curl -fsSL -o /tmp/x https://example.invalid/x && sha256sum -c x.sha256",
    "grep curl file | sort",
])
def test_self_pipe_to_shell_passes_clean_lines(snippet):
    assert pipe_to_shell(snippet) == []


def _tasks(text):
    tasks = yaml.safe_load(text)
    return [("planted.yml", task, ctx) for task, ctx in iter_tasks(tasks)]


@pytest.mark.parametrize("text,message", [
    ("- name: Fetch\n  ansible.builtin.get_url:\n    url: https://example.invalid/x.tar.gz\n    dest: /tmp/x\n    mode: '0644'\n",
     "get_url without checksum"),
    ("- name: Fetch\n  ansible.builtin.uri:\n    url: https://example.invalid/x\n    dest: /tmp/x\n", "uri download"),
    ("- name: Key\n  ansible.builtin.apt_key:\n    url: https://example.invalid/key\n", "apt_key"),
    ("- name: Repo\n  ansible.builtin.apt_repository:\n    repo: deb https://example.invalid/ stable main\n",
     "without signed-by"),
    ("- name: Source\n  ansible.builtin.copy:\n    content: \"deb https://example.invalid/ /\\n\"\n    dest: /etc/apt/sources.list.d/x.list\n",
     "apt source line without signed-by"),
    ("- name: Source\n  ansible.builtin.copy:\n    content: \"deb [trusted=yes] https://example.invalid/ /\\n\"\n    dest: /etc/apt/sources.list.d/x.list\n",
     "trusted=yes"),
    ("- name: Unpinned\n  ansible.builtin.command:\n    argv: [pip, install, torch]\n", "neither hash- nor version-pinned"),
    ("- name: Unpinned\n  ansible.builtin.command:\n    argv: \"{{ [uv_bin, 'pip', 'install'] + reqs }}\"\n",
     "neither hash- nor version-pinned"),
    ("- name: Pip\n  ansible.builtin.pip:\n    name: [torch]\n", "not pinned"),
    ("- name: Clone\n  ansible.builtin.git:\n    repo: https://example.invalid/r.git\n    dest: /tmp/r\n    version: main\n",
     "not pinned to a commit"),
    ("- name: Fetch\n  ansible.builtin.get_url:\n    url: https://example.invalid/x\n    dest: /tmp/x\n    checksum: sha256:00\n    validate_certs: false\n",
     "validate_certs off"),
])
def test_self_download_scan_catches(text, message):
    problems = download_problems(_tasks(text), {"reqs": ["torch"]})
    assert any(message in p[1] for p in problems), problems


@pytest.mark.parametrize("text", [
    "- name: Fetch\n  ansible.builtin.get_url:\n    url: https://example.invalid/x\n    dest: /tmp/x\n    checksum: sha256:00\n",
    "- name: Pinned\n  ansible.builtin.command:\n    argv: \"{{ [uv_bin, 'pip', 'install'] + reqs }}\"\n",
    "- name: Hashes\n  ansible.builtin.command:\n    argv: [pip, install, --require-hashes, -r, /tmp/r.txt]\n",
    "- name: Source\n  ansible.builtin.copy:\n    content: \"deb [signed-by=/usr/share/keyrings/x.gpg] https://example.invalid/ /\\n\"\n"
    "    dest: /etc/apt/sources.list.d/x.list\n",
    # A key into a scratch directory, then asserted against the pinned fingerprint.
    "- name: Key\n  block:\n"
    "    - name: Scratch\n      ansible.builtin.tempfile:\n        state: directory\n      register: tmp\n"
    "    - name: Get\n      ansible.builtin.get_url:\n        url: https://example.invalid/key\n        dest: \"{{ tmp.path }}/key\"\n"
    "    - name: Check\n      ansible.builtin.assert:\n        that: [pinned_fingerprint in fingerprints]\n",
])
def test_self_download_scan_passes_good_tasks(text):
    assert download_problems(_tasks(text), {"reqs": ["torch==2.13.0"]}) == []


def test_self_key_download_without_fingerprint_check_is_caught():
    text = ("- name: Key\n  block:\n"
            "    - name: Scratch\n      ansible.builtin.tempfile:\n        state: directory\n      register: tmp\n"
            "    - name: Get\n      ansible.builtin.get_url:\n        url: https://example.invalid/key\n"
            "        dest: \"{{ tmp.path }}/key\"\n")
    assert [p for p in download_problems(_tasks(text)) if "get_url without checksum" in p[1]]


def _become(text, defs=None, registers=None):
    tasks = yaml.safe_load(text)
    entries = [("planted.yml", None, task, ctx) for task, ctx in iter_tasks(tasks)]
    return become_problems(entries, Resolver(defs or {}, registers or {}))


@pytest.mark.parametrize("text,message", [
    ("- name: Remove a home folder as root\n  ansible.builtin.file:\n    path: /home/deploy/x\n    state: absent\n  become: true\n",
     "not a system location"),
    ("- name: Venv as root\n  ansible.builtin.command:\n    argv: [python3, -m, venv, \"{{ venv }}\"]\n  become: true\n",
     "not a system location"),
    ("- name: Shell as root\n  ansible.builtin.shell: rm -rf /tmp/x\n  become: true\n", "not an allow-listed purpose"),
    ("- name: Anything as root\n  ansible.builtin.command:\n    argv: [rm, -rf, /etc/x]\n  become: true\n",
     "not an allow-listed command"),
    ("- name: Role as root\n  ansible.builtin.include_role:\n    name: x\n  become: true\n", "include or role"),
    ("- name: Block as root\n  become: true\n  block:\n    - name: Write a home file\n      ansible.builtin.copy:\n"
     "        content: x\n        dest: \"~/x\"\n        mode: '0644'\n", "not a system location"),
    ("- name: Templated become to root\n  ansible.builtin.command:\n    argv: [id]\n  become: \"{{ flag }}\"\n",
     "non-root become_user"),
])
def test_self_become_checker_catches(text, message):
    problems = _become(text, defs={"venv": ["~/ml-env-x"]})
    assert any(message in p[1] for p in problems), problems


def test_self_become_checker_passes_allowed_tasks():
    text = (
        "- name: Package\n  ansible.builtin.apt:\n    name: g++\n  become: true\n"
        "- name: Loader\n  ansible.builtin.copy:\n    content: x\n    dest: \"{{ ld_file }}\"\n    mode: '0644'\n  become: true\n"
        "- name: ldconfig\n  ansible.builtin.command:\n    argv: [/sbin/ldconfig]\n  become: true\n"
        "- name: As the deploy user\n  ansible.builtin.command:\n    argv: [id]\n  become: \"{{ flag }}\"\n  become_user: deploy\n"
        "- name: Loop\n  ansible.builtin.file:\n    path: \"{{ item }}\"\n    state: absent\n  loop: [/etc/profile.d/x.sh]\n  become: true\n")
    assert _become(text, defs={"ld_file": ["/etc/ld.so.conf.d/x.conf"]}) == []


def test_self_play_become_is_caught():
    docs = {"planted.yml": [{"name": "p", "hosts": "all", "become": True, "tasks": []},
                            {"name": "q", "hosts": "all", "roles": [{"role": "x", "become": True}]}]}
    assert len(play_become_problems(docs)) == 2


def test_self_lint_noqa_pattern():
    assert re.search(r"#\s*noqa\b", "  ansible.builtin.shell: x  # noqa: command-instead-of-shell")
