#!/usr/bin/env python
"""The HTML fleet report of the H200 health runs (evidence/h200-health/
reports-2, reports-3: their fleet-report.json), rendered by the report's
template and photographed with headless Chromium (Debian's package), on the
controller: the H200 machine has no browser.

    python3 evidence/h200-health-screenshot.py
Writes evidence/h200-health/report-2.png and report-3.png."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".collections"))
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import format as fmt  # noqa: E402  pylint: disable=wrong-import-position

EVIDENCE = os.path.join(ROOT, "evidence", "h200-health")
for run in ("2", "3"):
    with open(os.path.join(EVIDENCE, "reports-%s" % run, "fleet-report.json"), encoding="utf-8") as fh:
        report = json.load(fh)
    with tempfile.TemporaryDirectory() as tmp:
        page = os.path.join(tmp, "fleet-report.html")
        with open(page, "w", encoding="utf-8") as fh:
            fh.write(fmt.render(report, "html"))
        subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        "--user-data-dir=" + os.path.join(tmp, "profile"), "--hide-scrollbars",
                        "--window-size=1400,700", "--screenshot=" + os.path.join(EVIDENCE, "report-%s.png" % run),
                        "file://" + page], check=True, capture_output=True, timeout=120)
    print("report-%s.png: %s, %s" % (run, report["hosts"][0]["host"], report["hosts"][0]["status"]))
