"""Every role's defaults/main.yml and meta/argument_specs.yml agree: the same
names, and the same values. A default that is a template falling back on a
playbook input (``{{ gpufleet_x | default(V) }}``) is compared by its fallback V,
which is what the role gets when it is used on its own.

defaults/main.yml is where a default is written; every other copy of it is
checked here against that one: the argument specs' ``default:``, the fallback
V of a chained default (the default of gpufleet_x), and the constants and
module docs of plugins/ that the roles' defaults are handed to."""
import ast
import glob
import os

import pytest
import yaml

from ansible_collections.gpufleet.inference.plugins.module_utils import backends, busy
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.defaults import (
    FALLBACK_RE, effective, role_default)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES = sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
               for p in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")))


def _load(role, *parts):
    with open(os.path.join(ROOT, "roles", role, *parts), encoding="utf-8") as fh:
        return yaml.safe_load(fh) or {}


def _spec_options(role):
    options = {}
    for entry in _load(role, "meta", "argument_specs.yml")["argument_specs"].values():
        for name, spec in ((entry or {}).get("options") or {}).items():
            options.setdefault(name, spec)
    return options


def test_every_role_has_a_spec():
    have = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "roles", "*")) if os.path.isdir(p))
    assert ROLES == have


@pytest.mark.parametrize("role", ROLES)
def test_defaults_and_spec_name_the_same_variables(role):
    defaults = _load(role, "defaults", "main.yml")
    public = {k for k in defaults if not k.startswith("_")}
    options = set(_spec_options(role))
    assert sorted(public - options) == [], "in defaults/main.yml but not in the argument spec"
    with_default = {n for n, s in _spec_options(role).items() if "default" in s}
    assert sorted(with_default - public) == [], "a default in the argument spec but not in defaults/main.yml"


@pytest.mark.parametrize("role", ROLES)
def test_defaults_and_spec_give_the_same_values(role):
    defaults = _load(role, "defaults", "main.yml")
    wrong = []
    for name, spec in _spec_options(role).items():
        if "default" not in spec or name not in defaults:
            continue
        got, want = effective(defaults[name]), effective(spec["default"])
        if isinstance(got, str) and "{{" in got and got == want:
            continue  # the same run-time derivation in both
        if isinstance(got, str) and "{{" in got and not (isinstance(want, str) and "{{" in want):
            continue  # derived from other variables at run time (the spec's description says how)
        if got != want:
            wrong.append("%s: defaults/main.yml %r, argument spec %r" % (name, got, want))
    assert wrong == []


def test_the_fallback_reader_reads_what_roles_write():
    assert effective("{{ gpufleet_venv_link | default('~/ml-env') }}") == "~/ml-env"
    assert effective("{{ gpufleet_collectives_sizes_mib | default([1, 16, 64]) }}") == [1, 16, 64]
    assert effective("{{ gpufleet_verify_smoke | default(true) }}") is True
    assert effective("{{ uv_venv_dir }}") == "{{ uv_venv_dir }}"


def _homes():
    """{variable: (role, its default)} over every role's defaults/main.yml."""
    homes = {}
    for role in ROLES:
        for name, value in _load(role, "defaults", "main.yml").items():
            homes[name] = (role, value)
    return homes


@pytest.mark.parametrize("role", ROLES)
def test_a_chained_default_falls_back_on_the_default_it_chains_to(role):
    """{{ gpufleet_x | default(V) }}: V is what the role gets on its own, the
    default of gpufleet_x what it gets in a playbook; both are the same."""
    homes, wrong = _homes(), []
    for name, value in _load(role, "defaults", "main.yml").items():
        m = FALLBACK_RE.match(value.strip()) if isinstance(value, str) else None
        if not m or m.group("name") not in homes:
            continue  # not chained, or chained to a variable no role defaults (unset means something)
        home_role, home = homes[m.group("name")]
        if effective(value) != effective(home):
            wrong.append("%s: falls back on %r, %s's default of %s is %r"
                         % (name, effective(value), home_role, m.group("name"), effective(home)))
    assert wrong == []


def test_the_chained_defaults_are_found():
    homes = _homes()
    assert FALLBACK_RE.match(homes["verify_busy_memory_mib"][1]).group("name") == "gpufleet_busy_memory_mib"
    assert homes["gpufleet_busy_memory_mib"][0] == "fleet"


@pytest.mark.parametrize("constant, role, name", [
    # the modules' default when a task does not pass one (module_utils run on the host, without the roles)
    (busy.DEFAULT_BUSY_MEMORY_MIB, "fleet", "gpufleet_busy_memory_mib"),
    (busy.DEFAULT_BUSY_MEMORY_MIB, "verify", "verify_busy_memory_mib"),
    (backends.DEFAULT_SGLANG_VERSION, "fleet", "gpufleet_sglang_version"),
    (backends.DEFAULT_SGLANG_VERSION, "verify", "verify_sglang_version"),
])
def test_a_module_utils_constant_is_the_roles_default(constant, role, name):
    assert constant == role_default(role, name)


def _documented_default(module, option):
    with open(os.path.join(ROOT, "plugins", "modules", module + ".py"), encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["DOCUMENTATION"]:
            return yaml.safe_load(node.value.value)["options"][option].get("default")
    raise AssertionError("%s has no DOCUMENTATION" % module)


@pytest.mark.parametrize("module", ["gpu_facts", "torch_verify"])
def test_the_module_docs_give_the_busy_threshold_the_code_has(module):
    """ansible-doc reads DOCUMENTATION without running the module, so its default is written there too."""
    assert _documented_default(module, "busy_memory_mib") == busy.DEFAULT_BUSY_MEMORY_MIB
