#!/usr/bin/env python
"""The host lock of deploy.yml and rollback.yml: one run at a time per host.

Runs on both sides, with no dependency beyond the standard library (the host
side must work with the host's python3, 3.6 or later):

    gpufleet_hostlock.py whoami --playbook deploy.yml
        On the controller: this run's holder record (a new run id, the
        controller, the pid and start time of the ansible-playbook process)
        and a snapshot of the controller's running ansible processes, as JSON.
    gpufleet_hostlock.py acquire --path P --holder JSON --live JSON
                                 [--stale-after S] [--wait S] [--force] [--check]
        On the host (as root): take the lock P, a directory holding
        holder.json. It is created under a temporary name and renamed into
        place, so it never exists without its holder record, and two runs can
        never both take it (rename(2) onto a non-empty directory fails).
    gpufleet_hostlock.py release --path P --run-id ID [--check]
        On the host: remove the lock if, and only if, run ID holds it.

Both host commands print one JSON object and exit 0; a non-zero exit is an
error of the command itself (bad arguments, no permission).

A held lock is broken (renamed aside, then removed) when it is stale:
  - its holder ran on this very controller (same boot and pid namespace) and
    its ansible-playbook process is gone (a killed run);
  - or it is older than --stale-after seconds (0: never by age);
  - or --force is given (the operator's override).
Otherwise the holder is alive or cannot be checked (another controller), and
acquire reports it. With --check nothing is created, broken or removed.
"""

import argparse
import datetime
import errno
import json
import os
import shutil
import socket
import sys
import time
import uuid

HOLDER = "holder.json"
POLL_S = 2.0


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


def _ticks_now():
    try:
        uptime = float(_read("/proc/uptime").split()[0])
        return int(uptime * os.sysconf("SC_CLK_TCK"))
    except (IndexError, ValueError, OSError, AttributeError):
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


def whoami(playbook, now=None):
    pid = playbook_process(os.getppid())
    st = _stat(pid) if pid else None
    ident = controller_identity()
    try:
        import getpass  # pylint: disable=import-outside-toplevel
        user = getpass.getuser()
    except (ImportError, KeyError, OSError):
        user = ""
    holder = {
        "run_id": uuid.uuid4().hex,
        "controller": ident,
        "pid": pid,
        "pid_start": st[1] if st else None,
        "user": user,
        "playbook": playbook,
        "started": _iso(now if now is not None else time.time()),
    }
    live = {"boot_id": ident["boot_id"], "pid_ns": ident["pid_ns"], "ticks_now": _ticks_now(),
            "pids": live_processes()}
    return {"holder": holder, "live": live}


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
    if parent and not os.path.isdir(parent):
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


# ---------------------------------------------------------------- CLI

def _json_arg(text):
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError("not JSON: %s" % exc)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def main(argv=None):
    p = argparse.ArgumentParser(prog="gpufleet_hostlock", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd")
    w = sub.add_parser("whoami")
    w.add_argument("--playbook", default="")
    a = sub.add_parser("acquire")
    a.add_argument("--path", required=True)
    a.add_argument("--holder", required=True, type=_json_arg)
    a.add_argument("--live", type=_json_arg, default={})
    a.add_argument("--stale-after", type=int, default=0)
    a.add_argument("--wait", type=int, default=0)
    a.add_argument("--force", action="store_true")
    a.add_argument("--check", action="store_true")
    r = sub.add_parser("release")
    r.add_argument("--path", required=True)
    r.add_argument("--run-id", required=True)
    r.add_argument("--check", action="store_true")
    args = p.parse_args(argv)
    if args.cmd == "whoami":
        out = whoami(args.playbook)
    elif args.cmd in ("acquire", "release") and not os.path.isabs(args.path):
        p.error("--path must be absolute (got %r)" % args.path)
    elif args.cmd == "acquire":
        if not args.holder.get("run_id"):
            p.error("--holder needs a run_id")
        out = acquire(args.path, args.holder, args.live, args.stale_after, args.wait, args.force, args.check)
    elif args.cmd == "release":
        out = release(args.path, args.run_id, args.check)
    else:
        p.print_usage(sys.stderr)
        return 2
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
