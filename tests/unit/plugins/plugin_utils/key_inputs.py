# -*- coding: utf-8 -*-
"""Inputs the tests of the keys share (plugin_utils/keys.py and the filters
that wrap it): an ABI key's data, and a collection tree of fixed content."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.inference.plugins.plugin_utils import keys

ABI = {
    "source_ref": "3ec6e09487cbf7424f7875cb098860a2142666a3",
    "patch_rules": [{"name": "cmake-policy-guard", "file": "CMakeLists.txt",
                     "pattern": "cmake_policy(SET CMP0169 OLD)", "replacement": "x"}],
    "torch_version": "2.12.0.dev20260307+cu130",
    "cuda_version": "13.0",
    "arch_list": ["12.0a"],
    "python_tag": "cp312",
}


def fake_root(tmp_path):
    """A collection tree of fixed content under TMP_PATH: code, and argument
    specs declaring <role>_x (preflight: an input of fleet's) and <role>_y
    (lock: run control for fleet, an input for a stage role)."""
    for sub in keys.CODE_DIRS:
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "main.yml").write_text("- one\n")
    for role in ("fleet",) + keys.STAGE_ROLES:
        meta = tmp_path / "roles" / role / "meta"
        meta.mkdir(parents=True)
        (meta / "argument_specs.yml").write_text(
            "argument_specs:\n  preflight:\n    options:\n      %s_x: {type: str}\n"
            "  lock:\n    options:\n      %s_y: {type: str}\n" % (role, role))
    return str(tmp_path)
