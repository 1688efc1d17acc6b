#!/usr/bin/env python
"""The controller's CPU in named functions of one verify.yml, without a
profiler, for this checkout and, runs alternated, for other checkouts of the
collection on the same sandbox hosts.

    bench/fleet_functions.py [--hosts 64] [--runs 2] [--checkout PATH ...] [--ssh-executable PATH]

Each run is ansible-playbook in a child Python that wraps a few functions
with a CPU clock of their own thread (time.thread_time: the main process's
results thread is not counted in the main thread's functions): in the main
process the strategy's wait for results and its look at the workers
(has_dead_workers), get_vars, the meta tasks and their conditions, queueing
a task (the fork); in each worker (one per host and task) the task's
post_validate (templating its arguments), the verification's action, its
checks and its module run. Wrapping costs a few microseconds a call, not the
3x of cProfile (bench/fleet_profile.py), so the seconds are close to a run's
own. Printed per checkout: the median over its runs of each function's CPU
a host, and the whole main process's and workers'.

A checkout given with --checkout is run as it is, with its own ansible.cfg
(its .collections link must point at it: `git worktree add PATH REV`, then
`mkdir -p PATH/.collections/ansible_collections/gpufleet && ln -s PATH
PATH/.collections/ansible_collections/gpufleet/inference`); it uses this
checkout's venv and sandbox inventory. Every run starts with no ssh control
master (a control path directory of its own). The sandbox must be up with
--hosts deployed hosts (bench/fleet_scale.py leaves it so).
"""
import argparse
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INV = os.path.join(ROOT, "inventories", "sandbox", "hosts.yml")
BIN = os.path.join(ROOT, ".venv", "bin")
WORK = os.path.join(ROOT, ".cache", "fleet-functions")

# (label, module, class, method): wrapped in every process of the run
MAIN = (
    ("main: wait for results", "ansible.plugins.strategy", "StrategyBase", "_wait_on_pending_results"),
    ("main:   has_dead_workers", "ansible.executor.task_queue_manager", "TaskQueueManager", "has_dead_workers"),
    ("main:   process results", "ansible.plugins.strategy", "StrategyBase", "_process_pending_results"),
    ("main: get_vars", "ansible.vars.manager", "VariableManager", "get_vars"),
    ("main: meta tasks", "ansible.plugins.strategy", "StrategyBase", "_execute_meta"),
    ("main:   conditions", "ansible.playbook.task", "Task", "_resolve_conditional"),
    ("main: queue a task (fork)", "ansible.plugins.strategy", "StrategyBase", "_queue_task"),
)
WORKER = (
    ("worker: task post_validate", "ansible.playbook.task", "Task", "post_validate"),
    ("worker: module run", "ansible.plugins.action", "ActionBase", "_execute_module"),
)
# the collection's action, found in the worker (ansible-playbook imported it before the fork)
ACTION = (("worker: verify_host", "run"), ("worker:   its checks", "_check"))


# -- the child: ansible-playbook with the wrapped functions ------------------

def child(out, argv):
    import importlib

    acc = {}

    def wrap(owner, name, label):
        fn = getattr(owner, name)

        @functools.wraps(fn)
        def inner(*a, **k):
            start = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                acc[label] = acc.get(label, 0.0) + time.thread_time() - start
        setattr(owner, name, inner)

    for label, module, cls, name in MAIN + WORKER:
        wrap(getattr(importlib.import_module(module), cls), name, label)
    from ansible.executor.process.worker import WorkerProcess
    run = WorkerProcess.run

    def worker_run(self):
        acc.clear()
        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").endswith("gpufleet.inference.plugins.action.verify_host"):
                for label, name in ACTION:
                    wrap(mod.ActionModule, name, label)
        start = time.process_time()
        try:
            return run(self)
        finally:
            acc["workers"] = time.process_time() - start
            with open(os.path.join(out, "worker-%d.json" % os.getpid()), "w") as f:
                json.dump(acc, f)

    WorkerProcess.run = worker_run
    from ansible.cli.playbook import main as playbook_main
    sys.argv = ["ansible-playbook"] + argv
    code = 0
    try:
        playbook_main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    finally:
        acc["main process"] = time.process_time()
        with open(os.path.join(out, "main.json"), "w") as f:
            json.dump(acc, f)
    sys.exit(code)


# -- the parent ---------------------------------------------------------------

def one_run(checkout, hosts, ssh, out):
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    control = tempfile.mkdtemp(prefix="gpufleet-cp-")
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""),
               ANSIBLE_CONFIG=os.path.join(checkout, "ansible.cfg"), ANSIBLE_SSH_CONTROL_PATH_DIR=control)
    if ssh:
        env["ANSIBLE_SSH_EXECUTABLE"] = ssh
    argv = ["-i", INV, os.path.join(checkout, "playbooks", "verify.yml"), "--limit", ",".join(hosts),
            "-e", "gpufleet_report_dir=%s" % os.path.join(out, "reports")]
    start = time.monotonic()
    with open(os.path.join(out, "run.log"), "wb") as log:
        done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", out] + argv, cwd=checkout,
                              env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, check=False)
    wall = time.monotonic() - start
    shutil.rmtree(control, ignore_errors=True)
    if done.returncode != 0:
        raise SystemExit("verify.yml in %s exited %d (log: %s)" % (checkout, done.returncode,
                                                                   os.path.join(out, "run.log")))
    with open(os.path.join(out, "main.json")) as f:
        found = json.load(f)
    for name in os.listdir(out):
        if name.startswith("worker-"):
            with open(os.path.join(out, name)) as f:
                for label, cpu in json.load(f).items():
                    found[label] = found.get(label, 0.0) + cpu
    found["wall"] = wall
    return found


def host_names(n):
    listing = subprocess.run([os.path.join(BIN, "ansible-inventory"), "-i", INV, "--list"], capture_output=True,
                             text=True, check=True, env=dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg")))
    names = sorted(json.loads(listing.stdout)["_meta"]["hostvars"], key=lambda h: int(h[3:]) if h[3:].isdigit() else 0)
    if len(names) < n:
        raise SystemExit("the sandbox has %d hosts, --hosts asks for %d" % (len(names), n))
    return names[:n]


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("--hosts", type=int, default=64)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--checkout", action="append", default=[], help="another checkout to run, alternated")
    p.add_argument("--ssh-executable", default="", help="the ssh client (ansible's ssh_executable)")
    a = p.parse_args()
    hosts = host_names(a.hosts)
    checkouts = [ROOT] + [os.path.abspath(c) for c in a.checkout]
    for c in checkouts[1:]:
        if not os.path.exists(os.path.join(c, ".collections", "ansible_collections", "gpufleet", "inference")):
            raise SystemExit("%s has no .collections link to itself (see --help)" % c)
    ssh = os.path.abspath(a.ssh_executable) if a.ssh_executable else ""
    results = dict((c, []) for c in checkouts)
    for run in range(a.runs):
        for i, c in enumerate(checkouts):
            found = one_run(c, hosts, ssh, os.path.join(WORK, "checkout-%d" % i))
            results[c].append(found)
            print("run %d  %-30s wall %5.1f s  main %.3f  workers %.3f s a host" % (
                run + 1, os.path.relpath(c, os.path.dirname(ROOT)), found["wall"],
                found["main process"] / a.hosts, found.get("workers", 0.0) / a.hosts), flush=True)
    labels = ["main process"] + [m[0] for m in MAIN] + ["workers"] + [w[0] for w in WORKER] + [x[0] for x in ACTION]
    print("\n%d hosts, %d runs each, alternated, cold ssh masters: CPU a host (median), by function"
          % (a.hosts, a.runs))
    print("%-30s" % "" + "".join("%16s" % ("checkout %d" % i) for i in range(len(checkouts))))
    for label in labels:
        print("%-30s" % label + "".join("%16.4f" % (statistics.median(r.get(label, 0.0) for r in results[c]) / a.hosts)
                                        for c in checkouts))
    for i, c in enumerate(checkouts):
        print("checkout %d: %s" % (i, c))
    return 0


if __name__ == "__main__":
    sys.exit(main())
