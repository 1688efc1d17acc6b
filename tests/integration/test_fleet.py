"""deploy.yml / verify.yml / rollback.yml and tools/fleet_verify.py on 3 sandbox
hosts over SSH, with the sandbox's CPU-only profile (inventories/sandbox/group_vars):
torch 2.13.0 CPU and the fixture flashinfer wheels from the wheelhouse, the
fixture extension as sgl_kernel.

The tests run in order on one fleet: deploy from nothing, a no-op re-deploy,
the same no-op deploy and a verification from the execution environment image,
a verification as three slices merged into one report, drift on one host, a failed verification that must leave the previous venv
active, rollback, a host stopped in the middle of a run, and a build whose kernels
are wrong, caught by the kernel checks and never activated."""
import base64
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import ROOT, base_env, parse_recap, venv_bin

HOSTS = ["sbx1", "sbx2", "sbx3"]
DEPLOY = os.path.join(ROOT, "playbooks", "deploy.yml")
VERIFY = os.path.join(ROOT, "playbooks", "verify.yml")
ROLLBACK = os.path.join(ROOT, "playbooks", "rollback.yml")
FLEET_VERIFY = os.path.join(ROOT, "tools", "fleet_verify.py")
SITE = "~/ml-env/lib/python3.11/site-packages"


def ansible(inventory, host_pattern, module, args, become=False):
    argv = [venv_bin("ansible"), "-i", str(inventory), host_pattern, "-m", module, "-a", args, "-o"]
    if become:
        argv.append("-b")
    proc = subprocess.run(argv, cwd=ROOT, env=base_env(), capture_output=True, text=True, timeout=300, check=False)
    return proc


def shell(inventory, host_pattern, script):
    proc = ansible(inventory, host_pattern, "ansible.builtin.shell", script)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = {}
    for line in proc.stdout.splitlines():
        # -o: "host | CHANGED | rc=0 | (stdout) ..."
        host, dummy, rest = line.partition(" | ")
        # stdout only: torch without numpy warns on stderr, which -o appends.
        stdout = rest.split("(stdout)", 1)[-1].split(" (stderr)", 1)[0] if "(stdout)" in rest else ""
        out[host.strip()] = stdout.strip()
    return out


def readlinks(inventory):
    return shell(inventory, ",".join(HOSTS), "readlink ~/ml-env || echo NONE")


def report(fleet):
    with open(os.path.join(fleet["reports"], "fleet-report.json"), encoding="utf-8") as fh:
        return json.load(fh)


def rows(fleet):
    return {r["host"]: r for r in report(fleet)["hosts"]}


def play(fleet, playbook, extra=None, limit=None, inventory=None):
    argv = [venv_bin("ansible-playbook"), "-i", str(inventory or fleet["inventory"]), playbook,
            "-e", json.dumps(dict({"gpufleet_report_dir": fleet["reports"]}, **(extra or {})))]
    if limit:
        argv += ["--limit", limit]
    proc = subprocess.run(argv, cwd=ROOT, env=base_env(), capture_output=True, text=True, timeout=1800, check=False)
    out = proc.stdout + proc.stderr
    return proc.returncode, out, parse_recap(out)


@pytest.fixture(scope="module")
def fleet(sandbox, tmp_path_factory):
    inventory = sandbox(3)
    # From nothing: no venv, no stable path, no history on any host.
    shell(inventory, ",".join(HOSTS), "rm -rf ~/ml-env ~/ml-env-* ~/.ml-env.history")
    reports = str(tmp_path_factory.mktemp("reports"))
    # A copy of the sandbox inventory with one host-specific expectation, for
    # the failed-verification test (same hosts, same group_vars).
    alt = tmp_path_factory.mktemp("inventory")
    shutil.copy(os.path.join(inventory, "hosts.yml"), alt / "hosts.yml")
    shutil.copytree(os.path.join(inventory, "group_vars"), alt / "group_vars")
    return {"inventory": inventory, "reports": reports, "alt": str(alt), "state": {}}


def test_deploy_from_nothing(fleet):
    rc, out, stats = play(fleet, DEPLOY)
    assert rc == 0, out[-6000:]
    assert set(stats) >= set(HOSTS)
    assert all(stats[h]["failed"] == 0 and stats[h]["unreachable"] == 0 for h in HOSTS), stats
    r = rows(fleet)
    assert sorted(r) == HOSTS
    links = readlinks(fleet["inventory"])
    for h in HOSTS:
        assert r[h]["status"] == "ok", r[h]
        assert r[h]["torch_version"] == "2.13.0+cpu"
        assert r[h]["flashinfer_version"] == "0.6.0.dev20260307"
        assert r[h]["activated"] is True
        # the stable path really points at the verified, fingerprinted venv
        assert links[h] == r[h]["venv"] == r[h]["active_venv"], (links, r[h])
        assert "/ml-env-" in links[h]
    # every host imports the stack through the stable path
    imports = shell(fleet["inventory"], ",".join(HOSTS),
                    "~/ml-env/bin/python -c 'import torch, flashinfer, sgl_kernel; print(torch.__version__)'")
    assert all(imports[h] == "2.13.0+cpu" for h in HOSTS), imports
    for ext in ("md", "html", "json"):
        assert os.path.exists(os.path.join(fleet["reports"], "fleet-report." + ext))
    fleet["state"]["first_venv"] = {h: links[h] for h in HOSTS}
    # The kernel checks ran during verification, on the CPU (no GPU here): the
    # fixture's ops matched fp32; whatever could not run is listed with its reason.
    for h in HOSTS:
        checks = {(e["check"], e["device"]): e for e in r[h]["facts"]["torch"]["kernels"]}
        for name in ("sgl_kernel.rmsnorm", "sgl_kernel.fused_add_rmsnorm", "sgl_kernel.silu_and_mul"):
            assert checks[(name, "cpu")]["status"] == "ok", checks[(name, "cpu")]
        assert checks[("torch.fp8_scaled_mm", "cpu")]["reason"] == "no CUDA device"
        assert r[h]["kernels"]["passed"] == 3 and r[h]["kernels"]["failed"] == 0, r[h]["kernels"]
        assert r[h]["requirement_conflicts"] == []


def changed_tasks(out):
    """The tasks a play's output reports as changed, with the hosts."""
    task, found = None, []
    for line in out.splitlines():
        if line.startswith("TASK ["):
            task = line.split("]")[0][6:]
        elif line.startswith("changed: "):
            found.append("%s: %s" % (task, line[len("changed: "):].split(" ")[0]))
    return found


def fast_path_hosts(fleet):
    """The hosts the last run's report says took deploy.yml's fast path."""
    with open(os.path.join(fleet["reports"], "fleet-report.json"), encoding="utf-8") as fh:
        return {r["host"] for r in json.load(fh)["hosts"] if r["fast_path"]}


def test_second_deploy_changes_nothing(fleet):
    rc, out, stats = play(fleet, DEPLOY)
    assert rc == 0, out[-6000:]
    assert all(stats[h]["changed"] == 0 for h in HOSTS), (stats, changed_tasks(out))
    # same code and inputs: every host takes the fast path (verify + report only)
    assert fast_path_hosts(fleet) == set(HOSTS)
    assert "TASK [gpufleet.inference.fleet : Stage venv]" not in out
    # no lock there: the fast path only verifies, and takes none (skipped for every host, so no banner)
    assert "Host lock | Take the host lock]" not in out
    # gpufleet_full_run walks the whole chain, and still changes nothing
    rc, out, stats = play(fleet, DEPLOY, extra={"gpufleet_full_run": True})
    assert rc == 0, out[-6000:]
    assert "TASK [gpufleet.inference.fleet : Stage venv]" in out and fast_path_hosts(fleet) == set()
    assert "TASK [gpufleet.inference.fleet : Host lock | Take the host lock]" in out
    assert all(stats[h]["changed"] == 0 for h in HOSTS), stats
    assert readlinks(fleet["inventory"]) == fleet["state"]["first_venv"]


def test_the_execution_environment_runs_a_no_op_deploy_and_verify(fleet):
    """The execution environment image (scripts/ee.sh: ansible-builder and
    podman on the project's own Debian 12 image) holds the pinned ansible-core,
    ansible-runner, OpenSSH client and this collection, and runs the playbooks
    as AWX would:
    deploy.yml by its FQCN in a container (the image's copy of the collection,
    none of the checkout's) takes every host's fast path and changes nothing,
    and fleet_verify.py --ee runs verify.yml through ansible-runner's
    container mode."""
    proc = subprocess.run([os.path.join(ROOT, "scripts", "ee.sh")], cwd=ROOT, env=base_env(), capture_output=True,
                          text=True, timeout=1200, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    image = proc.stdout.strip().splitlines()[-1]
    # what the image holds, at the pins
    probe = subprocess.run(["podman", "run", "--rm", image, "sh", "-c",
                            "ansible --version | head -1; ansible-runner --version; ssh -V 2>&1; "
                            "ssh -G probe.invalid | grep '^kexalgorithms '; "
                            "ansible-galaxy collection list gpufleet.inference --format json"],
                           capture_output=True, text=True, timeout=300, check=False)
    assert probe.returncode == 0, probe.stdout + probe.stderr
    lines = probe.stdout.splitlines()
    assert "core 2.19.14" in lines[0] and lines[1].strip() == "2.4.3", lines[:2]
    # the pinned OpenSSH 10.0 client, whose first key exchange is the
    # post-quantum ML-KEM hybrid (OpenSSH 9.2's would be sntrup761x25519)
    assert lines[2].startswith("OpenSSH_10.0p2 Debian-7~bpo12+1"), lines[2]
    assert lines[3].split()[1].split(",")[0] == "mlkem768x25519-sha256", lines[3]
    listed = json.loads("\n".join(lines[4:]))
    assert listed == {"/usr/share/ansible/collections/ansible_collections": {
        "gpufleet.inference": {"version": "0.1.0"}}}, listed
    # the sandbox inventory's paths into the checkout (relative to playbook_dir,
    # which is the image's collection here) as the checkout's run had them; an
    # input given only here would change the deploy key, and the run would
    # walk the whole chain
    checkout = {"gpufleet_wheelhouse": os.path.join(ROOT, ".cache", "wheelhouse"),
                "sgl_kernel_local_dir": os.path.join(ROOT, "tests", "fixtures"),
                "gpufleet_report_dir": fleet["reports"]}
    # the sandbox's ssh ports are on the controller's loopback: the host's network
    # as this user, who owns the checkout (the image's own user is uid 1000)
    user = "--user=0" if os.getuid() == 0 else "--userns=keep-id"
    run = subprocess.run(["podman", "run", "--rm", user, "--network=host", "-v", "%s:%s:Z" % (ROOT, ROOT),
                          "-v", "%s:%s:Z" % (fleet["reports"], fleet["reports"]), "-w", ROOT,
                          "-e", "ANSIBLE_CONFIG=" + os.path.join(ROOT, "ansible.cfg"),
                          "-e", "ANSIBLE_COLLECTIONS_PATH=/usr/share/ansible/collections",
                          image, "ansible-playbook", "-i", str(fleet["inventory"]), "gpufleet.inference.deploy",
                          "-e", json.dumps(checkout)],
                         capture_output=True, text=True, timeout=1200, check=False)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-6000:]
    stats = parse_recap(out)
    assert all(stats[h]["changed"] == 0 and stats[h]["failed"] == 0 for h in HOSTS), (stats, changed_tasks(out))
    # the same code and inputs as the checkout's last deploy: the fast path on every host
    assert fast_path_hosts(fleet) == set(HOSTS)
    assert readlinks(fleet["inventory"]) == fleet["state"]["first_venv"]
    proc = subprocess.run([sys.executable, FLEET_VERIFY, "--ee", image, "--ee-option=--network=host",
                           "-i", str(fleet["inventory"]), "--report-dir", fleet["reports"], "--json", "-q",
                           "-e", json.dumps(checkout)],
                          cwd=ROOT, env=base_env(), capture_output=True, text=True, timeout=1200, check=False)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["healthy"] and summary["runner"] == {"status": "successful", "rc": 0}, summary
    assert {h: summary["hosts"][h]["status"] for h in HOSTS} == dict.fromkeys(HOSTS, "ok"), summary


def sliced_view(report_dir):
    with open(os.path.join(report_dir, "fleet-report.json"), encoding="utf-8") as fh:
        data = json.load(fh)
    return data["counts"], {r["host"]: (r["status"], r["drift"], r["freeze_diff"], r["expectation_failures"],
                                        [g["outliers"] for g in r["gpus"]]) for r in data["hosts"]}


def test_three_slices_side_by_side_merge_into_the_report_of_the_whole_run(fleet, tmp_path):
    """As AWX runs a sliced job template: verify.yml as three runs at once,
    one host each, with one run id, then merge.yml. With sbx3's torch changed
    by hand, the merged report has the statuses, drift (against the same
    baselines) and failures of the same fleet verified in one run."""
    whole, sliced = str(tmp_path / "whole"), str(tmp_path / "sliced")
    for folder in (whole, sliced):  # the same history and freezes to judge drift against
        shutil.copytree(fleet["reports"], folder)
    inv = fleet["inventory"]
    shell(inv, "sbx3", "sed -i \"s/^__version__ = .*/__version__ = '2.13.1+cpu'/\" %s/torch/version.py && "
                       "sed -i 's/^Version: 2.13.0+cpu$/Version: 2.13.1+cpu/' %s/torch-2.13.0+cpu.dist-info/METADATA"
          % (SITE, SITE))
    try:
        rc, out, stats = play(fleet, VERIFY, extra={"gpufleet_report_dir": whole})
        assert rc != 0 and "sbx3" in out, out[-4000:]
        # without hooks or a textfile directory, a host that passed costs one
        # task (its verification): the hooks step and the finish end in meta
        # tasks, with no worker and no "skipped"; the failed host is failed
        assert stats["sbx2"]["ok"] == 1 and stats["sbx2"]["skipped"] == 0, stats
        assert stats["sbx3"]["failed"] == 1, stats
        argv = [[venv_bin("ansible-playbook"), "-i", str(inv), VERIFY, "--limit", host, "-e", json.dumps(
            {"gpufleet_report_dir": sliced, "gpufleet_run_id": "awx-17", "gpufleet_report_part": str(number)})]
            for number, host in enumerate(HOSTS, 1)]
        procs = [subprocess.Popen(a, cwd=ROOT, env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True) for a in argv]
        outs = [p.communicate(timeout=900)[0] for p in procs]
        # each slice fails or passes its own host, as a run without slicing
        assert [p.returncode == 0 for p in procs] == [True, True, False], [o[-3000:] for o in outs]
    finally:
        shell(inv, "sbx3", "sed -i \"s/^__version__ = .*/__version__ = '2.13.0+cpu'/\" %s/torch/version.py && "
                           "sed -i 's/^Version: 2.13.1+cpu$/Version: 2.13.0+cpu/' %s/torch-2.13.0+cpu.dist-info/METADATA"
              % (SITE, SITE))
    assert sorted(os.listdir(os.path.join(sliced, "parts", "awx-17"))) == ["1.json", "2.json", "3.json"]
    rc, out, dummy = play(fleet, os.path.join(ROOT, "playbooks", "merge.yml"), inventory="localhost,",
                          extra={"gpufleet_report_dir": sliced, "gpufleet_run_id": "awx-17", "gpufleet_report_parts": 3})
    assert rc == 0 and "fleet report of run awx-17 (3 parts), 3 hosts" in out, out[-4000:]
    counts, view = sliced_view(sliced)
    assert (counts, view) == sliced_view(whole)
    assert view["sbx3"][0] == "failed" and view["sbx1"][0] == view["sbx2"][0] == "ok", view
    assert {"name": "torch", "old": "2.13.0+cpu", "new": "2.13.1+cpu"} in view["sbx3"][2], view["sbx3"]


def test_a_bad_textfile_dir_is_refused_on_the_fast_path_too(fleet):
    # the fast path's inputs are the recorded run's, but the textfile
    # directory is this run's own: /proc is not writable, and is said so
    # (a report of its own, so the fleet's history stays the passing runs')
    reports = os.path.join(fleet["reports"], "textfile-proc")
    rc, out, stats = play(fleet, DEPLOY, extra={"gpufleet_textfile_dir": "/proc", "gpufleet_report_dir": reports},
                          limit=HOSTS[0])
    assert rc != 0 and stats[HOSTS[0]]["failed"] > 0, out[-4000:]
    with open(os.path.join(reports, "fleet-report.json"), encoding="utf-8") as fh:
        row = {r["host"]: r for r in json.load(fh)["hosts"]}[HOSTS[0]]
    assert row["fast_path"] and row["status"] == "failed", row
    assert "gpufleet_textfile_dir must be an existing directory that" in " ".join(row["message"].split()), row
    assert "(got '/proc': not writable)" in row["message"], row
    assert readlinks(fleet["inventory"]) == fleet["state"]["first_venv"]


def test_an_installed_collection_keeps_the_reports_in_the_operators_folder(fleet, tmp_path):
    """Built and installed as an operator would (ansible-galaxy), run from
    another folder: the report, its history and the freeze baselines land in
    ./reports there, and a reinstall with --force keeps them all."""
    dist, collections, operator = tmp_path / "dist", tmp_path / "collections", tmp_path / "fleet"
    operator.mkdir()
    galaxy = venv_bin("ansible-galaxy")
    subprocess.run([galaxy, "collection", "build", "--output-path", str(dist), ROOT], cwd=ROOT, env=base_env(),
                   capture_output=True, text=True, timeout=300, check=True)
    tarball = str(next(dist.glob("gpufleet-inference-*.tar.gz")))
    installed = collections / "ansible_collections" / "gpufleet" / "inference"

    def install(*extra):
        proc = subprocess.run([galaxy, "collection", "install", "-p", str(collections), tarball] + list(extra),
                              cwd=str(operator), env=env, capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    # the operator's own configuration: only the installed copy is found
    (operator / "ansible.cfg").write_text(
        "[defaults]\ncollections_path = %s\ncollections_scan_sys_path = false\n"
        "[ssh_connection]\npipelining = true\n" % collections)
    env = base_env({"ANSIBLE_CONFIG": str(operator / "ansible.cfg")})
    install()
    assert (installed / "tools" / "fleet_verify.py").is_file() and (installed / "LICENSE").is_file()
    assert (installed / "requirements" / "controller.txt").is_file()
    assert not (installed / "tests").exists() and not (installed / "evidence").exists()
    # the sandbox inventory's paths into the checkout, given as an operator gives theirs
    checkout = {"gpufleet_wheelhouse": os.path.join(ROOT, ".cache", "wheelhouse"),
                "sgl_kernel_local_dir": os.path.join(ROOT, "tests", "fixtures"),
                "sgl_kernel_artifact_dir": os.path.join(ROOT, ".cache", "artifacts", "sgl_kernel")}

    def run(argv):
        proc = subprocess.run(argv, cwd=str(operator), env=env, capture_output=True, text=True, timeout=1200,
                              check=False)
        return proc.returncode, proc.stdout + proc.stderr

    def row():
        with open(operator / "reports" / "fleet-report.json", encoding="utf-8") as fh:
            return {r["host"]: r for r in json.load(fh)["hosts"]}[HOSTS[0]]

    # deploy by its FQCN, the whole chain (the same stack: nothing to install), no report dir given
    rc, out = run([venv_bin("ansible-playbook"), "-i", str(fleet["inventory"]), "gpufleet.inference.deploy",
                   "--limit", HOSTS[0], "-e", json.dumps(dict(checkout, gpufleet_full_run=True))])
    assert rc == 0, out[-6000:]
    baseline = sorted((operator / "reports" / "freezes" / HOSTS[0]).glob("*.freeze.txt"))
    assert baseline and row()["status"] == "ok", (baseline, row())
    assert not (installed / "reports").exists()
    rc, out = run([venv_bin("ansible-playbook"), "-i", str(fleet["inventory"]), "gpufleet.inference.verify",
                   "--limit", HOSTS[0]])
    assert rc == 0, out[-6000:]
    # (the report names the baseline it used, relative to the report folder)
    freeze = os.path.relpath(str(baseline[-1]), str(operator / "reports"))
    assert row()["freeze"] == freeze and row()["freeze_diff"] == [], row()
    # a new version of the collection over the old one: what the operator owns stays
    install("--force")
    assert (installed / "tools" / "fleet_verify.py").is_file()
    # the re-verification program of the installed collection, no checkout on its path
    rc, out = run([sys.executable, str(installed / "tools" / "fleet_verify.py"), "-i", str(fleet["inventory"]),
                   "--limit", HOSTS[0]])
    assert rc == 0, out[-6000:]
    assert "report: %s" % (operator / "reports" / "fleet-report.md") in out, out[-3000:]
    assert row()["freeze"] == freeze and row()["freeze_diff"] == [] and row()["status"] == "ok", row()
    assert len(list((operator / "reports" / "history").glob("*.json"))) == 3


def test_verify_puts_each_hosts_metrics_into_its_textfile_directory(fleet):
    """gpufleet_textfile_dir: each host gets its own metrics for node_exporter, the
    controller the fleet's, both in Prometheus text that the official parser reads."""
    from prometheus_client.parser import text_string_to_metric_families

    inv = fleet["inventory"]
    shell(inv, ",".join(HOSTS), "rm -rf /tmp/gpufleet-textfile && mkdir -m 0755 /tmp/gpufleet-textfile")
    rc, out, stats = play(fleet, VERIFY, extra={"gpufleet_textfile_dir": "/tmp/gpufleet-textfile"})
    assert rc == 0, out[-6000:]
    encoded = shell(inv, ",".join(HOSTS), "ls -A /tmp/gpufleet-textfile && base64 -w0 /tmp/gpufleet-textfile/gpufleet.prom")
    for host in HOSTS:
        listing, dummy, data = encoded[host].partition("\\n")
        assert listing == "gpufleet.prom", encoded[host][:300]  # one file, no temporary left beside it
        families = {f.name: f for f in text_string_to_metric_families(base64.b64decode(data).decode())}
        hosts = {s.labels["host"] for f in families.values() for s in f.samples}
        assert hosts == {host}, hosts
        status = {s.labels["status"]: s.value for s in families["gpufleet_host_status"].samples}
        assert status["ok"] == 1 and sum(status.values()) == 1, status
        assert families["gpufleet_host_healthy"].samples[0].value == 1
        assert families["gpufleet_host_verification_timestamp_seconds"].samples[0].value > 1.7e9
    with open(os.path.join(fleet["reports"], "fleet-report.prom"), encoding="utf-8") as fh:
        fleet_hosts = {s.labels["host"] for f in text_string_to_metric_families(fh.read()) for s in f.samples}
    assert fleet_hosts == set(HOSTS)
    # the metrics put in place (staged and renamed in one task) are the one change on the host
    assert all(stats[h]["changed"] == 1 for h in HOSTS), stats
    # the finish task ran (after the verification) because there were metrics to put in place
    assert stats["sbx2"]["ok"] == stats["sbx3"]["ok"] == 2, stats


SLURM_HOOKS = {
    "gpufleet_drain_hook": ["scontrol", "update", "nodename={{ inventory_hostname }}", "state=drain",
                            "reason={{ fleet_hook_reason }}"],
    # undrain, not resume: it succeeds on a node someone already put back
    "gpufleet_return_hook": ["scontrol", "update", "nodename={{ inventory_hostname }}", "state=undrain"],
}


def wait_for_slurm_state(inv, host, state, seconds=20):
    """slurm_node(host) once its state is STATE (a resumed node reads IDLE+NOT_RESPONDING until slurmctld's next ping)."""
    from serving_helpers import slurm_node

    deadline = time.monotonic() + seconds
    while True:
        node = slurm_node(inv, host)
        if node["state"] == state or time.monotonic() > deadline:
            return node
        time.sleep(0.5)


def test_drift_on_one_host_is_flagged_drained_in_slurm_and_resumed_after_a_pass(fleet):
    """fleet_verify.py with the Slurm hooks (Debian's slurm-wlm on the sandbox:
    slurmctld on sbx1, a slurmd per host): the host whose torch was changed by
    hand fails with the diff, exits non-zero, and is drained with the first
    failed check as the reason while the others stay in service; once it is
    put back, verify.yml resumes it."""
    from serving_helpers import install_slurm, slurm_node

    inv = fleet["inventory"]
    install_slurm(inv)
    assert all(slurm_node(inv, h)["state"] == "IDLE" for h in HOSTS)
    # By hand on sbx2 only: torch's own version and its distribution metadata.
    shell(inv, "sbx2", "sed -i \"s/^__version__ = .*/__version__ = '2.13.1+cpu'/\" %s/torch/version.py && "
                       "sed -i 's/^Version: 2.13.0+cpu$/Version: 2.13.1+cpu/' %s/torch-2.13.0+cpu.dist-info/METADATA"
          % (SITE, SITE))
    try:
        proc = subprocess.run([sys.executable, FLEET_VERIFY, "-i", str(inv), "--report-dir", fleet["reports"],
                               "-e", json.dumps(SLURM_HOOKS)],
                              cwd=ROOT, env=base_env(), capture_output=True, text=True, timeout=900, check=False)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        # progress while hosts finish, then the table
        assert "3/3 hosts done" in proc.stderr, proc.stderr
        assert "sbx2" in proc.stdout and "report:" in proc.stdout
        r = rows(fleet)
        assert report(fleet)["mode"] == "verify"
        assert r["sbx2"]["status"] == "failed", r["sbx2"]
        assert {"name": "torch_version", "expected": "2.13.0+cpu", "found": "2.13.1+cpu"} in r["sbx2"]["expectation_failures"]
        assert {"name": "torch", "old": "2.13.0+cpu", "new": "2.13.1+cpu"} in r["sbx2"]["freeze_diff"], r["sbx2"]["freeze_diff"]
        assert report(fleet)["hosts"][0]["host"] == "sbx2"  # failing hosts first
        assert r["sbx1"]["status"] == "ok" and r["sbx3"]["status"] == "ok", (r["sbx1"]["drift"], r["sbx3"]["drift"])
        # drained in Slurm with the first failed check; the others stay in service
        node = slurm_node(inv, "sbx2")
        assert "DRAIN" in node["state"], node["output"] + proc.stdout[-3000:]
        assert node["reason"].startswith("gpufleet: torch_version: expected 2.13.0+cpu, found 2.13.1+cpu"), node
        assert [slurm_node(inv, h)["state"] for h in ("sbx1", "sbx3")] == ["IDLE", "IDLE"]
        assert r["sbx2"]["serving"]["drained"] and not r["sbx1"]["serving"]["drained"], r["sbx2"]["serving"]
    finally:
        shell(inv, "sbx2", "sed -i \"s/^__version__ = .*/__version__ = '2.13.0+cpu'/\" %s/torch/version.py && "
                           "sed -i 's/^Version: 2.13.1+cpu$/Version: 2.13.0+cpu/' %s/torch-2.13.0+cpu.dist-info/METADATA"
              % (SITE, SITE))
    # put back by hand: the next verification passes and resumes the node gpufleet drained
    rc, out, _stats = play(fleet, VERIFY, extra=SLURM_HOOKS)
    assert rc == 0, out[-4000:]
    node = wait_for_slurm_state(inv, "sbx2", "IDLE")
    assert node["state"] == "IDLE" and node["reason"] is None, node["output"]
    r = rows(fleet)
    assert r["sbx2"]["serving"]["returned"] and r["sbx2"]["serving"]["actions"] == ["return"], r["sbx2"]["serving"]
    # a host gpufleet never drained is never resumed
    assert r["sbx1"]["serving"]["actions"] == [] and r["sbx3"]["serving"]["actions"] == []


def test_a_serving_gpu_is_skipped_refused_or_drained_never_disturbed(fleet):
    """A stand-in GPU on sbx3 whose compute process is a systemd unit (the
    stand-in nvidia-smi lists the unit's pid): in_service and auto pass with
    the numeric checks skipped, naming the pid; full refuses the host (busy);
    full with the systemd hooks stops the unit, verifies in full, starts it
    again, and the proof record says the kernels were proven in this run."""
    from serving_helpers import SERVING_UNIT, install_fake_gpu, remove_fake_gpu, serving, serving_pid

    inv = fleet["inventory"]
    # the stand-in GPU is no device of the CPU torch: nvidia-smi's count would not be 0
    expect = {"python_version": "3.11", "imports": ["flashinfer", "sgl_kernel"]}
    install_fake_gpu(inv, "sbx3")
    try:
        serving(inv, "sbx3", "started")
        pid = serving_pid(inv, "sbx3")
        assert pid > 0
        # auto, the default (in_service is the same on this one busy GPU: unit tables and the H200 evidence);
        # the Xid read as root with a become that cannot work: the read says why, and the verification
        # itself, as the deploy user, is not touched by it
        rc, out, stats = play(fleet, VERIFY, limit="sbx3", extra={"gpufleet_expect": expect, "gpufleet_xid": "become",
                                                                  "ansible_become_exe": "/bin/false"})
        assert rc == 0, out[-4000:]
        row = rows(fleet)["sbx3"]
        assert row["status"] == "ok", row["drift"]
        assert row["xid"]["read"] is False and row["xid"]["error"].startswith("the kernel log was not read as root: "), row["xid"]
        skipped = row["gpu_use"]["skipped"]
        assert skipped and skipped[0]["gpu"] == 0 and ("busy (pid %d /usr/bin/python3" % pid) in skipped[0]["reason"], skipped
        assert row["gpus"][0]["processes"][0]["pid"] == pid
        assert row["kernels"]["passed"] == 0, row["kernels"]  # no numeric check ran on the busy host
        rc, out, stats = play(fleet, VERIFY, limit="sbx3", extra={"gpufleet_verify_mode": "full", "gpufleet_expect": expect})
        assert rc != 0
        row = rows(fleet)["sbx3"]
        assert row["status"] == "busy" and "pid %d" % pid in row["message"], row
        assert serving_pid(inv, "sbx3") == pid  # never touched
        hooks = {"gpufleet_drain_hook": ["systemctl", "stop", SERVING_UNIT],
                 "gpufleet_return_hook": ["systemctl", "start", SERVING_UNIT],
                 "gpufleet_drain_wait_seconds": 30}
        rc, out, stats = play(fleet, VERIFY, limit="sbx3",
                              extra=dict(hooks, gpufleet_verify_mode="full", gpufleet_expect=expect))
        assert rc == 0, out[-4000:]
        row = rows(fleet)["sbx3"]
        assert row["status"] == "ok", row
        assert row["serving"]["actions"] == ["drain: gpufleet: full verification", "return"], row["serving"]
        assert row["kernels"]["passed"] > 0 and row["proof"]["summary"] == "kernels proven in this run", row["proof"]
        after = serving_pid(inv, "sbx3")
        assert after > 0 and after != pid  # the unit is serving again, started anew
        # the next in_service run reads the proof's age from the record on the host; a proof older than
        # max_kernel_proof_age_hours (0: any) fails the host
        rc, out, stats = play(fleet, VERIFY, limit="sbx3", extra={
            "gpufleet_verify_mode": "in_service", "gpufleet_expect": dict(expect, max_kernel_proof_age_hours=0)})
        assert rc != 0 and "max_kernel_proof_age_hours: expected kernels proven under this stack within 0" in out, out[-3000:]
        row = rows(fleet)["sbx3"]
        assert row["proof"]["summary"].startswith("kernels last proven "), row["proof"]
        assert row["kernels"]["passed"] == 0 and row["status"] == "failed"
    finally:
        remove_fake_gpu(inv, "sbx3")


def test_failed_verification_keeps_the_previous_venv(fleet):
    alt = fleet["alt"]
    os.makedirs(os.path.join(alt, "host_vars"), exist_ok=True)
    with open(os.path.join(alt, "host_vars", "sbx2.yml"), "w", encoding="utf-8") as fh:
        # a torch the new venv does not have: judged by the verification of the
        # built venv (a wrong device count would be refused in the preflight)
        fh.write("gpufleet_expect:\n  torch_version: '2.13.1+cpu'\n  device_count: 0\n")
    # Another flashinfer pin: a new fingerprinted venv on every host.
    extra = {"flashinfer_version": "0.6.0.dev20260310"}
    before = shell(fleet["inventory"], "sbx2", "readlink ~/ml-env && ls ~/ml-env/lib/python3.11/site-packages | wc -l")
    rc, out, stats = play(fleet, DEPLOY, extra=extra, inventory=alt)
    assert rc != 0, out[-4000:]
    assert stats["sbx2"]["failed"] == 1 and stats["sbx1"]["failed"] == 0 and stats["sbx3"]["failed"] == 0, stats
    links = readlinks(fleet["inventory"])
    old = fleet["state"]["first_venv"]
    assert links["sbx2"] == old["sbx2"], links
    assert links["sbx1"] != old["sbx1"] and links["sbx3"] != old["sbx3"], links
    # the previous venv on sbx2 is intact: same contents, still imports the stack
    assert shell(fleet["inventory"], "sbx2", "readlink ~/ml-env && ls ~/ml-env/lib/python3.11/site-packages | wc -l") == before
    ok = shell(fleet["inventory"], "sbx2", "~/ml-env/bin/python -c 'import torch, flashinfer, sgl_kernel; print(flashinfer.__version__)'")
    assert ok["sbx2"] == "0.6.0.dev20260307", ok
    r = rows(fleet)
    assert r["sbx2"]["status"] == "failed" and r["sbx2"]["stage"] == "verify"
    assert {"name": "torch_version", "expected": "2.13.1+cpu", "found": "2.13.0+cpu"} in r["sbx2"]["expectation_failures"], \
        r["sbx2"]
    assert r["sbx2"]["active_venv"] == old["sbx2"] and r["sbx2"]["venv"] != old["sbx2"]
    assert r["sbx1"]["flashinfer_version"] == "0.6.0.dev20260310" and r["sbx1"]["status"] == "ok"
    fleet["state"]["second_venv"] = links


def test_rollback_returns_the_previous_venv_and_verifies_it(fleet):
    old = fleet["state"]["first_venv"]
    rc, out, stats = play(fleet, ROLLBACK, limit="sbx1,sbx3")
    assert rc == 0, out[-4000:]
    links = readlinks(fleet["inventory"])
    assert links["sbx1"] == old["sbx1"] and links["sbx3"] == old["sbx3"], links
    r = rows(fleet)
    assert report(fleet)["mode"] == "rollback"
    assert r["sbx1"]["status"] == "ok" and r["sbx1"]["flashinfer_version"] == "0.6.0.dev20260307"
    assert stats["sbx1"]["changed"] > 0
    # sbx2 never left its first venv: nothing to roll back to, nothing changed
    rc, out, stats = play(fleet, ROLLBACK, limit="sbx2")
    assert rc != 0
    assert "no previous venv to roll back to on sbx2" in out
    assert readlinks(fleet["inventory"])["sbx2"] == old["sbx2"]


def test_unreachable_host_mid_run_then_converges(fleet, sandbox_ctl):
    # The whole chain (not the fast path), so that the host is lost in the middle of it.
    argv = [venv_bin("ansible-playbook"), "-i", str(fleet["inventory"]), DEPLOY,
            "-e", json.dumps({"gpufleet_report_dir": fleet["reports"], "gpufleet_full_run": True})]
    log = os.path.join(fleet["reports"], "unreachable-run.log")
    with open(log, "w", encoding="utf-8") as fh:
        proc = subprocess.Popen(argv, cwd=ROOT, env=base_env(), stdout=fh, stderr=subprocess.STDOUT)
        try:
            deadline = time.time() + 300
            # Stop sbx3 once the chain is under way (after preflight reached every host).
            while time.time() < deadline and proc.poll() is None:
                with open(log, encoding="utf-8") as rd:
                    if "TASK [gpufleet.inference.fleet : Stage venv]" in rd.read():
                        break
                time.sleep(0.5)
            assert proc.poll() is None, "deploy ended before the host could be stopped"
            sandbox_ctl("stop", "sbx3")
            proc.wait(timeout=1200)
        finally:
            if proc.poll() is None:
                proc.kill()
    with open(log, encoding="utf-8") as rd:
        out = rd.read()
    stats = parse_recap(out)
    try:
        assert stats["sbx1"]["failed"] == 0 and stats["sbx2"]["failed"] == 0, out[-4000:]
        assert stats["sbx3"]["unreachable"] == 1, stats
        r = rows(fleet)
        assert r["sbx3"]["status"] == "unreachable", r["sbx3"]
        assert r["sbx1"]["status"] == "ok" and r["sbx2"]["status"] == "ok"
        assert report(fleet)["hosts"][0]["host"] == "sbx3"
        # verify.yml while the host is still down: it has no separate connection
        # check, so the verification itself must record the host as unreachable
        # (not drop it), verify the others, and exit non-zero.
        rc, out, _stats = play(fleet, VERIFY)
        assert rc != 0, out[-4000:]
        r = rows(fleet)
        assert report(fleet)["mode"] == "verify"
        assert r["sbx3"]["status"] == "unreachable", r["sbx3"]
        assert r["sbx1"]["status"] == "ok" and r["sbx2"]["status"] == "ok", (r["sbx1"], r["sbx2"])
        assert "sbx3: unreachable" in out, out[-4000:]
    finally:
        sandbox_ctl("start", "sbx3")
    rc, out, stats = play(fleet, DEPLOY)
    assert rc == 0, out[-4000:]
    assert rows(fleet)["sbx3"]["status"] == "ok"
    links = readlinks(fleet["inventory"])
    assert len(set(links.values()) - {"NONE"}) >= 1 and all(links[h] != "NONE" for h in HOSTS)


def test_wrong_kernel_build_is_not_activated(fleet):
    """A build of the extension whose rmsnorm is wrong for M >= 128 imports
    fine; the kernel check on the host catches it, names it, and the previous
    venv stays active and intact."""
    inv = fleet["inventory"]
    before = shell(inv, "sbx1", "readlink ~/ml-env && ls ~/ml-env/lib/python3.11/site-packages | wc -l")
    rc, out, stats = play(fleet, DEPLOY, limit="sbx1",
                          extra={"sgl_kernel_cmake_args": ["-DSGL_KERNEL_FIXTURE_WRONG_LARGE_M=ON"]})
    assert rc != 0, out[-4000:]
    assert stats["sbx1"]["failed"] == 1, stats
    assert "kernels: expected sgl_kernel.rmsnorm to match fp32 on the CPU, found relative error" in out, out[-4000:]
    assert shell(inv, "sbx1", "readlink ~/ml-env && ls ~/ml-env/lib/python3.11/site-packages | wc -l") == before
    ok = shell(inv, "sbx1", "~/ml-env/bin/python -c 'import sgl_kernel, torch; x = torch.randn(300, 64);"
                            " print(bool(torch.allclose(sgl_kernel.rmsnorm(x, torch.ones(64)),"
                            " x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), atol=1e-4)))'")
    assert ok["sbx1"] == "True", ok  # the active venv still has the right build
    r = rows(fleet)["sbx1"]
    assert r["status"] == "failed" and r["stage"] == "verify", r
    failure = [f for f in r["expectation_failures"] if f["name"] == "kernels"]
    assert failure and failure[0]["expected"] == "sgl_kernel.rmsnorm to match fp32 on the CPU", r["expectation_failures"]
    # rows >= 128 are wrong: the sweep's M=1024 shows it, M=1..128 do not
    assert failure[0]["found"].endswith("at M=1024"), failure
    assert r["kernels"]["failed_checks"] == ["sgl_kernel.rmsnorm"], r["kernels"]
