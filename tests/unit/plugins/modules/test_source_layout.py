# -*- coding: utf-8 -*-
"""source_layout on real sources (a git commit, tar and zip archives, a
folder) of both layouts of the kernel: before and after sglang moved it from
sgl-kernel/ to python/sglang/kernels/aot. auto follows the source; a subdir
that does not hold the kernel's CMakeLists.txt is refused by name, with what
the source has, before anything is built."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import tarfile
import zipfile

import pytest
import yaml

from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpufleet.inference.plugins.modules import source_layout

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
AOT, OLD = "python/sglang/kernels/aot", "sgl-kernel"
JIT = "python/sglang/kernels/jit/include"


def role_layouts():
    """The layouts the sgl_kernel role passes (its vars/main.yml)."""
    with open(os.path.join(ROOT, "roles", "sgl_kernel", "vars", "main.yml")) as handle:
        return yaml.safe_load(handle)["_sgl_kernel_layouts"]


LAYOUTS = role_layouts()


def make_tree(root, layout, jit=True):
    """A repository root with the kernel under LAYOUT (and the JIT headers the aot build includes)."""
    folder = os.path.join(str(root), layout)
    os.makedirs(folder)
    with open(os.path.join(folder, "CMakeLists.txt"), "w") as handle:
        handle.write("project(sgl-kernel)\n")
    if jit and layout == AOT:
        os.makedirs(os.path.join(str(root), JIT))
        with open(os.path.join(str(root), JIT, "collective.h"), "w") as handle:
            handle.write("// header\n")
    return str(root)


def git(repo, *args):
    return subprocess.run(["git", "-C", repo] + list(args), capture_output=True, text=True, check=True).stdout.strip()


def make_repo(root, layout, jit=True):
    repo = make_tree(root, layout, jit)
    subprocess.run(["git", "init", "-q", repo], check=True)
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "tree")
    return repo, git(repo, "rev-parse", "HEAD")


def run_module(args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            source_layout.main()


def call(capsys, **args):
    run_module(dict({"layouts": LAYOUTS}, **args))
    return json.loads(capsys.readouterr().out)


# ---------------------------------------------------------------- the rule itself


def test_the_role_knows_both_layouts_newest_first():
    assert [(x["name"], x["subdir"]) for x in LAYOUTS] == [("aot", AOT), ("sgl-kernel", OLD)]
    assert LAYOUTS[0]["with"] == [JIT] and LAYOUTS[1]["with"] == []


@pytest.mark.parametrize("present, subdir, expected", [
    ({AOT + "/CMakeLists.txt", JIT}, "auto", (AOT, "aot", [JIT], [AOT])),
    ({OLD + "/CMakeLists.txt"}, "auto", (OLD, "sgl-kernel", [], [OLD])),
    # the aot tree before its CMakeLists read the JIT headers: nothing beside it
    ({AOT + "/CMakeLists.txt"}, "auto", (AOT, "aot", [], [AOT])),
    ({AOT + "/CMakeLists.txt", OLD + "/CMakeLists.txt"}, "auto", (AOT, "aot", [], [AOT, OLD])),
    ({AOT + "/CMakeLists.txt", OLD + "/CMakeLists.txt"}, OLD, (OLD, "sgl-kernel", [], [AOT, OLD])),
    ({OLD + "/CMakeLists.txt"}, OLD + "/", (OLD, "sgl-kernel", [], [OLD])),
    # another folder (a fixture, a fork's): no known layout
    ({"sgl_kernel_fixture/CMakeLists.txt"}, "sgl_kernel_fixture", ("sgl_kernel_fixture", "", [], [])),
], ids=["aot", "old", "aot-without-jit", "both-newest-first", "explicit-old", "trailing-slash", "another-folder"])
def test_resolve(present, subdir, expected):
    assert source_layout.resolve(subdir, LAYOUTS, present.__contains__) == expected


def test_a_subdir_of_the_other_layout_is_refused_naming_both_variables_and_what_is_there():
    with pytest.raises(source_layout.LayoutError) as exc:
        source_layout.resolve(OLD, LAYOUTS, {AOT + "/CMakeLists.txt"}.__contains__,
                              place="at sgl_kernel_ref main (commit abc)")
    assert exc.value.args[0] == (
        "sgl_kernel_subdir sgl-kernel has no CMakeLists.txt at sgl_kernel_ref main (commit abc); the kernel is in "
        "python/sglang/kernels/aot there: set sgl_kernel_subdir to auto (or python/sglang/kernels/aot), or "
        "sgl_kernel_ref to a ref that has sgl-kernel/CMakeLists.txt; nothing was built")
    assert exc.value.args[1] == [AOT]


def test_a_subdir_where_no_layout_is_is_refused_naming_the_folders_looked_in():
    with pytest.raises(source_layout.LayoutError) as exc:
        source_layout.resolve(AOT, LAYOUTS, set().__contains__, place="at sgl_kernel_ref v0")
    assert exc.value.args[0] == (
        "sgl_kernel_subdir python/sglang/kernels/aot has no CMakeLists.txt at sgl_kernel_ref v0; nor has any folder "
        "the kernel was kept in (python/sglang/kernels/aot, sgl-kernel): set sgl_kernel_subdir to the folder of its "
        "CMakeLists.txt, or sgl_kernel_ref to a ref that has python/sglang/kernels/aot/CMakeLists.txt; nothing was "
        "built")


def test_auto_without_any_layout_is_refused():
    with pytest.raises(source_layout.LayoutError) as exc:
        source_layout.resolve("auto", LAYOUTS, {"README.md"}.__contains__, place="at sgl_kernel_ref v0")
    assert exc.value.args[0] == (
        "sgl_kernel_subdir auto: there is no CMakeLists.txt at sgl_kernel_ref v0 in any folder the kernel was kept "
        "in (python/sglang/kernels/aot, sgl-kernel): set sgl_kernel_subdir to the folder of its CMakeLists.txt, or "
        "sgl_kernel_ref to a ref that has one; nothing was built")


def test_under_a_top_folder_the_layout_keeps_its_name_and_its_paths_their_prefix():
    present = {"sglang-1/" + AOT + "/CMakeLists.txt", "sglang-1/" + JIT}
    assert source_layout.resolve("auto", LAYOUTS, present.__contains__, ("", "sglang-1")) == (
        "sglang-1/" + AOT, "aot", ["sglang-1/" + JIT], ["sglang-1/" + AOT])


def test_the_names_of_an_archive_imply_their_folders_and_drop_a_leading_dot(tmp_path):
    path = str(tmp_path / "a.tar.gz")
    member = tmp_path / "f"
    member.write_text("x")
    with tarfile.open(path, "w:gz") as archive:
        archive.add(str(member), arcname="./top/.github/x.yml")
    assert source_layout.archive_names(path) == {"top", "top/.github", "top/.github/x.yml"}
    assert source_layout.top_folder(source_layout.archive_names(path)) == "top"
    assert source_layout.top_folder({"a", "b/c", "b"}) == ""
    assert source_layout.top_folder({"README"}) == ""


# ---------------------------------------------------------------- the module on real sources


@pytest.mark.parametrize("layout, expected", [
    (AOT, {"subdir": AOT, "layout": "aot", "with": [JIT], "found": [AOT]}),
    (OLD, {"subdir": OLD, "layout": "sgl-kernel", "with": [], "found": [OLD]}),
], ids=["after-the-move", "before-the-move"])
def test_git_commit_auto_follows_the_ref(tmp_path, capsys, layout, expected):
    repo, commit = make_repo(tmp_path / "repo", layout)
    result = call(capsys, source="git", path=repo, commit=commit, ref="main", subdir="auto")
    assert not result.get("failed") and result["changed"] is False
    assert dict((k, result[k]) for k in expected) == expected


def test_git_commit_with_the_old_subdir_after_the_move_is_refused(tmp_path, capsys):
    repo, commit = make_repo(tmp_path / "repo", AOT)
    result = call(capsys, source="git", path=repo, commit=commit, ref="main", subdir=OLD)
    assert result["failed"] and result["found"] == [AOT]
    assert result["msg"].startswith("sgl_kernel_subdir sgl-kernel has no CMakeLists.txt at sgl_kernel_ref main "
                                    "(commit %s); the kernel is in python/sglang/kernels/aot there" % commit)


def test_git_commit_with_the_new_subdir_before_the_move_is_refused(tmp_path, capsys):
    repo, commit = make_repo(tmp_path / "repo", OLD)
    result = call(capsys, source="git", path=repo, commit=commit, ref=commit, subdir=AOT)
    assert result["failed"] and result["found"] == [OLD]
    assert result["msg"].startswith("sgl_kernel_subdir python/sglang/kernels/aot has no CMakeLists.txt at "
                                    "sgl_kernel_ref %s; the kernel is in sgl-kernel there" % commit)


def test_git_reads_the_commit_not_the_working_tree(tmp_path, capsys):
    repo, commit = make_repo(tmp_path / "repo", OLD)
    make_tree(tmp_path / "repo", AOT)  # not committed
    result = call(capsys, source="git", path=repo, commit=commit, ref="main", subdir="auto")
    assert result["subdir"] == OLD and result["found"] == [OLD]


@pytest.mark.parametrize("kind", ["tar.gz", "zip"])
def test_archive_with_a_top_folder(tmp_path, capsys, kind):
    tree = make_tree(tmp_path / "tree", AOT)
    path = str(tmp_path / ("sglang.%s" % kind))
    if kind == "zip":
        with zipfile.ZipFile(path, "w") as archive:
            for folder, _dirs, names in os.walk(tree):
                for name in names:
                    full = os.path.join(folder, name)
                    archive.write(full, "sglang-abc/" + os.path.relpath(full, tree))
    else:
        with tarfile.open(path, "w:gz") as archive:
            archive.add(tree, arcname="sglang-abc")
    result = call(capsys, source="archive", path=path, subdir="auto")
    assert (result["subdir"], result["layout"], result["with"]) == ("sglang-abc/" + AOT, "aot", ["sglang-abc/" + JIT])
    refused = call(capsys, source="archive", path=path, subdir=AOT)
    assert refused["failed"] and refused["msg"].startswith(
        "sgl_kernel_subdir python/sglang/kernels/aot has no CMakeLists.txt in the archive sglang.%s "
        "(sgl_kernel_archive_url); the kernel is in sglang-abc/python/sglang/kernels/aot there" % kind)


def test_an_archive_that_cannot_be_read_is_named(tmp_path, capsys):
    path = tmp_path / "broken.tar.gz"
    path.write_text("not an archive")
    result = call(capsys, source="archive", path=str(path), subdir="auto")
    assert result["failed"] and result["msg"].startswith("sgl_kernel_archive_url: %s is not a tar or zip archive" % path)


def test_folder(tmp_path, capsys):
    tree = make_tree(tmp_path / "checkout", OLD)
    assert call(capsys, source="folder", path=tree, subdir="auto")["subdir"] == OLD
    refused = call(capsys, source="folder", path=tree, subdir="kernel")
    assert refused["failed"] and refused["msg"].startswith(
        "sgl_kernel_subdir kernel has no CMakeLists.txt in sgl_kernel_local_dir %s; the kernel is in sgl-kernel there"
        % tree)
    missing = call(capsys, source="folder", path=str(tmp_path / "nowhere"), subdir="auto")
    assert missing["failed"] and missing["msg"] == "sgl_kernel_local_dir %s is not a folder on the controller" % (
        tmp_path / "nowhere")


def test_git_needs_the_commit(tmp_path, capsys):
    result = call(capsys, source="git", path=str(tmp_path), subdir="auto")
    assert result["failed"] and result["msg"] == "source_layout: commit is required with source git"
