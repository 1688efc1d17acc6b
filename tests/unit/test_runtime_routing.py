"""meta/runtime.yml: every redirect points at a module of this collection that
exists, and each old name still reaches the new plugin through Ansible's own
plugin loader."""
import json
import os
import subprocess
import sys

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _routing():
    with open(os.path.join(ROOT, "meta", "runtime.yml"), encoding="utf-8") as fh:
        return (yaml.safe_load(fh) or {}).get("plugin_routing", {})


def test_every_redirect_names_an_existing_plugin_of_the_collection():
    routing = _routing()
    assert {"venv_link", "verify_venv"} <= set(routing.get("modules", {}))
    assert "verify_venv" in routing.get("action", {}) and "uv_lock_apply" in routing.get("filter", {})
    for kind, folder in (("modules", "modules"), ("action", "action")):
        for old, route in routing.get(kind, {}).items():
            target = route["redirect"]
            assert target.startswith("gpufleet.inference."), (old, target)
            name = target.rsplit(".", 1)[1]
            assert os.path.exists(os.path.join(ROOT, "plugins", folder, name + ".py")), (old, target)
            assert not os.path.exists(os.path.join(ROOT, "plugins", folder, old + ".py")), "the old file is still there"
    for old, route in routing.get("filter", {}).items():
        name = route["redirect"].rsplit(".", 1)[1]
        # a filter's documentation file carries its name
        assert os.path.exists(os.path.join(ROOT, "plugins", "filter", name + ".yml")), (old, name)
        assert not os.path.exists(os.path.join(ROOT, "plugins", "filter", old + ".yml")), "the old doc is still there"


ENV = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_DEPRECATION_WARNINGS="true")


@pytest.mark.parametrize("old, new", [("venv_link", "venv_link_info"), ("verify_venv", "verify_host")])
def test_the_old_module_name_resolves_to_the_new_module(old, new):
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-doc"), "-t", "module", "--json",
                          "gpufleet.inference." + old], cwd=ROOT, env=ENV, capture_output=True, text=True,
                         check=False, timeout=120)
    assert out.returncode == 0, out.stderr
    docs = next(iter(yaml.safe_load(out.stdout).values()))
    assert docs["doc"]["module"] == new


def test_the_old_filter_name_still_works_and_says_its_new_name():
    # ansible-doc shows no documentation through a filter's redirect: the filter is used instead
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-m", "debug", "-a",
                          json.dumps({"msg": "{{ 'a==1' | gpufleet.inference.uv_lock_apply({'install': {'b': '2'}}) | split }}"})],
                         cwd=ROOT, env=ENV, capture_output=True, text=True, check=False, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "- a==1" in out.stdout and "- b==2" in out.stdout, out.stdout
    assert "use gpufleet.inference.uv_freeze_apply" in out.stdout + out.stderr
