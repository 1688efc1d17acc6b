# Copyright: gpufleet.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.inference.plugins.filter import nightly
from ansible_collections.gpufleet.inference.plugins.filter.nightly import (
    FilterModule,
    nightly_date_valid,
    nightly_pin_errors,
    nightly_pins,
    nightly_version_parse,
    pins_unmet,
    uv_dry_run_changes,
    uv_freeze_parse,
    uv_freeze_apply,
    uv_requirement_conflicts,
)
from ansible_collections.gpufleet.inference.plugins.plugin_utils.nightly import release_pin_errors

BASES = {"torch": "2.12.0", "torchvision": "0.27.0", "torchaudio": "2.12.0"}
THREE = ["torch", "torchvision", "torchaudio"]

# Real `uv pip install --dry-run` output (uv 0.13.9) against the test wheelhouse.
DRY_RUN_UPGRADE = """Using Python 3.11.2 environment at: /home/deploy/ml-env-0123abcd
Resolved 3 packages in 1ms
Would download 3 packages
Would uninstall 1 package
Would install 3 packages
 + flashinfer-cubin==0.6.1.dev20260308
 + flashinfer-python==0.6.1.dev20260308
 - torch==2.13.0+cpu
 + torch==2.10.0
"""
DRY_RUN_NOTHING = """Using Python 3.11.2 environment at: venv
Checked 1 package in 2ms
Would make no changes
"""
CONFLICT = """error: No solution found when resolving dependencies
  cause: Because flashinfer-python>=0.6.1.dev20260308 depends on torch==2.10.0 and torch==2.13.0+cpu, \
we can conclude that flashinfer-python>=0.6.1.dev20260308 cannot be used.
         And because you require flashinfer-python==0.6.1.dev20260308, we can conclude that your \
requirements are unsatisfiable.
"""
CONFLICT_ALL_VERSIONS = """error: No solution found when resolving dependencies
  cause: Because all versions of gpufleet-wants-old-torch depend on torch==2.10.0 and \
torch==2.13.0+cpu, we can conclude that all versions of gpufleet-wants-old-torch cannot be used.
"""


@pytest.mark.parametrize("value, expected", [
    ("20260307", True),
    ("20240229", True),     # leap day
    ("20230229", False),    # not a leap year
    ("20261301", False),    # month 13
    ("2026037", False),     # seven digits
    ("2026-03-07", False),
    (20260307, True),       # YAML may hand an int
    ("", False),
])
def test_nightly_date_valid(value, expected):
    assert nightly_date_valid(value) is expected


def test_parse_nightly_with_local_tag():
    parsed = nightly_version_parse("2.12.0.dev20260307+cu130")
    assert parsed["base"] == "2.12.0"
    assert parsed["date"] == "20260307"
    assert parsed["nightly"] is True
    assert parsed["local"] == "cu130"
    assert parsed["public"] == "2.12.0.dev20260307"


def test_parse_release_is_not_nightly():
    parsed = nightly_version_parse("2.13.0+cpu")
    assert parsed["nightly"] is False
    assert parsed["date"] == ""
    assert parsed["local"] == "cpu"
    assert parsed["public"] == "2.13.0"


@pytest.mark.parametrize("bad", ["", "latest", "2.12.0.dev", "2.12.0+", "v2.12.0", "2.12.0 dev1"])
def test_parse_rejects_non_versions(bad):
    with pytest.raises(AnsibleFilterError):
        nightly_version_parse(bad)


def test_pins_from_date_and_bases():
    pins = nightly_pins(THREE, "20260307", BASES, "cu130")
    assert pins == {
        "torch": "2.12.0.dev20260307+cu130",
        "torchvision": "0.27.0.dev20260307+cu130",
        "torchaudio": "2.12.0.dev20260307+cu130",
    }
    assert nightly_pin_errors(pins, "cu130") == []


def test_explicit_version_wins_over_base():
    pins = nightly_pins(["torch"], "20260307", BASES, "cpu", {"torch": "2.13.0+cpu"})
    assert pins == {"torch": "2.13.0+cpu"}
    assert nightly_pin_errors(pins, "cpu") == []


@pytest.mark.parametrize("version, base, date, variant, pin", [
    # the full version wins, as it is
    ("2.13.0+cpu", "2.12.0", "20260307", "cu130", "2.13.0+cpu"),
    (2.13, "", "", "", 2.13),
    # else base, date and the variant where there is one
    ("", "2.12.0", "20260307", "cu130", "2.12.0.dev20260307+cu130"),
    ("", "2.12.0", 20260307, "", "2.12.0.dev20260307"),
    ("", "2.12.0", True, 0, "2.12.0.devTrue"),
    # nothing pinned without both: no error, nothing expected
    ("", "2.12.0", "", "cu130", ""),
    ("", "", "20260307", "cu130", ""),
    ("", None, None, None, ""),
])
def test_torch_pin_is_the_inventorys_torch_or_nothing(version, base, date, variant, pin):
    found = FilterModule().filters()["nightly_torch_pin"](version, base, date, variant)
    assert found == pin and type(found) is type(pin)


def test_a_nightly_pin_is_made_as_torch_pin_makes_it():
    assert nightly_pins(["torch"], "20260307", BASES, "cu130")["torch"] == \
        nightly.torch_pin("", BASES["torch"], "20260307", "cu130")
    assert nightly_pins(["torch"], "20260307", BASES, "")["torch"] == "2.12.0.dev20260307"


def test_pins_missing_base_names_the_variables():
    with pytest.raises(AnsibleFilterError, match="torch_nightly_version_base.torchaudio"):
        nightly_pins(THREE, "20260307", {"torch": "2.12.0", "torchvision": "0.27.0"}, "cu130")


def test_pins_from_different_dates_are_an_error():
    pins = {
        "torch": "2.12.0.dev20260307+cu130",
        "torchvision": "0.27.0.dev20260308+cu130",
        "torchaudio": "2.12.0.dev20260307+cu130",
    }
    errors = nightly_pin_errors(pins, "cu130")
    assert len(errors) == 1
    assert "different dates" in errors[0]
    assert "20260308: torchvision" in errors[0]


def test_wrong_variant_and_bad_dev_date_are_errors():
    errors = nightly_pin_errors({"torch": "2.12.0.dev20260307+cu128",
                                 "torchaudio": "2.12.0.dev1"}, "cu130")
    assert any("+cu128 is not the CUDA variant cu130" in e for e in errors)
    assert any("not a YYYYMMDD date" in e for e in errors)


def test_mixing_nightly_and_release_is_an_error():
    errors = nightly_pin_errors({"torch": "2.12.0.dev20260307+cu130",
                                 "torchvision": "0.26.0+cu130"}, "cu130")
    assert errors == ["mixing nightly and release pins: torchvision not nightly"]


def test_unparsable_pin_is_reported_not_raised():
    errors = nightly_pin_errors({"torch": "latest"}, "cu130")
    assert errors and errors[0].startswith("torch: not a PEP 440 version")


def test_freeze_parse_normalises_names_and_skips_other_lines():
    text = "# comment\nTyping_Extensions==4.16.0\ntorch==2.13.0+cpu\n-e file:///src/x\nfoo @ file:///w/foo.whl\n"
    assert uv_freeze_parse(text) == {"typing-extensions": "4.16.0", "torch": "2.13.0+cpu"}


def test_freeze_parse_reads_arbitrary_equality_and_cuts_comments():
    # before module_utils freeze, "x===1.0" gave the version "=1.0" and a trailing comment stayed in the version
    text = "legacy===1.0\nfilelock==3.20.0  # via torch\nuvicorn[standard]==0.35.0\n"
    assert uv_freeze_parse(text) == {"legacy": "1.0", "filelock": "3.20.0", "uvicorn": "0.35.0"}
    # and the freeze written from it stays name==version
    assert uv_freeze_apply(text, {"install": {}, "remove": {}}) == "filelock==3.20.0\nlegacy==1.0\nuvicorn==0.35.0\n"


def test_dry_run_changes_upgrade():
    changes = uv_dry_run_changes(DRY_RUN_UPGRADE)
    assert changes["pending"] is True
    assert changes["remove"] == {"torch": "2.13.0+cpu"}
    assert changes["install"]["torch"] == "2.10.0"
    assert changes["install"]["flashinfer-python"] == "0.6.1.dev20260308"


def test_dry_run_no_changes():
    assert uv_dry_run_changes(DRY_RUN_NOTHING) == {"install": {}, "remove": {}, "pending": False}


def test_freeze_apply_builds_the_planned_freeze():
    current = "sympy==1.14.0\ntorch==2.13.0+cpu\n"
    planned = uv_freeze_apply(current, uv_dry_run_changes(DRY_RUN_UPGRADE))
    assert planned == ("flashinfer-cubin==0.6.1.dev20260308\n"
                       "flashinfer-python==0.6.1.dev20260308\n"
                       "sympy==1.14.0\n"
                       "torch==2.10.0\n")


def test_freeze_apply_without_changes_is_the_current_freeze_sorted():
    assert uv_freeze_apply({"b": "1", "a": "2"}, {"install": {}, "remove": {}}) == "a==2\nb==1\n"


def test_conflict_names_the_package_that_wanted_another_torch():
    assert uv_requirement_conflicts(CONFLICT) == [
        {"package": "flashinfer-python", "wants": "torch==2.10.0"}]


def test_conflict_all_versions_form():
    assert uv_requirement_conflicts(CONFLICT_ALL_VERSIONS) == [
        {"package": "gpufleet-wants-old-torch", "wants": "torch==2.10.0"}]


def test_conflict_ignores_non_guarded_dependencies():
    text = "Because foo==1.0 depends on numpy>=2 and you require numpy<2, ..."
    assert uv_requirement_conflicts(text) == []
    assert uv_requirement_conflicts(text, ["numpy"]) == [{"package": "foo", "wants": "numpy>=2"}]


def test_filter_module_exports_every_filter():
    filters = FilterModule().filters()
    assert set(filters) == {
        "nightly_date_valid", "nightly_version_parse", "nightly_pins", "nightly_pin_errors", "nightly_torch_pin",
        "pins_unmet", "uv_freeze_parse", "uv_dry_run_changes", "uv_freeze_apply", "uv_requirement_conflicts"}
    assert filters["nightly_pins"] is nightly.nightly_pins


# ---------------------------------------------------------------- the release channel

RELEASE = {"torch": "2.14.1", "torchvision": "0.29.1", "torchaudio": "2.11.0"}


def test_release_pins_are_the_full_versions_with_no_date_or_base():
    # the preflight's call for torch_nightly_channel=release: no date, no bases
    assert nightly_pins(THREE, "", {}, "cu130", RELEASE) == RELEASE
    with pytest.raises(AnsibleFilterError, match="no version for torchaudio"):
        nightly_pins(THREE, "", {}, "cu130", {"torch": "2.14.1", "torchvision": "0.29.1"})


@pytest.mark.parametrize("pins, errors", [
    (RELEASE, []),
    ({"torch": "2.14.1+cu130", "torchaudio": "2.11.0+cu130"}, []),
    ({"torch": "2.15.0rc3"}, []),  # a pre-release is a release candidate, not a nightly
    ({"torch": "2.14.1+cpu"}, ["torch==2.14.1+cpu: local tag +cpu is not the CUDA variant cu130"]),
    ({"torch": "2.12.0.dev20260307+cu130"},
     ["torch==2.12.0.dev20260307+cu130: .dev20260307 is a nightly or development build, not a release"]),
    ({"torch": "2.14.1.dev1"}, ["torch==2.14.1.dev1: .dev1 is a nightly or development build, not a release"]),
    ({"torch": "two"}, ["torch: not a PEP 440 version: 'two'"]),
])
def test_release_pin_errors(pins, errors):
    assert release_pin_errors(pins, "cu130") == errors


@pytest.mark.parametrize("installed, pins, local_optional, unmet", [
    (RELEASE, RELEASE, False, {}),
    (RELEASE, RELEASE, True, {}),
    # PyPI's 2.14.1 and the cu130 index's 2.14.1+cu130: one pin meets both when it is a release pin
    ({"torch": "2.14.1+cu130"}, {"torch": "2.14.1"}, True, {}),
    ({"torch": "2.14.1+cu130"}, {"torch": "2.14.1"}, False, {"torch": "2.14.1+cu130"}),
    # a pin with a tag wants that tag; a tag is not a prefix of another version
    ({"torch": "2.14.1"}, {"torch": "2.14.1+cu130"}, True, {"torch": "2.14.1"}),
    ({"torch": "2.14.10"}, {"torch": "2.14.1"}, True, {"torch": "2.14.10"}),
    ({"torch": "2.14.1.post1"}, {"torch": "2.14.1"}, True, {"torch": "2.14.1.post1"}),
    # missing, and installed without a pin
    ({}, {"torch": "2.14.1"}, True, {"torch": None}),
    ({"torch": "2.14.1", "torchvision": "0.29.1"}, {"torch": "2.14.1"}, True, {"torchvision": "0.29.1"}),
])
def test_pins_unmet(installed, pins, local_optional, unmet):
    assert pins_unmet(installed, pins, local_optional) == unmet


@pytest.mark.parametrize("installed, pins", [
    ({"torch": "2.12.0.dev20260307+cu130"}, {"torch": "2.12.0.dev20260307+cu130"}),
    ({"torch": "2.12.0.dev20260307+cu130"}, {"torch": "2.12.0.dev20260306+cu130"}),
    ({"torch": "2.13.0+cpu"}, {"torch": "2.13.0"}),
    ({}, {"torch": "2.13.0+cpu"}),
    ({"torch": "2.13.0+cpu", "torchaudio": "2.13.0+cpu"}, {"torch": "2.13.0+cpu"}),
])
def test_nightly_pins_are_met_as_the_equality_the_install_check_made(installed, pins):
    assert (pins_unmet(installed, pins) == {}) is (installed == pins)


def test_a_pins_own_reason_comes_before_its_local_tag():
    pins = {"torch": "2.12.0.dev1+cu129", "torchaudio": "2.11.0+cu129"}
    assert nightly_pin_errors(pins, "cu130") == [
        "torch==2.12.0.dev1+cu129: dev number 1 is not a YYYYMMDD date",
        "torch==2.12.0.dev1+cu129: local tag +cu129 is not the CUDA variant cu130",
        "torchaudio==2.11.0+cu129: local tag +cu129 is not the CUDA variant cu130"]
    assert release_pin_errors(pins, "cu130") == [
        "torch==2.12.0.dev1+cu129: .dev1 is a nightly or development build, not a release",
        "torch==2.12.0.dev1+cu129: local tag +cu129 is not the CUDA variant cu130",
        "torchaudio==2.11.0+cu129: local tag +cu129 is not the CUDA variant cu130"]
