# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin gpufleet.inference.fleet_finish: a fleet run's last task on
each host, after the report.

1. Where a textfile directory is given (node_exporter's textfile collector),
   the host's metrics, rendered with the fleet report on the controller, are
   put there: written beside gpufleet.prom under a name the collector ignores
   (.gpufleet.prom.staged, no .prom suffix) and renamed over it, so that the
   collector never reads a half-written file; left alone when they are the
   same (changed=0). One shell command, the metrics on its standard input:
   one round trip, no module, no file transfer. A failure here is a warning,
   never a failed host.
2. The host is failed when the play says so (fail=true), with its message:
   one host's failure never stops the others, and every host is in the
   report. Failing them here is also what max_fail_percentage counts between
   serial batches.

Two tasks per host (the textfile's copy and rename) and two skipped ones
(its warning, the failure) were four workers per host; this is one.
"""

from __future__ import annotations

import shlex

from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

ARGUMENT_SPEC = {
    "textfile_src": {"type": "path"},
    "textfile_dir": {"type": "str", "default": ""},
    "fail": {"type": "bool", "default": False},
    "msg": {"type": "str", "default": ""},
}
STAGED = ".gpufleet.prom.staged"
FINAL = "gpufleet.prom"
# $0: the directory. "same" when the file is already what was sent.
SCRIPT = ('set -e; cd "$0"; cat > %(staged)s; '
          'if cmp -s %(staged)s %(final)s; then rm -f %(staged)s; echo same; '
          'else chmod 0644 %(staged)s; mv -f %(staged)s %(final)s; echo moved; fi'
          % {"staged": STAGED, "final": FINAL})


class ActionModule(ActionBase):
    """Put the host's metrics in place, then fail the host when asked."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_check_mode = True

    def _textfile(self, src, directory):
        """(changed, warning) of putting src into directory on the host."""
        try:
            with open(src, "rb") as f:
                data = f.read()
        except OSError as exc:
            return False, "the metrics for node_exporter were not written to %s/%s: %s" % (directory, FINAL, exc)
        if self._task.check_mode:
            return True, None
        cmd = "sh -c %s %s" % (shlex.quote(SCRIPT), shlex.quote(directory))
        res = self._low_level_execute_command(cmd, in_data=data, sudoable=False)
        if res.get("rc") != 0:
            why = to_text(res.get("stderr") or res.get("stdout") or "rc %s" % res.get("rc")).strip()
            return False, "the metrics for node_exporter were not written to %s/%s: %s" % (directory, FINAL, why)
        return to_text(res.get("stdout")).strip().endswith("moved"), None

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        result["changed"] = False
        if args["textfile_dir"] and args["textfile_src"]:
            try:
                changed, warning = self._textfile(args["textfile_src"], args["textfile_dir"])
            except AnsibleConnectionFailure as exc:
                changed, warning = False, "the metrics for node_exporter were not written to %s/%s: %s" % (
                    args["textfile_dir"], FINAL, exc)
            result["changed"] = changed
            if warning:
                result["warnings"] = [warning]
        if args["fail"]:
            result["failed"] = True
            result["msg"] = args["msg"] or "failed"
        return result
