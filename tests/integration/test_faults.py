"""Faults injected into deploy.yml and rollback.yml runs on the sandbox, each
bounded in count and time, and what every host is left with, read on the
host itself (the stable path's target, imports through it, listings, the
host lock).

One fleet state for the module: a baseline deploy of sbx1 (stable path
~/ml-env) and sbx2 (stable path on a small tmpfs), then, in order:

- a full disk on sbx2: preflight refuses naming free and needed space; with
  the check lowered the torch install fails, the active venv is intact and
  the half-built venv is removed by the next run;
- a build that fails (a patch rule that does not compile, on a new pin) on
  sbx1: the previous sgl-kernel stays in the active venv and imports;
- a corrupt (truncated) wheel in the wheelhouse on the same pin: the active
  venv is intact and verifies, the half-built venv of the failed build was
  built again rather than reused;
- ansible-playbook killed during the torch install: the active venv is intact
  and verifies, the killed run's lock is left behind;
- concurrent runs: the next deploy breaks that stale lock, rebuilds the half
  venv and activates it, while a second deploy is refused naming it and a
  rollback waits for it and only then rolls back;
- a lock held by another controller: refused (check mode too, which leaves
  it), broken by age and by the override.

A host stopped in the middle of a deploy (the others finish, the next run
converges it) is test_fleet.py::test_unreachable_host_mid_run_then_converges.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from conftest import ROOT, base_env, parse_recap, venv_bin

HOST, DISK_HOST = "sbx1", "sbx2"
DEPLOY = os.path.join(ROOT, "playbooks", "deploy.yml")
VERIFY = os.path.join(ROOT, "playbooks", "verify.yml")
ROLLBACK = os.path.join(ROOT, "playbooks", "rollback.yml")
WHEELHOUSE = os.path.join(ROOT, ".cache", "wheelhouse")
SMALL = "/srv/gpufleet-small"
HOME = "/home/deploy"
LOCK = "/var/lock/gpufleet"
# Another flashinfer pin of the fixture wheelhouse: another venv.
NEW_PIN = {"flashinfer_version": "0.6.0.dev20260310"}
# Output as it happens: the tests act on task headers as they appear.
ENV = base_env({"PYTHONUNBUFFERED": "1"})
IMPORTS = ("import torch, flashinfer, sgl_kernel; x = torch.ones(3); "
           "print(flashinfer.__version__, sgl_kernel.scale_add(x, x, 2.0).tolist())")


def container(host):
    """The podman container of a sandbox host (scripts/sandbox.py names them)."""
    with open(os.path.join(ROOT, "inventories", "sandbox", "hosts.yml"), encoding="utf-8") as fh:
        text = fh.read()
    m = re.search(r"^\s+%s:\n(?:\s+\w+: .*\n)*?\s+gpufleet_sandbox_container: (\S+)" % host, text, re.M)
    assert m, "no container for %s in the sandbox inventory" % host
    return m.group(1)


def on_host(host, script, user="deploy", check=True):
    """Run a shell script on the host (podman exec: no SSH round trip); stdout."""
    proc = subprocess.run(["podman", "exec", "--user", user, "--workdir", "/", container(host), "sh", "-c", script],
                          capture_output=True, text=True, timeout=300, check=False)
    if check:
        assert proc.returncode == 0, "%s on %s: rc=%d\n%s%s" % (script, host, proc.returncode, proc.stdout, proc.stderr)
    return proc.stdout.strip()


def link_state(host, link):
    """Target of the stable path, the activation history, the venvs and marks beside it."""
    d, name = os.path.dirname(link), os.path.basename(link)
    out = on_host(host, "readlink %s || echo NONE; echo @@; cat %s/.%s.history 2>/dev/null; echo @@; "
                        "cd %s && ls -d %s-* .%s-*.incomplete 2>/dev/null | sort; true" % (link, d, name, d, name, name))
    target, history, listing = (out + "\n").split("@@\n")
    return {"target": target.strip(), "history": history.split(), "listing": listing.split()}


def venv_tree(host, link):
    """sha256 of the venv behind the stable path: every folder, every file with
    its size and mtime (bytecode caches left out). Equal: not changed in place."""
    return on_host(host, "cd %s/ && find . -path '*/__pycache__' -prune -o -type d -printf '%%p/\\n' "
                         "-o -printf '%%p %%s %%T@\\n' | sort | sha256sum" % link)


def imports(host, link):
    return on_host(host, "%s/bin/python -c '%s' 2>/dev/null" % (link, IMPORTS))


def host_lock(host):
    """The holder record of the host lock, or None when there is no lock."""
    out = on_host(host, "cat %s/holder.json 2>/dev/null || echo NONE" % LOCK, user="root")
    return None if out == "NONE" else json.loads(out)


def fake_lock(host, age_s=0, pid=4242):
    """A lock held by a run of another controller (unknown boot), age_s old."""
    holder = {"run_id": "0ther" * 6 + "00", "controller": {"hostname": "elsewhere", "machine_id": "f" * 32,
              "boot_id": "other-boot", "pid_ns": "pid:[1]"}, "pid": pid, "pid_start": 1, "user": "ops",
              "playbook": "deploy.yml", "started": "2026-03-08T12:00:00Z"}
    on_host(host, "rm -rf {l} && mkdir -p {l} && printf '%s\\n' '{h}' > {l}/holder.json && touch -d '-{a} seconds' {l}/holder.json"
            .format(l=LOCK, h=json.dumps(holder), a=age_s), user="root")
    return holder


def argv(fleet, playbook, extra=None, limit=None, label="run", check=False):
    report_dir = os.path.join(fleet["tmp"], "reports-%s-%d" % (label, len(fleet["runs"])))
    fleet["runs"].append(label)
    variables = {"gpufleet_report_dir": report_dir, "gpufleet_freeze_dir": fleet["freezes"]}
    variables.update(extra or {})
    cmd = [venv_bin("ansible-playbook"), "-i", fleet["inventory"], playbook, "-e", json.dumps(variables)]
    if limit:
        cmd += ["--limit", limit]
    if check:
        cmd.append("--check")
    return cmd, report_dir


def play(fleet, playbook, extra=None, limit=HOST, label="run", check=False):
    cmd, report_dir = argv(fleet, playbook, extra, limit, label, check)
    t0 = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=900, check=False)
    fleet["times"].append((label, round(time.time() - t0, 1)))
    out = proc.stdout + proc.stderr
    return proc.returncode, out, parse_recap(out), report_dir


def start(fleet, playbook, extra=None, limit=HOST, label="run"):
    """A playbook run in the background, in its own process group, output to a log."""
    cmd, report_dir = argv(fleet, playbook, extra, limit, label)
    log = report_dir + ".log"
    fh = open(log, "w", encoding="utf-8")  # pylint: disable=consider-using-with
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=fh, stderr=subprocess.STDOUT,
                            start_new_session=True)
    return {"proc": proc, "log": log, "fh": fh, "report_dir": report_dir, "t0": time.time(), "label": label}


def kill(*runs):
    for run in runs:
        if run and run["proc"].poll() is None:
            os.killpg(run["proc"].pid, signal.SIGKILL)


def output(run):
    with open(run["log"], encoding="utf-8") as fh:
        return fh.read()


def wait_for(run, text, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline and run["proc"].poll() is None:
        if text in output(run):
            return
        time.sleep(0.3)
    raise AssertionError("%r did not appear (rc=%s):\n%s" % (text, run["proc"].poll(), output(run)[-4000:]))


def finish(fleet, run, timeout=900):
    rc = run["proc"].wait(timeout=timeout)
    run["fh"].close()
    fleet["times"].append((run["label"], round(time.time() - run["t0"], 1)))
    out = output(run)
    return rc, out, parse_recap(out)


def flat(text):
    """Output with every run of white space as one space (results are wrapped)."""
    return " ".join(text.split())


def row(report_dir, host):
    with open(os.path.join(report_dir, "fleet-report.json"), encoding="utf-8") as fh:
        return {r["host"]: r for r in json.load(fh)["hosts"]}[host]


@pytest.fixture(scope="module")
def fleet(sandbox, sandbox_ctl, tmp_path_factory):
    inventory = sandbox(3)
    tmp = tmp_path_factory.mktemp("faults")
    # The sandbox inventory, with sbx2's stable path on a small filesystem.
    inv = tmp / "inventory"
    inv.mkdir()
    shutil.copy(os.path.join(inventory, "hosts.yml"), inv / "hosts.yml")
    shutil.copytree(os.path.join(inventory, "group_vars"), inv / "group_vars")
    (inv / "host_vars").mkdir()
    (inv / "host_vars" / ("%s.yml" % DISK_HOST)).write_text(
        "gpufleet_venv_link: %s/ml-env\n# the baseline venv (~0.8 GiB) fits, a second one does not\n"
        "gpufleet_min_free_gib: 1\n" % SMALL, encoding="utf-8")
    state = {"inventory": str(inv), "tmp": str(tmp), "freezes": str(tmp / "freezes"), "runs": [], "times": [],
             "t0": time.time()}

    def unlock():
        for h in (HOST, DISK_HOST):
            on_host(h, "rm -rf {l} {l}.*".format(l=LOCK), user="root")
    unlock()
    for h in (HOST, DISK_HOST):
        on_host(h, "rm -rf ~/ml-env ~/ml-env-* ~/.ml-env.history ~/.ml-env-*.incomplete")
    sandbox_ctl("tmpfs", DISK_HOST, SMALL, "1500m")
    try:
        on_host(DISK_HOST, "rm -rf %s/ml-env %s/ml-env-* %s/.ml-env*" % (SMALL, SMALL, SMALL))
        rc, out, stats, report_dir = play(state, DEPLOY, limit="%s,%s" % (HOST, DISK_HOST), label="baseline")
        assert rc == 0, out[-6000:]
        assert stats[HOST]["failed"] == 0 and stats[DISK_HOST]["failed"] == 0, stats
        for h, link in ((HOST, HOME + "/ml-env"), (DISK_HOST, SMALL + "/ml-env")):
            r, s = row(report_dir, h), link_state(h, link)
            assert r["status"] == "ok" and r["activated"] and s["target"] == r["venv"] == r["active_venv"], (r, s)
            assert s["listing"] == [os.path.basename(r["venv"])], s  # no mark: the venv is complete
            assert host_lock(h) is None  # released
            state[h] = r["venv"]
        yield state
    finally:
        print("\nfault test runs (s): %s; module %.0f s" % (state["times"], time.time() - state["t0"]))
        sandbox_ctl("tmpfs", DISK_HOST, SMALL, "off")
        unlock()


def test_full_disk_is_refused_then_fails_the_install_and_leaves_the_active_venv(fleet, sandbox_ctl):
    link = SMALL + "/ml-env"
    before, tree = link_state(DISK_HOST, link), venv_tree(DISK_HOST, link)
    # ~100 MiB left on the venvs' filesystem
    used_k = int(on_host(DISK_HOST, "df -Pk %s | tail -n 1" % SMALL).split()[2])
    sandbox_ctl("tmpfs", DISK_HOST, SMALL, "%dk" % (used_k + 100 * 1024))

    rc, out, stats, report_dir = play(fleet, DEPLOY, NEW_PIN, limit=DISK_HOST, label="disk-preflight")
    assert rc != 0 and stats[DISK_HOST]["failed"] == 1, out[-4000:]
    m = re.search(r"not enough room on %s: ([0-9.]+) GiB free in %s, a new venv and a build need 1(\.0)? GiB"
                  % (DISK_HOST, SMALL), flat(out))
    assert m and float(m.group(1)) <= 0.2, out[-4000:]
    assert row(report_dir, DISK_HOST)["stage"] == "preflight"
    assert link_state(DISK_HOST, link) == before  # nothing was changed
    assert host_lock(DISK_HOST) is None  # released on the failure path

    # The check lowered: the install runs into the full disk.
    rc, out, stats, report_dir = play(fleet, DEPLOY, dict(NEW_PIN, gpufleet_min_free_gib=0), limit=DISK_HOST,
                                      label="disk-full")
    assert rc != 0 and stats[DISK_HOST]["failed"] == 1, out[-4000:]
    r = row(report_dir, DISK_HOST)
    assert r["status"] == "failed" and r["stage"] == "torch", r
    assert "No space left on device" in flat(out) or "os error 28" in out, out[-4000:]
    assert r["venv"] != fleet[DISK_HOST] and r["venv"].startswith(SMALL + "/ml-env-"), r
    # the active venv is intact and imports; the half-built one was removed by the failing
    # run (with its mark), which gave the space back
    assert link_state(DISK_HOST, link) == before and venv_tree(DISK_HOST, link) == tree
    assert imports(DISK_HOST, link) == "0.6.0.dev20260307 [3.0, 3.0, 3.0]"
    free_k = int(on_host(DISK_HOST, "df -Pk %s | tail -n 1" % SMALL).split()[3])
    assert free_k > 90 * 1024, free_k


# A patch that breaks the compile of every source (a missing header is a
# fatal error: the compiler stops at once).
BREAK_THE_BUILD = {
    "name": "fault-test-does-not-compile",
    "file": "csrc/sgl_kernel_ops.h",
    "reason": "fault test: a patch that breaks the compile",
    "pattern": "#pragma once",
    "insert_after": '#include "gpufleet_fault_test_missing.h"',
}


def test_failed_build_keeps_the_previous_sgl_kernel(fleet):
    # The pins are those of the active venv, but a patch rule is part of the
    # venv's name (deploy.yml): the build that fails is for a new venv, and the
    # active one, with its sgl-kernel, is not touched.
    link = HOME + "/ml-env"
    before, tree = link_state(HOST, link), venv_tree(HOST, link)
    marker = on_host(HOST, "cat ~/ml-env/gpufleet-sgl_kernel.json")
    rc, out, stats, report_dir = play(fleet, DEPLOY, {"sgl_kernel_patch_rules_extra": [BREAK_THE_BUILD]},
                                      label="build-fails")
    assert rc != 0 and stats[HOST]["failed"] == 1, out[-4000:]
    r = row(report_dir, HOST)
    assert r["status"] == "failed" and r["stage"] == "sgl_kernel" and r["venv"] != fleet[HOST], r
    assert re.search(r"sgl_kernel build of ABI key \w+ failed on %s" % HOST, flat(out)), out[-4000:]
    assert "gpufleet_fault_test_missing.h: No such file or directory" in flat(out)  # the build log's tail
    # the active venv: same files, the previous build with its key marker, and it imports;
    # the new venv, half built, was removed by the failing run
    assert venv_tree(HOST, link) == tree
    assert on_host(HOST, "cat ~/ml-env/gpufleet-sgl_kernel.json") == marker
    assert link_state(HOST, link) == before
    assert imports(HOST, link) == "0.6.0.dev20260307 [3.0, 3.0, 3.0]"


def corrupt_wheelhouse(tmp):
    """A copy of the wheelhouse (links) with the new pin's flashinfer_python wheel cut in half."""
    dest = os.path.join(tmp, "wheelhouse-corrupt")
    os.makedirs(dest)
    cut = None
    for name in sorted(os.listdir(WHEELHOUSE)):
        src = os.path.join(WHEELHOUSE, name)
        if name.startswith("flashinfer_python-%s-" % NEW_PIN["flashinfer_version"]):
            with open(src, "rb") as fh:
                data = fh.read()
            with open(os.path.join(dest, name), "wb") as fh:
                fh.write(data[: len(data) // 2])
            cut = name
        elif os.path.isfile(src):
            os.link(src, os.path.join(dest, name))
    assert cut, "no flashinfer_python %s wheel in %s" % (NEW_PIN["flashinfer_version"], WHEELHOUSE)
    return dest, cut


def test_corrupt_wheel_fails_the_install_and_the_active_venv_still_verifies(fleet):
    link = HOME + "/ml-env"
    before, tree = link_state(HOST, link), venv_tree(HOST, link)
    wheelhouse, cut = corrupt_wheelhouse(fleet["tmp"])
    rc, out, stats, report_dir = play(fleet, DEPLOY, dict(NEW_PIN, gpufleet_wheelhouse=wheelhouse), label="corrupt-wheel")
    assert rc != 0 and stats[HOST]["failed"] == 1, out[-4000:]
    r = row(report_dir, HOST)
    assert r["status"] == "failed" and r["stage"] == "flashinfer" and r["venv"] != fleet[HOST], r
    fleet["half"] = r["venv"]
    assert cut in flat(out), out[-4000:]
    assert "Install | Install torch==2.13.0+cpu" in out  # torch went into the new venv first
    # the active venv is untouched; the half-built one was removed by the failing run
    assert link_state(HOST, link) == before and venv_tree(HOST, link) == tree

    rc, out, stats, report_dir = play(fleet, VERIFY, label="corrupt-wheel-verify")
    assert rc == 0, out[-4000:]
    v = row(report_dir, HOST)
    assert v["status"] == "ok" and v["venv"] == fleet[HOST] and v["flashinfer_version"] == "0.6.0.dev20260307", v


# On the host: wait for the uv process of the torch install (pattern $1), let
# it work for a moment and freeze it (SIGSTOP) half way; print its pid.
FREEZE_INSTALL = """
end=$(( $(date +%s) + 120 ))
while [ "$(date +%s)" -lt "$end" ]; do
    pid=$(pgrep -f "$1" | head -n 1)
    if [ -n "$pid" ]; then
        sleep 0.2
        if kill -STOP "$pid"; then echo "frozen $pid"; else echo "finished $pid"; fi
        exit 0
    fi
    sleep 0.01
done
echo "not seen"
"""


def test_killed_during_the_torch_install(fleet):
    link, half = HOME + "/ml-env", fleet["half"]
    before, tree = link_state(HOST, link), venv_tree(HOST, link)
    # A cold uv cache: the install unpacks the torch wheel instead of linking it.
    on_host(HOST, "rm -rf ~/.cache/uv")
    # ([p]: the pattern does not match the shell that runs pgrep)
    install = "[p]ip install --python %s/bin/python --prerelease allow" % half
    run, uv_pid = start(fleet, DEPLOY, NEW_PIN, label="killed"), ""
    try:
        wait_for(run, "TASK [gpufleet.inference.fleet : Stage torch]")
        freeze = subprocess.run(["podman", "exec", container(HOST), "sh", "-c", FREEZE_INSTALL, "sh", install],
                                capture_output=True, text=True, timeout=180, check=False)
        what, dummy, uv_pid = freeze.stdout.strip().partition(" ")
        assert what == "frozen", (freeze.stdout, freeze.stderr, output(run)[-3000:])
        # the controller waits for the torch install task: kill the run, all of its processes
        os.killpg(run["proc"].pid, signal.SIGKILL)
    finally:
        kill(run)
        finish(fleet, run, timeout=60)
        # and the install it left on the host, as the loss of the host's session would
        if uv_pid:
            on_host(HOST, "kill -9 %s" % uv_pid, user="root", check=False)
    # killed inside that task: the task before it finished, it never returned (a task's
    # banner is written with its first result)
    log = output(run)
    assert "Install | Read the plan" in log and "Install | Install torch==" not in log, log[-3000:]
    fleet["killed_pid"] = run["proc"].pid
    lock = host_lock(HOST)
    assert lock and lock["pid"] == run["proc"].pid and lock["playbook"] == "deploy.yml", lock  # left behind
    after = link_state(HOST, link)
    assert after["target"] == fleet[HOST] and after["history"] == before["history"] and venv_tree(HOST, link) == tree
    # the half-built venv stays, marked, until the next run
    assert os.path.basename(half) in after["listing"] and ".%s.incomplete" % os.path.basename(half) in after["listing"]
    on_host(HOST, "touch %s/fault-test-sentinel" % half)

    # verify.yml takes no lock: the active venv verifies while the killed run's lock is there
    rc, out, stats, report_dir = play(fleet, VERIFY, label="killed-verify")
    assert rc == 0, out[-4000:]
    v = row(report_dir, HOST)
    assert v["status"] == "ok" and v["venv"] == fleet[HOST], v
    assert imports(HOST, link) == "0.6.0.dev20260307 [3.0, 3.0, 3.0]"


def test_concurrent_runs_never_interleave(fleet):
    link, half, killed = HOME + "/ml-env", fleet["half"], fleet["killed_pid"]
    # A: the next deploy of the new pin; it breaks the killed run's lock
    a = start(fleet, DEPLOY, NEW_PIN, label="A-deploy")
    c = None
    try:
        wait_for(a, "TASK [gpufleet.inference.fleet : Stage preflight]")
        holder = host_lock(HOST)
        assert holder["pid"] == a["proc"].pid, holder
        # C: a rollback that waits for the lock; B: another deploy, refused at once
        c = start(fleet, ROLLBACK, {"gpufleet_host_lock_wait": 600}, label="C-rollback-waits")
        rc, out, stats, report_dir = play(fleet, DEPLOY, label="B-deploy-refused")
        assert a["proc"].poll() is None, "A finished before B was refused: nothing was concurrent"
        assert rc != 0 and stats[HOST]["failed"] == 1, out[-4000:]
        assert re.search(r"another gpufleet run holds the lock on %s since \S+ \(controller \S+, pid %d, "
                         r"playbook deploy\.yml, run %s\): its process %d is running on this controller"
                         % (HOST, a["proc"].pid, holder["run_id"][:12], a["proc"].pid), flat(out)), out[-4000:]
        assert "TASK [gpufleet.inference.fleet : Stage preflight]" not in out  # refused before any stage
        b = row(report_dir, HOST)
        assert b["status"] == "failed" and b["stage"] == "lock", b
        assert host_lock(HOST)["run_id"] == holder["run_id"]  # A still holds it
        rc, out, stats = finish(fleet, a)
        assert rc == 0, out[-4000:]
        assert re.search(r"broke the stale lock of the run since \S+ \(controller \S+, pid %d, playbook deploy\.yml, "
                         r"run \w+\): its ansible-playbook process %d is no longer running on this controller"
                         % (killed, killed), flat(out)), out[-4000:]
        r = row(a["report_dir"], HOST)
        assert r["status"] == "ok" and r["activated"] and r["venv"] == half, r
        assert r["flashinfer_version"] == "0.6.0.dev20260310", r
        # the half venv of the killed run was built again, not reused
        assert on_host(HOST, "test -e %s/fault-test-sentinel && echo kept || echo gone" % half) == "gone"
        rc, out, stats = finish(fleet, c)
    except BaseException:
        kill(a, c)
        raise
    assert rc == 0, out[-4000:]
    assert re.search(r"host lock %s taken by run \w+ after waiting [1-9][0-9]* s" % LOCK, flat(out)), out[-4000:]
    rb = row(c["report_dir"], HOST)
    # it rolled back from what A activated: it ran after A, never in between
    assert rb["status"] == "ok" and rb["active_venv"] == fleet[HOST], rb
    assert rb["flashinfer_version"] == "0.6.0.dev20260307", rb
    s = link_state(HOST, link)
    assert s["target"] == fleet[HOST] and s["history"] == [fleet[HOST]], s
    assert sorted(s["listing"]) == sorted([os.path.basename(fleet[HOST]), os.path.basename(half)]), s
    assert host_lock(HOST) is None
    assert imports(HOST, link) == "0.6.0.dev20260307 [3.0, 3.0, 3.0]"


def test_lock_of_another_controller_refuses_until_old_or_overridden(fleet):
    link = HOME + "/ml-env"
    before = link_state(HOST, link)
    holder = fake_lock(HOST)
    # check mode refuses too and leaves the lock as it was
    rc, out, stats, report_dir = play(fleet, DEPLOY, label="foreign-check", check=True)
    assert rc != 0, out[-4000:]
    assert ("another gpufleet run holds the lock on %s since 2026-03-08T12:00:00Z (controller elsewhere, pid 4242, "
            "playbook deploy.yml, run %s): held by another controller" % (HOST, holder["run_id"][:12])) in flat(out), out[-4000:]
    assert "gpufleet_host_lock_break=true" in flat(out)
    assert host_lock(HOST) == holder

    # older than gpufleet_host_lock_stale_after: broken (a rollback with nothing to roll back to,
    # which fails after taking the lock and still releases it)
    on_host(HOST, "touch -d '-7200 seconds' %s/holder.json" % LOCK, user="root")
    rc, out, stats, report_dir = play(fleet, ROLLBACK, {"gpufleet_host_lock_stale_after": 3600}, label="foreign-old")
    assert rc != 0, out[-4000:]
    assert re.search(r"broke the stale lock of the run since .*controller elsewhere, pid 4242.*: it is 7[0-9]{3}s old, "
                     r"more than gpufleet_host_lock_stale_after \(3600s\)", flat(out)), out[-4000:]
    assert "no previous venv to roll back to on %s" % HOST in flat(out)
    assert host_lock(HOST) is None

    # the override breaks a fresh one
    fake_lock(HOST)
    rc, out, stats, report_dir = play(fleet, ROLLBACK, {"gpufleet_host_lock_break": True}, label="foreign-override")
    assert rc != 0 and "no previous venv to roll back to on %s" % HOST in flat(out), out[-4000:]
    assert "the override gpufleet_host_lock_break is set" in flat(out)
    assert host_lock(HOST) is None
    assert link_state(HOST, link) == before
