#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name (plugins/action/fleet_report.py),
# on the controller; this file holds its documentation.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r'''
---
module: fleet_report
short_description: (internal) write the fleet report of a deploy, verify or rollback run
version_added: 0.3.0
description:
  - Internal to the collection's playbooks and roles (one step of them); its options may change in any
    release. The modules for your own playbooks are M(gpufleet.inference.gpu_facts),
    M(gpufleet.inference.torch_verify), M(gpufleet.inference.venv_link_info), M(gpufleet.inference.arch_audit) and
    M(gpufleet.inference.patch_rules).
  - Reads each play host's result (O(result_var)) and stage (O(stage_var)) from C(hostvars) and writes the fleet
    report on the controller under O(out_dir) - C(fleet-report.json) (the next run's baseline, a copy kept under
    C(history/)), C(fleet-report.md), C(fleet-report.html), C(fleet-report.prom), and one C(textfile/<host>.prom)
    per host for node_exporter's textfile collector.
  - Each host's row is compared with the previous report in O(out_dir) and with the venv freeze (its package list)
    the deploy fetched under O(freeze_dir)C(/<host>/); GPUs and all-reduce figures below O(outlier_ratio) of their
    siblings' median are flagged.
  - A host without a result (one of a later serial batch, one the play never reached) is reported as not run;
    a result still C(running) is reported as unreachable.
  - Runs on the controller only and never connects to a host; run it once per play (C(run_once=true)).
  - V(changed) is true only when what the fleet is (statuses, versions, drift) differs from the previous report,
    so that a run that changed nothing stays C(changed=0).
author:
  - gpufleet.inference maintainers (@gpufleet)
options:
  out_dir:
    description:
      - The controller directory the report goes to; created when missing.
    type: path
    required: true
  freeze_dir:
    description:
      - The controller directory of the venv freezes the deploy fetched, one sub-directory per host.
      - Defaults to O(out_dir)C(/freezes).
      - C(<out_dir>/locks/<host>/), where earlier versions of the collection fetched them, is read as well, so that
        a host not deployed again since keeps its baseline.
    type: path
  mode:
    description:
      - The playbook the report is of; recorded in the report, and in V(verify) a version that moved since the
        previous run (where no freeze is known) is drift.
      - Required but with O(merge=true), where the parts say it.
    type: str
    choices: [deploy, verify, rollback]
  hosts:
    description:
      - The hosts of the report, in order.
      - Defaults to C(ansible_play_hosts_all), every host of the play, those of later serial batches included.
    type: list
    elements: str
  result_var:
    description:
      - The host variable that holds a host's result (a dict with at least C(status)).
    type: str
    default: gpufleet_result
  stage_var:
    description:
      - The host variable that names the stage a host was in; used where its result is still C(running).
    type: str
    default: gpufleet_stage
  reach_var:
    description:
      - The host variable that holds the registered result of gpufleet.inference.fleet_reach, the run's first
        task; its C(record) and C(stage) stand for a host's O(result_var) and O(stage_var) until it sets its own.
      - A host whose record still says C(running) gets its C(ok) record built here when it is still in the play
        (C(ansible_play_hosts) - no failure, not unreachable), as the fleet role's C(record.yml) would; one that
        left the play was lost on the connection and is reported unreachable.
    type: str
  outlier_ratio:
    description:
      - A GPU's throughput or a host's all-reduce bandwidth below this share of its siblings' median is an outlier
        (drift). Above 0, at most 1.
    type: float
    default: 0.9
  outliers_fail:
    description:
      - Outliers fail their hosts instead of being drift.
    type: bool
    default: false
  inventory:
    description:
      - The inventory recorded in the report.
      - Defaults to C(ansible_inventory_sources), joined with commas.
    type: str
  in_check_mode:
    description:
      - Write the report in check mode too. The report is the controller's record of the run, not a change on a host,
        so a read-only run (verify) may want it under C(--check).
      - When false, the task is skipped in check mode and nothing is written.
    type: bool
    default: false
  run_id:
    description:
      - With O(part), this play is one slice of a sliced run (an AWX / Automation Controller job template with job
        slicing, or any runs over parts of an inventory). It writes its part to C(<out_dir>/parts/<run_id>/<part>.json)
        instead of the fleet report, and each host's textfile metrics as usual; the host's end of the run (finish)
        is judged against the fleet's previous report.
      - With O(merge=true), the run whose parts are merged.
      - 1-64 letters, digits, C(.), C(_) or C(-), starting with a letter or digit; the same for every slice of one run.
    type: str
    default: ""
  part:
    description:
      - This slice's name within the run (for example the slice number), with O(run_id); each slice its own.
    type: str
    default: ""
  merge:
    description:
      - Build the one fleet report of run O(run_id) from all its parts, as if it had been one run - outliers against the
        whole fleet's medians, drift against the fleet's previous report and freezes - and write it (history, JSON,
        Markdown, HTML, Prometheus). Reads no host. A host in two parts, parts of different playbooks or outlier
        settings, or fewer parts than O(expect_parts) are refused, naming them.
    type: bool
    default: false
  expect_parts:
    description:
      - With O(merge=true), the number of parts the run must have (the job template's slice count).
    type: int
attributes:
  action:
    description: Implemented by an action plugin that runs on the controller.
    support: full
  check_mode:
    description: Skipped in check mode unless O(in_check_mode=true); then the report is written as in a normal run.
    support: full
  diff_mode:
    description: Reports no differences.
    support: none
notes:
  - The task must not set C(check_mode=false) itself, since the plugin tells a check run by the task's check mode.
seealso:
  - module: gpufleet.inference.torch_verify
'''

EXAMPLES = r'''
- name: Write the fleet report
  gpufleet.inference.fleet_report:
    out_dir: "{{ playbook_dir | dirname }}/reports"
    mode: verify
    result_var: gpufleet_result
    outlier_ratio: "{{ gpufleet_outlier_ratio | default(0.9) }}"
    in_check_mode: true
  run_once: true
  register: report

- name: Say where the report is
  ansible.builtin.debug:
    msg: "{{ report.summary }}: {{ report.paths.html }}"
  run_once: true
  when: report is not skipped

- name: The one report of a run sliced in 4 (playbooks/merge.yml)
  gpufleet.inference.fleet_report:
    out_dir: /srv/gpufleet/reports
    merge: true
    run_id: "{{ gpufleet_run_id }}"
    expect_parts: 4
'''

RETURN = r'''
changed:
  description: Whether what the fleet is (statuses, versions, drift) differs from the previous report.
  returned: always
  type: bool
healthy:
  description: No host failed, drifted (other than outliers only), was unreachable or was not run.
  returned: success
  type: bool
counts:
  description: Hosts per status.
  returned: success
  type: dict
  sample: {"ok": 2, "failed": 1}
summary:
  description: The counts in one line, worst first.
  returned: success
  type: str
  sample: "3 hosts: 1 failed, 2 ok"
failing:
  description: The hosts that failed, drifted or were unreachable, without those whose only drift is outliers.
  returned: success
  type: list
  elements: str
outliers_only:
  description: The hosts whose only drift is being outliers among their siblings (reported, not failed).
  returned: success
  type: list
  elements: str
status:
  description: Each host's status (V(ok), V(drift), V(failed), V(unreachable), V(not_run)).
  returned: success
  type: dict
  sample: {"gpu01": "ok", "gpu02": "failed"}
finish:
  description:
    - What the run's last task on each host reads (the fleet role's C(finish.yml)) - C(status), C(fail) (failed,
      unreachable or drift that is not only outliers), C(msg) (why, when it fails) and C(textfile) (the host has
      metrics of this run to put in place).
  returned: success
  type: dict
  sample: {"gpu02": {"status": "failed", "fail": true, "msg": "gpu02: failed in verify: ...", "textfile": true}}
paths:
  description:
    - The files written - C(json), C(md), C(html), C(prom) and C(textfile_dir), the directory of the per-host files.
    - A slice of a sliced run (O(run_id), O(part)) - C(part), the part it wrote, and C(textfile_dir).
  returned: success
  type: dict
  sample:
    json: /srv/gpufleet/reports/fleet-report.json
    md: /srv/gpufleet/reports/fleet-report.md
    html: /srv/gpufleet/reports/fleet-report.html
    prom: /srv/gpufleet/reports/fleet-report.prom
    textfile_dir: /srv/gpufleet/reports/textfile
    part: /srv/gpufleet/reports/parts/run-4711/1.json
parts:
  description: With O(merge=true), the names of the parts merged.
  returned: with O(merge=true)
  type: list
  elements: str
  sample: ["1", "2", "3", "4"]
'''
