"""The alert rules the collection ships (extras/prometheus), proven with the
real promtool from Debian's prometheus package (pinned, sha256 checked,
unpacked without installing): `promtool check rules`, `promtool test rules`
over the input series of tests/fixtures/promtool, and `promtool check
metrics` over the textfile metrics a fleet report writes."""
import glob
import hashlib
import os
import re
import subprocess

import pytest
import yaml

from conftest import ROOT, _must_run, cache_lock
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import store
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import textfile

PROMETHEUS_DEB = "prometheus=2.42.0+ds-5+deb12u1"
PROMETHEUS_SHA256 = "81d59a24fce84f7fbe97a45a4f2914b6a5881b5cd1db2a6a0e129e515e1a5f55"
CACHE = os.path.join(ROOT, ".cache", "promtool")
RULES = os.path.join(ROOT, "extras", "prometheus", "gpufleet-alerts.rules.yml")
TESTS = os.path.join(ROOT, "tests", "fixtures", "promtool", "gpufleet-alerts.test.yml")


@pytest.fixture(name="promtool", scope="module")
def promtool_fixture():
    """promtool out of Debian's prometheus package (apt-get download: no install, no root needed to unpack)."""
    binary = os.path.join(CACHE, "root", "usr", "bin", "promtool")
    with cache_lock("promtool"):
        if not os.path.exists(binary):
            os.makedirs(CACHE, exist_ok=True)
            for old in glob.glob(os.path.join(CACHE, "*.deb")):
                os.unlink(old)
            _must_run(["apt-get", "download", PROMETHEUS_DEB], cwd=CACHE, timeout=600)
            deb = glob.glob(os.path.join(CACHE, "prometheus_*.deb"))[0]
            with open(deb, "rb") as fh:
                digest = hashlib.sha256(fh.read()).hexdigest()
            assert digest == PROMETHEUS_SHA256, "%s: sha256 %s, pinned %s" % (deb, digest, PROMETHEUS_SHA256)
            _must_run(["dpkg-deb", "-x", deb, os.path.join(CACHE, "root")])
    return binary


def _promtool(promtool, *args, **kwargs):
    return subprocess.run([promtool] + list(args), capture_output=True, text=True, check=False, timeout=300, **kwargs)


def test_the_rules_load_and_their_unit_tests_pass(promtool):
    checked = _promtool(promtool, "check", "rules", RULES)
    assert checked.returncode == 0 and "SUCCESS: 11 rules found" in checked.stdout, checked.stdout + checked.stderr
    tested = _promtool(promtool, "test", "rules", os.path.basename(TESTS), cwd=os.path.dirname(TESTS))
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr


def test_every_metric_a_rule_reads_is_one_the_report_writes():
    with open(RULES, encoding="utf-8") as fh:
        rules = [rule for group in yaml.safe_load(fh)["groups"] for rule in group["rules"]]
    written = {textfile.PREFIX + name for name, dummy in textfile.HOST_METRICS + textfile.GPU_OTHER} | \
        {textfile.PREFIX + name for name, dummy, dummy2 in textfile.GPU_HEALTH}
    read = {name for rule in rules for name in re.findall(r"gpufleet_[a-z_]+", rule["expr"])}
    assert read and read <= written, sorted(read - written)


def test_the_textfile_metrics_pass_promtools_check(promtool, tmp_path):
    gpus = [{"index": i, "name": "NVIDIA H200", "compute_capability": "9.0", "uuid": "GPU-%d" % i,
             "pci_bus_id": "00000000:%02X:00.0" % (0x18 + i),
             "health": {"pcie_width_current": 16, "pcie_width_max": 16, "ecc_uncorrected_volatile": 0}}
            for i in range(2)]
    entry = {"status": "ok", "venv": "/v", "gpu": {"present": True, "driver_version": "580.159.04", "gpus": gpus},
             "torch": {"torch_version": "2.11.0+cu130", "smoke": [{"device": 0, "dtype": "bfloat16", "tflops": 700.0}],
                       "kernels": [{"check": "flashinfer.rmsnorm", "device": 0, "status": "ok", "relative_error": 0.001}]},
             "deploy_key": "k" * 24}
    report = store.build_report({"mode": "verify", "hosts": ["h1"], "results": [entry]})
    text = textfile.render(report)
    checked = _promtool(promtool, "check", "metrics", input=text)
    assert checked.returncode == 0, checked.stdout + checked.stderr + text
    assert "gpufleet_host_stack_info{" in text and 'UUID="GPU-1"' in text
