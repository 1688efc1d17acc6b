#!/usr/bin/env python
"""Where the controller's CPU goes in one fleet run: ansible-playbook under
cProfile (CPU time, time.process_time), in its main process and in every
worker it forks, then the figures put together.

    bench/fleet_profile.py [--hosts 64] [--playbook verify.yml] [--top 20] [-- EXTRA ANSIBLE ARGS]

It runs ansible-playbook in a child Python that profiles the main process
from start to exit and wraps ansible-core's WorkerProcess.run, so each
worker (one fork per host and task) writes its own profile and its own CPU
(user + system, and that of the ssh clients it waited for) before it exits.
The whole command's CPU is the operating system's accounting of the child
and all it waited for (os.wait4), as in bench/fleet_scale.py. Printed:

  * the split: main process, workers, the workers' ssh clients, the rest;
  * each part's CPU by kind of work, from the functions' own time: templating
    (ansible.template, jinja2), variables and inventory, the strategy and
    its result handling, callbacks, the connection plugin, forking, the
    collection's own code (its actions, the fleet report), serialisation;
  * the top functions by cumulative time, main process and workers apart.

The profiler slows Python code down (about 3x here: 56.5 s of CPU against
18.2 s with --no-profile at 64 hosts): read the shares,
not the absolute seconds, and take the absolute figures from fleet_scale.py.
The sandbox must be up with at least --hosts hosts carrying a stack
(bench/fleet_scale.py leaves it so). Profiles land in .cache/fleet-profile/.
"""
import argparse
import cProfile
import json
import os
import pstats
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INV = os.path.join(ROOT, "inventories", "sandbox")
WORK = os.path.join(ROOT, ".cache", "fleet-profile")
BIN = os.path.join(ROOT, ".venv", "bin")

# (kind, path fragments of the function's file); the first that matches wins
KINDS = (
    ("collection (actions, report)", ("ansible_collections/gpufleet", "/plugins/action/", "/plugins/plugin_utils/",
                                      "/plugins/filter/", "/plugins/module_utils/")),
    ("templating", ("ansible/template", "ansible/_internal/_templating", "/jinja2/")),
    ("variables, inventory", ("ansible/vars/", "ansible/inventory/", "ansible/utils/vars")),
    ("strategy, results", ("ansible/plugins/strategy", "ansible/executor/task_queue_manager",
                           "ansible/executor/task_result", "ansible/executor/play_iterator")),
    ("task executor", ("ansible/executor/task_executor", "ansible/executor/module_common",
                       "ansible/plugins/action/")),
    ("callbacks, display", ("ansible/plugins/callback", "ansible/utils/display")),
    ("connection plugin", ("ansible/plugins/connection",)),
    ("forking, processes", ("multiprocessing/", "posix.fork", "posix.wait", "subprocess")),
    ("serialisation", ("json/", "_json", "yaml/", "_yaml", "pickle", "ansible/_internal/_json",
                       "ansible/module_utils/_internal/_json")),
    ("playbook objects", ("ansible/playbook/",)),
    ("waiting (select, poll)", ("select.", "selectors", "time.sleep")),
)


def kind_of(func):
    """The kind of a pstats function key (file, line, name)."""
    where = "%s %s" % (func[0], func[2])
    for kind, fragments in KINDS:
        if any(f in where for f in fragments):
            return kind
    return "other"


# -- the child: ansible-playbook under the profiler ---------------------------

def usage_of(who):
    u = resource.getrusage(who)
    return u.ru_utime + u.ru_stime


def child(out, profile, argv):
    from ansible.executor.process import worker

    original = worker.WorkerProcess.run

    def profiled_run(self):
        prof = cProfile.Profile(time.process_time) if profile else None
        if prof:
            prof.enable()
        try:
            return original(self)
        finally:
            pid = os.getpid()
            if prof:
                prof.disable()
                prof.dump_stats(os.path.join(out, "worker-%d.prof" % pid))
            with open(os.path.join(out, "worker-%d.json" % pid), "w") as f:
                json.dump({"self": usage_of(resource.RUSAGE_SELF), "task": self._task.get_name(),
                           "children": usage_of(resource.RUSAGE_CHILDREN)}, f)

    worker.WorkerProcess.run = profiled_run
    from ansible.cli.playbook import main as playbook_main
    sys.argv = ["ansible-playbook"] + argv
    prof = cProfile.Profile(time.process_time)
    code = 0
    if profile:
        prof.enable()
    try:
        playbook_main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    finally:
        prof.disable()
        if profile:
            prof.dump_stats(os.path.join(out, "main.prof"))
        with open(os.path.join(out, "main.json"), "w") as f:
            json.dump({"self": usage_of(resource.RUSAGE_SELF)}, f)
    sys.exit(code)


# -- the parent: run it, then read the profiles ------------------------------

def env():
    out = dict(os.environ)
    out["PATH"] = BIN + os.pathsep + out.get("PATH", "")
    out["ANSIBLE_CONFIG"] = os.path.join(ROOT, "ansible.cfg")
    return out


def host_names(n):
    listing = subprocess.run([os.path.join(BIN, "ansible-inventory"), "-i", INV, "--list"],
                             env=env(), capture_output=True, text=True, check=True)
    names = sorted(json.loads(listing.stdout)["_meta"]["hostvars"],
                   key=lambda h: int(h[3:]) if h[3:].isdigit() else 0)
    if len(names) < n:
        raise SystemExit("the sandbox has %d hosts, --hosts asks for %d: scripts/sandbox.py up/clone first"
                         % (len(names), n))
    return names[:n]


def by_kind(stats):
    totals = {}
    for func, (dummy_cc, dummy_nc, tottime, dummy_ct, dummy_callers) in stats.stats.items():
        k = kind_of(func)
        totals[k] = totals.get(k, 0.0) + tottime
    return totals


def print_kinds(title, stats, cpu):
    totals = by_kind(stats)
    profiled = sum(totals.values()) or 1.0
    print("\n%s: %.2f s of CPU (%.3f s a host), by kind of work (share of the profiled time):" % (
        title, cpu, cpu / HOSTS[0]))
    for k, v in sorted(totals.items(), key=lambda kv: -kv[1]):
        print("  %-32s %5.1f %%  ~%.3f s a host" % (k, 100 * v / profiled, cpu * v / profiled / HOSTS[0]))


HOSTS = [1]


def main():
    if len(sys.argv) > 3 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3] == "profile", sys.argv[4:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("--hosts", type=int, default=64)
    p.add_argument("--playbook", default="verify.yml")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--no-profile", action="store_true",
                   help="only the CPU split and each task's workers, without the profiler's slowdown")
    p.add_argument("extra", nargs="*", help="more ansible-playbook arguments (after --)")
    a = p.parse_args()
    HOSTS[0] = a.hosts
    names = host_names(a.hosts)
    out = os.path.join(WORK, "%s-%d" % (a.playbook.replace(".yml", ""), a.hosts))
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(out):
        os.remove(os.path.join(out, f))
    argv = ["-i", INV, os.path.join(ROOT, "playbooks", a.playbook), "--limit", ",".join(names),
            "-e", "gpufleet_report_dir=%s" % os.path.join(WORK, "reports")] + a.extra
    log = os.path.join(WORK, "run.log")
    with open(log, "wb") as f:
        start = time.monotonic()
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", out,
                                 "plain" if a.no_profile else "profile"] + argv,
                                stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env())
        status, usage = os.wait4(proc.pid, 0)[1:]
        wall = time.monotonic() - start
    rc = os.waitstatus_to_exitcode(status)
    total = usage.ru_utime + usage.ru_stime
    with open(os.path.join(out, "main.json")) as f:
        main_cpu = json.load(f)["self"]
    workers = [f for f in os.listdir(out) if f.startswith("worker-") and f.endswith(".json")]
    w_self = w_children = 0.0
    tasks = {}
    for name in workers:
        with open(os.path.join(out, name)) as f:
            u = json.load(f)
        w_self += u["self"]
        w_children += u["children"]
        t = tasks.setdefault(u["task"], [0, 0.0, 0.0])
        t[0] += 1
        t[1] += u["self"]
        t[2] += u["children"]
    print("%s on %d hosts under the profiler: rc %d, wall %.1f s, CPU %.1f s (%.3f s a host); log %s" % (
        a.playbook, a.hosts, rc, wall, total, total / a.hosts, os.path.relpath(log, ROOT)))
    print("  main process      %6.2f s  %5.1f %%" % (main_cpu, 100 * main_cpu / total))
    print("  %4d workers      %6.2f s  %5.1f %%" % (len(workers), w_self, 100 * w_self / total))
    print("  their ssh clients %6.2f s  %5.1f %%" % (w_children, 100 * w_children / total))
    rest = total - main_cpu - w_self - w_children
    print("  the rest          %6.2f s  %5.1f %%  (the python start, ssh control masters, what else it waited for)"
          % (rest, 100 * rest / total))

    print("\nworkers by task: workers, their CPU a host, their ssh clients' CPU a host")
    for name, (count, cpu, ssh) in sorted(tasks.items(), key=lambda kv: -kv[1][1]):
        print("  %4d  %.3f s  %.3f s  %s" % (count, cpu / a.hosts, ssh / a.hosts, name[:90]))
    if a.no_profile:
        return rc
    main_stats = pstats.Stats(os.path.join(out, "main.prof"))
    print_kinds("main process", main_stats, main_cpu)
    worker_profs = [os.path.join(out, f) for f in os.listdir(out) if f.startswith("worker-") and f.endswith(".prof")]
    if worker_profs:
        w_stats = pstats.Stats(*worker_profs)
        print_kinds("workers (all %d together)" % len(worker_profs), w_stats, w_self)
    for title, stats in (("main process", main_stats), ("workers", w_stats if worker_profs else None)):
        if stats is None:
            continue
        print("\n== %s: top %d by cumulative time" % (title, a.top))
        stats.files = []
        stats.sort_stats("cumulative").print_stats(a.top)
    return rc


if __name__ == "__main__":
    sys.exit(main())
