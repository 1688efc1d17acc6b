# -*- coding: utf-8 -*-
"""wheelhouse_push: only the missing or changed wheels are sent, each checked
against the controller's checksum and renamed into place, in one task.

The playbook tests run ansible-playbook itself on a local host (the action's
temporary folder, transfer and module run are ansible's own); the module's
refusals run its main() in-process.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import wheelhouse
from ansible_collections.gpufleet.inference.plugins.modules import wheelhouse_push as module
from ansible_collections.gpufleet.inference.tests.unit.plugins.modules.module_harness import run_case

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def sha1(path):
    with open(path, "rb") as handle:
        return hashlib.sha1(handle.read()).hexdigest()


def entry(path):
    return {"path": str(path), "checksum": sha1(str(path))}


def test_missing_is_by_name_and_checksum_sorted():
    files = [{"path": "/c/b.whl", "checksum": "2" * 40}, {"path": "/c/a.whl", "checksum": "1" * 40},
             {"path": "/c/c.whl", "checksum": "3" * 40}]
    present = [{"path": "/h/a.whl", "checksum": "1" * 40}, {"path": "/h/c.whl", "checksum": "9" * 40},
               {"path": "/h/old.whl", "checksum": "4" * 40}]
    assert [f["path"] for f in wheelhouse.missing(files, present)] == ["/c/b.whl", "/c/c.whl"]
    assert wheelhouse.missing(files[:1], [{"path": "/h/b.whl", "checksum": "2" * 40}]) == []


@pytest.fixture(name="wheels")
def wheels_fixture(tmp_path):
    """A controller wheelhouse of three files and a host wheelhouse holding one of
    them as it is, one changed, and one the controller does not have."""
    src, dest = tmp_path / "controller", tmp_path / "host"
    src.mkdir()
    dest.mkdir()
    for name, size in (("a-1.0-py3-none-any.whl", 1000), ("b-1.0-py3-none-any.whl", 3 << 20),
                       ("c-1.0-py3-none-any.whl", 10)):
        (src / name).write_bytes(os.urandom(size))
    (dest / "a-1.0-py3-none-any.whl").write_bytes((src / "a-1.0-py3-none-any.whl").read_bytes())
    (dest / "c-1.0-py3-none-any.whl").write_bytes(b"an older build")
    (dest / "old-0.1-py3-none-any.whl").write_bytes(b"kept")
    return src, dest


def play(tmp_path, src, dest, *extra):
    """The role's three tasks on a local host; returns the push task's result and
    what is left in the remote temporary folder."""
    playbook_bin = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.access(playbook_bin, os.X_OK):
        pytest.skip("no ansible-playbook beside %s" % sys.executable)
    remote_tmp = tmp_path / "remote-tmp"
    (tmp_path / "ansible.cfg").write_text("[defaults]\ncollections_path = %s\nlocal_tmp = %s\nremote_tmp = %s\n" % (
        os.path.join(ROOT, ".collections"), tmp_path / "local-tmp", remote_tmp))
    (tmp_path / "hosts.ini").write_text("h1 ansible_connection=local ansible_python_interpreter=%s\n" % sys.executable)
    (tmp_path / "site.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - {ansible.builtin.find: {paths: '%s', file_type: file, get_checksum: true}, register: here}\n"
        "    - {ansible.builtin.find: {paths: '%s', file_type: file, get_checksum: true}, register: there}\n"
        "    - gpufleet.inference.wheelhouse_push:\n        files: '{{ here.files }}'\n"
        "        present: '{{ there.files }}'\n        dest: '%s'\n" % (src, dest, dest))
    env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    proc = subprocess.run([playbook_bin, "-i", "hosts.ini", "site.yml"] + list(extra), cwd=str(tmp_path), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    tasks = json.loads(proc.stdout[proc.stdout.index("{"):])["plays"][0]["tasks"]
    shown = proc.stdout[:proc.stdout.index("{")]
    left = sorted(os.listdir(str(remote_tmp))) if remote_tmp.exists() else []
    return proc.returncode, dict(tasks[-1]["hosts"]["h1"], shown=shown), left


def test_only_the_missing_and_changed_wheels_are_sent_then_nothing(tmp_path, wheels):
    src, dest = wheels
    rc, res, left = play(tmp_path, src, dest)
    assert rc == 0 and res["changed"], res
    assert res["pushed"] == ["b-1.0-py3-none-any.whl", "c-1.0-py3-none-any.whl"], res
    assert res["bytes"] == (3 << 20) + 10
    # the operator sees what was sent, at the default verbosity
    assert "h1: sending 2 file(s), 3.0 MiB, to %s: b-1.0-py3-none-any.whl, c-1.0-py3-none-any.whl" % dest \
        in res["shown"], res["shown"]
    for name in ("a-1.0-py3-none-any.whl", "b-1.0-py3-none-any.whl", "c-1.0-py3-none-any.whl"):
        assert sha1(str(dest / name)) == sha1(str(src / name)), name
        assert oct(os.stat(str(dest / name)).st_mode & 0o7777) == "0o644", name
    # nothing but the wheels (no temporary name left), the host's own file kept;
    # the task's temporary folder is gone
    assert sorted(os.listdir(str(dest))) == ["a-1.0-py3-none-any.whl", "b-1.0-py3-none-any.whl",
                                             "c-1.0-py3-none-any.whl", "old-0.1-py3-none-any.whl"]
    assert left == [], left
    # again: nothing to send, and no temporary folder made for it
    rc, res, left = play(tmp_path, src, dest)
    assert rc == 0 and not res["changed"] and res["pushed"] == [] and res["bytes"] == 0, res
    assert "sending" not in res["shown"], res["shown"]
    assert left == [], left


def test_check_mode_names_what_it_would_send_and_sends_nothing(tmp_path, wheels):
    src, dest = wheels
    before = {name: sha1(str(dest / name)) for name in os.listdir(str(dest))}
    rc, res, left = play(tmp_path, src, dest, "--check")
    assert rc == 0 and res["changed"], res
    assert res["pushed"] == ["b-1.0-py3-none-any.whl", "c-1.0-py3-none-any.whl"] and res["bytes"] == 0, res
    assert "would send 2 file(s), 3.0 MiB" in res["msg"], res
    assert {name: sha1(str(dest / name)) for name in os.listdir(str(dest))} == before
    assert left == [], left


def test_a_listing_without_checksums_is_refused_naming_the_option(tmp_path, wheels):
    src, dest = wheels
    playbook = tmp_path / "bad.yml"
    playbook.write_text("- hosts: all\n  gather_facts: false\n  tasks:\n"
                        "    - gpufleet.inference.wheelhouse_push:\n        files: [{path: '%s/a-1.0-py3-none-any.whl'}]\n"
                        "        dest: '%s'\n" % (src, dest))
    play(tmp_path, src, dest)  # writes the configuration and inventory
    env = dict(os.environ, ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "hosts.ini",
                           "bad.yml"], cwd=str(tmp_path), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
    res = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["h1"]
    assert proc.returncode != 0 and res["failed"], res
    assert "each entry of files needs a path and its SHA-1 checksum" in res["msg"], res


def run_module(monkeypatch, args):
    result, dummy = run_case(module.main, {"input": args}, monkeypatch)
    return result


def test_a_file_that_arrived_damaged_is_not_put_in_place(tmp_path, monkeypatch, wheels):
    src, dest = wheels
    staged = tmp_path / "staged-b.whl"
    staged.write_bytes((src / "b-1.0-py3-none-any.whl").read_bytes()[:1000])  # cut short
    good = entry(src / "b-1.0-py3-none-any.whl")
    result = run_module(monkeypatch, {"files": [good], "present": [], "dest": str(dest),
                                      "staged": {"b-1.0-py3-none-any.whl": str(staged)}})
    assert result.get("failed"), result
    assert "b-1.0-py3-none-any.whl arrived with SHA-1 %s, the controller has %s: not put in place" % (
        sha1(str(staged)), good["checksum"]) in result["msg"], result
    assert not (dest / "b-1.0-py3-none-any.whl").exists()
    assert not any(name.endswith(".gpufleet-part") for name in os.listdir(str(dest)))


def test_the_file_in_place_stays_when_the_rename_fails(tmp_path, monkeypatch, wheels):
    src, dest = wheels
    old = (dest / "c-1.0-py3-none-any.whl").read_bytes()
    staged = tmp_path / "staged-c.whl"
    staged.write_bytes((src / "c-1.0-py3-none-any.whl").read_bytes())

    def refuse(a, b):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(module.os, "replace", refuse)
    result = run_module(monkeypatch, {"files": [entry(src / "c-1.0-py3-none-any.whl")], "present": [],
                                      "dest": str(dest), "staged": {"c-1.0-py3-none-any.whl": str(staged)}})
    assert result.get("failed") and "No space left on device" in result["msg"], result
    assert (dest / "c-1.0-py3-none-any.whl").read_bytes() == old
    assert not any(name.endswith(".gpufleet-part") for name in os.listdir(str(dest)))
