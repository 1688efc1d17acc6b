# -*- coding: utf-8 -*-
"""The cuda_toolkit role's value rules (plugin_utils/rules/cuda_toolkit.py): each bad value gives the
message the role's preflight asserts gave, the defaults pass, a value of the wrong type is left to the
type check."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules.cuda_toolkit import cuda_toolkit_main
from ansible_collections.gpufleet.inference.plugins.plugin_utils.value_rules import rule_errors

ROLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "..", "roles", "cuda_toolkit")


def _load(*parts):
    with open(os.path.join(ROLE, *parts), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


DEFAULTS = {k: v for k, v in _load("defaults", "main.yml").items() if "{{" not in str(v)}
# the templated defaults as they render for cuda_toolkit_version 13.0
RENDERED = {"cuda_toolkit_prefix": "/usr/local/cuda-13.0", "cuda_toolkit_apt_package": "cuda-toolkit-13-0",
            "cuda_toolkit_ldconfig_file": "/etc/ld.so.conf.d/gpufleet-cuda-13-0.conf",
            "cuda_toolkit_profile_file": "/etc/profile.d/gpufleet-cuda-13-0.sh"}
# what the preflight passes as context: the role's driver table
CONTEXT = {"cuda_toolkit_driver_minimums": _load("vars", "main.yml")["cuda_toolkit_driver_minimums"]}
GOOD = dict(DEFAULTS, **dict(RENDERED, **CONTEXT))
PIN = {"name": "nvidia-cublas", "version": "13.0.0.19", "sha256": "0" * 64}
PIN_WORDS = ("cuda_toolkit: entries of cuda_toolkit_pip_packages / cuda_toolkit_pip_extra_packages must have a name, "
             "a version and a sha256 of 64 lower-case hex digits (got ")


def test_the_defaults_pass():
    assert "cuda_toolkit_version" in DEFAULTS and "cuda_toolkit_pip_packages" in DEFAULTS
    assert cuda_toolkit_main(DEFAULTS) == []
    assert cuda_toolkit_main(GOOD) == []
    assert rule_errors("cuda_toolkit", "main", dict(GOOD, cuda_toolkit_method="pip")) == []


def test_the_defaults_and_the_scenarios_values_type_check():
    spec = _load("meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    for values in (GOOD, dict(GOOD, cuda_toolkit_method="pip"), dict(GOOD, cuda_toolkit_method="apt",
                   cuda_toolkit_apt_repo_url="http://127.0.0.1:8765/", cuda_toolkit_remove_stale_ldconfig=True,
                   cuda_toolkit_apt_key_fingerprint="0" * 40, cuda_toolkit_gpu_facts={"present": True})):
        values = {k: v for k, v in values.items() if k in spec}
        assert ArgumentSpecValidator(spec).validate(values, validate_role_argument_spec=True).error_messages == []


@pytest.mark.parametrize("values, message", [
    ({"cuda_toolkit_version": "13"}, "cuda_toolkit: cuda_toolkit_version must be major.minor like 13.0 (got '13')"),
    ({"cuda_toolkit_version": "13.0.2"},
     "cuda_toolkit: cuda_toolkit_version must be major.minor like 13.0 (got '13.0.2')"),
    ({"cuda_toolkit_release": "13.1.0"}, "cuda_toolkit: cuda_toolkit_release must be major.minor.update within "
                                         "cuda_toolkit_version 13.0, like 13.0.2 (got '13.1.0')"),
    ({"cuda_toolkit_release": "13.0"}, "cuda_toolkit: cuda_toolkit_release must be major.minor.update within "
                                       "cuda_toolkit_version 13.0, like 13.0.2 (got '13.0')"),
    ({"cuda_toolkit_release": "13.02.1"}, "cuda_toolkit: cuda_toolkit_release must be major.minor.update within "
                                          "cuda_toolkit_version 13.0, like 13.0.2 (got '13.02.1')"),
    ({"cuda_toolkit_prefix": "/usr/local/cuda-13.0/"},
     "cuda_toolkit: cuda_toolkit_prefix must be an absolute path without a trailing slash "
     "(got '/usr/local/cuda-13.0/')"),
    ({"cuda_toolkit_prefix": "opt/cuda"},
     "cuda_toolkit: cuda_toolkit_prefix must be an absolute path without a trailing slash (got 'opt/cuda')"),
    ({"cuda_toolkit_symlink_path": "/usr/local/cuda-13.0"},
     "cuda_toolkit: cuda_toolkit_symlink_path must be an absolute path without a trailing slash, other than "
     "cuda_toolkit_prefix (got '/usr/local/cuda-13.0')"),
    ({"cuda_toolkit_symlink_path": "/usr/local/cuda/"},
     "cuda_toolkit: cuda_toolkit_symlink_path must be an absolute path without a trailing slash, other than "
     "cuda_toolkit_prefix (got '/usr/local/cuda/')"),
    # a string the dict type would convert
    ({"cuda_toolkit_gpu_facts": "present=true"},
     "cuda_toolkit: cuda_toolkit_gpu_facts must be a dict in the gpu_facts shape (got str)"),
    ({"cuda_toolkit_apt_key_fingerprint": "3bf863cc"},
     "cuda_toolkit: cuda_toolkit_apt_key_fingerprint must be 40 hex digits (got '3bf863cc')"),
    ({"cuda_toolkit_apt_key_fingerprint": "G" * 40},
     "cuda_toolkit: cuda_toolkit_apt_key_fingerprint must be 40 hex digits (got '%s')" % ("G" * 40)),
    ({"cuda_toolkit_apt_keyring": "keyring.gpg"},
     "cuda_toolkit: cuda_toolkit_apt_keyring must be an absolute path (got 'keyring.gpg')"),
    ({"cuda_toolkit_ldconfig_file": "/etc/ld.so.conf.d/cuda.txt"},
     "cuda_toolkit: cuda_toolkit_ldconfig_file must be /etc/ld.so.conf.d/*.conf (got '/etc/ld.so.conf.d/cuda.txt')"),
    ({"cuda_toolkit_ldconfig_file": "/etc/ld.so.conf"},
     "cuda_toolkit: cuda_toolkit_ldconfig_file must be /etc/ld.so.conf.d/*.conf (got '/etc/ld.so.conf')"),
    ({"cuda_toolkit_profile_file": "/etc/profile.d/sub/cuda.sh"},
     "cuda_toolkit: cuda_toolkit_profile_file must be /etc/profile.d/*.sh (got '/etc/profile.d/sub/cuda.sh')"),
    # the driver table of vars/main.yml knows 13.0 only
    ({"cuda_toolkit_version": "13.1", "cuda_toolkit_release": "13.1.0"},
     "cuda_toolkit: no minimum driver is known for CUDA 13.1 (cuda_toolkit_version); add its releases to "
     "cuda_toolkit_driver_minimums in the role's vars."),
    # the pip pins, with the pip method
    ({"cuda_toolkit_method": "pip", "cuda_toolkit_pip_extra_packages": [dict(PIN, sha256="0123abcd")]},
     PIN_WORDS + '{"name": "nvidia-cublas", "version": "13.0.0.19", "sha256": "0123abcd"})'),
    ({"cuda_toolkit_method": "pip",
      "cuda_toolkit_pip_extra_packages": [dict(PIN, sha256="A" * 64), PIN, {"name": "x"}]},
     PIN_WORDS + '{"name": "nvidia-cublas", "version": "13.0.0.19", "sha256": "%s"} {"name": "x"})' % ("A" * 64)),
    ({"cuda_toolkit_method": "pip", "cuda_toolkit_pip_packages": [dict(PIN, name="nvidia cublas")]},
     PIN_WORDS + '{"name": "nvidia cublas", "version": "13.0.0.19", "sha256": "%s"})' % ("0" * 64)),
    ({"cuda_toolkit_method": "pip", "cuda_toolkit_pip_packages": [dict(PIN, version="v13")]},
     PIN_WORDS + '{"name": "nvidia-cublas", "version": "v13", "sha256": "%s"})' % ("0" * 64)),
    # URLs and lists, as their own check wrote them
    ({"cuda_toolkit_apt_repo_url": "https://mirror:s3cret@cuda.example/repos/debian12/x86_64/"},
     "cuda_toolkit_apt_repo_url must not carry credentials (user:password@): it is written where others can read it "
     "(got 'https://***@cuda.example/repos/debian12/x86_64/'); nothing was changed."),
    ({"cuda_toolkit_apt_key_url": "ftp://cuda.example/key.pub"},
     "cuda_toolkit_apt_key_url must be a URL starting with one of http://, https://, file:// "
     "(got 'ftp://cuda.example/key.pub'); nothing was changed."),
    ({"cuda_toolkit_pip_index_url": "file:///srv/wheels"},
     "cuda_toolkit_pip_index_url must be a URL starting with one of http://, https:// (got 'file:///srv/wheels'); "
     "nothing was changed."),
    ({"cuda_toolkit_pip_packages": "nvidia-cuda-nvcc"},
     "cuda_toolkit_pip_packages must be a list (got string 'nvidia-cuda-nvcc'); nothing was changed."),
    # with the pip method too: one message for a list that is not one of dicts
    ({"cuda_toolkit_method": "pip", "cuda_toolkit_pip_extra_packages": ["nvidia-cublas"]},
     "cuda_toolkit_pip_extra_packages must be a list of dicts (got string 'nvidia-cublas'); nothing was changed."),
])
def test_each_bad_value_gives_its_message(values, message):
    assert cuda_toolkit_main(dict(GOOD, **values)) == [message]


@pytest.mark.parametrize("values", [
    # right: a spaced fingerprint, a credential in the pip index (not written to a shared file), no pip method
    {"cuda_toolkit_apt_key_fingerprint": "EB69 3B30 35CD 5710 E231  E123 A4B4 6996 3BF8 63CC"},
    {"cuda_toolkit_pip_index_url": "https://user:token@pypi.example/simple"},
    {"cuda_toolkit_method": "apt", "cuda_toolkit_pip_extra_packages": [{"version": "1"}]},
    {"cuda_toolkit_method": "pip", "cuda_toolkit_pip_extra_packages": [dict(PIN, version="13.0.0.19+local!1")]},
    {"cuda_toolkit_apt_repo_url": "file:///srv/cuda-repo/", "cuda_toolkit_apt_key_url": "http://127.0.0.1:8765/k.pub"},
    # another type: the type check's (a dict that is no dict, a method among the spec's choices)
    {"cuda_toolkit_gpu_facts": ["present"]}, {"cuda_toolkit_gpu_facts": None}, {"cuda_toolkit_method": "conda"},
    # no driver table to look the version up in
    {"cuda_toolkit_driver_minimums": None},
])
def test_good_values_and_other_types_pass(values):
    assert cuda_toolkit_main(dict(GOOD, **values)) == []


def test_the_driver_table_is_searched_by_major_minor():
    table = {"cuda_toolkit_driver_minimums": [{"release": "13.10.0", "driver": "600.1"}]}
    assert cuda_toolkit_main(dict(GOOD, cuda_toolkit_version="13.10", cuda_toolkit_release="13.10.0", **table)) == []
    assert cuda_toolkit_main(dict(GOOD, cuda_toolkit_version="13.1", cuda_toolkit_release="13.1.0", **table)) == [
        "cuda_toolkit: no minimum driver is known for CUDA 13.1 (cuda_toolkit_version); add its releases to "
        "cuda_toolkit_driver_minimums in the role's vars."]


def test_a_version_that_is_not_major_minor_is_not_looked_up_in_the_driver_table():
    assert cuda_toolkit_main(dict(GOOD, cuda_toolkit_version="abc")) == [
        "cuda_toolkit: cuda_toolkit_version must be major.minor like 13.0 (got 'abc')",
        "cuda_toolkit: cuda_toolkit_release must be major.minor.update within cuda_toolkit_version abc, like abc.2 "
        "(got '13.0.2')"]


def test_every_message_at_once_the_url_and_list_ones_last():
    errors = cuda_toolkit_main(dict(GOOD, cuda_toolkit_prefix="cuda", cuda_toolkit_apt_keyring="k.gpg",
                                    cuda_toolkit_apt_key_url="ftp://k", cuda_toolkit_pip_packages="x"))
    assert [e.split(" ")[1] if e.startswith("cuda_toolkit: ") else e.split(" ")[0] for e in errors] == [
        "cuda_toolkit_prefix", "cuda_toolkit_apt_keyring", "cuda_toolkit_apt_key_url", "cuda_toolkit_pip_packages"]
    assert not errors[2].endswith("nothing was changed.") and errors[3].endswith("; nothing was changed.")
