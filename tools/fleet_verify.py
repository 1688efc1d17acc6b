#!/usr/bin/env python
"""Fleet re-verification as a program: the entry point for cron, CI and AWX-style automation.

Runs playbooks/verify.yml through ansible-runner's Python API (the engine AWX /
Automation Controller use), shows progress while hosts finish (done / total),
prints the summary table, writes the fleet report (./reports of the directory
it is started from by default, never inside the collection) and exits non-zero
when any host failed, drifted or could not be reached.

From a checkout (the controller venv of `make bootstrap`):

    .venv/bin/python tools/fleet_verify.py -i inventories/cluster
    .venv/bin/python tools/fleet_verify.py -i inventories/sandbox --limit sbx1 --no-smoke
    .venv/bin/python tools/fleet_verify.py -i inventories/cluster --mode in_service   # a serving fleet, no GPU time

From an installed collection (ansible-galaxy collection install), with the
Python that has ansible-core and ansible-runner:

    cd ~/fleet && python ~/.ansible/collections/ansible_collections/gpufleet/inference/tools/fleet_verify.py -i inventory

In the execution environment image (`make ee`), as AWX runs it: ansible-runner
starts ansible-playbook in a container of IMAGE, with the working directory,
the inventories, the report folder and the ansible.cfg in use mounted at
their own paths; the collection is the image's own copy:

    .venv/bin/python tools/fleet_verify.py --ee localhost/gpufleet-ee:0.1.0 -i inventories/cluster

Exit status: 0 every host verified and unchanged; 1 a host failed, drifted,
was busy in a full run, was unreachable or was not run; 2 the run itself broke (bad inventory, no
report written).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A checkout carries .collections (ansible.cfg's collections_path, a link back
# to the checkout) and its own ansible.cfg; an installed collection lies at
# <collections path>/ansible_collections/gpufleet/inference and runs with the
# operator's own configuration.
CHECKOUT = os.path.isdir(os.path.join(ROOT, ".collections"))
COLLECTIONS_PATH = (os.path.join(ROOT, ".collections") if CHECKOUT
                    else os.path.dirname(os.path.dirname(os.path.dirname(ROOT))))
# this copy of the collection first, before any other on the interpreter's path
sys.path.insert(0, COLLECTIONS_PATH)
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report.format import summary_table  # noqa: E402
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report.store import REPORT_BASENAME  # noqa: E402

# A host is done when the fleet report has judged it: the report's task
# (roles/fleet/tasks/report.yml, once per play or serial batch) returns each
# host's verdict (fail or not) in its result, and the finish only acts on it;
# a host that passed with nothing to put in place has no finish task at all
# (a meta task ends it). The finish task's own result counts too, for a host
# the report left out, and so does a lost connection. The hosts of the run
# are those with an event in the verification play (its first task runs on
# every host before the second starts).
REPORT_PREFIX = "Report | Write the fleet report"
FINISH_TASK = "Finish | Put the host's metrics in place"
VERIFY_PLAY = "Verify the fleet"


class Progress:
    """Counts hosts as they finish, from ansible-runner's event stream."""

    def __init__(self, stream, quiet=False):
        self.stream = stream
        self.quiet = quiet
        self.hosts = set()
        self.done = {}
        self.lock = threading.Lock()
        self.started = time.monotonic()

    def _print(self, host, how):
        if not self.quiet:
            total = len(self.hosts) or "?"
            self.stream.write("[%6.1fs] %d/%s hosts done  %-20s %s\n"
                              % (time.monotonic() - self.started, len(self.done), total, host, how))
            self.stream.flush()

    def _finish(self, host, how):
        if host not in self.done:
            self.done[host] = how
            self._print(host, how)

    def __call__(self, event):
        data = event.get("event_data") or {}
        host = data.get("host")
        kind = event.get("event") or ""
        if not host:
            return True
        with self.lock:
            # a role's task may come as "<role> : <name>"
            task = (data.get("task") or "").split(" : ", 1)[-1]
            if data.get("play") == VERIFY_PLAY and kind.startswith("runner_on_"):
                self.hosts.add(host)
            if kind == "runner_on_unreachable":
                self._finish(host, "unreachable")
            elif task.startswith(REPORT_PREFIX) and kind == "runner_on_ok":
                verdicts = (data.get("res") or {}).get("finish") or {}
                for name in sorted(set(verdicts) & self.hosts):
                    entry = verdicts[name] if isinstance(verdicts[name], dict) else {}
                    self._finish(name, "not ok" if entry.get("fail", True) else "ok")
            elif task.startswith(FINISH_TASK) and kind in ("runner_on_ok", "runner_on_failed"):
                self._finish(host, "ok" if kind == "runner_on_ok" else "not ok")
        return True


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-i", "--inventory", action="append", required=True,
                   help="inventory path (repeatable), e.g. inventories/cluster")
    p.add_argument("-l", "--limit", help="host pattern to limit the run to")
    p.add_argument("-e", "--extra-vars", action="append", default=[],
                   help="extra variables: key=value or a JSON object (repeatable)")
    p.add_argument("--report-dir", default="reports",
                   help="where the fleet report, its history and the freeze baselines go; relative to the "
                        "working directory (default: %(default)s)")
    p.add_argument("--no-smoke", action="store_true", help="skip the GPU smoke test (gpufleet_verify_smoke=false)")
    p.add_argument("--mode", choices=("auto", "in_service", "full"),
                   help="how deep (gpufleet_verify_mode): auto runs the numeric checks on idle GPUs only, in_service "
                        "spends no GPU time, full runs them on every GPU and refuses a busy host (default: the "
                        "inventory's, else auto)")
    p.add_argument("--forks", type=int, default=0, help="parallel hosts (default: ansible.cfg)")
    p.add_argument("--check", action="store_true", help="run under --check (verify.yml is read-only either way)")
    p.add_argument("--json", action="store_true", help="print the report's JSON summary instead of the table")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.add_argument("--ee", metavar="IMAGE",
                   help="run ansible-playbook in this execution environment image (ansible-runner's container mode)")
    p.add_argument("--ee-engine", default="podman", help="the container engine for --ee (default podman)")
    p.add_argument("--ee-option", action="append", default=[], metavar="OPTION",
                   help="an option for the engine's run, e.g. --ee-option=--network=host (repeatable)")
    p.add_argument("--ee-mount", action="append", default=[], metavar="PATH",
                   help="one more host path the container sees at the same path, e.g. the ssh key's folder (repeatable)")
    args = p.parse_args(argv)
    if (args.ee_option or args.ee_mount) and not args.ee:
        p.error("--ee-option and --ee-mount need --ee IMAGE")
    return args


# Where ansible-builder installs the collections of an execution environment.
EE_COLLECTIONS_PATH = "/usr/share/ansible/collections"


def ee_user_options(engine, uid=None):
    """Run the container as this user, who owns the working directory, the
    report folder and the ssh key (an ansible-builder image runs as uid 1000
    otherwise): rootful podman and docker take the uid; rootless podman maps
    this user into the container with keep-id."""
    uid = os.getuid() if uid is None else uid
    if "podman" in os.path.basename(engine) and uid != 0:
        return ["--userns=keep-id"]
    return ["--user=%d" % uid]


def ee_settings(args, envvars, paths):
    """ansible-runner's container-mode arguments for --ee: the working
    directory (its ansible.cfg, relative paths) mounted as the container's,
    and every other path the run reads or writes at its own path. The image's
    collection is used, whatever a mounted ansible.cfg's collections_path says."""
    cwd = os.getcwd()
    mounts = []
    for path in [p for p in paths if p] + [os.path.abspath(os.path.expanduser(m)) for m in args.ee_mount]:
        if not os.path.exists(path):
            raise SystemExit("fleet_verify: --ee: %s does not exist" % path)
        path = os.path.realpath(path)
        if path != cwd and not path.startswith(cwd + os.sep) and not any(
                path == m or path.startswith(m + os.sep) for m in mounts):
            mounts.append(path)
    ee_env = {"ANSIBLE_FORCE_COLOR": "false", "ANSIBLE_COLLECTIONS_PATH": EE_COLLECTIONS_PATH}
    options = list(args.ee_option)
    if not any(o.split("=")[0] in ("--user", "-u", "--userns") for o in options):
        options = ee_user_options(args.ee_engine) + options
    if envvars.get("ANSIBLE_CONFIG"):
        ee_env["ANSIBLE_CONFIG"] = envvars["ANSIBLE_CONFIG"]
    return dict(process_isolation=True, process_isolation_executable=args.ee_engine, container_image=args.ee,
                container_options=options or None, host_cwd=cwd, project_dir=cwd,
                container_volume_mounts=["%s:%s:Z" % (m, m) for m in mounts] or None,
                playbook="gpufleet.inference.verify", envvars=ee_env)


def extra_vars(args):
    out = {}
    for item in args.extra_vars:
        item = item.strip()
        if item.startswith("{"):
            out.update(json.loads(item))
        elif "=" in item:
            k, v = item.split("=", 1)
            out[k] = v
        else:
            raise SystemExit("fleet_verify: -e %r is neither key=value nor a JSON object" % item)
    out["gpufleet_report_dir"] = os.path.abspath(args.report_dir)
    if args.no_smoke:
        out["gpufleet_verify_smoke"] = False
    if args.mode:
        out["gpufleet_verify_mode"] = args.mode
    return out


def run(args, out=sys.stdout, err=sys.stderr):
    try:
        import ansible_runner  # pylint: disable=import-outside-toplevel
    except ImportError:
        err.write("fleet_verify: ansible-runner is not installed in %s (make bootstrap installs it)\n" % sys.executable)
        return 2
    inventories = [os.path.abspath(i) for i in args.inventory]
    for inv in inventories:
        if not os.path.exists(inv):
            err.write("fleet_verify: inventory %s does not exist\n" % inv)
            return 2
    report_json = os.path.join(os.path.abspath(args.report_dir), REPORT_BASENAME + ".json")
    before = os.path.getmtime(report_json) if os.path.exists(report_json) else None

    # the first inventory is ansible-runner's own (on the host); in a container
    # every inventory goes on the command line (below)
    extra_inventories = ["-i %s" % shlex.quote(inv) for inv in inventories[1:]]
    flags = ["--check"] if args.check else []
    # ansible-playbook must be the one next to this interpreter (the project venv).
    bindir = os.path.dirname(sys.executable)
    envvars = {
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
        "ANSIBLE_FORCE_COLOR": "false",
    }
    if CHECKOUT:
        envvars["ANSIBLE_CONFIG"] = os.path.join(ROOT, "ansible.cfg")
        project_dir = ROOT
    else:
        # the operator's ansible.cfg (ANSIBLE_CONFIG, or the one in the working
        # directory) and this collection found first, whatever their path says
        project_dir = os.getcwd()
        paths = os.environ.get("ANSIBLE_COLLECTIONS_PATH", "")
        envvars["ANSIBLE_COLLECTIONS_PATH"] = COLLECTIONS_PATH + (os.pathsep + paths if paths else "")
        if os.environ.get("ANSIBLE_CONFIG"):
            envvars["ANSIBLE_CONFIG"] = os.environ["ANSIBLE_CONFIG"]
        elif os.path.exists("ansible.cfg"):
            envvars["ANSIBLE_CONFIG"] = os.path.abspath("ansible.cfg")
    progress = Progress(err, quiet=args.quiet)
    private = tempfile.mkdtemp(prefix="gpufleet-runner-")
    try:
        kwargs = dict(
            private_data_dir=private,
            project_dir=project_dir,
            playbook=os.path.join(ROOT, "playbooks", "verify.yml"),
            inventory=inventories[0],
            extravars=extra_vars(args),
            envvars=envvars,
            cmdline=" ".join(extra_inventories + flags) or None,
            event_handler=progress,
            quiet=True,
            suppress_env_files=True,
        )
        if args.limit:
            kwargs["limit"] = args.limit
        if args.forks:
            kwargs["forks"] = args.forks
        if args.ee:
            report_dir = os.path.abspath(args.report_dir)
            os.makedirs(report_dir, exist_ok=True)
            kwargs.update(ee_settings(args, envvars, [report_dir] + [os.path.dirname(i) for i in inventories]
                                      + [os.path.dirname(envvars.get("ANSIBLE_CONFIG") or "")]))
            # In a container, ansible-runner reads the inventory of its private
            # folder (/runner/inventory, as AWX fills it): left empty, and the
            # inventories given on the command line, at their own paths.
            os.mkdir(os.path.join(private, "inventory"))
            del kwargs["inventory"]
            kwargs["cmdline"] = " ".join(["-i %s" % shlex.quote(inventories[0])] + extra_inventories + flags)
        old_path = os.environ.get("PATH", "")
        os.environ["PATH"] = envvars["PATH"]
        try:
            result = ansible_runner.run(**kwargs)
        finally:
            os.environ["PATH"] = old_path
        stdout_tail = ""
        try:
            stdout_tail = result.stdout.read()[-4000:]
            stats = result.stats or {}
        except Exception:  # pylint: disable=broad-except  # no events: the run never started
            stats = {}
    finally:
        shutil.rmtree(private, ignore_errors=True)

    report = None
    if os.path.exists(report_json) and os.path.getmtime(report_json) != before:
        with open(report_json, encoding="utf-8") as fh:
            report = json.load(fh)
    if report is None:
        err.write("fleet_verify: the run wrote no report (ansible-runner status %s, rc %s); last output:\n%s\n"
                  % (result.status, result.rc, stdout_tail))
        return 2

    if args.json:
        out.write(json.dumps({"healthy": report["healthy"], "counts": report["counts"],
                              "hosts": {r["host"]: {"status": r["status"], "drift": r["drift"]} for r in report["hosts"]},
                              "runner": {"status": result.status, "rc": result.rc}}, sort_keys=True) + "\n")
    else:
        out.write(summary_table(report) + "\n")
        for kind in ("md", "html", "json"):
            out.write("report: %s\n" % os.path.join(os.path.abspath(args.report_dir), "%s.%s" % (REPORT_BASENAME, kind)))
    # Hosts the report could not see (e.g. a runner-level failure) still count.
    unreachable = sorted((stats.get("dark") or {}).keys())
    healthy = report["healthy"] and not unreachable
    if healthy and result.rc not in (0, None):
        err.write("fleet_verify: ansible-playbook ended with rc %s although every host passed; last output:\n%s\n"
                  % (result.rc, stdout_tail))
        return 2
    return 0 if healthy else 1


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
