# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin gpufleet.inference.wheelhouse_push: the wheels a host lacks, in one task.

The task is given both listings (the controller's, made once for the run, and
the host's, each with SHA-1 checksums); it sends only the missing or changed
files into the task's temporary folder on the host, one transfer each over the
host's connection, and then runs the module of the same name once, which
checks every checksum and renames each file into the wheelhouse. Nothing is
checksummed on the controller here (the listing did that once for the whole
run), and a host that has everything is not contacted at all.
"""

from __future__ import annotations

import os

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.gpufleet.inference.plugins.module_utils.wheelhouse import missing

display = Display()

MODULE = "gpufleet.inference.wheelhouse_push"
ARGUMENT_SPEC = {
    "files": {"type": "list", "elements": "dict", "required": True},
    "present": {"type": "list", "elements": "dict", "default": []},
    "dest": {"type": "str", "required": True},
    "mode": {"type": "str", "default": "0644"},
}


def checked(entries, name):
    """The entries of a listing, each with a path and a 40-hex checksum, or a clear error."""
    for entry in entries:
        path, checksum = entry.get("path"), entry.get("checksum")
        if not isinstance(path, str) or not path or not isinstance(checksum, str) or len(checksum) != 40:
            raise AnsibleActionFail("wheelhouse_push: each entry of %s needs a path and its SHA-1 checksum, as "
                                    "ansible.builtin.find with get_checksum: true lists them (got %r)"
                                    % (name, dict((k, entry.get(k)) for k in ("path", "checksum"))))
    return entries


class ActionModule(ActionBase):
    """Compare, send what is missing, and put it in place with one module run."""

    # the temporary folder is made below, only when a file is to be sent
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        files = checked(args["files"], "files")
        present = checked(args["present"], "present")
        dest = args["dest"]
        if not dest.startswith("/"):
            raise AnsibleActionFail("wheelhouse_push: dest must be an absolute path on the host (got %r)" % dest)
        todo = missing(files, present)
        names = [os.path.basename(f["path"]) for f in todo]
        for f in todo:
            if not os.path.isfile(f["path"]):
                raise AnsibleActionFail("wheelhouse_push: %s is not a file on the controller" % f["path"])
        size = sum(os.path.getsize(f["path"]) for f in todo)
        result.update(pushed=names, bytes=0 if self._task.check_mode else size, changed=bool(todo))
        if not todo:
            return result
        if self._task.check_mode:
            result["msg"] = "would send %d file(s), %.1f MiB: %s" % (len(todo), size / 2.0 ** 20, ", ".join(names))
            return result
        # one line per host at the default verbosity, naming what is sent (the copy loop
        # it replaces showed a line per wheel)
        display.display("%s: sending %d file(s), %.1f MiB, to %s: %s" % (
            task_vars.get("inventory_hostname", ""), len(todo), size / 2.0 ** 20, dest, ", ".join(names)))
        tmpdir = self._make_tmp_path()
        try:
            staged = {}
            for f, name in zip(todo, names):
                staged[name] = self._transfer_file(f["path"], self._connection._shell.join_path(tmpdir, name))
            # readable by the become user, where the task becomes another one
            self._fixup_perms2([tmpdir] + list(staged.values()), execute=False)
            # the files to put in place only: the comparison was made above
            res = self._execute_module(module_name=MODULE, task_vars=task_vars, module_args={
                "files": [{"path": f["path"], "checksum": f["checksum"]} for f in todo],
                "dest": dest, "mode": args["mode"], "staged": staged})
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        result.update(res)
        return result
