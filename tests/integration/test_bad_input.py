"""Bad input on real sandbox hosts: every case is refused before any change.

Each case runs deploy.yml, verify.yml or rollback.yml on one sandbox host
with one bad value and checks that the run failed, that the failure
message names the variable and what it may be, that it failed in the stage
that validates (deploy: preflight), and that the host is exactly as before:
its venvs (every file with its mtime), the stable link, /etc/ld.so.conf.d,
/opt/gpufleet, the installed packages, the active venv's pip freeze and
~/.cache/gpufleet, read in one ssh command per snapshot.

The hosts first get a "previous" state: a real venv ~/ml-env-<hex> with a
marker distribution, ~/ml-env linked to it, and a loader file in
/etc/ld.so.conf.d written as root. The cases only reach the preflight, so the
module fixture runs three cases of one playbook in one run, one per host: the
run's inventory gives each host its case's values as host variables, and each
host's report row and snapshot are its own case's (a failure stays
attributable to its case). The cases refused on the controller before the
hosts' play (a host pattern, the play keywords, an empty inventory) run one
per run, with -e, side by side. A run is made when the first of its cases is
tested, so each test's time is that of its own run (not the whole module's in
the first test's set-up), and `-k CASE` runs only the run that holds CASE.
"""
import collections
import concurrent.futures
import difflib
import hashlib
import json
import os
import shlex
import subprocess
import tarfile

import pytest
import yaml

from conftest import ROOT, base_env, run_playbook, venv_bin

HOSTS = ["sbx1", "sbx2", "sbx3"]
STAGE = {"deploy": "preflight", "verify": "verify", "rollback": "rollback"}
# the stage of a case refused by the hosts check on the controller, for what the hosts set themselves
CONTROLLER = "controller"
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "sgl_kernel_fixture")
with open(os.path.join(ROOT, "inventories", "sandbox", "group_vars", "all.yml"), encoding="utf-8") as _fh:
    SANDBOX_EXPECT = yaml.safe_load(_fh)["gpufleet_expect"]

Case = collections.namedtuple("Case", "id playbook extra words inventory xfail limit stage")
Outcome = collections.namedtuple("Outcome", "rc out row after")


def case(case_id, extra, *words, playbook="deploy", inventory="sandbox", xfail=None, limit=False, stage=None):
    """One bad input: extra vars (a dict, or a function of the fixture's context),
    and the words the failure message must contain (the variable first). limit:
    run alone, with -e and --limit (the controller's checks are skipped then);
    stage: where it is refused, when not the playbook's validating stage."""
    return Case("%s-%s" % (playbook, case_id), playbook, extra, words, inventory, xfail, limit,
                stage or STAGE[playbook])


def patch_rule(**kw):
    return [dict({"name": "bad-rule", "file": "CMakeLists.txt", "reason": "bad input test",
                  "pattern": "project(", "replacement": "project("}, **kw)]


CUDA = {"gpufleet_cuda_toolkit_enabled": True}
GPU_BUILD = {"sgl_kernel_cuda": True}
THREE_PACKAGES = {"torch_nightly_packages": ["torch", "torchvision", "torchaudio"],
                  "torch_nightly_cuda_variant": "cu130"}

CASES = [
    # torch_nightly: dates, versions, variant, packages, index strategy
    case("nightly-date-dashes", {"torch_nightly_date": "2026-03-07"},
         "torch_nightly_date must be a real date written YYYYMMDD", "(got '2026-03-07')"),
    case("nightly-date-feb-30", {"torch_nightly_date": "20260230"},
         "torch_nightly_date must be a real date", "(got '20260230')"),
    case("torch-packages-three-dates", dict(THREE_PACKAGES, torch_nightly_versions={
        "torch": "2.12.0.dev20260307+cu130", "torchvision": "0.27.0.dev20260306+cu130",
        "torchaudio": "2.12.0.dev20260308+cu130"}),
        "torch_nightly_versions", "must pin one nightly stack", "one date", "nightly pins from different dates"),
    case("torch-version-not-pep440", {"torch_nightly_versions": {"torch": "two.thirteen"}},
         "torch_nightly_versions", "must pin one nightly stack", "not a PEP 440 version: 'two.thirteen'"),
    case("torch-variant-unknown", {"torch_nightly_cuda_variant": "cu999"},
         "torch_nightly_cuda_variant must be one of cu126, cu128, cu129, cu130, cpu", "(got 'cu999')"),
    case("torch-package-unknown", {"torch_nightly_packages": ["torch", "torchtext"]},
         "torch_nightly_packages must list torch and only torch, torchvision, torchaudio", "(got torch, torchtext)"),
    case("torch-index-strategy-unknown", {"torch_nightly_index_strategy": "best"},
         "torch_nightly_index_strategy must be one of", "unsafe-best-match", "got: best"),
    # flashinfer
    case("flashinfer-version-word", {"flashinfer_version": "latest"},
         "flashinfer_version / flashinfer_versions must be versions like 0.6.5.dev20260307", "'latest'"),
    case("flashinfer-versions-mixed", {"flashinfer_versions": {"flashinfer-cubin": "0.6.1.dev20260308"}},
         "flashinfer_versions must give the flashinfer packages one version", "'0.6.1.dev20260308'"),
    # cuda_toolkit (enabled for these: the sandbox profile leaves it out)
    case("cuda-method-unknown", dict(CUDA, cuda_toolkit_method="conda"),
         "cuda_toolkit_method must be one of", "existing", "got: conda"),
    case("cuda-version-major-only", dict(CUDA, cuda_toolkit_version="13"),
         "cuda_toolkit_version must be major.minor", "(got '13')"),
    case("cuda-pip-sha256-malformed", dict(CUDA, cuda_toolkit_method="pip", cuda_toolkit_pip_extra_packages=[
        {"name": "nvidia-cublas", "version": "13.0.0.19", "sha256": "0123abcd"}]),
        "cuda_toolkit_pip_extra_packages must have", "a sha256 of 64 lower-case hex digits", "0123abcd"),
    # sgl_kernel: arch list, build jobs, sources, patch rules, builder group
    case("arch-12.0b", dict(GPU_BUILD, sgl_kernel_arch_list=["12.0b"]),
         "sgl_kernel_arch_list entries must be MAJOR.MINOR", "12.0a", "(got 12.0b)"),
    case("arch-none-for-a-cuda-build", dict(GPU_BUILD, sgl_kernel_arch_list=[]),
         "sgl_kernel_arch_list must name at least one architecture", "(got none"),
    case("arch-not-a-cuda-target", dict(GPU_BUILD, sgl_kernel_arch_list=["9.0a", "9.1a"]),
         "sgl_kernel_arch_list: '9.1a' is not a CUDA target; allowed: 7.5, 8.0", "12.0a"),
    case("cuda-build-without-nvcc", dict(GPU_BUILD, sgl_kernel_arch_list=["12.0a"]),
         "sgl_kernel_cuda is true but there is no nvcc at /usr/local/cuda-13.0/bin/nvcc", "sgl_kernel_cuda_home"),
    case("max-jobs-negative", {"sgl_kernel_max_jobs": -1}, "sgl_kernel_max_jobs must be an integer >= 0", "(got -1)"),
    case("compile-threads-zero", {"sgl_kernel_compile_threads": 0},
         "sgl_kernel_compile_threads must be an integer >= 1", "(got 0)"),
    case("sgl-source-unknown", {"sgl_kernel_source": "svn"}, "sgl_kernel_source must be one of", "archive", "got: svn"),
    case("archive-sha256-mismatch", lambda ctx: {
        "sgl_kernel_source": "archive", "sgl_kernel_archive_url": "file://" + ctx["archive"],
        "sgl_kernel_archive_sha256": hashlib.sha256(b"another archive").hexdigest(),
        "sgl_kernel_artifact_dir": os.path.join(ctx["tmp"], "artifacts")},
        "sgl_kernel_archive_sha256 must be the sha256 of the archive at sgl_kernel_archive_url", "did not match"),
    case("patch-rule-regex-invalid", {"sgl_kernel_patch_rules_extra": patch_rule(pattern="^(project[", regex=True)},
         "sgl_kernel_patch_rules_extra[0] (bad-rule).pattern must be a valid Python regular expression", "'^(project['"),
    case("patch-rule-two-actions", {"sgl_kernel_patch_rules_extra": patch_rule(insert_after="x")},
         "sgl_kernel_patch_rules_extra[0] (bad-rule) must have exactly one of replacement, insert_after, insert_before",
         "(got replacement, insert_after)"),
    case("builders-group-not-in-inventory", {"sgl_kernel_builders_group": "gpu_builders"},
         "sgl_kernel_builders_group must name a group of the inventory, one of sandbox", "(got 'gpu_builders')"),
    # uv_venv: paths, Python, wheelhouse
    case("venv-link-relative", {"gpufleet_venv_link": "ml-env"},
         "gpufleet_venv_link must be an absolute or ~/ path", "(got 'ml-env')"),
    case("venv-link-trailing-slash", {"gpufleet_venv_link": "~/ml-env/"},
         "gpufleet_venv_link must be", "not ending in /", "(got '~/ml-env/')"),
    case("venv-link-root-owned", {"gpufleet_venv_link": "/usr/lib/ml-env"},
         "(gpufleet_venv_link) must be a path in a folder that exists and that the deploy user", "/usr/lib is not writable"),
    case("python-version-missing", {"uv_venv_python_version": "3.9"},
         "uv_venv_python_version must be a Python that", "found: 3.11", "got '3.9'"),
    case("wheelhouse-missing", {"gpufleet_wheelhouse": "/nonexistent/wheelhouse"},
         "(gpufleet_wheelhouse) must be '' (install from the indexes) or a folder", "'/nonexistent/wheelhouse'"),
    # the playbook's own variables
    case("expect-device-count-word", {"gpufleet_expect": dict(SANDBOX_EXPECT, device_count="many")},
         "gpufleet_expect.device_count must be an integer >= 0", "(got 'many')"),
    case("expect-not-a-dict", {"gpufleet_expect": "many"}, "gpufleet_expect must be a dict", "(got string 'many')"),
    case("expect-unknown-key", {"gpufleet_expect": {"devices": 0}},
         "gpufleet_expect keys must be among", "device_count", "(got 'devices')"),
    # kernel checks: names, tolerances, the list itself
    case("expect-kernels-unknown", {"gpufleet_expect": dict(SANDBOX_EXPECT, kernels=["sgl_kernel.rmsnorm", "sgl_kernel.moe"])},
         "gpufleet_expect.kernels must be a list of kernel checks among torch.fp8_scaled_mm", "unknown: 'sgl_kernel.moe'"),
    case("kernel-tolerance-zero", {"gpufleet_kernel_tolerances": {"sgl_kernel.rmsnorm": 0}},
         "gpufleet_kernel_tolerances.sgl_kernel.rmsnorm must be a positive number", "(got 0)"),
    case("kernel-tolerances-list", {"gpufleet_kernel_tolerances": [0.01]},
         "gpufleet_kernel_tolerances must be a dict of kernel check name -> positive number", "(got list [0.01])"),
    case("flashinfer-warm-timeout-zero", {"flashinfer_jit_warm_timeout": 0},
         "flashinfer_jit_warm_timeout must be a number of seconds > 0", "(got 0)"),
    case("keep-previous-negative", {"gpufleet_keep_previous_venvs": -1},
         "gpufleet_keep_previous_venvs must be an integer >= 0", "(got -1)"),
    # URLs and lists, checked even where this mode does not use them (a
    # wheelhouse instead of the index, a git source instead of an archive)
    case("torch-index-url-no-scheme", {"torch_nightly_index_url": "download.pytorch.org/whl/nightly/cu130"},
         "torch_nightly_index_url must be a URL starting with one of http://, https://, file://",
         "(got 'download.pytorch.org/whl/nightly/cu130')"),
    case("torch-extra-index-string", {"torch_nightly_extra_index_urls": "https://a.example/simple"},
         "torch_nightly_extra_index_urls must be a list", "(got string 'https://a.example/simple')"),
    case("cuda-apt-url-credentials", dict(CUDA, cuda_toolkit_apt_repo_url="https://mirror:s3cret@cuda.example/repos/debian12/x86_64/"),
         "cuda_toolkit_apt_repo_url must not carry credentials (user:password@)", "(got 'https://***@cuda.example/"),
    case("sgl-archive-url-no-host", {"sgl_kernel_archive_url": "https:///sglang.tar.gz"},
         "sgl_kernel_archive_url must be a URL with a host after https://", "(got 'https:///sglang.tar.gz')"),
    case("sgl-repo-not-a-url", {"sgl_kernel_repo": "github.com/sgl-project/sglang"},
         "sgl_kernel_repo must be a URL starting with one of https://, http://, ssh://, git://, file://",
         "(got 'github.com/sgl-project/sglang')"),
    case("flashinfer-packages-string", {"flashinfer_packages": "flashinfer-python,flashinfer-cubin"},
         "flashinfer_packages must be a list", "(got string 'flashinfer-python,flashinfer-cubin')"),
    case("expect-tflops-negative", {"gpufleet_expect": dict(SANDBOX_EXPECT, min_smoke_tflops=-5)},
         "gpufleet_expect.min_smoke_tflops must be a number >= 0", "(got -5)"),
    case("adopt-not-a-bool", {"gpufleet_adopt_existing_venv": "maybe"},
         "gpufleet_adopt_existing_venv", "'maybe'"),
    case("collectives-size-zero", {"gpufleet_collectives_sizes_mib": [64, 0]},
         "gpufleet_collectives_sizes_mib must be a non-empty list of different positive sizes in MiB", "(got [64, 0])"),
    case("outlier-ratio-above-one", {"gpufleet_outlier_ratio": 1.5},
         "gpufleet_outlier_ratio must be a number > 0 and <= 1", "(got 1.5)"),
    case("health-unknown-field", {"gpufleet_expect": dict(SANDBOX_EXPECT, min_pcie_speed=5)},
         "gpufleet_expect keys must be among", "min_pcie_gen", "(got 'min_pcie_speed')"),
    # a config.json path on the host is read there by the preflight, before the install (not by the verification)
    case("model-config-missing", {"gpufleet_model": "/nonexistent/model/config.json"},
         "gpufleet_model: /nonexistent/model/config.json does not exist on the host"),
    case("textfile-dir-not-writable", {"gpufleet_textfile_dir": "/etc"},
         "gpufleet_textfile_dir must be an existing directory that deploy can write", "(got '/etc': not writable)"),
    # verify.yml
    case("expect-device-count-word", {"gpufleet_expect": dict(SANDBOX_EXPECT, device_count="many")},
         "gpufleet_expect.device_count must be an integer >= 0", "(got 'many')", playbook="verify"),
    case("expect-not-a-dict", {"gpufleet_expect": ["device_count"]},
         "gpufleet_expect must be a dict", "(got list ['device_count'])", playbook="verify"),
    case("expect-kernels-not-a-list", {"gpufleet_expect": dict(SANDBOX_EXPECT, kernels="sgl_kernel.rmsnorm")},
         "gpufleet_expect.kernels must be a list of kernel check names", "(got 'sgl_kernel.rmsnorm')", playbook="verify"),
    case("kernel-tolerance-word", {"gpufleet_kernel_tolerances": {"flashinfer.rmsnorm": "tight"}},
         "gpufleet_kernel_tolerances.flashinfer.rmsnorm must be a positive number", "(got 'tight')", playbook="verify"),
    case("hosts-match-nothing", {"gpufleet_hosts": "gpu*"},
         "gpufleet_hosts must be a host pattern that matches at least one host", "(got 'gpu*')", playbook="verify"),
    case("health-pcie-gen-7", {"gpufleet_expect": dict(SANDBOX_EXPECT, min_pcie_gen=7)},
         "gpufleet_expect.min_pcie_gen must be a PCIe generation 1-6", "(got 7)", playbook="verify"),
    case("health-remaps-word", {"gpufleet_expect": dict(SANDBOX_EXPECT, no_pending_remaps="hopefully")},
         "gpufleet_expect.no_pending_remaps must be true or false", "(got 'hopefully')", playbook="verify"),
    case("textfile-dir-missing", {"gpufleet_textfile_dir": "/var/lib/node_exporter/textfile"},
         "gpufleet_textfile_dir must be an existing directory that deploy can write",
         "(got '/var/lib/node_exporter/textfile': does not exist)", playbook="verify"),
    # a serving fleet's inputs: the depth of a run, the hooks (a negative
    # max_kernel_proof_age_hours is refused by the same rule as every gpufleet_expect
    # value: unit tests; twelve verify cases are four runs)
    case("verify-mode-unknown", {"gpufleet_verify_mode": "quick"},
         "gpufleet_verify_mode", "auto, in_service, full", "quick", playbook="verify"),
    case("drain-hook-a-shell-string", {"gpufleet_drain_hook": "scontrol update nodename=sbx1 state=drain"},
         "gpufleet_drain_hook must be a command as a list of strings (argv, run without a shell), the path of a task file",
         "(got the string 'scontrol update nodename=sbx1 state=drain'", playbook="verify"),
    case("collectives-not-a-bool", {"gpufleet_verify_collectives": "sometimes"},
         "gpufleet_verify_collectives", "'sometimes'", playbook="verify"),
    case("collectives-sizes-string", {"gpufleet_collectives_sizes_mib": "64,256"},
         "gpufleet_collectives_sizes_mib must be a non-empty list of different positive sizes in MiB", '(got "64,256")',
         playbook="verify"),
    case("allreduce-size-not-measured", {"gpufleet_expect": dict(SANDBOX_EXPECT, min_allreduce_busbw_gbps=5,
                                                                 allreduce_size_mib=256)},
         "gpufleet_expect.allreduce_size_mib must be one of gpufleet_collectives_sizes_mib [1, 16, 64]", "(got 256)",
         playbook="verify"),
    # rollback.yml
    case("expect-not-a-dict", {"gpufleet_expect": "many"},
         "gpufleet_expect must be a dict", "(got string 'many')", playbook="rollback"),
    case("own-expect-tflops-word", {"gpufleet_rollback_expect": {"min_smoke_tflops": "fast"}},
         "gpufleet_rollback_expect.min_smoke_tflops must be a number", "(got 'fast')", playbook="rollback"),
    case("textfile-dir-relative", {"gpufleet_textfile_dir": "metrics"},
         "gpufleet_textfile_dir must be an absolute path without spaces", "(got 'metrics')", playbook="rollback"),
    case("ignore-expect-unknown-key", {"gpufleet_rollback_ignore_expect": ["torch_versions"]},
         "gpufleet_rollback_ignore_expect keys must be among", "torch_version", "(got 'torch_versions')",
         playbook="rollback"),
    case("inventory-without-hosts", {},
         "gpufleet_hosts must be a host pattern that matches at least one host", "has 0 host(s)",
         playbook="rollback", inventory="empty"),
    case("hosts-match-nothing", {"gpufleet_hosts": "gpu*"},
         "gpufleet_hosts must be a host pattern that matches at least one host", "(got 'gpu*')"),
    # under --limit the controller's check does not run: each host refuses it
    case("serial-word-under-limit", {"gpufleet_serial": "abc"},
         "gpufleet_serial must be a number of hosts >= 1, a percentage 1%-100% or a list of them", '(got "abc")',
         limit=True),
    case("max-fail-word-under-limit", {"gpufleet_max_fail_percentage": "abc"},
         "gpufleet_max_fail_percentage must be an integer 0-100", "(got 'abc')", playbook="rollback", limit=True),
    # the lock is the first thing taken on a host: its path is refused before
    case("host-lock-path-relative", {"gpufleet_host_lock_path": "relative/lock"},
         "gpufleet_host_lock_path must be an absolute path without spaces", "(got 'relative/lock')", stage="lock"),
    # the hardware is judged before the CUDA install, the torch download, the build
    case("device-count-wrong", {"gpufleet_expect": dict(SANDBOX_EXPECT, device_count=8)},
         "device_count: expected 8, found 0"),
    # play keywords (-e only), checked on the controller before the hosts' play
    case("serial-zero", {"gpufleet_serial": 0},
         "gpufleet_serial must be a number of hosts >= 1, a percentage 1%-100% or a list of them", "(got 0)"),
    case("max-fail-percentage-150", {"gpufleet_max_fail_percentage": 150},
         "gpufleet_max_fail_percentage must be an integer 0-100", "(got '150')", playbook="rollback"),
    # each host's inputs, judged on the controller before the hosts' play (a run without --limit): once, with
    # the hosts that have the value
    case("expect-word-on-every-host", {"gpufleet_expect": dict(SANDBOX_EXPECT, device_count="many")},
         "gpufleet_expect.device_count must be an integer >= 0", "(got 'many') (on sbx1, sbx2 and sbx3)",
         playbook="verify", stage=CONTROLLER),
    # what the hosts set themselves, judged on the controller before the hosts' play
    case("unknown-variable", {"gpufleet_expext": {"device_count": 7}},
         "gpufleet_expext is not an input of this collection; did you mean gpufleet_expect?",
         "gpufleet_allowed_variables", stage=CONTROLLER),
    case("unknown-variable", {"verify_tiemout": 5},
         "verify_tiemout is not an input of this collection; did you mean verify_timeout?", playbook="rollback",
         stage=CONTROLLER),
    case("nightly-date-not-the-pins", {"torch_nightly_date": "20260310",
                                       "torch_nightly_versions": {"torch": "2.13.0.dev20260307+cpu"}},
         "torch_nightly_date must be the date of the nightly versions pinned in torch_nightly_versions",
         "(got '20260310'; pinned: torch 2.13.0.dev20260307+cpu", stage=CONTROLLER),
    # under --limit (each batch of host cases runs so) each host refuses what it set itself
    case("unknown-variable-in-host-vars", {"torch_nightly_dates": "20260310"},
         "torch_nightly_dates is not an input of this collection; did you mean torch_nightly_date?"),
    case("unknown-variable-in-host-vars", {"gpufleet_rollback_expects": {"device_count": 0}},
         "gpufleet_rollback_expects is not an input of this collection; did you mean gpufleet_rollback_expect?",
         playbook="rollback"),
    # a float's type error in the variable's own words, no Python class
    case("min-free-gib-with-a-unit", {"gpufleet_min_free_gib": "60GB"},
         "gpufleet_min_free_gib must be a number of GiB", "(got '60GB')"),
]
# refused on the controller, before the hosts' play: no report row
CONTROLLER_VARS = ("gpufleet_hosts", "gpufleet_serial", "gpufleet_max_fail_percentage")
NO_HOSTS = {c.id for c in CASES if not c.limit and (c.inventory == "empty" or c.stage == CONTROLLER
            or any(k in (c.extra if isinstance(c.extra, dict) else {}) for k in CONTROLLER_VARS))}
# run one per run, with -e: the controller's cases and those under --limit
ALONE = NO_HOSTS | {c.id for c in CASES if c.limit}

# The previous state: a real venv with a marker distribution, the stable link
# to it, and a root-owned loader file.
PREPARE = r"""set -eu
rm -rf ~/ml-env ~/ml-env-* ~/.ml-env.history
mkdir -p ~/.ansible/tmp ~/.cache
venv=~/ml-env-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
python3 -m venv "$venv"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
mkdir "$site/gpufleet_bad_input_marker-1.0.dist-info"
printf 'Metadata-Version: 2.1\nName: gpufleet-bad-input-marker\nVersion: 1.0\n' \
  > "$site/gpufleet_bad_input_marker-1.0.dist-info/METADATA"
echo 'PREVIOUS = True' > "$site/gpufleet_bad_input_marker.py"
ln -sfn "$venv" ~/ml-env
echo /opt/gpufleet-bad-input/lib | sudo -n tee /etc/ld.so.conf.d/gpufleet-test.conf >/dev/null
"""
CLEANUP = "rm -rf ~/ml-env ~/ml-env-* && sudo -n rm -f /etc/ld.so.conf.d/gpufleet-test.conf"
SNAPSHOT = r"""set +e
echo '== home'; ls -la --time-style=full-iso ~
echo '== venvs'; for d in ~/ml-env-*; do echo "$d"; find "$d" -printf '%M %u %s %T@ %P\n' | sort; done
echo '== stable link'; readlink ~/ml-env || echo none
echo '== history'; cat ~/.ml-env.history 2>&1
echo '== ld.so.conf.d'; ls -la --time-style=full-iso /etc/ld.so.conf.d; sha256sum /etc/ld.so.conf.d/*
echo '== /opt/gpufleet'; ls -laR --time-style=full-iso /opt/gpufleet 2>&1
echo '== packages'; dpkg-query -W | sha256sum
echo '== pip freeze'; ~/ml-env/bin/python -B -m pip freeze --all 2>&1
echo '== cache'; ls -laR --time-style=full-iso ~/.cache/gpufleet 2>&1
exit 0
"""


def ssh(ctx, host, script):
    """One ssh command on a sandbox host, with the inventory's connection settings."""
    hv = ctx["hostvars"][host]
    argv = ["ssh", "-i", hv["ansible_ssh_private_key_file"], "-p", str(hv["ansible_port"]),
            "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"] + shlex.split(hv.get("ansible_ssh_common_args", "")) \
        + ["%s@%s" % (hv["ansible_user"], hv["ansible_host"]), "bash -c " + shlex.quote(script)]
    # stdin from /dev/null: ssh would set the shared stdin non-blocking, which
    # the ansible-playbook runs of the other threads refuse
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, "%s: %s%s" % (host, proc.stdout, proc.stderr)
    return proc.stdout


def report_row(report_dir, host):
    path = os.path.join(report_dir, "fleet-report.json")
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as fh:
        return {r["host"]: r for r in json.load(fh)["hosts"]}.get(host)


def run_case(ctx, c, host):
    """A case of ALONE: one run of the whole inventory (of host alone where the
    case says limit), its values with -e; host is the one whose row and snapshot are read."""
    report_dir = os.path.join(ctx["tmp"], c.id)
    result = run_playbook(os.path.join(ROOT, "playbooks", c.playbook + ".yml"),
                          ctx["inventories"][c.inventory], extra_vars=dict(values(ctx, c), gpufleet_report_dir=report_dir),
                          timeout=600, limit=host if c.limit else None,
                          # each message on one line, its quotes as they are
                          env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json"})
    return Outcome(result.rc, result.out, report_row(report_dir, host), ssh(ctx, host, SNAPSHOT))


def values(ctx, c):
    return c.extra(ctx) if callable(c.extra) else c.extra


def run_batch(ctx, number, batch):
    """Cases [(host, case)] of one playbook in one run: the inventory is the
    sandbox's hosts and group_vars, with host_vars/<host>.yml holding that
    host's case. Returns {case id: (host, Outcome)}."""
    inventory = os.path.join(ctx["tmp"], "inventory-%02d" % number)
    os.makedirs(os.path.join(inventory, "host_vars"))
    for name in ("hosts.yml", "group_vars"):
        os.symlink(os.path.join(ctx["inventories"]["sandbox"], name), os.path.join(inventory, name))
    for host, c in batch:
        with open(os.path.join(inventory, "host_vars", host + ".yml"), "w", encoding="utf-8") as fh:
            yaml.safe_dump(values(ctx, c), fh)
    report_dir = os.path.join(ctx["tmp"], "run-%02d" % number)
    result = run_playbook(os.path.join(ROOT, "playbooks", batch[0][1].playbook + ".yml"), inventory,
                          extra_vars={"gpufleet_report_dir": report_dir},
                          limit=",".join(host for host, dummy in batch), timeout=600,
                          env={"ANSIBLE_CALLBACK_RESULT_FORMAT": "json"})
    with concurrent.futures.ThreadPoolExecutor(len(batch)) as pool:
        after = dict(zip([h for h, dummy in batch], pool.map(lambda hc: ssh(ctx, hc[0], SNAPSHOT), batch)))
    return {c.id: (host, Outcome(result.rc, result.out, report_row(report_dir, host), after[host]))
            for host, c in batch}


def batches(cases):
    """The host-level cases, in order, as runs of up to len(HOSTS) cases of one playbook."""
    runs = []
    for playbook in STAGE:
        same = [c for c in cases if c.playbook == playbook]
        runs += [list(zip(HOSTS, same[i:i + len(HOSTS)])) for i in range(0, len(same), len(HOSTS))]
    return runs


class Outcomes:
    """The runs of the module, each made when one of its cases is first asked
    for: the cases of ALONE in one go (side by side, as they reach no host or
    one host each), each batch of batches() in its own run."""

    def __init__(self, ctx, before):
        self.ctx, self.before, self.results = ctx, before, {}
        self.group = {}  # case id -> the run that gives its outcome
        alone = [c for c in CASES if c.limit] + [c for c in CASES if c.id in NO_HOSTS]
        assert len([c for c in alone if c.limit]) <= len(HOSTS)
        for c in alone:
            self.group[c.id] = ("alone", alone)
        for number, batch in enumerate(batches([c for c in CASES if c.id not in ALONE])):
            for dummy, c in batch:
                self.group[c.id] = (number, batch)

    def __getitem__(self, case_id):
        if case_id not in self.results:
            key, cases = self.group[case_id]
            if key == "alone":
                self.results.update(self.run_alone(cases))
            else:
                self.results.update(run_batch(self.ctx, key, cases))
        return self.results[case_id]

    def run_alone(self, alone):
        # refused on the controller: reach no host, so three at once; those
        # under --limit reach their host, one to a host (they run side by side;
        # the others only read the hosts)
        with concurrent.futures.ThreadPoolExecutor(len(HOSTS)) as pool:
            return dict(zip([c.id for c in alone], pool.map(
                lambda ic: (HOSTS[ic[0] % len(HOSTS)], run_case(self.ctx, ic[1], HOSTS[ic[0] % len(HOSTS)])),
                enumerate(alone))))


@pytest.fixture(scope="module", name="outcomes")
def outcomes_fixture(sandbox, tmp_path_factory):
    inventory = sandbox(len(HOSTS))
    tmp = str(tmp_path_factory.mktemp("bad-input"))
    listed = subprocess.run([venv_bin("ansible-inventory"), "-i", inventory, "--list"], cwd=ROOT, env=base_env(),
                            capture_output=True, text=True, timeout=120, check=True).stdout
    empty = os.path.join(tmp, "empty-inventory")
    os.makedirs(empty)
    with open(os.path.join(empty, "hosts.yml"), "w", encoding="utf-8") as fh:
        fh.write("all:\n  children:\n    sandbox:\n      hosts: {}\n")
    archive = os.path.join(tmp, "sgl_kernel_fixture.tar.gz")
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(FIXTURE, arcname="sgl_kernel_fixture")
    ctx = {"tmp": tmp, "archive": archive, "hostvars": json.loads(listed)["_meta"]["hostvars"],
           "inventories": {"sandbox": inventory, "empty": empty}}
    with concurrent.futures.ThreadPoolExecutor(len(HOSTS)) as pool:
        before = dict(zip(HOSTS, pool.map(lambda h: ssh(ctx, h, PREPARE + SNAPSHOT), HOSTS)))
    for host, snap in before.items():
        # the snapshot sees the previous state it must protect
        assert "gpufleet-bad-input-marker==1.0" in snap and "gpufleet-test.conf" in snap, snap
    yield Outcomes(ctx, before)
    with concurrent.futures.ThreadPoolExecutor(len(HOSTS)) as pool:
        list(pool.map(lambda h: ssh(ctx, h, CLEANUP), HOSTS))


@pytest.mark.parametrize("c", [
    pytest.param(c, id=c.id, marks=[pytest.mark.xfail(strict=True, reason=c.xfail)] if c.xfail else [])
    for c in CASES])
def test_bad_input_is_refused_before_any_change(outcomes, c):
    host, o = outcomes[c.id]
    assert o.rc != 0, o.out[-4000:]
    if c.id in NO_HOSTS:
        message = o.out
    else:
        assert o.row is not None, "no fleet report: " + o.out[-4000:]
        assert (o.row["status"], o.row["stage"]) == ("failed", c.stage), o.row
        message = o.row["message"]
    message = " ".join(message.split())
    # a credential given in a bad value is never repeated
    assert "s3cret" not in o.out
    missing = [w for w in c.words if " ".join(w.split()) not in message]
    assert not missing, "%s not in the failure message: %s" % (missing, message[-3000:])
    before = outcomes.before[host]
    assert o.after == before, "%s changed:\n%s" % (host, "\n".join(
        difflib.unified_diff(before.splitlines(), o.after.splitlines(), "before", "after", lineterm="")))


def test_enough_cases():
    assert len(CASES) >= 50 and len({c.id for c in CASES}) == len(CASES)


# The offline inventory check and an unreachable host's output: no sandbox
# host, hosts that resolve nowhere or listen on no port, and an ssh that
# leaves a mark if anything ever ran it.
OFFLINE_HOSTS = {"gpu1": {"ansible_host": "127.0.0.1", "ansible_port": 1},
                 "gpu2": {"ansible_host": "gpufleet-nowhere.invalid"},
                 "gpu3": {"ansible_host": "gpufleet-nowhere.invalid", "gpufleet_outlier_ratio": 1.5}}


def offline_inventory(tmp_path, group_vars):
    """An inventory of OFFLINE_HOSTS whose ssh writes tmp_path/ssh-ran; returns (inventory, that mark)."""
    mark = tmp_path / "ssh-ran"
    ssh_stub = tmp_path / "ssh"
    ssh_stub.write_text("#!/bin/sh\ntouch %s\nexit 255\n" % shlex.quote(str(mark)))
    ssh_stub.chmod(0o755)
    inventory = tmp_path / "inventory"
    (inventory / "group_vars").mkdir(parents=True)
    hosts = {h: dict(v, ansible_connection="ssh", ansible_ssh_executable=str(ssh_stub)) for h, v in OFFLINE_HOSTS.items()}
    (inventory / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {"gpus": {"hosts": hosts}}}}))
    (inventory / "group_vars" / "gpus.yml").write_text(yaml.safe_dump(dict(
        group_vars, gpufleet_report_dir=str(tmp_path / "reports"), gpufleet_model="/models/m/config.json")))
    return inventory, mark


def test_offline_check_judges_every_host_without_connecting(tmp_path):
    inventory, mark = offline_inventory(tmp_path, {"gpufleet_expext": {"device_count": 7},
                                                   "gpufleet_expect": {"device_count": "many"}})
    result = run_playbook(os.path.join(ROOT, "playbooks", "check_inventory.yml"), inventory, timeout=120)
    assert result.rc == 2, result.out
    assert not mark.exists() and "unreachable" not in result.out.split("PLAY RECAP")[0].lower(), result.out
    assert set(result.stats) == {"localhost"}, result.stats
    out = " ".join(result.out.split("fatal: [localhost]", 1)[1].split())
    for problem in ("gpufleet_expext is not an input of this collection; did you mean gpufleet_expect? "
                    "(set for gpu1, gpu2 and gpu3",
                    "gpufleet_expect.device_count must be an integer >= 0 (got 'many') (on gpu1, gpu2 and gpu3)",
                    "gpufleet_outlier_ratio must be a number > 0 and <= 1 (got 1.5) (on gpu3)"):
        assert out.count(problem) == 1, (problem, out)
    # the verification's copy of gpufleet_expect is the same problem, not said again
    assert "verify_expect" not in out, out
    said = " ".join(result.out.split())
    assert ("gpufleet_model: not checked offline: the config.json at /models/m/config.json on gpu1, gpu2 and gpu3"
            in said), result.out


def test_offline_check_passes_a_good_inventory(tmp_path):
    # a hook's template names what only the run defines (fleet_hook_reason): judged there, not refused here
    inventory, mark = offline_inventory(tmp_path, {"gpufleet_expect": {"device_count": 8}, "gpufleet_drain_hook": [
        "scontrol", "update", "nodename={{ inventory_hostname }}", "state=drain", "reason={{ fleet_hook_reason }}"]})
    result = run_playbook(os.path.join(ROOT, "playbooks", "check_inventory.yml"), inventory,
                          extra_vars={"gpufleet_hosts": "gpu1:gpu2"}, timeout=120)
    assert result.rc == 0, result.out
    assert not mark.exists(), result.out
    assert "not checked offline" in result.out and "gpu3" not in result.out, result.out


def test_unreachable_host_is_one_line(tmp_path):
    inventory, mark = offline_inventory(tmp_path, {})
    result = run_playbook(os.path.join(ROOT, "playbooks", "rollback.yml"), inventory, extra_vars={"gpufleet_hosts": "gpu1:gpu2"},
                          timeout=300, env={"ANSIBLE_STDOUT_CALLBACK": "gpufleet.inference.fleet"})
    assert result.rc == 2 and mark.exists(), result.out
    body = result.out.split("PLAY RECAP", 1)[0]
    # the report's tasks run once, on the controller: said as its, not as the first host's
    report = [t for t in body.split("\nTASK [") if " : Report | " in t.split("\n", 1)[0]]
    assert len(report) == 2 and all("[localhost]" in t for t in report), body
    for host in ("gpu1", "gpu2"):
        lines = [line for line in body.splitlines() if "[%s]" % host in line]
        assert len(lines) == 1 and lines[0].startswith("unreachable: [%s]: " % host), (host, lines, result.out)
    assert "Origin:" not in body and "Traceback" not in body, body


def test_a_run_refuses_a_bad_input_once_on_the_controller(tmp_path):
    """verify.yml --check judges every host's inputs before any host is touched: a bad value is said once, with
    the hosts that have it, and the run writes no report (nor a history entry)."""
    inventory, mark = offline_inventory(tmp_path, {"gpufleet_expect": {"device_count": "many"}})
    result = run_playbook(os.path.join(ROOT, "playbooks", "verify.yml"), inventory, check=True, timeout=120)
    assert result.rc == 2 and not mark.exists(), result.out
    assert set(result.stats) == {"localhost"}, result.stats
    said = " ".join(result.out.split())
    assert "gpufleet_expect.device_count must be an integer >= 0 (got 'many') (on gpu1, gpu2 and gpu3)" in said, said
    assert not any("[%s]" % host in said for host in OFFLINE_HOSTS), result.out
    assert "not checked offline" not in said and not (tmp_path / "reports").exists(), result.out


def test_deploy_refuses_two_gpu_model_groups_and_an_unwritable_report_dir_before_any_host(tmp_path):
    """A host in two GPU models' groups (each sets gpufleet_expect) and a report directory the controller cannot
    make: both named by deploy.yml's hosts check on the controller, no host reached, no report written."""
    inventory, mark = offline_inventory(tmp_path, {})
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
    gpus = hosts["all"]["children"]["gpus"]["hosts"]
    hosts["all"]["children"].update({"h200": {"hosts": {"gpu1": None, "gpu2": None}},
                                     "rtx_pro_6000": {"hosts": {"gpu1": None}}})
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts))
    (inventory / "group_vars" / "h200.yml").write_text(yaml.safe_dump({"gpufleet_expect": {"device_count": 8}}))
    (inventory / "group_vars" / "rtx_pro_6000.yml").write_text(yaml.safe_dump({"gpufleet_expect": {"device_count": 4}}))
    result = run_playbook(os.path.join(ROOT, "playbooks", "deploy.yml"), inventory, timeout=120,
                          extra_vars={"gpufleet_report_dir": "/proc/gpufleet"})
    assert result.rc == 2 and not mark.exists(), result.out
    assert set(result.stats) == {"localhost"} and sorted(gpus) == ["gpu1", "gpu2", "gpu3"], result.stats
    said = " ".join(result.out.split())
    assert ("gpu1 is in h200 and rtx_pro_6000, which both set gpufleet_expect: a host takes one GPU model's group"
            in said), said
    assert "gpufleet_report_dir must be a directory the controller can make and write (got '/proc/gpufleet'" in said
    assert not os.path.exists("/proc/gpufleet")
