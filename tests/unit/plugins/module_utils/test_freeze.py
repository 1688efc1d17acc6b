# -*- coding: utf-8 -*-
"""module_utils freeze: the one reader of `uv pip freeze` / `pip freeze` text and the venv freezes."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.inference.plugins.filter import nightly
from ansible_collections.gpufleet.inference.plugins.module_utils.freeze import canonical_name, parse_freeze, parse_freeze_line
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import freeze as report_freeze


@pytest.mark.parametrize("name, canonical", [
    ("Flashinfer_Python", "flashinfer-python"),
    ("typing.extensions", "typing-extensions"),
    ("A__B-.c", "a-b-c"),
    ("torch", "torch"),
])
def test_canonical_names_follow_pep_503(name, canonical):
    assert canonical_name(name) == canonical


@pytest.mark.parametrize("line, pin", [
    ("torch==2.13.0+cu130", ("torch", "2.13.0+cu130")),
    # arbitrary equality: the whole version, never a leading "="
    ("A_B.c===1.0", ("a-b-c", "1.0")),
    ("legacy===2024.1-custom", ("legacy", "2024.1-custom")),
    ("  numpy == 2.3.0  ", ("numpy", "2.3.0")),
    ("uvicorn[standard]==0.35.0", ("uvicorn", "0.35.0")),
    ("sympy==1.14.0 ; python_version >= '3.9'", ("sympy", "1.14.0")),
    ("sympy==1.14.0;python_version>='3.9'", ("sympy", "1.14.0")),
    ("filelock==3.20.0  # via torch", ("filelock", "3.20.0")),
    ("six==1.17.0 --hash=sha256:4721f3", ("six", "1.17.0")),
    # direct references carry no version: skipped, with or without spaces, a #fragment or a hash
    ("sgl-kernel @ file:///w/sgl_kernel-0.3.0-cp310-abi3-linux_x86_64.whl", None),
    ("foo@https://example.invalid/foo-1.0.tar.gz#sha256=abc==def", None),
    ("bar @ git+https://example.invalid/bar.git@v1.0#egg=bar", None),
    # editables and other options
    ("-e /src/pkg", None),
    ("-e git+https://example.invalid/x.git@0123abc#egg=x", None),
    ("--editable=/src/pkg", None),
    ("-i https://example.invalid/simple", None),
    ("-r other.txt", None),
    # comments, blank lines, lines that pin no single version
    ("# Editable install with no version control (tool==0.1)", None),
    ("   # note", None),
    ("", None),
    ("   ", None),
    ("torch>=2.0", None),
    ("torch", None),
    ("torch==", None),
    ("==1.0", None),
    ("-bad-name==1.0", None),
])
def test_one_line(line, pin):
    assert parse_freeze_line(line) == pin


def test_a_whole_freeze_keyed_by_canonical_name():
    text = ("# uv pip freeze\n"
            "Typing_Extensions==4.16.0\r\n"
            "torch==2.13.0+cpu\n"
            "\n"
            "-e file:///src/x\n"
            "foo @ file:///w/foo.whl\n"
            "A_B.c===1.0\n"
            "torch==2.13.0+cu130\n")
    # the last of two lines of one name wins
    assert parse_freeze(text) == {"typing-extensions": "4.16.0", "torch": "2.13.0+cu130", "a-b-c": "1.0"}


@pytest.mark.parametrize("empty", [None, "", "\n\n", "# only a comment\n"])
def test_nothing_gives_an_empty_dict(empty):
    assert parse_freeze(empty) == {}


def test_the_filter_and_the_report_read_a_freeze_the_same_way(tmp_path):
    text = "torch==2.13.0\nsgl-kernel @ file:///x/sgl_kernel-0.1-cp312.whl\n-e /src/pkg\n# note\nA_B.c===1.0\n"
    expected = {"torch": "2.13.0", "a-b-c": "1.0"}
    assert nightly.uv_freeze_parse(text) == expected
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "venv.freeze.txt").write_text(text)
    assert report_freeze.find_freeze(str(tmp_path), "h")["packages"] == expected
