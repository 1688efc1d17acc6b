"""tools/inputs_table.py: the README's table of where each input is checked
stays true to the argument specs and the playbooks."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import inputs_table  # noqa: E402  pylint: disable=wrong-import-position


def test_readme_table_is_current():
    assert inputs_table.main(["--check"]) == 0, "run tools/inputs_table.py --write"


def test_every_gpufleet_name_read_is_a_declared_input_of_the_fleet_role():
    names = inputs_table.public_names_read() - inputs_table.FACTS
    declared = set(inputs_table.role_options("fleet"))
    assert sorted(names - declared) == [], "declare these in roles/fleet/meta/argument_specs.yml and defaults"
    # and nothing declared that nothing reads
    assert sorted(declared - names) == []


def test_every_role_option_and_playbook_input_has_a_row():
    rows = inputs_table.table().splitlines()[2:]
    listed = {re.match(r"^\| `([a-z0-9_]+)` \|", r).group(1) for r in rows}
    options = {name for name, _owner, _kind, _where in inputs_table.role_rows()}
    assert options and options <= listed
    assert set(inputs_table.role_options("fleet")) <= listed
    # the inputs are all checked somewhere before any change
    assert not [r for r in rows if "**not checked**" in r]


def test_a_name_is_matched_whole(tmp_path, monkeypatch):
    (tmp_path / "a.yml").write_text("sgl_kernel_verify_timeout | int > 0\n")
    monkeypatch.setattr(inputs_table, "ROOT", str(tmp_path))
    assert inputs_table._mentions("sgl_kernel_verify", ["a.yml"]) == []  # pylint: disable=protected-access
    assert inputs_table._mentions("sgl_kernel_verify_timeout", ["a.yml"]) == ["a.yml"]  # pylint: disable=protected-access
