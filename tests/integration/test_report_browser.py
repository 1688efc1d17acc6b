"""The fleet report's HTML page in a real browser: Debian's headless Chromium
(scripts/test-hosts.sh installs it) loads the written page from disk, runs its
script and hands back the DOM; the heat map, the marks, the table's sort and
status filter (driven by the URL fragment) and the trend's sparklines over the
kept history are checked there, and a screenshot of a 1-host, a 16-host and a
trend page lands in .cache/test-logs/ for a person."""

import datetime
import html.parser
import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import store

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

NOW = datetime.datetime(2026, 3, 8, 12, 0, 0, tzinfo=datetime.timezone.utc)
LOGS = os.path.join(ROOT, ".cache", "test-logs")
GPUS = 8
BF16, FP16 = 300.0, 310.0
SLOW, LINK, REMAP, FAILED = ("gpu05", 3), ("gpu09", 6), ("gpu12", 1), "gpu14"
# The trend page: six runs a day apart; one GPU loses 6% of its bf16 throughput and its
# kernel error grows 1.5x a run, another is swapped (a new UUID) before the fourth run.
TREND_RUNS, SINKING, SWAPPED = 6, ("gpu02", 3), ("gpu04", 5)


def chromium_binary():
    path = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if path is None:
        pytest.fail("chromium is not installed: scripts/test-hosts.sh installs Debian's chromium package "
                    "(apt-get install -y chromium); the report page test needs it", pytrace=False)
    return path


def chromium(tmp_path, url, *args):
    """Run headless Chromium on url; its stdout (the DOM with --dump-dom)."""
    profile = tmp_path / "chromium-profile"
    profile.mkdir(exist_ok=True)
    argv = [chromium_binary(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--disable-dev-shm-usage", "--user-data-dir=%s" % profile, "--virtual-time-budget=5000"] + list(args) + [url]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False,
                          env=dict(os.environ, HOME=str(tmp_path)))
    assert proc.returncode == 0, "chromium failed (rc %s): %s" % (proc.returncode, proc.stderr[-3000:])
    return proc.stdout


def dump_dom(tmp_path, path, fragment=""):
    dom = chromium(tmp_path, "file://%s%s" % (path, fragment), "--dump-dom")
    assert "</html>" in dom, "no DOM from chromium: %r" % dom[:500]
    return Page(dom)


def screenshot(tmp_path, path, name, folder=LOGS):
    os.makedirs(folder, exist_ok=True)
    png = os.path.join(folder, name)
    if os.path.exists(png):
        os.unlink(png)
    chromium(tmp_path, "file://%s" % path, "--screenshot=%s" % png, "--window-size=1400,1000", "--hide-scrollbars")
    with open(png, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % png
    assert os.path.getsize(png) > 10000, "%s looks empty" % png


class Page(html.parser.HTMLParser):
    """The parts of the dumped DOM the checks need: GPU cells, host rows, summary text."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.cells, self.rows, self.heat_rows, self.sources, self.sparks = [], [], [], [], []
        self.summary, self.ids = "", []
        self._in_summary = self._in_spark = 0
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        classes = (a.get("class") or "").split()
        if a.get("id"):
            self.ids.append(a["id"])
        for key in ("src", "href"):
            if a.get(key) is not None:
                self.sources.append((tag, a[key]))
        if "gpu" in classes and "data-gpu" in a:
            self.cells.append(dict(a, classes=classes))
        if "hm-row" in classes:
            self.heat_rows.append(dict(a, classes=classes))
        if tag == "tr" and (a.get("id") or "").startswith("host-"):
            self.rows.append(dict(a, classes=classes))
        if self._in_summary:
            self._in_summary += 1
        elif a.get("id") == "summary":
            self._in_summary = 1
        if self._in_spark:
            self._in_spark += 1
            if tag == "polyline":
                self.sparks[-1]["lines"][a["class"]] = [tuple(float(c) for c in p.split(",")) for p in a["points"].split()]
        elif "spark" in classes:
            self.sparks.append(dict(a, classes=classes, lines={}))
            self._in_spark = 1

    def handle_endtag(self, tag):
        if self._in_summary:
            self._in_summary -= 1
        if self._in_spark:
            self._in_spark -= 1

    def handle_data(self, data):
        if self._in_summary:
            self.summary += data

    def cell(self, host, gpu):
        found = [c for c in self.cells if c["data-host"] == host and c["data-gpu"] == str(gpu)]
        assert len(found) == 1, "cells for %s GPU %s: %r" % (host, gpu, found)
        return found[0]

    def with_class(self, name):
        return sorted((c["data-host"], int(c["data-gpu"])) for c in self.cells if name in c["classes"])

    def order(self):
        return [r["id"][len("host-"):] for r in self.rows]

    def visible(self):
        return [r["id"][len("host-"):] for r in self.rows if "hidden" not in r and "display: none" not in (r.get("style") or "")]


def health(**over):
    h = {"persistence_mode": True, "pcie_gen_current": 5, "pcie_gen_max": 5, "pcie_width_current": 16, "pcie_width_max": 16,
         "ecc_enabled": True, "ecc_uncorrected_volatile": 0, "retired_pages_pending": False, "remapped_rows_pending": False,
         "remapped_rows_failure": False, "clocks_event_reasons_active": 0, "clocks_event_reasons": [], "temperature_c": 41,
         "power_draw_w": 121.5, "power_limit_w": 700.0, "clocks_sm_mhz": 1980, "clocks_max_sm_mhz": 1980}
    h.update(over)
    return h


def entry(host, status="ok"):
    """One host's registered result: 8 H200s, per-device bf16/fp16 smoke figures and health, with the
    fleet's planted faults on their hosts."""
    gpus, smoke = [], []
    for i in range(GPUS):
        h = health(temperature_c=38 + i)
        if (host, i) == LINK:
            h["pcie_width_current"] = 8
        if (host, i) == REMAP:
            h["remapped_rows_pending"] = True
        gpus.append({"index": i, "name": "NVIDIA H200", "compute_capability": "9.0", "memory_total_mib": 143771, "health": h,
                     "uuid": "GPU-%s-0000-4000-8000-%012d" % (host, i), "pci_bus_id": "00000000:%02X:00.0" % (0x18 + i)})
        smoke += [{"device": i, "dtype": "bfloat16", "tflops": BF16 * (0.75 if (host, i) == SLOW else 1.0)},
                  {"device": i, "dtype": "float16", "tflops": FP16}]
    e = {"status": status, "venv": "/home/deploy/ml-env-abc", "active_venv": "/home/deploy/ml-env-abc",
         "gpu": {"present": True, "driver_version": "590.48.01", "cuda_driver_version": "13.1", "gpus": gpus},
         "torch": {"torch_version": "2.12.0.dev20260307+cu130", "torch_cuda_version": "13.0",
                   "imports": {"flashinfer": {"ok": True, "version": "0.6.4"}}, "smoke": smoke},
         "packages": {"torch": "2.12.0.dev20260307+cu130", "flashinfer-python": "0.6.4"},
         "sgl_kernel_abi_key": "0123456789abcdef0123"}
    if status == "failed":
        e.update(stage="verify", message="torch_version: expected 2.12.0.dev20260307+cu130, found 2.13.0")
    return e


def write(tmp_path, names):
    run = {"mode": "verify", "hosts": names, "results": [entry(n, "failed" if n == FAILED else "ok") for n in names]}
    report = store.build_report(run, now=NOW)
    out = tmp_path / "report"
    paths = store.write_report(report, str(out))
    with open(paths["html"], encoding="utf-8") as fh:
        text = fh.read()
    page = Page(text)
    # Self-contained: nothing to fetch (no src, no stylesheet link, no CSS url() or @import), only in-page anchors.
    assert all(tag == "a" and ref.startswith("#") for tag, ref in page.sources), page.sources
    assert "url(" not in text and "@import" not in text
    assert len(page.ids) == len(set(page.ids)), "duplicate ids"
    return report, paths["html"]


def test_one_host_page(tmp_path):
    dummy, path = write(tmp_path, ["gpu01"])
    page = dump_dom(tmp_path, path)
    assert [(c["data-host"], c["data-gpu"]) for c in page.cells] == [("gpu01", str(i)) for i in range(GPUS)]
    assert not page.with_class("outlier") and not page.with_class("health-problem")
    assert all(float(c["data-ratio"]) == 1.0 for c in page.cells)
    assert page.order() == ["gpu01"] and page.visible() == ["gpu01"]
    summary = " ".join(page.summary.split())
    assert "fleet healthy" in summary and "1 host: 1 ok" in summary
    assert "8 GPUs" in summary and "0 outlier GPUs" in summary and "0 GPUs with health marks" in summary
    screenshot(tmp_path, path, "report-1-host.png")


def test_sixteen_hosts_find_the_sick_gpus(tmp_path):
    names = ["gpu%02d" % i for i in range(1, 17)]
    report, path = write(tmp_path, names)
    status = {r["host"]: r["status"] for r in report["hosts"]}
    assert status[FAILED] == "failed" and status[SLOW[0]] == status[LINK[0]] == "drift" and status[REMAP[0]] == "ok"

    page = dump_dom(tmp_path, path)
    assert len(page.cells) == 16 * GPUS
    slow = page.cell(*SLOW)
    assert "outlier" in slow["classes"] and "health-problem" not in slow["classes"]
    assert float(slow["data-ratio"]) == pytest.approx(0.75, abs=0.005)
    assert "ratio 0.75" in slow["title"] and "bfloat16 225.0" in slow["title"], slow["title"]
    # named as dcgm-exporter, an RMA form and the slot name it
    assert "GPU-gpu05-0000-4000-8000-000000000003, PCI 00000000:1B:00.0" in slow["title"], slow["title"]
    assert page.with_class("health-problem") == sorted([LINK, REMAP])
    assert "PCIe x8 of x16" in page.cell(*LINK)["title"] and "row remap pending" in page.cell(*REMAP)["title"]
    # The degraded link is also unlike its 127 siblings; nothing else stands out.
    assert page.with_class("outlier") == sorted([SLOW, LINK])
    healthy = page.cell("gpu01", 0)
    assert healthy["data-ratio"] == "1.0" and healthy["classes"] == ["gpu", "host-ok"]
    # The failed host: first in the table, its heat map row and cells marked.
    assert page.order()[0] == FAILED and page.order() == [r["host"] for r in report["hosts"]]
    assert page.visible() == page.order()
    failed_row = [r for r in page.heat_rows if r["data-host"] == FAILED]
    assert failed_row and "failed" in failed_row[0]["classes"]
    assert all("host-failed" in page.cell(FAILED, i)["classes"] for i in range(GPUS))
    summary = " ".join(page.summary.split())
    for text in ("16 hosts", "1 failed", "2 drift", "13 ok", "128 GPUs", "2 outlier GPUs", "2 GPUs with health marks",
                 "gpu05 GPU 3 at 0.75"):
        assert text in summary, (text, summary)

    # Sort and filter through the URL fragment that a click on a header or a checkbox writes.
    assert dump_dom(tmp_path, path, "#sort=host").order() == names
    assert dump_dom(tmp_path, path, "#sort=-host").order() == names[::-1]
    by_status = dump_dom(tmp_path, path, "#sort=-status")
    assert by_status.order()[-1] == FAILED and by_status.order()[:13] == [n for n in names if status[n] == "ok"]
    only_failed = dump_dom(tmp_path, path, "#status=failed")
    assert only_failed.visible() == [FAILED] and len(only_failed.rows) == 16
    assert [r["data-host"] for r in only_failed.heat_rows if "hidden" not in r] == [FAILED]
    both = dump_dom(tmp_path, path, "#status=failed,drift&sort=host")
    assert both.visible() == sorted([FAILED, SLOW[0], LINK[0]]) and both.order() == names
    screenshot(tmp_path, path, "report-16x8.png")


def trend_entry(host, run):
    """entry() of one run of the trend page: a kernel check per GPU with its relative error, SINKING
    slower and less exact each run, SWAPPED a new GPU from the fourth run on."""
    e = entry(host)
    for s in e["torch"]["smoke"]:
        if (host, s["device"]) == SINKING and s["dtype"] == "bfloat16":
            s["tflops"] = round(BF16 * (1 - 0.06 * run), 3)
    e["torch"]["kernels"] = [{"check": "torch.fp8_scaled_mm", "set": "torch", "device": i, "device_name": "NVIDIA H200",
                              "status": "ok", "relative_error": round(0.002 * (1.5 ** run if (host, i) == SINKING else 1), 6),
                              "tolerance": 0.02, "tflops": 600.0} for i in range(GPUS)]
    if host == SWAPPED[0] and run >= 3:
        e["gpu"]["gpus"][SWAPPED[1]]["uuid"] = "GPU-%s-0000-4000-8000-swapped00005" % host
    return e


def trend_report(out, names=("gpu01", "gpu02", "gpu03", "gpu04")):
    """TREND_RUNS runs published into out (the real publish/write_report path, a day apart,
    the last at NOW); the last report as written."""
    for run in range(TREND_RUNS):
        results = [trend_entry(n, run) for n in names]
        store.publish({"mode": "verify", "hosts": list(names), "results": results}, str(out),
                      now=NOW - datetime.timedelta(days=TREND_RUNS - 1 - run))
    with open(os.path.join(str(out), "fleet-report.json"), encoding="utf-8") as fh:
        return json.load(fh)


def test_trend_sparklines(tmp_path):
    report = trend_report(tmp_path / "report")
    assert len(os.listdir(tmp_path / "report" / "history")) == TREND_RUNS
    path = str(tmp_path / "report" / "fleet-report.html")
    page = dump_dom(tmp_path, path)

    def spark(host, gpu):
        found = [s for s in page.sparks if s.get("data-host") == host and s.get("data-gpu") == str(gpu)]
        assert found, "no sparkline for %s GPU %s" % (host, gpu)
        assert all(s["title"] == found[0]["title"] for s in found)  # the host table's and "GPUs to look at"'s
        return found[0]

    sinking = spark(*SINKING)
    assert "worsening" in sinking["classes"]
    line = sinking["lines"]["tflops"]
    assert len(line) == TREND_RUNS
    # left to right, each point lower than the one before (SVG y grows downwards)
    assert all(b[0] > a[0] and b[1] > a[1] for a, b in zip(line, line[1:])), line
    errors = sinking["lines"]["kernel_error"]
    assert all(b[1] < a[1] for a, b in zip(errors, errors[1:])), errors
    title = sinking["title"]
    for run in range(TREND_RUNS):
        when = (NOW - datetime.timedelta(days=TREND_RUNS - 1 - run)).strftime("%Y-%m-%d %H:%M")
        assert "\n%s: %.1f, %.3g" % (when, BF16 * (1 - 0.06 * run), 0.002 * 1.5 ** run) in title, title
    assert "300 → … → 228 → 210 bfloat16 TFLOP/s (-30% over 6 runs, steady decline)" in title, title
    assert "\nUTC: TFLOP/s, kernel error\n" in title, title
    assert "GPU-gpu02-0000-4000-8000-000000000003" in title

    healthy = spark("gpu02", 2)
    assert "worsening" not in healthy["classes"] and len(set(y for x, y in healthy["lines"]["tflops"])) == 1
    # the swapped GPU: its own three runs, on the right of the runs' axis
    swapped = spark(*SWAPPED)
    assert len(swapped["lines"]["tflops"]) == 3 and swapped["lines"]["tflops"][0][0] > healthy["lines"]["tflops"][2][0]
    assert report["hosts"][0]["host"] == "gpu02"  # drift: the sinking GPU is an outlier by now
    host = [s for s in page.sparks if s.get("data-trend") == "tflops" and s["title"].startswith("gpu02: ")]
    assert len(host) == 1 and "worsening" in host[0]["classes"]
    summary = " ".join(page.summary.split())
    assert "1 GPU worsening over 6 runs" in summary, summary
    model = [s for s in page.sparks if s["title"].startswith("NVIDIA H200: median TFLOP/s")]
    assert len(model) == 1 and "worsening" not in model[0]["classes"]
    screenshot(tmp_path, path, "report-trend.png")
