"""deploy.yml's sglang stage on ONE sandbox host (sbx1) with the real wheels
from PyPI: sglang 0.5.23 (cp311) with the stack it requires - torch 2.14.1
(PyPI's CUDA 13.0 build, with its CUDA libraries), torchaudio 2.11.0,
flashinfer-python[cu13] 0.7.2, sglang-kernel 0.4.10 - and everything they
depend on: the lock's 207 wheels and the cp312 sglang wheel whose sha256
the collection pins (the preflight reads that one), 4.1 GiB.

The wheels are resolved once (uv pip compile, CPython 3.11 on manylinux
x86_64, nothing newer than EXCLUDE_NEWER, so the set does not drift) and
downloaded once by pip, checked against the lock's hashes, into one
read-only folder on the controller, .cache/sglang-stack, with a PEP 503
index over them (and each wheel's METADATA beside it, PEP 658). The test
serves that folder over HTTP on 127.0.0.1 (the sandbox hosts share the
controller's network), and the roles install from it as from any index:
one copy on the controller, no copy per host (the wheelhouse pushed to the
host, gpufleet_wheelhouse, holds only uv for the uv_venv role).

What runs on the host, and what does not (it has no GPU and no driver):

- the chain: the fleet preflight (the sglang role's reads sglang's METADATA
  on the controller, from the same index, into a cache of the test's own,
  and judges the stack's pins), uv_venv, torch_nightly (the release channel:
  torch, torchvision, torchaudio), flashinfer (flashinfer-python[cu13]), sglang
  (installed under torch's constraints file and the held flashinfer), the
  freeze, the verification and the activation. The sgl_kernel stage is off:
  its published-wheel path judges the wheel for GPU targets this host does
  not have (its own integration tests run it); sglang-kernel 0.4.10 comes in
  as sglang's own requirement, from the same index.
- the verification imports torch and flashinfer (both import without a
  driver; so do sglang and its server's modules, where torch_verify asks the
  serving stack); the GPU checks are skipped (no CUDA device). sgl_kernel is
  NOT imported: it loads libcuda when imported, and no CUDA part of sglang
  runs. What is checked of sglang is that it is installed at 0.5.23, that
  its top-level package imports, and that its metadata holds in the venv:
  every requirement it has on this host is met by what is installed, read in
  the venv with importlib.metadata.
- a second walk of the whole chain (gpufleet_full_run) keeps the venv and
  changes nothing in the sglang stage;
- a stack whose torch contradicts sglang's requirements (torch 2.13.0) is
  refused by the preflight, on the controller, naming both pins, before any
  change: no new venv, nothing installed, the first venv still active.

The install times uv reports (-v) and the wheelhouse's size are written to
.cache/sglang-stack/measured.json. Measured on a controller of 2 shared
cores with a fresh host: the deploy 196-220 s; uv fetched and unpacked the
torch stage's 33 packages from the served index in 56 s, flashinfer's 26 in
3 s and sglang's 148 in 7 s, and put each stage's into the venv in under
0.4 s; the venv is 9.6 GiB, its files hardlinked from uv's cache on the host (which
is as large: about 10 GiB on the host in all, removed when the module ends;
the module runs first in the sandbox lane, see conftest.py); the second
walk of the chain 195 s; the refusal 9-21 s.
The wheelhouse is downloaded and indexed once (about 2 minutes).
"""
import functools
import glob
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile

import pytest

from conftest import ROOT, base_env, cache_lock, parse_recap, venv_bin

sys.path.insert(0, os.path.join(ROOT, ".collections"))
from ansible_collections.gpufleet.inference.plugins.module_utils.flashinfer_aot import sha256_file  # noqa: E402
from ansible_collections.gpufleet.inference.plugins.plugin_utils import sglang_pins  # noqa: E402

HOST = "sbx1"
DEPLOY = os.path.join(ROOT, "playbooks", "deploy.yml")
STACK = os.path.join(ROOT, ".cache", "sglang-stack")
WHEELS = os.path.join(STACK, "wheels")
SIMPLE = os.path.join(STACK, "simple")
UV_WHEELHOUSE = os.path.join(STACK, "uv-wheelhouse")
SGLANG = "0.5.23"
REQUIREMENTS = ["sglang==%s" % SGLANG, "torch==2.14.1", "torchaudio==2.11.0", "flashinfer-python[cu13]==0.7.2",
                "sglang-kernel==0.4.10"]
EXCLUDE_NEWER = "2026-12-07T00:00:00Z"
# pip's own options for the hosts' platform: Debian 12's CPython 3.11 (glibc 2.36)
PLATFORM = ([arg for minor in range(36, 16, -1) for arg in ("--platform", "manylinux_2_%d_x86_64" % minor)]
            + ["--platform", "manylinux2014_x86_64", "--platform", "linux_x86_64",
               "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--abi", "abi3",
               "--abi", "none", "--only-binary=:all:"])
# This controller's pip configuration may cap what it installs (a constraints
# file); the lock is the set, so the cap is lifted for these downloads.
PIP_ENV = dict(os.environ, PIP_CONSTRAINT="/dev/null")
MEASURED = os.path.join(STACK, "measured.json")


def _run(argv, timeout, env=None):
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    assert proc.returncode == 0, "%s\n%s%s" % (" ".join(argv), proc.stdout[-3000:], proc.stderr[-3000:])
    return proc.stdout


def _canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def _index_page(anchors):
    return "<!DOCTYPE html>\n<html><body>\n%s</body></html>\n" % "".join("%s<br/>\n" % a for a in anchors)


def _write_index():
    """simple/<project>/index.html over wheels/, each wheel's METADATA beside it (PEP 658)."""
    projects = {}
    for path in sorted(glob.glob(os.path.join(WHEELS, "*.whl"))):
        name = os.path.basename(path)
        metadata = path + ".metadata"
        if not os.path.exists(metadata):
            with zipfile.ZipFile(path) as wheel:
                member = [m for m in wheel.namelist() if m.count("/") == 1 and m.endswith(".dist-info/METADATA")][0]
                with open(metadata + ".part", "wb") as handle:
                    handle.write(wheel.read(member))
            os.replace(metadata + ".part", metadata)
        meta_sha = sha256_file(metadata)
        projects.setdefault(_canonical(name.split("-")[0]), []).append(
            '<a href="../../wheels/%s#sha256=%s" data-dist-info-metadata="sha256=%s" data-core-metadata="sha256=%s">%s</a>'
            % (name, sha256_file(path), meta_sha, meta_sha, name))
    shutil.rmtree(SIMPLE, ignore_errors=True)
    for project, anchors in projects.items():
        os.makedirs(os.path.join(SIMPLE, project))
        with open(os.path.join(SIMPLE, project, "index.html"), "w", encoding="utf-8") as handle:
            handle.write(_index_page(anchors))
    with open(os.path.join(SIMPLE, "index.html"), "w", encoding="utf-8") as handle:
        handle.write(_index_page('<a href="%s/">%s</a>' % (p, p) for p in sorted(projects)))


def _pinned_sglang_wheel():
    """The cp312 wheel whose sha256 the collection pins: the preflight reads that one from the index."""
    pinned = sglang_pins.SGLANG_WHEELS[SGLANG]
    path = os.path.join(WHEELS, pinned["filename"])
    shared = sglang_pins.cached_wheel(os.path.join(ROOT, ".cache"), SGLANG)
    if not os.path.exists(path):
        if os.path.exists(shared):
            shutil.copyfile(shared, path + ".part")
        else:
            with urllib.request.urlopen(pinned["url"], timeout=600) as response, open(path + ".part", "wb") as handle:
                shutil.copyfileobj(response, handle, 1 << 20)
        assert sha256_file(path + ".part") == pinned["sha256"]
        os.replace(path + ".part", path)


def stack_wheelhouse():
    """.cache/sglang-stack made once: the lock, the wheels, the index, uv's own wheel."""
    stamp = os.path.join(STACK, ".ready")
    with cache_lock("sglang-stack"):
        if os.path.exists(stamp):
            return
        os.makedirs(WHEELS, exist_ok=True)
        lock = os.path.join(STACK, "lock.txt")
        if not os.path.exists(lock):
            with open(os.path.join(STACK, "requirements.in"), "w", encoding="utf-8") as handle:
                handle.write("\n".join(REQUIREMENTS) + "\n")
            _run([venv_bin("uv"), "pip", "compile", os.path.join(STACK, "requirements.in"), "--python-version", "3.11",
                  "--python-platform", "x86_64-manylinux_2_36", "--index-url", "https://pypi.org/simple",
                  "--exclude-newer", EXCLUDE_NEWER, "--no-header", "--generate-hashes", "-o", lock], 600)
        started = time.monotonic()
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--require-hashes", "-r", lock, "-d", WHEELS]
             + PLATFORM, 3600, env=PIP_ENV)
        _pinned_sglang_wheel()
        _run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", UV_WHEELHOUSE, "uv==0.13.9"] + PLATFORM,
             600, env=PIP_ENV)
        _write_index()
        with open(stamp, "w", encoding="utf-8") as handle:
            handle.write("downloaded and indexed in %.0f s\n" % (time.monotonic() - started))


@pytest.fixture(name="index_url", scope="module")
def index_url_fixture():
    """The stack's index, served read-only from the controller's folder for the module's runs."""
    stack_wheelhouse()
    handler = functools.partial(QuietHandler, directory=STACK)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield "http://127.0.0.1:%d/simple" % server.server_address[1]
    server.shutdown()
    server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def shell(inventory, script):
    """A shell command's standard output on the host."""
    proc = subprocess.run([venv_bin("ansible"), "-i", inventory, HOST, "-m", "ansible.builtin.shell", "-a", script],
                          cwd=ROOT, env=base_env(), capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout.split("\n", 1)[1].strip() if "\n" in proc.stdout else ""


def python_script(inventory, source, python, tmp):
    """SOURCE run by the host's PYTHON (ansible.builtin.script: the file is copied, no quoting of the code)."""
    path = os.path.join(tmp, "script.py")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(source)
    proc = subprocess.run([venv_bin("ansible"), "-i", inventory, HOST, "-m", "ansible.builtin.script", "-a",
                           "%s executable=%s" % (path, python)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          check=False, env=base_env({"ANSIBLE_CALLBACK_RESULT_FORMAT": "json"}))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.split(" => ", 1)[1])["stdout"]


def stack_vars(index_url, tmp):
    """The stack sglang 0.5.23 requires, every install from the served index."""
    return {
        "gpufleet_sglang_enabled": True,
        "gpufleet_report_dir": os.path.join(tmp, "reports"),
        # uv for uv_venv: the only wheel pushed to the host
        "gpufleet_wheelhouse": UV_WHEELHOUSE,
        "torch_nightly_channel": "release",
        "torch_nightly_cuda_variant": "cu130",
        # sglang requires torchvision: the torch stage pins it (the one of the lock)
        "torch_nightly_packages": ["torch", "torchvision", "torchaudio"],
        "torch_nightly_versions": {"torch": "2.14.1", "torchvision": "0.29.2", "torchaudio": "2.11.0"},
        "torch_nightly_index_url": index_url,
        "torch_nightly_wheelhouse": "",
        "gpufleet_flashinfer_enabled": True,
        "flashinfer_version": "0.7.2",
        "flashinfer_packages": ["flashinfer-python"],
        "flashinfer_extras": ["cu13"],
        "flashinfer_index_urls": [],
        "flashinfer_default_index_url": index_url,
        "flashinfer_wheelhouse": "",
        "gpufleet_sgl_kernel_enabled": False,
        "sglang_default_index_url": index_url,
        "sglang_wheelhouse": "",
        "sglang_wheel_cache_dir": os.path.join(tmp, "sglang-metadata-cache"),
        # importing sgl_kernel (and sglang, which imports it) needs the driver
        "gpufleet_verify_imports": ["flashinfer"],
        "gpufleet_expect": {"python_version": "3.11", "device_count": 0, "imports": ["flashinfer"]},
    }


def deploy(inventory, extra, args=()):
    argv = [venv_bin("ansible-playbook"), "-i", inventory, DEPLOY, "--limit", HOST, "-e", json.dumps(extra)] + list(args)
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=base_env(), capture_output=True, text=True, timeout=3600, check=False)
    out = proc.stdout + proc.stderr
    return proc.returncode, out, parse_recap(out), time.monotonic() - started


def report_row(extra):
    with open(os.path.join(extra["gpufleet_report_dir"], "fleet-report.json"), encoding="utf-8") as handle:
        return [row for row in json.load(handle)["hosts"] if row["host"] == HOST][0]


def task_changes(out, role):
    """The tasks of ROLE a run's output reports as changed."""
    task, found = None, []
    for line in out.splitlines():
        if line.startswith("TASK ["):
            task = line.split("]")[0][6:]
        elif line.startswith("changed: ") and task and task.startswith("gpufleet.inference.%s :" % role):
            found.append(task)
    return found


def uv_times(out):
    """{role: {prepared, installed}} from uv's own lines in each role's install task of a -v run: 'Prepared N
    packages in T' (fetched from the index and unpacked into uv's cache), 'Installed N packages in T' (put into
    the venv)."""
    found = {}
    for block in out.split("\nTASK [")[1:]:
        title = block.split("]", 1)[0]
        if " : Install | Install " not in title:
            continue
        times = {}
        for what in ("Prepared", "Installed"):
            match = re.search(r"%s (\d+) packages? in ([0-9.]+m?s)" % what, block)
            if match:
                times[what.lower()] = "%s in %s" % (match.group(1), match.group(2))
        if times:
            found.setdefault(title.split(" : ")[0].rsplit(".", 1)[-1], times)
    return found


# What sglang requires on this host, checked in the venv: every requirement
# whose marker holds (no extra) is met by the installed distribution.
CONSISTENT = r"""
import json
from importlib import metadata
from packaging.requirements import Requirement
unmet, checked = [], 0
for line in metadata.requires("sglang") or []:
    req = Requirement(line)
    if req.marker and not req.marker.evaluate({"extra": ""}):
        continue
    checked += 1
    try:
        found = metadata.version(req.name)
    except metadata.PackageNotFoundError:
        unmet.append("%s: missing" % req)
        continue
    if not req.specifier.contains(found, prereleases=True):
        unmet.append("%s: %s" % (req, found))
import sglang
print(json.dumps({"sglang": metadata.version("sglang"), "imported": sglang.__version__, "checked": checked, "unmet": unmet,
                  "versions": {n: metadata.version(n) for n in ("torch", "torchaudio", "torchvision",
                               "flashinfer-python", "sglang-kernel", "transformers")}}))
"""


@pytest.fixture(name="fleet", scope="module")
def fleet_fixture(sandbox, index_url, tmp_path_factory):
    inventory = sandbox(1)
    # from nothing: no venv, no stable path, no history
    clean = "rm -rf ~/ml-env ~/ml-env-* ~/.ml-env-*.incomplete ~/.ml-env.history ~/.cache/uv"
    shell(inventory, clean)
    tmp = str(tmp_path_factory.mktemp("sglang-stage"))
    yield {"inventory": inventory, "vars": stack_vars(index_url, tmp), "measured": {}, "tmp": tmp}
    # the host is shared: the stack's gigabytes go with the test
    shell(inventory, clean)


def measured(fleet, **values):
    fleet["measured"].update(values)
    with open(MEASURED, "w", encoding="utf-8") as handle:
        json.dump(fleet["measured"], handle, indent=1)


def test_the_stack_with_sglang_is_deployed_verified_and_active(fleet):
    rc, out, stats, seconds = deploy(fleet["inventory"], fleet["vars"], args=["-v"])
    assert rc == 0, out[-8000:]
    assert stats[HOST]["failed"] == 0, stats
    row = report_row(fleet["vars"])
    assert row["status"] == "ok" and row["activated"] is True, row
    link = shell(fleet["inventory"], "readlink ~/ml-env")
    assert link == row["venv"] == row["active_venv"] and "/ml-env-" in link
    # the preflight read sglang's requirements from the index and judged the pins
    words = " ".join(out.split())
    assert "sglang 0.5.23 (sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl, from the index) meets the stack" in words
    assert "pins: flashinfer-python 0.7.2, torch 2.14.1, torchaudio 2.11.0, torchvision 0.29.2" in words
    # the last line: an import may print before it
    facts = json.loads(python_script(fleet["inventory"], CONSISTENT, link + "/bin/python", fleet["tmp"]).splitlines()[-1])
    assert facts["sglang"] == facts["imported"] == SGLANG and facts["unmet"] == [] and facts["checked"] > 50, facts
    assert facts["versions"]["torch"] == "2.14.1" and facts["versions"]["torchaudio"] == "2.11.0", facts
    assert facts["versions"]["flashinfer-python"] == "0.7.2" and facts["versions"]["sglang-kernel"] == "0.4.10", facts
    # the freeze the report compares with holds sglang
    freeze = shell(fleet["inventory"], "cat ~/ml-env/gpufleet-freeze.txt").split()
    assert "sglang==0.5.23" in freeze and "torch==2.14.1" in freeze
    assert row["torch_version"] == "2.14.1+cu130" and row["flashinfer_version"] == "0.7.2", row
    installs = uv_times(out)
    assert sorted(installs) == ["flashinfer", "sglang", "torch_nightly"], installs
    wheels = glob.glob(os.path.join(WHEELS, "*.whl"))
    fleet["state_venv"] = link
    measured(fleet, deploy_seconds=round(seconds, 1), uv_installs=installs, wheelhouse_wheels=len(wheels),
             wheelhouse_bytes=sum(os.path.getsize(p) for p in wheels),
             venv_mib=int(shell(fleet["inventory"], "du -sm ~/ml-env/ | cut -f1")),
             host_uv_cache_mib=int(shell(fleet["inventory"], "du -sm ~/.cache/uv | cut -f1")))


def test_the_whole_chain_again_keeps_the_venv_and_sglang_changes_nothing(fleet):
    rc, out, stats, seconds = deploy(fleet["inventory"], dict(fleet["vars"], gpufleet_full_run=True))
    assert rc == 0, out[-8000:]
    assert "TASK [gpufleet.inference.sglang : Install | Plan the change under the stack's pins" in out, out[-8000:]
    assert task_changes(out, "sglang") == [], out[-8000:]
    assert shell(fleet["inventory"], "readlink ~/ml-env") == fleet["state_venv"]
    measured(fleet, full_chain_again_seconds=round(seconds, 1))


def test_a_torch_that_sglang_does_not_take_is_refused_before_any_change(fleet):
    before = shell(fleet["inventory"], "ls -d ~/ml-env-* | sort")
    extra = dict(fleet["vars"],
                 torch_nightly_versions={"torch": "2.13.0", "torchvision": "0.29.2", "torchaudio": "2.11.0"})
    rc, out, stats, seconds = deploy(fleet["inventory"], extra)
    assert rc != 0 and stats[HOST]["failed"] == 1, out[-6000:]
    row = report_row(extra)
    assert row["status"] == "failed" and row["stage"] == "preflight", row
    assert ("sglang 0.5.23 requires torch==2.14.1; torch_nightly_versions.torch is 2.13.0: set it to 2.14.1"
            in row["message"]), row["message"]
    assert "nothing was changed" in row["message"]
    # nothing installed, no new venv, the first one still active
    assert shell(fleet["inventory"], "ls -d ~/ml-env-* | sort") == before
    assert shell(fleet["inventory"], "readlink ~/ml-env") == fleet["state_venv"]
    assert task_changes(out, "uv_venv") == [] and task_changes(out, "torch_nightly") == []
    measured(fleet, refused_seconds=round(seconds, 1))
