"""scripts/sandbox.py: a fleet that would not fit the machine's inotify limit
is refused before any host is made, naming the setting and the value to set."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import sandbox  # noqa: E402  pylint: disable=wrong-import-position


def test_a_fleet_past_the_inotify_limit_is_refused_naming_it(tmp_path):
    limit = tmp_path / "max_user_instances"
    limit.write_text("128\n")
    sandbox.check_inotify(21, str(limit))
    with pytest.raises(sandbox.SandboxError) as caught:
        sandbox.check_inotify(64, str(limit))
    assert str(caught.value) == (
        "64 sandbox hosts need about 384 inotify instances (6 each, for systemd), and "
        "fs.inotify.max_user_instances is 128: raise it first, e.g. `sysctl -w fs.inotify.max_user_instances=384`")
    # a machine that does not say is not refused
    sandbox.check_inotify(64, str(tmp_path / "absent"))
