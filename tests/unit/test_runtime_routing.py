"""meta/runtime.yml: every redirect points at a module of this collection that
exists, and the old name venv_link still reaches venv_link_info through
Ansible's own plugin loader."""
import os
import subprocess
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _routing():
    with open(os.path.join(ROOT, "meta", "runtime.yml"), encoding="utf-8") as fh:
        return (yaml.safe_load(fh) or {}).get("plugin_routing", {})


def test_every_redirect_names_an_existing_module_of_the_collection():
    modules = _routing().get("modules", {})
    assert "venv_link" in modules
    for old, route in modules.items():
        target = route["redirect"]
        assert target.startswith("gpufleet.inference."), (old, target)
        name = target.rsplit(".", 1)[1]
        assert os.path.exists(os.path.join(ROOT, "plugins", "modules", name + ".py")), (old, target)
        assert not os.path.exists(os.path.join(ROOT, "plugins", "modules", old + ".py")), "the old file is still there"


def test_the_old_name_resolves_to_the_new_module():
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_DEPRECATION_WARNINGS="true")
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-doc"), "-t", "module", "--json",
                          "gpufleet.inference.venv_link"], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=False, timeout=120)
    assert out.returncode == 0, out.stderr
    docs = next(iter(yaml.safe_load(out.stdout).values()))
    assert docs["doc"]["module"] == "venv_link_info"
