# -*- coding: utf-8 -*-
"""The sglang role's value rules (plugin_utils/rules/sglang.py): each bad value gives its
message, then "nothing was changed."; the role's defaults pass; a value of the wrong type is
left to the type check."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.sglang import ENTRY_POINTS, sglang_main
from ansible_collections.gpufleet.inference.plugins.plugin_utils.value_rules import rule_errors
from ansible_collections.gpufleet.inference.tests.unit.plugins.plugin_utils.rules.role_files import role_defaults

NOTHING = "; nothing was changed."

DEFAULTS = role_defaults("sglang")
# what uv_venv and torch_nightly set before (check_vars' context), and the templated defaults rendered
CONTEXT = {"uv_venv_dir": "/home/deploy/ml-env-0a1b2c3d", "uv_venv_python": "/home/deploy/ml-env-0a1b2c3d/bin/python",
           "uv_venv_bin": "/opt/gpufleet/uv/bin/uv", "uv_venv_remote_wheelhouse_dir": None,
           "torch_nightly_constraints_file": "/home/deploy/ml-env-0a1b2c3d/gpufleet-constraints.txt",
           "sglang_version": "0.5.23", "sglang_wheelhouse": ""}
GOOD = dict(DEFAULTS, **CONTEXT)


def test_the_defaults_pass():
    assert {"sglang_extras", "sglang_index_urls", "sglang_default_index_url", "sglang_guarded_packages",
            "sglang_wheel_sha256"} <= set(DEFAULTS)
    assert sglang_main(GOOD) == []
    for entry_point in ("main",):
        assert rule_errors("sglang", entry_point, GOOD) == []
    assert sorted(ENTRY_POINTS) == ["main"]


@pytest.mark.parametrize("changes", [
    {"sglang_version": "0.5.6.post2"},
    {"sglang_version": "0.5.0rc1"},
    {"sglang_extras": ["tracing", "http2"]},
    {"sglang_index_urls": ["https://user:token@mirror.example/simple", "file:///srv/simple"]},
    {"sglang_wheel_sha256": "8D257A319395B322BB1BE327D05E5528859358153C8563B04C0A4A3C8AF164B6"},
    {"sglang_wheelhouse": "/srv/wheels", "uv_venv_remote_wheelhouse_dir": "/home/deploy/.cache/gpufleet/wheelhouse"},
])
def test_good_values_pass(changes):
    assert sglang_main(dict(GOOD, **changes)) == []


@pytest.mark.parametrize("changes, message", [
    ({"sglang_version": "latest"}, "sglang_version must be a release of sglang such as 0.5.23 (got 'latest')"),
    ({"sglang_version": "0.5.23+cu130"}, "sglang_version must be a release of sglang such as 0.5.23 (got '0.5.23+cu130')"),
    ({"sglang_version": ""}, "sglang_version must be a release of sglang such as 0.5.23 (got '')"),
    # extras
    ({"sglang_extras": "tracing"}, "sglang_extras must be a list (got string 'tracing')"),
    ({"sglang_extras": ["tracing", "all]"]}, "sglang_extras must be extra names of sglang (letters, digits and . _ - "
                                             "inside, as tracing; got all])"),
    ({"sglang_extras": ["http2", "HTTP2"]}, "sglang_extras must name each extra once (got http2 more than once)"),
    # URLs and lists
    ({"sglang_index_urls": ["ftp://mirror.example/simple"]},
     "sglang_index_urls[0] must be a URL starting with one of http://, https://, file:// "
     "(got 'ftp://mirror.example/simple')"),
    ({"sglang_index_urls": "https://a.example/simple"},
     "sglang_index_urls must be a list (got string 'https://a.example/simple')"),
    ({"sglang_index_urls": ["HTTPS://mirror.example/simple"]},
     "sglang_index_urls must be http(s):// or file:// URLs (got HTTPS://mirror.example/simple)"),
    ({"sglang_default_index_url": "pypi.org/simple"},
     "sglang_default_index_url must be a URL starting with one of http://, https://, file:// (got 'pypi.org/simple')"),
    ({"sglang_guarded_packages": ["torch", 1]}, "sglang_guarded_packages must be a list of strings (got number 1)"),
    ({"sglang_guarded_packages": []}, "sglang_guarded_packages must name the packages the install may not move (got [])"),
    # the pinned wheel
    ({"sglang_wheel_sha256": "8d257a31"},
     "sglang_wheel_sha256 must be '' or the 64 hex digits of a sha256 (got '8d257a31')"),
    # uv_venv and torch_nightly ran first
    ({"uv_venv_dir": None}, "uv_venv_* / torch_nightly_constraints_file are not set: run gpufleet.inference.uv_venv and "
                            "torch_nightly before sglang"),
    ({"torch_nightly_constraints_file": None}, "uv_venv_* / torch_nightly_constraints_file are not set: run "
                                               "gpufleet.inference.uv_venv and torch_nightly before sglang"),
    ({"sglang_wheelhouse": "/srv/wheels"}, "sglang_wheelhouse must be '' unless gpufleet.inference.uv_venv pushed the "
                                           "wheelhouse (uv_venv_remote_wheelhouse_dir)"),
])
def test_each_bad_value_names_its_variable(changes, message):
    assert sglang_main(dict(GOOD, **changes)) == [message + NOTHING]


def test_several_bad_values_are_reported_together_and_the_last_says_nothing_changed():
    errors = sglang_main(dict(GOOD, sglang_version="x", sglang_wheel_sha256="y"))
    assert len(errors) == 2 and errors[0].startswith("sglang_version") and errors[1].endswith(NOTHING)


def test_a_value_of_the_wrong_type_is_left_to_the_type_check():
    assert sglang_main(dict(GOOD, sglang_extras=None, sglang_index_urls=None, sglang_guarded_packages=None)) == []
