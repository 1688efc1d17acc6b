# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The fleet report: one row per host from what deploy/verify/rollback registered.

The action plugin gpufleet.inference.fleet_report hands store.publish() the
per-host results of one run; the report compares them with the previous run's
report and with the venv freezes that the uv_venv role fetched under
``<report dir>/freezes/<host>/``, and writes ``fleet-report.json`` (everything,
the next run's baseline), ``fleet-report.md`` and ``fleet-report.html`` (one
row per host, failing hosts first), ``fleet-report.prom`` and one
``textfile/<host>.prom`` per host. Pure Python + jinja2, on the controller;
tools/fleet_verify.py prints format.summary_table from the JSON.

Each module imports only those before it in this list:

- sections: the parts of a host's registered result (torch_verify's smoke,
  kernel, model and all-reduce checks, the adopted venv, the proof, the
  serving hooks) as a row keeps them, and the small readers all share;
- freeze: the venv freezes a deploy fetched, the drift check's baselines;
- rows: one host's row, its status and notes, its GPUs and their marks;
- outliers: GPUs and hosts unlike their siblings, across the rows;
- trend: throughput and kernel error over the kept runs;
- textfile: the report as Prometheus text;
- format: the cells, the Markdown and HTML renderings, the terminal table;
- store: the report of a run built, written and kept, what the task returns,
  and the parts of a sliced run merged into one report.
"""
