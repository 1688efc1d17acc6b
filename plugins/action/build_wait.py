# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin gpufleet.inference.build_wait: wait for a long build, one line per poll.

An ``until:`` loop around the status command prints "FAILED - RETRYING" on every
poll of a build that is going well, for hours. This plugin runs the same status
command on the target every ``interval`` seconds and prints one readable line per
poll through Display instead (shown at default verbosity), then returns the last
status line as ``stdout``, so that the tasks after it read it as before.
"""

from __future__ import annotations

import json
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()

ARGUMENT_SPEC = {
    "argv": {"type": "list", "elements": "str", "required": True},
    "interval": {"type": "int", "default": 15},
    "timeout": {"type": "int", "required": True},
    "label": {"type": "str"},
}
# The detail after the count or the state, so that a line stays one terminal line.
DETAIL_CHARS = 100
# The builder's start time is trusted while it is at most this much older than the
# wait: the build starts just before the wait, and a log that a build did not
# rewrite (a reused wheel) can be days old.
START_SLACK = 600


def duration(seconds):
    """1m20s, 0m40s, 2h05m10s."""
    seconds = max(int(seconds), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return "%dh%02dm%02ds" % (hours, minutes, secs)
    return "%dm%02ds" % (minutes, secs)


def steps(status):
    """(done, total) of the status line, or (None, None) before ninja counts."""
    done, total = status.get("done"), status.get("total")
    if isinstance(done, int) and isinstance(total, int) and not isinstance(done, bool) \
            and not isinstance(total, bool) and total > 0 and 0 <= done <= total:
        return done, total
    return None, None


def detail(status):
    """The progress text without its ninja counter, cut to DETAIL_CHARS."""
    text = " ".join(str(status.get("progress") or "").split())
    if text.startswith("[") and "] " in text:
        text = text.split("] ", 1)[1]
    if len(text) > DETAIL_CHARS:
        text = text[:DETAIL_CHARS - 3] + "..."
    return text


def build_elapsed(status, waited):
    """Seconds since the build started, by the builder's clock where the status gives
    its start, else the time waited so far."""
    started, now = status.get("started"), status.get("now")
    if isinstance(started, int) and isinstance(now, int) and 0 <= now - started <= waited + START_SLACK:
        return now - started
    return waited


def progress_line(label, status, elapsed):
    """One line for one poll:
    sbx1: sgl-kernel build 12/40 (30%), 1m20s elapsed, about 3m05s left: Building CUDA object csrc/x.cu.o
    sbx1: sgl-kernel build configuring, 0m40s elapsed: -- Detected CUDA_VERSION=13.0
    sbx1: sgl-kernel build finished (rc 0), 4m10s elapsed
    """
    if status.get("finished"):
        return "%s: sgl-kernel build finished (rc %s), %s elapsed" % (label, status.get("rc"), duration(elapsed))
    done, total = steps(status)
    text = detail(status)
    if done is None:
        line = "%s: sgl-kernel build configuring, %s elapsed" % (label, duration(elapsed))
    else:
        line = "%s: sgl-kernel build %d/%d (%d%%), %s elapsed" % (label, done, total, done * 100 // total,
                                                                  duration(elapsed))
        if done > 0:
            line += ", about %s left" % duration(elapsed / done * (total - done))
    return line + (": " + text if text else "")


class ActionModule(ActionBase):
    """Poll the status command until the build finishes or the timeout passes."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        # the spec's list type would split a string at its commas into a command
        if isinstance(self._task.args.get("argv"), str):
            raise AnsibleActionFail("build_wait: argv must be a list of strings, an argument list and no shell string "
                                    "(got %r)" % self._task.args["argv"])
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        argv, interval, timeout = args["argv"], args["interval"], args["timeout"]
        label = args["label"] or task_vars.get("inventory_hostname", "")
        if not argv:
            raise AnsibleActionFail("build_wait: argv must be a non-empty list of strings (got [])")
        if interval < 1:
            raise AnsibleActionFail("build_wait: interval must be an integer >= 1 (got %r)" % interval)
        if timeout < 1:
            raise AnsibleActionFail("build_wait: timeout must be an integer >= 1 (got %r)" % timeout)
        if self._task.check_mode:
            result.update(skipped=True, changed=False, msg="check mode: no build to wait for")
            return result

        start = time.monotonic()
        polls = 0
        try:
            while True:
                stdout, status, failure = self._status(argv, task_vars)
                if failure:
                    result.update(failure, failed=True, polls=polls)
                    return result
                polls += 1
                waited = time.monotonic() - start
                elapsed = build_elapsed(status, waited)
                display.display(progress_line(label, status, elapsed))
                display.v("%s: %s" % (label, stdout))
                result.update(changed=False, stdout=stdout, stdout_lines=[stdout], elapsed=int(elapsed), polls=polls)
                if status.get("finished"):
                    return result
                if waited >= timeout:
                    result.update(failed=True, msg=(
                        "sgl-kernel build on %s not finished after %s (timeout %d s: raise sgl_kernel_build_timeout "
                        "for a longer build); last progress: %s"
                        % (label, duration(waited), timeout, status.get("progress") or "(the log is empty)")))
                    return result
                time.sleep(min(interval, max(timeout - waited, 0)))
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)

    def _status(self, argv, task_vars):
        """Run the status command on the target: (its last stdout line, the parsed JSON,
        None) or, where it failed or printed no status, (None, None, the failure)."""
        res = self._execute_module(module_name="ansible.legacy.command", module_args={"argv": argv},
                                   task_vars=task_vars)
        stdout = (res.get("stdout") or "").strip()
        context = {"rc": res.get("rc"), "stdout": stdout, "stderr": res.get("stderr", "")}
        if res.get("failed") or res.get("rc", 0) != 0:
            context["msg"] = "the status command %s failed (rc %s): %s" % (
                argv, res.get("rc"), res.get("msg") or res.get("stderr") or stdout)
            return None, None, context
        line = stdout.splitlines()[-1] if stdout else ""
        try:
            status = json.loads(line)
        except ValueError:
            status = None
        if not isinstance(status, dict) or "finished" not in status:
            context["msg"] = "the status command %s printed no JSON status line with 'finished' (got %r)" % (
                argv, line[-300:])
            return None, None, context
        return line, status, None
