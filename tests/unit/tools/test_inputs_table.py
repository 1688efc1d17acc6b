"""tools/inputs_table.py: the table of where each input is checked
(docs/inputs.md) stays true to the argument specs and the playbooks."""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import inputs_table  # noqa: E402  pylint: disable=wrong-import-position


def test_inputs_page_is_current():
    assert inputs_table.main(["--check"]) == 0, "run tools/inputs_table.py --write"


def test_the_table_lives_in_docs_not_in_the_readme():
    assert inputs_table.DOC == os.path.join("docs", "inputs.md")
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        assert inputs_table.START not in handle.read()


def test_write_replaces_only_the_table_and_check_sees_it(tmp_path, monkeypatch):
    page = tmp_path / "inputs.md"
    page.write_text("# Inputs\n\nkept\n\n%s\n| stale |\n%s\n\nkept too\n" % (inputs_table.START, inputs_table.END))
    monkeypatch.setattr(inputs_table, "DOC", str(page))
    assert inputs_table.main(["--check"]) == 1
    assert inputs_table.main(["--write"]) == 0
    assert inputs_table.main(["--check"]) == 0
    text = page.read_text()
    assert text.startswith("# Inputs\n\nkept\n\n") and text.endswith("\n\nkept too\n")
    assert "| stale |" not in text and "`gpufleet_expect`" in text


def test_a_page_without_markers_is_refused(tmp_path, monkeypatch):
    page = tmp_path / "inputs.md"
    page.write_text("# Inputs\n")
    monkeypatch.setattr(inputs_table, "DOC", str(page))
    assert inputs_table.main(["--check"]) == 1
    assert inputs_table.main(["--write"]) == 1
    assert page.read_text() == "# Inputs\n"
    monkeypatch.setattr(inputs_table, "DOC", str(tmp_path / "missing.md"))
    assert inputs_table.main(["--check"]) == 1


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
    # one answer per row: the role's own rules module, or the type alone
    for row in rows:
        name, owner, answer = re.match(r"^\| `([a-z0-9_]+)` \| ([a-z_]+) \| .* \| ([^|]+) \|$", row).groups()
        assert answer.strip() in ("type only", "`plugins/plugin_utils/rules/%s.py`" % owner), row
    # a URL, a path or a directory has a shape to check beyond its type
    shaped = [r for r in rows if re.match(r"^\| `[a-z0-9_]+_(url|urls|path|prefix)` \|", r) and r.endswith("type only |")]
    assert shaped == []


def test_a_name_is_matched_whole(tmp_path, monkeypatch):
    (tmp_path / "a.yml").write_text("sgl_kernel_abi_check_timeout | int > 0\n")
    monkeypatch.setattr(inputs_table, "ROOT", str(tmp_path))
    assert inputs_table._mentions("sgl_kernel_abi_check", ["a.yml"]) == []  # pylint: disable=protected-access
    assert inputs_table._mentions("sgl_kernel_abi_check_timeout", ["a.yml"]) == ["a.yml"]  # pylint: disable=protected-access
