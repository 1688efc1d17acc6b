"""First contact with a hand-built node (gpufleet_adopt_existing_venv) on one
sandbox host over SSH: ~/ml-env is a real venv made there with the host's
`python3 -m venv`, torch 2.13.0 installed into it with pip from the wheelhouse,
and a marker package.

In order: a directory that is not a venv is refused and left as it was; the
hand-built venv without the variable is refused, naming it; --check says what
it would move and moves nothing; the deploy moves it (a rename: byte-identical
in its new place), links the stable path to the new venv and reports what it
found; a second deploy finds the link and changes nothing; rollback.yml returns
to the adopted venv and verifies it."""
import glob
import json
import os
import subprocess

import pytest

from conftest import ROOT, base_env, parse_recap, venv_bin

HOST = "sbx3"
CONTAINER = os.environ.get("GPUFLEET_SANDBOX_PREFIX", "gpufleet-sbx") + HOST[3:]
DEPLOY = os.path.join(ROOT, "playbooks", "deploy.yml")
ROLLBACK = os.path.join(ROOT, "playbooks", "rollback.yml")
WHEELHOUSE = os.path.join(ROOT, ".cache", "wheelhouse")
# torch 2.13.0 (CPU) and what it needs, as pip resolves it with no index
TORCH_WHEELS = ["torch-2.13.0+cpu-*.whl", "filelock-*.whl", "typing_extensions-*.whl", "sympy-*.whl",
                "mpmath-*.whl", "networkx-*.whl", "jinja2-*.whl", "markupsafe-*.whl", "fsspec-*.whl",
                "setuptools-*.whl"]
# sha256 of every file, the target of every link, under a directory: equal
# before and after means the same bytes at the new place
MANIFEST = ("cd \"$1\" && find . \\( -type f -exec sha256sum {} + \\) -o \\( -type l -printf 'link %p %l\\n' \\) "
            "| LC_ALL=C sort")


def host(script, *args, user="deploy"):
    """A shell script on the host (podman exec: no SSH round trip); stdout."""
    proc = subprocess.run(["podman", "exec", "--user", user, "--workdir", "/", CONTAINER, "sh", "-c", script, "sh"]
                          + list(args), capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, "%s\n%s%s" % (script, proc.stdout, proc.stderr)
    return proc.stdout


def play(ctx, playbook, extra=None, check=False):
    argv = [venv_bin("ansible-playbook"), "-i", ctx["inventory"], playbook, "--limit", HOST,
            "-e", json.dumps(dict({"gpufleet_report_dir": ctx["reports"]}, **(extra or {})))]
    if check:
        argv.append("--check")
    proc = subprocess.run(argv, cwd=ROOT, env=base_env(), capture_output=True, text=True, timeout=1800, check=False)
    out = proc.stdout + proc.stderr
    return proc.returncode, out, parse_recap(out)


def home_listing():
    # (.ansible: the connection's own temporary folder)
    return sorted(name for name in host("ls -A /home/deploy").split() if name != ".ansible")


def row(ctx):
    with open(os.path.join(ctx["reports"], "fleet-report.json"), encoding="utf-8") as fh:
        return {r["host"]: r for r in json.load(fh)["hosts"]}[HOST]


@pytest.fixture(scope="module")
def ctx(sandbox, tmp_path_factory):
    inventory = sandbox(3)
    host("rm -rf /home/deploy/ml-env /home/deploy/ml-env-* /home/deploy/.ml-env.history /home/deploy/.ml-env.adopted.json")
    wheels = sorted(w for pattern in TORCH_WHEELS for w in glob.glob(os.path.join(WHEELHOUSE, pattern)))
    assert len(wheels) == len(TORCH_WHEELS), "make wheelhouse first: %s" % wheels
    host("rm -rf /tmp/hand-wheels && mkdir -m 0777 /tmp/hand-wheels", user="root")
    for wheel in wheels:
        subprocess.run(["podman", "cp", wheel, "%s:/tmp/hand-wheels/" % CONTAINER], check=True, timeout=300)
    yield {"inventory": inventory, "reports": str(tmp_path_factory.mktemp("reports")), "state": {}}
    host("rm -rf /home/deploy/ml-env /home/deploy/ml-env-* /home/deploy/.ml-env.history "
         "/home/deploy/.ml-env.adopted.json; rm -rf /tmp/hand-wheels", user="root")


def test_a_directory_that_is_not_a_venv_is_refused_and_untouched(ctx):
    host("mkdir -p ~/ml-env/bin && echo 'my notes' > ~/ml-env/NOTES && ln -s /usr/bin/python3 ~/ml-env/bin/python".replace(
        "~", "/home/deploy"))
    before, listing = host(MANIFEST, "/home/deploy/ml-env"), home_listing()
    rc, out, dummy = play(ctx, DEPLOY, {"gpufleet_adopt_existing_venv": True})
    assert rc != 0
    assert "/home/deploy/ml-env is not a Python venv (no pyvenv.cfg; it holds NOTES, bin)" in out, out[-4000:]
    assert host(MANIFEST, "/home/deploy/ml-env") == before and home_listing() == listing
    host("rm -rf /home/deploy/ml-env")


def test_hand_built_venv_without_the_variable_is_refused_naming_it(ctx):
    # the node as a person set it up: the host's own python3 -m venv, torch from pip, a marker package
    host("python3 -m venv /home/deploy/ml-env && /home/deploy/ml-env/bin/pip install -q --no-index "
         "--find-links /tmp/hand-wheels torch==2.13.0 && site=$(/home/deploy/ml-env/bin/python -c "
         "'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])') && mkdir \"$site/hand_marker-1.0.dist-info\" "
         "&& printf 'Metadata-Version: 2.1\\nName: hand-marker\\nVersion: 1.0\\n' > \"$site/hand_marker-1.0.dist-info/METADATA\" "
         "&& echo 'ANSWER = 42' > \"$site/hand_marker.py\"")
    ctx["state"]["manifest"] = host(MANIFEST, "/home/deploy/ml-env")
    listing = home_listing()
    rc, out, dummy = play(ctx, DEPLOY)
    assert rc != 0
    assert "exists and is not a symlink" in out and "gpufleet_adopt_existing_venv=true" in out, out[-4000:]
    assert host(MANIFEST, "/home/deploy/ml-env") == ctx["state"]["manifest"] and home_listing() == listing


def test_check_mode_says_what_it_would_move_and_moves_nothing(ctx):
    listing = home_listing()
    rc, out, dummy = play(ctx, DEPLOY, {"gpufleet_adopt_existing_venv": True}, check=True)
    assert rc == 0, out[-6000:]
    assert "check mode: would move the hand-built venv /home/deploy/ml-env (torch 2.13.0+cpu," in out, out[-6000:]
    assert "to /home/deploy/ml-env-adopted-" in out
    assert host(MANIFEST, "/home/deploy/ml-env") == ctx["state"]["manifest"] and home_listing() == listing
    assert host("test -d /home/deploy/ml-env -a ! -L /home/deploy/ml-env && echo dir").strip() == "dir"


def test_deploy_adopts_it_byte_identical_and_links_the_new_venv(ctx):
    rc, out, dummy = play(ctx, DEPLOY, {"gpufleet_adopt_existing_venv": True})
    assert rc == 0, out[-6000:]
    adopted = host("ls -d /home/deploy/ml-env-adopted-*").split()
    assert len(adopted) == 1, adopted
    adopted = adopted[0]
    link = host("readlink /home/deploy/ml-env").strip()
    assert link.startswith("/home/deploy/ml-env-") and "-adopted-" not in link
    # moved, not copied: the same bytes in its new place
    assert host(MANIFEST, adopted) == ctx["state"]["manifest"]
    # the adopted venv is the previous one in the activation history
    assert host("cat /home/deploy/.ml-env.history").split() == [adopted, link]
    record = json.loads(host("cat /home/deploy/.ml-env.adopted.json"))
    assert record["moved_from"] == "/home/deploy/ml-env" and record["moved_to"] == adopted
    assert record["replaced_by"] == link and record["torch_version"] == "2.13.0+cpu"
    assert record["packages"]["hand-marker"] == "1.0" and record["verified"] is True
    r = row(ctx)
    assert r["status"] == "ok" and r["activated"] is True and r["venv"] == link
    assert r["adopted"]["moved"] is True and r["adopted"]["moved_to"] == adopted
    assert r["adopted"]["torch_version"] == "2.13.0+cpu" and r["adopted"]["packages"]["hand-marker"] == "1.0"
    with open(os.path.join(ctx["reports"], "fleet-report.md"), encoding="utf-8") as fh:
        assert "adopted hand-built venv: /home/deploy/ml-env moved to %s" % adopted in fh.read()
    ctx["state"].update(adopted=adopted, link=link)


def test_second_deploy_finds_the_link_and_changes_nothing(ctx):
    rc, out, stats = play(ctx, DEPLOY, {"gpufleet_adopt_existing_venv": True})
    assert rc == 0, out[-6000:]
    assert stats[HOST]["changed"] == 0, stats
    assert host("readlink /home/deploy/ml-env").strip() == ctx["state"]["link"]
    assert host(MANIFEST, ctx["state"]["adopted"]) == ctx["state"]["manifest"]


def test_rollback_returns_to_the_adopted_venv_and_verifies_it(ctx, tmp_path):
    # the hand-built venv has torch and nothing of the collection's stack: a
    # report beside the deploy's would flag that change as drift (and exit
    # non-zero), so this one starts a report of its own
    ctx["reports"] = str(tmp_path)
    rc, out, dummy = play(ctx, ROLLBACK, {"gpufleet_adopt_existing_venv": True, "gpufleet_verify_imports": [],
                                          "gpufleet_rollback_expect": {"torch_version": "2.13.0+cpu"}})
    assert rc == 0, out[-6000:]
    assert host("readlink /home/deploy/ml-env").strip() == ctx["state"]["adopted"]
    r = row(ctx)
    assert r["status"] == "ok" and r["torch_version"] == "2.13.0+cpu", r
    assert host("/home/deploy/ml-env/bin/python -c 'import hand_marker, torch; print(hand_marker.ANSWER, torch.__version__)'"
                ).strip() == "42 2.13.0+cpu"
