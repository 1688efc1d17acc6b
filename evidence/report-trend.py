#!/usr/bin/env python
"""The fleet report's trend, photographed: the browser test's six runs
(tests/integration/test_report_browser.py trend_report: GPU 3 of gpu02 slower
and less exact run after run, GPU 5 of gpu04 swapped before the fourth run)
published through publish()/write_report into a temporary report folder, and
the page taken with the test's own headless Chromium call (Debian's chromium
package), on the controller.

    .venv/bin/python evidence/report-trend.py
Writes evidence/report-trend/report-trend.png."""
import os
import pathlib
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, ".collections"))
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import trend  # noqa: E402  pylint: disable=wrong-import-position
from ansible_collections.gpufleet.inference.tests.integration import test_report_browser as browser  # noqa: E402  pylint: disable=wrong-import-position

EVIDENCE = os.path.join(ROOT, "evidence", "report-trend")
with tempfile.TemporaryDirectory() as tmp:
    tmp = pathlib.Path(tmp)
    report = browser.trend_report(tmp / "report")
    browser.screenshot(tmp, str(tmp / "report" / "fleet-report.html"), "report-trend.png", folder=EVIDENCE)
row = [r for r in report["hosts"] if r["host"] == browser.SINKING[0]][0]
gpu = row["trend"]["gpus"][str(browser.SINKING[1])]
print("report-trend.png: %s GPU %s: %s; %s" % (row["host"], browser.SINKING[1], trend.trend_text(gpu["tflops"], "tflops", 8),
                                               trend.trend_text(gpu["kernel_error"], "kernel_error", 8)))
