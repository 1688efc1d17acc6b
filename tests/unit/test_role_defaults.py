"""Every role's defaults/main.yml and meta/argument_specs.yml agree: the same
names, and the same values. A default that is a template falling back on a
playbook input (``{{ gpufleet_x | default(V) }}``) is compared by its fallback V,
which is what the role gets when it is used on its own."""
import ast
import glob
import os
import re

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES = sorted(os.path.basename(os.path.dirname(os.path.dirname(p)))
               for p in glob.glob(os.path.join(ROOT, "roles", "*", "meta", "argument_specs.yml")))
FALLBACK = re.compile(r"^\{\{\s*[a-z0-9_]+\s*\|\s*default\((?P<value>.*)\)\s*\}\}$")


def _load(role, *parts):
    with open(os.path.join(ROOT, "roles", role, *parts), encoding="utf-8") as fh:
        return yaml.safe_load(fh) or {}


def _spec_options(role):
    options = {}
    for entry in _load(role, "meta", "argument_specs.yml")["argument_specs"].values():
        for name, spec in ((entry or {}).get("options") or {}).items():
            options.setdefault(name, spec)
    return options


def _effective(value):
    """The value a default gives when the role runs alone."""
    if isinstance(value, dict):
        return {k: _effective(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_effective(v) for v in value]
    if isinstance(value, str):
        m = FALLBACK.match(value.strip())
        if m:
            text = m.group("value").replace("true", "True").replace("false", "False")
            try:
                return ast.literal_eval(text)
            except (ValueError, SyntaxError):
                return value
    return value


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
        got, want = _effective(defaults[name]), _effective(spec["default"])
        if isinstance(got, str) and "{{" in got and got == want:
            continue  # the same run-time derivation in both
        if isinstance(got, str) and "{{" in got and not (isinstance(want, str) and "{{" in want):
            continue  # derived from other variables at run time (the spec's description says how)
        if got != want:
            wrong.append("%s: defaults/main.yml %r, argument spec %r" % (name, got, want))
    assert wrong == []


def test_the_fallback_reader_reads_what_roles_write():
    assert _effective("{{ gpufleet_venv_link | default('~/ml-env') }}") == "~/ml-env"
    assert _effective("{{ gpufleet_collectives_sizes_mib | default([1, 16, 64]) }}") == [1, 16, 64]
    assert _effective("{{ gpufleet_verify_smoke | default(true) }}") is True
    assert _effective("{{ uv_venv_dir }}") == "{{ uv_venv_dir }}"
