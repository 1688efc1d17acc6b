# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The host lock of deploy.yml and rollback.yml: one run at a time per host.

Used on both sides, with no dependency beyond the standard library (the host
side must work with the host's python3, 3.6 or later):

- on the controller, by the action plugin gpufleet.inference.host_lock:
  ``whoami`` gives this run's holder record (a run id derived from the
  ansible-playbook process, the controller, the pid and start time of that
  process) and a snapshot of the controller's running ansible-playbook
  processes;
- on the host (as root), by the module gpufleet.inference.host_lock:
  ``acquire`` takes the lock, a directory holding holder.json. It is created
  under a temporary name and renamed into place, so it never exists without
  its holder record, and two runs can never both take it (rename(2) onto a
  non-empty directory fails). ``release`` removes the lock if, and only if,
  the given run holds it.

A held lock is broken (renamed aside, then removed) when it is stale:
  - its holder ran on this very controller (same boot and pid namespace) and
    its ansible-playbook process is gone (a killed run);
  - or it is older than ``stale_after`` seconds (0: never by age);
  - or ``force`` is given (the operator's override).
Otherwise the holder is alive or cannot be checked (another controller), and
acquire reports it. In check mode nothing is created, broken or removed.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import errno
import json
import os
import shutil
import socket
import time
import uuid

HOLDER = "holder.json"
POLL_S = 2.0
# The namespace of the run ids (uuid5 of the run's process identity).
RUN_ID_NAMESPACE = uuid.UUID("6f1d7a4e-3c2b-5e8f-9a10-4b7c2d9e0f31")


# ---------------------------------------------------------------- controller

def _read(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as fh:
            return [a.decode("utf-8", "replace") for a in fh.read().split(b"\0") if a]
    except OSError:
        return []


def _stat(pid):
    """(ppid, start time in clock ticks since boot) from /proc/PID/stat, or None."""
    text = _read("/proc/%d/stat" % pid)
    if not text or ")" not in text:
        return None
    fields = text.rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3); ppid is field 4, starttime field 22
    try:
        return int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def _is_playbook(argv):
    return any(os.path.basename(a) == "ansible-playbook" for a in argv[:3])


def playbook_process(start_pid):
    """pid of the ansible-playbook process this one runs under, or None.

    Its workers are forks with the same command line, so the outermost of the
    chain of ansible-playbook ancestors is the main process."""
    found, pid, seen = None, start_pid, 0
    while pid > 1 and seen < 64:
        seen += 1
        argv = _cmdline(pid)
        if _is_playbook(argv):
            found = pid
        elif found is not None:
            break
        st = _stat(pid)
        if st is None:
            break
        pid = st[0]
    return found


def _ticks_per_second():
    try:
        return os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        return None


def _ticks_now():
    try:
        return int(float(_read("/proc/uptime").split()[0]) * _ticks_per_second())
    except (IndexError, ValueError, TypeError):
        return None


def _started_epoch(start_ticks):
    """Epoch seconds at which a process started ``start_ticks`` after boot, or None."""
    hz = _ticks_per_second()
    if start_ticks is None or not hz:
        return None
    for line in _read("/proc/stat").splitlines():
        if line.startswith("btime "):
            try:
                return int(line.split()[1]) + start_ticks // hz
            except (IndexError, ValueError):
                return None
    return None


def _pid_ns():
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def live_processes():
    """[pid, start ticks] of every ansible-playbook process (the only kind a holder is)."""
    out = []
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return out
    for pid in pids:
        if _is_playbook(_cmdline(pid)):
            st = _stat(pid)
            if st is not None:
                out.append([pid, st[1]])
    return sorted(out)


def controller_identity():
    return {
        "hostname": socket.gethostname(),
        "machine_id": _read("/etc/machine-id") or _read("/var/lib/dbus/machine-id"),
        "boot_id": _read("/proc/sys/kernel/random/boot_id"),
        "pid_ns": _pid_ns(),
    }


def live_snapshot(ident=None):
    """What a lock's holder is judged against: this boot and pid namespace, the
    clock ticks now, and the running ansible-playbook processes."""
    ident = ident or controller_identity()
    return {"boot_id": ident["boot_id"], "pid_ns": ident["pid_ns"], "ticks_now": _ticks_now(),
            "pids": live_processes()}


def make_run_id(ident, pid, start, salt=""):
    """The run id of the process ``pid`` started at ``start`` (clock ticks since
    boot) on the controller ``ident``: the same for every process of one run,
    different for another run (another process, another start, another boot).
    ``salt`` stands in for the start where it cannot be read (no /proc)."""
    key = "|".join("%s" % v for v in (
        ident.get("machine_id"), ident.get("hostname"), ident.get("boot_id"), ident.get("pid_ns"), pid,
        start if start is not None else "no-start:%s" % salt))
    return uuid.uuid5(RUN_ID_NAMESPACE, key).hex


def this_run(start_pid=None, salt=""):
    """(ansible-playbook pid or None, its start ticks or None, the controller identity, the run id)
    of the run the process ``start_pid`` (default: this one) belongs to.

    The run is its outermost ansible-playbook ancestor (or itself); where there
    is none (an ad hoc ``ansible`` run, a test), the parent of ``start_pid``
    names the run, and the holder has no pid (no liveness check)."""
    start_pid = os.getpid() if start_pid is None else start_pid
    pid = playbook_process(start_pid)
    key_pid = pid
    if key_pid is None:
        st = _stat(start_pid)
        key_pid = st[0] if st else os.getppid()
    st = _stat(key_pid)
    start = st[1] if st else None
    ident = controller_identity()
    return pid, start, ident, make_run_id(ident, key_pid, start, salt)


def whoami(playbook, start_pid=None, now=None, salt=""):
    """{holder, live}: this run's holder record and the controller's live snapshot.

    ``started`` is when the run's process started (the same on every host),
    else ``now``, else the time of this call."""
    pid, start, ident, run_id = this_run(start_pid, salt)
    try:
        import getpass  # pylint: disable=import-outside-toplevel
        user = getpass.getuser()
    except (ImportError, KeyError, OSError):
        user = ""
    started = now if now is not None else _started_epoch(start)
    holder = {
        "run_id": run_id,
        "controller": ident,
        "pid": pid,
        "pid_start": start if pid else None,
        "user": user,
        "playbook": playbook,
        "started": _iso(started if started is not None else time.time()),
    }
    return {"holder": holder, "live": live_snapshot(ident)}


def _iso(epoch):
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- judging

def judge(holder, age, live, stale_after=0, force=False):
    """(stale, reason) for a lock held by ``holder`` for ``age`` seconds (host clock)."""
    if force:
        return True, "the override gpufleet_host_lock_break is set"
    if stale_after and stale_after > 0 and age is not None and age > stale_after:
        return True, "it is %ds old, more than gpufleet_host_lock_stale_after (%ds)" % (age, stale_after)
    ctl = holder.get("controller") or {}
    live = live or {}
    same = (ctl.get("boot_id") and ctl.get("boot_id") == live.get("boot_id")
            and ctl.get("pid_ns") == live.get("pid_ns"))
    pid, start = holder.get("pid"), holder.get("pid_start")
    if not same or not pid or start is None or live.get("ticks_now") is None:
        return False, "held by another controller or a run whose process cannot be checked from here"
    if start > live["ticks_now"]:
        # started after this run looked at the controller's processes
        return False, "its process started after this run began"
    if [pid, start] in [list(p) for p in live.get("pids") or []]:
        return False, "its process %d is running on this controller" % pid
    return True, "its ansible-playbook process %d is no longer running on this controller" % pid


def describe(holder):
    ctl = holder.get("controller") or {}
    return "since %s (controller %s, pid %s, playbook %s, run %s)" % (
        holder.get("started") or "an unknown time", ctl.get("hostname") or "unknown",
        holder.get("pid") if holder.get("pid") else "unknown", holder.get("playbook") or "unknown",
        (holder.get("run_id") or "unknown")[:12])


# ---------------------------------------------------------------- host side

def read_lock(path, now=None):
    """(exists, holder dict, age seconds) of the lock directory ``path``."""
    now = time.time() if now is None else now
    try:
        st = os.stat(os.path.join(path, HOLDER))
    except OSError:
        try:
            st = os.stat(path)
        except OSError:
            return False, {}, None
    try:
        with open(os.path.join(path, HOLDER), encoding="utf-8") as fh:
            holder = json.load(fh)
        if not isinstance(holder, dict):
            holder = {}
    except (OSError, ValueError):
        holder = {}
    return True, holder, max(0, int(now - st.st_mtime))


def _take(path, holder):
    """True if the lock was created with ``holder`` in it, False if it exists."""
    tmp = "%s.tmp-%s" % (path, holder.get("run_id") or uuid.uuid4().hex)
    shutil.rmtree(tmp, ignore_errors=True)
    os.mkdir(tmp, 0o755)
    try:
        with open(os.path.join(tmp, HOLDER), "w", encoding="utf-8") as fh:
            json.dump(holder, fh, sort_keys=True)
            fh.write("\n")
        os.rename(tmp, path)
        return True
    except OSError as exc:
        if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR):
            return False
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _remove(path, run_id):
    """Rename the lock aside and delete it, if ``run_id`` holds it. True if removed."""
    exists, holder, dummy = read_lock(path)
    if not exists or (holder.get("run_id") or "") != (run_id or ""):
        return False
    aside = "%s.removed-%s" % (path, uuid.uuid4().hex)
    try:
        os.rename(path, aside)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return False
        raise
    moved = read_lock(aside)[1]
    if (moved.get("run_id") or "") != (run_id or ""):
        # another run took the lock between the read and the rename: put it back
        try:
            os.rename(aside, path)
        except OSError:
            pass
        return False
    shutil.rmtree(aside, ignore_errors=True)
    return True


def acquire(path, holder, live, stale_after=0, wait=0, force=False, check=False, clock=time.time,
            sleep=time.sleep):
    parent = os.path.dirname(path)
    if parent and not check and not os.path.isdir(parent):
        os.makedirs(parent, 0o755)
    deadline = clock() + max(0, wait)
    result = {"acquired": False, "held": False, "holder": {}, "age": None, "stale": False,
              "reason": "", "broke": None, "waited": 0, "check": bool(check), "path": path}
    started = clock()
    breaks = 0
    while True:
        exists, current, age = read_lock(path, clock())
        if exists and (current.get("run_id") or "") == holder.get("run_id"):
            result.update(acquired=True, held=False, holder=current, age=age)
            break
        if not exists:
            if check:
                result.update(held=False, holder={}, age=None)
                break
            if _take(path, holder):
                result.update(acquired=True, held=False, holder=holder, age=0)
                break
            continue
        stale, reason = judge(current, age, live, stale_after, force)
        result.update(held=True, holder=current, age=age, stale=stale, reason=reason)
        if stale and not check and breaks < 5:
            breaks += 1
            if _remove(path, current.get("run_id") or ""):
                result["broke"] = dict(current, age=age, reason=reason)
            continue
        if stale:
            break
        if clock() >= deadline:
            break
        sleep(min(POLL_S, max(0.1, deadline - clock())))
    result["waited"] = int(clock() - started)
    result["holder_text"] = describe(result["holder"]) if result["holder"] else ""
    result["message"] = message(result)
    return result


def message(result):
    h = result.get("holder") or {}
    if result.get("acquired"):
        text = "host lock %s taken by run %s" % (result["path"], (h.get("run_id") or "")[:12])
        if result.get("waited"):
            text += " after waiting %s s" % result["waited"]
        if result.get("broke"):
            text += "; broke the stale lock of the run %s: %s" % (describe(result["broke"]), result["broke"]["reason"])
        return text
    if not result.get("held"):
        return "host lock %s is free (check mode: not taken)" % result["path"]
    if result.get("stale"):
        return "check mode: the lock %s is stale (%s) and a real run would break it" % (
            describe(h), result.get("reason"))
    return "another gpufleet run holds the lock %s %s: %s; held for %ss%s" % (
        result["path"], describe(h), result.get("reason") or "alive", result.get("age"),
        (", waited %ss" % result["waited"]) if result.get("waited") else "")


def release(path, run_id, check=False):
    exists, holder, dummy = read_lock(path)
    ours = exists and (holder.get("run_id") or "") == run_id
    if check or not ours:
        return {"released": False, "ours": bool(ours), "held": exists, "holder": holder, "check": bool(check)}
    removed = _remove(path, run_id)
    return {"released": removed, "ours": True, "held": not removed, "holder": holder, "check": False}
