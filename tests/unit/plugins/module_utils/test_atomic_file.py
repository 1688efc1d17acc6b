# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
import os
import stat

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import atomic_file


def mode_of(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_writes_the_text_with_the_mode_and_no_temporary_file(tmp_path):
    path = str(tmp_path / "flags.env")
    atomic_file.write_text(path, u'SGLANG_ARGS="--moe-runner-backend triton" \u00b5\n', mode=0o644)
    with open(path, encoding="utf-8") as fh:
        assert fh.read() == u'SGLANG_ARGS="--moe-runner-backend triton" \u00b5\n'
    assert mode_of(path) == 0o644
    assert os.listdir(str(tmp_path)) == ["flags.env"]


def test_replaces_an_existing_file_whole(tmp_path):
    path = tmp_path / "report.json"
    path.write_text("old and longer than the new one\n")
    atomic_file.write_text(str(path), "new\n")
    assert path.read_text() == "new\n"


def test_mode_none_keeps_the_private_mode(tmp_path):
    path = str(tmp_path / "proof.json")
    atomic_file.write_text(path, "{}\n", mode=None)
    assert mode_of(path) == 0o600


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "gpufleet-serving.json"
    path.write_text("last pass\n")
    with pytest.raises(TypeError):
        atomic_file.write_text(str(path), b"not text", prefix=".gpufleet-serving.")
    assert path.read_text() == "last pass\n"
    assert os.listdir(str(tmp_path)) == ["gpufleet-serving.json"]


def test_a_missing_directory_raises_before_anything_is_written(tmp_path):
    with pytest.raises(OSError):
        atomic_file.write_text(str(tmp_path / "absent" / "x.prom"), "x 1\n")
    assert os.listdir(str(tmp_path)) == []
