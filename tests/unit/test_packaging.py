"""What a built collection carries, and how an operator runs it.

- An operator's own inventory under inventories/ never goes into the tarball,
  whatever its name; the shipped cluster, local and sandbox always do; the
  folders that hold runs, caches and venvs never do.
- The README's ansible.cfg for a fleet folder of one's own works: the built
  collection installs into that folder with ansible-galaxy and its playbooks
  run by FQCN from there, even from a venv that has a checkout on its import
  path (a development venv).
- Only the development targets put the checkout on the venv's import path.
"""
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
SHIPPED_INVENTORIES = ("cluster", "local", "sandbox")
# Never in the tarball: runs, caches, venvs, real-run evidence, the tests.
NEVER_PACKED = (".cache", ".venv", ".collections", "reports", "evidence", "tests", ".ansible")
# Folders of the checkout the copy leaves out: large, or built here; the
# copy plants small ones of its own where the check needs them.
NOT_COPIED = {".git", ".venv", ".cache", ".ansible", ".sandbox", ".whl", ".device", ".pytest_cache",
              "reports", "__pycache__"}
EE_BUILD_FOLDERS = {"collections", "context", "wheels", "debs", "debs.part"}
# Inventories an operator might name: a prefix of a shipped name, a longer
# one, a file instead of a folder.
OPERATOR_INVENTORIES = ("mycluster", "c", "clust", "clusterx", "localhost", "sandbox2", "prod")


def all_but(prefix, names, start=""):
    """build_ignore patterns (fnmatch: no "all but") that match every first
    path component under prefix except the given names: for each prefix of a
    name, a name that stops there and one that goes on with another letter;
    for each whole name, a longer one."""
    following = sorted({n[len(start)] for n in names if n.startswith(start) and len(n) > len(start)})
    whole = start in names
    patterns = [prefix + start] if start and not whole else []
    patterns.append(prefix + start + "[!" + ("/" if whole else "") + "".join(following) + "]*")
    for letter in following:
        patterns += all_but(prefix, names, start + letter)
    return patterns


def galaxy():
    with open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def test_build_ignore_spells_out_every_inventory_but_the_shipped():
    assert "manifest" not in galaxy()
    listed = [p for p in galaxy()["build_ignore"] if p.startswith("inventories/")]
    assert listed == ["inventories/sandbox/hosts.yml"] + all_but("inventories/", SHIPPED_INVENTORIES)
    for name in SHIPPED_INVENTORIES:
        assert os.path.isdir(os.path.join(ROOT, "inventories", name))


def test_all_but_matches_every_other_name_and_nothing_inside_the_kept():
    import fnmatch  # pylint: disable=import-outside-toplevel
    patterns = all_but("inventories/", SHIPPED_INVENTORIES)

    def ignored(path):
        return any(fnmatch.fnmatch(path, p) for p in patterns)

    for name in SHIPPED_INVENTORIES:
        assert not ignored("inventories/" + name)
        assert not ignored("inventories/%s/group_vars/all.yml" % name)
    for name in OPERATOR_INVENTORIES + ("cluster.yml", ".hidden", "Local", "s", "sandbo", "l"):
        assert ignored("inventories/" + name), name


def copy_checkout(dest):
    """The checkout's files as a build sees them, without its large or
    built folders."""
    def skip(folder, names):
        rel = os.path.relpath(folder, ROOT)
        out = {n for n in names if n in NOT_COPIED}
        if rel == "execution-environment":
            out |= EE_BUILD_FOLDERS & set(names)
        return out
    shutil.copytree(ROOT, dest, symlinks=True, ignore=skip)


def plant(path, text="planted\n"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def run(argv, cwd, env=None):
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, " ".join(argv) + "\n" + proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def clean_env(tmp):
    """No configuration of the checkout's (make exports ANSIBLE_CONFIG) and
    no ~/.ansible of the machine's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["PATH"] = BIN + os.pathsep + env.get("PATH", "")
    env["ANSIBLE_HOME"] = os.path.join(tmp, "ansible-home")
    return env


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A copy of the checkout with an operator's inventories and a run's
    leftovers planted in it, built with ansible-galaxy: (tarball, names)."""
    tmp = str(tmp_path_factory.mktemp("packaging"))
    src = os.path.join(tmp, "src")
    copy_checkout(src)
    for name in OPERATOR_INVENTORIES:
        plant(os.path.join(src, "inventories", name, "hosts.yml"), "all:\n  hosts:\n    gpu01.example.com:\n")
    plant(os.path.join(src, "inventories", "mycluster.yml"), "all:\n  hosts:\n    gpu02.example.com:\n")
    for path in (".cache/facts/gpu01", "reports/fleet-report.json", ".venv/pyvenv.cfg", "tests/output/x.txt",
                 "inventories/sandbox/hosts.yml"):
        plant(os.path.join(src, path))
    dist = os.path.join(tmp, "dist")
    run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", dist, src],
        cwd=src, env=clean_env(tmp))
    (tarball,) = [os.path.join(dist, n) for n in os.listdir(dist) if n.endswith(".tar.gz")]
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    return tarball, names


def test_the_tarball_carries_only_the_shipped_inventories(built):
    _tarball, names = built
    inventories = {n.split("/")[1] for n in names if n.startswith("inventories/")}
    assert inventories == set(SHIPPED_INVENTORIES)
    assert "inventories/cluster/hosts.yml" in names and "inventories/local/hosts.yml" in names
    assert "inventories/sandbox/hosts.yml" not in names
    assert not [n for n in names if "example.com" in n or n.startswith("inventories/my")]


def test_the_tarball_carries_no_runs_caches_or_venvs(built):
    _tarball, names = built
    assert not [n for n in names if n.split("/")[0] in NEVER_PACKED]
    assert "roles/verify/tasks/main.yml" in names and "tools/fleet_verify.py" in names


def readme_fleet_cfg():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    section = text[text.index("## Your own fleet folder\n"):]
    return re.search(r"^```ini\n(.*?)^```\n", section, re.S | re.M).group(1)


def test_the_readmes_fleet_folder_runs_the_installed_copy_by_fqcn(built, tmp_path):
    tarball, _names = built
    fleet = tmp_path / "fleet"
    plant(str(fleet / "inventory" / "hosts.yml"), "gpu_nodes:\n  hosts:\n    gpu01.example.com:\n")
    (fleet / "ansible.cfg").write_text(readme_fleet_cfg())
    env = clean_env(str(tmp_path))
    galaxy_bin = os.path.join(BIN, "ansible-galaxy")
    out = run([galaxy_bin, "collection", "install", "-p", "./collections", tarball], cwd=str(fleet), env=env)
    assert "Nothing to do" not in out and "was installed successfully" in out, out
    installed = fleet / "collections" / "ansible_collections" / "gpufleet" / "inference"
    assert (installed / "MANIFEST.json").is_file()
    # one copy found, this folder's, whatever the venv's import path holds
    out = run([galaxy_bin, "collection", "list", "gpufleet.inference"], cwd=str(fleet), env=env)
    assert re.findall(r"^# (.*)$", out, re.M) == [str(fleet / "collections" / "ansible_collections")], out
    out = run([os.path.join(BIN, "ansible-playbook"), "gpufleet.inference.verify", "--syntax-check",
               "-i", "inventory"], cwd=str(fleet), env=env)
    # --syntax-check names the playbook file an FQCN resolved to
    assert "playbook: %s\n" % (installed / "playbooks" / "verify.yml") in out, out


@pytest.mark.skipif(not shutil.which("make"), reason="no make")
def test_only_the_development_targets_put_the_checkout_on_the_import_path(tmp_path):
    def dry_run(target):
        return run(["make", "-n", "-C", ROOT, target, "VENV=%s" % (tmp_path / "venv")], cwd=ROOT)

    assert "gpufleet-checkout.pth" not in dry_run("bootstrap")
    assert "gpufleet-checkout.pth" in dry_run("bootstrap-dev")
