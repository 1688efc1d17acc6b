# -*- coding: utf-8 -*-
"""Action plugin verify_host: checks, verification and summary in one task."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from unittest.mock import MagicMock

import pytest
import yaml
from ansible.errors import AnsibleActionFail, AnsibleConnectionFailure, AnsibleError
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.template import Templar

from ansible_collections.gpufleet.inference.plugins.action import verify_host
from ansible_collections.gpufleet.inference.plugins.action.verify_host import ActionModule, summarize

SPEC = """argument_specs:
  main:
    options:
      keep: {type: int}
      smoke: {type: bool}
"""
LINK = {"link_path": "/home/deploy/ml-env", "history_path": "/home/deploy/.ml-env.history", "target": "/v/b",
        "active_venv": "/v/b", "history": ["/v/a", "/v/b"], "link_is_directory": False}
GOOD = {"changed": False, "link": LINK, "probed": True, "msg": "verified",
        "ansible_facts": {"gpufleet_gpu": {"count": 1},
                          "gpufleet_torch": {"torch_version": "2.13.0", "packages": {"torch": "2.13.0"},
                                             "markers": {"gpufleet-sgl_kernel.json": {"abi_key": "k",
                                                                                      "compiled_targets": ["sm_90a"]},
                                                         "gpufleet-deployed.json": {"key": "d"}}}}}


def action(args, modules, check_mode=False):
    task = MagicMock()
    task.args = args
    task.async_val = 0
    task.check_mode = check_mode
    task.diff = False
    loader = DataLoader()
    act = ActionModule(task, MagicMock(), PlayContext(), loader, Templar(loader=loader), None)
    calls = []

    def execute(module_name, module_args, task_vars):
        calls.append((module_name, module_args))
        out = modules[module_name]
        if isinstance(out, Exception):
            raise out
        return dict(out)

    act._execute_module = execute
    return act, calls


@pytest.fixture()
def spec(tmp_path):
    path = tmp_path / "argument_specs.yml"
    path.write_text(SPEC)
    return str(path)


def test_summary_of_a_passed_verification():
    s = summarize(dict(GOOD), "~/ml-env")
    assert s["passed"] is True and s["fail_message"] == "" and s["message"] == ""
    assert (s["target"], s["active_venv"], s["previous_venv"]) == ("/v/b", "/v/b", "/v/a")
    assert s["torch"] == {"torch_version": "2.13.0"}
    assert s["packages"] == {"torch": "2.13.0"}
    assert (s["sgl_kernel_abi_key"], s["sgl_kernel_targets"]) == ("k", ["sm_90a"])
    assert s["deploy_stamp"] == {"key": "d"}
    assert s["host_unreachable"] is False


def test_summary_of_a_failed_and_of_a_check_mode_verification():
    s = summarize(dict(GOOD, failed=True, msg="torch 2.12 != 2.13"), "~/ml-env")
    assert s["passed"] is False
    assert s["fail_message"] == "verification of /v/b failed: torch 2.12 != 2.13"
    assert summarize(dict(GOOD, probed=False), "~/ml-env")["passed"] is None
    # the previous venv only when the active one is the last of the history
    assert summarize(dict(GOOD, link=dict(LINK, history=["/v/b", "/v/a"])), "~/ml-env")["previous_venv"] == ""


def test_a_verification_that_did_not_pass_does_not_fail_the_task():
    act, calls = action({"verify": {"link": "~/ml-env"}},
                        {verify_host.MODULE: dict(GOOD, failed=True, msg="wrong torch")})
    res = act.run(task_vars={})
    assert not res.get("failed")
    assert res["verify_failed"] is True and res["passed"] is False
    assert res["fail_message"] == "verification of /v/b failed: wrong torch"
    assert [c[0] for c in calls] == [verify_host.MODULE]


def test_only_the_gpu_facts_become_host_facts_the_torch_fact_is_in_the_summary():
    act, dummy = action({"verify": {"link": "~/ml-env"}}, {verify_host.MODULE: GOOD})
    res = act.run(task_vars={})
    assert res["ansible_facts"] == {"gpufleet_gpu": {"count": 1}}
    assert res["torch"] == {"torch_version": "2.13.0"} and res["packages"] == {"torch": "2.13.0"}
    assert res["sgl_kernel_abi_key"] == "k" and res["deploy_stamp"] == {"key": "d"}
    # the module's own result is left as it was
    assert "gpufleet_torch" in GOOD["ansible_facts"]
    only_torch = dict(GOOD, ansible_facts={"gpufleet_torch": GOOD["ansible_facts"]["gpufleet_torch"]})
    act, dummy = action({"verify": {"link": "~/ml-env"}}, {verify_host.MODULE: only_torch})
    assert "ansible_facts" not in act.run(task_vars={})


def test_a_host_lost_during_the_verification_is_summarized_not_dropped():
    act, dummy = action({"verify": {"link": "~/ml-env"}},
                        {verify_host.MODULE: AnsibleConnectionFailure("ssh: connect to host: Connection refused")})
    res = act.run(task_vars={})
    assert not res.get("failed") and "unreachable" not in res
    assert res["host_unreachable"] is True and res["passed"] is False
    assert res["fail_message"].startswith("host unreachable while verifying: ssh: connect")


def test_a_bad_input_fails_before_the_host_is_read(spec):
    act, calls = action({"checks": [{"spec": spec, "errors": ["", "keep must be >= 0 (got -1)"]}],
                         "verify": {"link": "~/ml-env"}}, {verify_host.MODULE: GOOD})
    res = act.run(task_vars={"keep": -1})
    assert res["failed"] and res["msg"] == "keep must be >= 0 (got -1)"
    assert calls == []


def test_type_errors_of_every_group_come_first(spec):
    act, calls = action({"checks": [{"spec": spec, "errors": ["a rule (got x)"]}, {"spec": spec, "errors": []}],
                         "verify": {"link": "~/ml-env"}}, {verify_host.MODULE: GOOD})
    res = act.run(task_vars={"smoke": "maybe"})
    lines = res["msg"].splitlines()
    assert lines[0] == "Validation of arguments failed:"
    assert "smoke" in lines[1] and "bool" in lines[1]
    assert lines[-1] == "a rule (got x)"
    assert calls == []


def test_an_unknown_entry_point_is_an_error(spec):
    act, dummy = action({"checks": [{"spec": spec, "entry_point": "nope"}], "verify": {"link": "~/ml-env"}}, {})
    with pytest.raises(AnsibleActionFail, match="has no entry point 'nope'"):
        act.run(task_vars={})


@pytest.mark.parametrize("stat, why", [
    ({"exists": False}, "does not exist"),
    ({"exists": True, "isdir": False}, "not a directory"),
    ({"exists": True, "isdir": True, "writeable": False}, "not writable"),
])
def test_a_directory_that_must_be_writable_is_checked_on_the_host(stat, why):
    act, calls = action({"writable_dirs": {"gpufleet_textfile_dir": "/srv/metrics", "other": ""},
                         "verify": {"link": "~/ml-env"}},
                        {"ansible.builtin.stat": {"stat": stat}, verify_host.MODULE: GOOD})
    res = act.run(task_vars={"ansible_user": "deploy"})
    assert res["failed"]
    assert res["msg"] == ("gpufleet_textfile_dir must be an existing directory that deploy can write "
                          "(got '/srv/metrics': %s)" % why)
    # the empty path is not looked at, and nothing is verified
    assert calls == [("ansible.builtin.stat", {"path": "/srv/metrics", "get_checksum": False})]


def test_a_writable_directory_passes_on_to_the_verification():
    act, calls = action({"writable_dirs": {"gpufleet_textfile_dir": "/srv/metrics"}, "verify": {"link": "~/ml-env"}},
                        {"ansible.builtin.stat": {"stat": {"exists": True, "isdir": True, "writeable": True}},
                         verify_host.MODULE: GOOD})
    res = act.run(task_vars={})
    assert res["passed"] is True
    assert [c[0] for c in calls] == ["ansible.builtin.stat", verify_host.MODULE]


def test_the_fast_paths_deploy_key_must_be_the_verified_venvs():
    act, dummy = action({"verify": {"link": "~/ml-env"}, "deploy_key": "d"}, {verify_host.MODULE: GOOD})
    res = act.run(task_vars={"inventory_hostname": "sbx1"})
    assert res["passed"] is True and res["msg"].startswith("deploy key d is already active (/v/b)")
    act, dummy = action({"verify": {"link": "~/ml-env"}, "deploy_key": "other"}, {verify_host.MODULE: GOOD})
    res = act.run(task_vars={"inventory_hostname": "sbx1"})
    assert not res.get("failed") and res["passed"] is False
    assert res["fail_message"] == ("the active venv changed after sbx1 was reached (another run?): /v/b does not "
                                   "carry deploy key other; nothing was changed, re-run.")
    # a verification that did not pass keeps its own message
    act, dummy = action({"verify": {"link": "~/ml-env"}, "deploy_key": "other"},
                        {verify_host.MODULE: dict(GOOD, failed=True, msg="wrong torch")})
    res = act.run(task_vars={"inventory_hostname": "sbx1"})
    assert res["fail_message"] == "verification of /v/b failed: wrong torch"


def test_a_check_group_that_names_a_role_reads_its_spec_and_value_rules():
    act, calls = action({"checks": [{"role": "fleet", "entry_point": "validate"}], "verify": {"link": "~/ml-env"}},
                        {verify_host.MODULE: GOOD})
    res = act.run(task_vars={"gpufleet_keep_previous_venvs": -1, "gpufleet_outlier_ratio": 0.5,
                             "gpufleet_textfile_dir": "", "gpufleet_collectives_sizes_mib": [1, 16, 64]})
    assert res["failed"] and res["msg"] == "gpufleet_keep_previous_venvs must be an integer >= 0 (got -1)"
    assert calls == []
    act, calls = action({"checks": [{"role": "fleet", "entry_point": "validate"}], "verify": {"link": "~/ml-env"}},
                        {verify_host.MODULE: GOOD})
    res = act.run(task_vars={"gpufleet_keep_previous_venvs": "many"})
    assert res["failed"] and res["msg"].startswith("Validation of arguments failed:\n")
    assert "gpufleet_keep_previous_venvs" in res["msg"]


def test_the_modules_options_come_from_the_roles_variables_templated_once(spec):
    role_vars = {"verify_venv_link": "~/ml-env", "verify_venv": "", "verify_adopt_existing_venv": "no",
                 "verify_imports": ["flashinfer"], "verify_smoke": "true", "verify_kernels": False,
                 "verify_kernel_tolerances": {}, "verify_expect": {"consistent": True}, "verify_timeout": "60",
                 "verify_collectives": False, "verify_collectives_sizes_mib": [1, 16], "verify_record_packages": True,
                 "verify_gpu_required": "yes"}
    act, calls = action({"checks": [{"role": "verify"}], "from_role": "verify",
                         "verify": {"gpu": True, "markers": ["m.json"]}}, {verify_host.MODULE: GOOD})
    templated = []
    real = act._templar.template
    act._templar = MagicMock()
    act._templar.template.side_effect = lambda value: templated.append(value) or real(value)
    res = act.run(task_vars=dict(role_vars))
    assert not res.get("failed"), res.get("msg")
    assert calls == [(verify_host.MODULE, {
        "link": "~/ml-env", "venv": "", "adopt": False, "imports": ["flashinfer"], "smoke": True, "kernels": False,
        "kernel_tolerances": {}, "expect": {"consistent": True}, "timeout": 60, "collectives": False,
        "collectives_sizes_mib": [1, 16], "packages": True, "gpu_required": True, "gpu": True, "markers": ["m.json"]})]
    # each variable once, for its check and the module alike
    assert sorted(map(str, templated)) == sorted(map(str, role_vars.values()))


def test_a_value_the_module_cannot_take_names_the_variable():
    act, calls = action({"from_role": "verify"}, {verify_host.MODULE: GOOD})
    with pytest.raises(AnsibleActionFail, match="verify_timeout must be an integer"):
        act.run(task_vars={"verify_venv_link": "~/ml-env", "verify_timeout": "soon"})
    assert calls == []


XID = {"source": "journald", "events": [], "count": 0, "cursor": {"boot_id": "b", "monotonic_us": 1}, "error": None}


def xid_action(read, xid="become"):
    """The verification of a host whose Xid read as root (the role's task
    before it) registered read (None: not registered)."""
    # the role's own checks are beside the point here
    task_vars = {"verify_venv_link": "~/ml-env", "verify_xid": xid, "fleet_preflight_done": True}
    if read is not None:
        task_vars[verify_host.XID_ROOT] = read
    act, calls = action({"from_role": "verify", "role_inputs": True, "verify": {"gpu": True}},
                        {verify_host.MODULE: GOOD})
    res = act.run(task_vars=task_vars)
    assert not res.get("failed"), res.get("msg")
    return calls


def test_xid_become_hands_the_read_as_root_to_the_verification():
    calls = xid_action({"changed": False, "ansible_facts": {"gpufleet_gpu": {"present": True, "xid": XID}}})
    # the verification alone runs here, without reading the log itself
    assert [c[0] for c in calls] == [verify_host.MODULE]
    assert calls[0][1]["xid"] == "off" and calls[0][1]["xid_answer"] == XID
    # read and off leave the log to the verification (or to no one)
    for xid in ("read", "off"):
        calls = xid_action({"skipped": True}, xid)
        assert calls[0][1]["xid"] == xid and "xid_answer" not in calls[0][1]


@pytest.mark.parametrize("read, why", [
    # a become that failed on the way (ansible-core's error, and its context below the first line)
    ({"unreachable": True, "changed": False,
      "msg": "Timeout (12s) waiting for privilege escalation prompt: \nPassword:"},
     "Timeout (12s) waiting for privilege escalation prompt: "),
    ({"failed": True, "changed": False, "exception": "(traceback)", "msg": "Missing sudo password"},
     "Missing sudo password"),
    # the module's own answer, as it is
    ({"failed": True, "changed": False, "msg": "MODULE FAILURE\nSee stdout/stderr for the exact error"},
     "MODULE FAILURE\nSee stdout/stderr for the exact error"),
    ({"failed": True, "changed": False}, "no answer"),
    # nothing registered: not read
    (None, "no answer"),
    ("not a result", "no answer"),
])
def test_xid_become_that_failed_is_an_answer_that_says_why(read, why):
    answer = xid_action(read)[-1][1]["xid_answer"]
    assert answer == {"source": None, "events": [], "count": 0, "cursor": None,
                      "error": "the kernel log was not read as root: " + why}


def test_xid_become_on_a_host_without_gpus():
    calls = xid_action({"ansible_facts": {"gpufleet_gpu": {"present": False}}})
    assert calls[-1][1]["xid"] == "off" and calls[-1][1]["xid_answer"] is None


def test_the_roles_xid_read_as_root_is_a_become_task_of_its_own_before_the_verification():
    """Only a host that asks (verify_xid: become) runs it: a role call of its
    own whose meta task ends it for every other host, with no worker; what it
    registers is the action's xid_root."""
    tasks_dir = os.path.join(verify_host.ROOT, "roles", "verify", "tasks")
    with open(os.path.join(tasks_dir, "host.yml"), encoding="utf-8") as f:
        tasks = yaml.safe_load(f)
    assert tasks[0]["ansible.builtin.import_role"] == {"name": "gpufleet.inference.verify", "tasks_from": "xid_root"}
    assert tasks[1]["gpufleet.inference.verify_host"]["role_inputs"] is True and len(tasks) == 2
    with open(os.path.join(tasks_dir, "xid_root.yml"), encoding="utf-8") as f:
        end, read = yaml.safe_load(f)
    assert end["ansible.builtin.meta"] == "end_role" and end["when"] == "verify_xid != 'become'"
    assert read["gpufleet.inference.gpu_facts"] == {"xid": True}
    assert read["become"] is True and "when" not in read
    assert read["register"] == verify_host.XID_ROOT
    assert read["ignore_errors"] is True and read["ignore_unreachable"] is True


def test_the_task_is_changed_only_where_the_module_wrote_the_serving_flags():
    act, calls = action({"verify": {"link": "~/ml-env"}}, {verify_host.MODULE: dict(GOOD, changed=True)})
    assert act.run(task_vars={})["changed"] is True
    act, calls = action({"verify": {"link": "~/ml-env"}}, {verify_host.MODULE: GOOD})
    assert act.run(task_vars={})["changed"] is False


try:
    from ansible.template import trust_as_template
    HAS_TRUST = True
except ImportError:  # ansible-core < 2.19: every string is a template
    HAS_TRUST = False

    def trust_as_template(value):
        return value


@pytest.mark.parametrize("raw, found", [
    ("{{ gpufleet_xid | default('read') }}", ("gpufleet_xid", "read")),
    ("{{gpufleet_tp_size|default(1)}}", ("gpufleet_tp_size", 1)),
    ("{{ gpufleet_collectives_sizes_mib | default([1, 16, 64]) }}", ("gpufleet_collectives_sizes_mib", [1, 16, 64])),
    ("{{ gpufleet_backend_families | default(none) }}", ("gpufleet_backend_families", None)),
    ("{{ gpufleet_verify_smoke | default(true) }}", ("gpufleet_verify_smoke", True)),
    ("{{ gpufleet_model_config | default({}) }}", ("gpufleet_model_config", {})),
    # anything else is the templar's
    ("{{ gpufleet_imports | default([], true) }}", None),
    ("{{ gpufleet_xid | default('read') | upper }}", None),
    ("{{ a | default('it''s') }}", None),
    ("{{ a | default(['x']) }}", None),
    ("{{ a | default(b) }}", None),
    ("{{ a }}", None),
    ("prefix {{ a | default(1) }}", None),
    ("read", None),
    (3, None),
])
def test_the_one_default_form_rendered_without_jinja(raw, found):
    assert verify_host.default_of(trust_as_template(raw) if isinstance(raw, str) else raw) == found


def test_an_untrusted_string_is_never_rendered():
    if not HAS_TRUST:
        pytest.skip("no template trust before ansible-core 2.19")
    assert verify_host.default_of("{{ gpufleet_xid | default('read') }}") is None


@pytest.mark.parametrize("task_vars", [
    {},
    {"gpufleet_xid": "become", "gpufleet_tp_size": 8, "gpufleet_verify_smoke": False, "gpufleet_backend_families": []},
    # the fleet-wide variable itself a template, and one the default form again
    {"gpufleet_xid": "{{ 'o' ~ 'ff' }}", "gpufleet_tp_size": "{{ other | default(4) }}", "other": 2},
    # defined but undefined once rendered: the templar answers
    {"gpufleet_xid": "{{ nowhere }}"},
])
def test_the_default_form_gives_what_the_templar_gives(task_vars):
    role_vars = {"verify_xid": "{{ gpufleet_xid | default('read') }}", "verify_tp_size": "{{ gpufleet_tp_size | default(1) }}",
                 "verify_smoke": "{{ gpufleet_verify_smoke | default(true) }}",
                 "verify_backend_families": "{{ gpufleet_backend_families | default(none) }}"}
    variables = dict((k, trust_as_template(v) if isinstance(v, str) else v)
                     for k, v in dict(task_vars, **role_vars).items())
    act, dummy = action({"verify": {"link": "x"}}, {})
    act._templar = Templar(loader=DataLoader(), variables=variables)
    for name in role_vars:
        try:
            expected = act._templar.template(variables[name])
        except AnsibleError as exc:
            with pytest.raises(type(exc)):
                act._value(name, variables)
            continue
        assert act._value(name, variables) == expected, name


def test_the_specs_a_verification_checks_are_parsed_when_the_module_is_imported():
    """ansible-playbook imports the action in its own process before it forks a
    worker per host: the workers must find the specs parsed, not parse them each."""
    code = ("import ansible_collections.gpufleet.inference.plugins.action.verify_host as v; "
            "print('\\n'.join(sorted(k[0] for k in v._SPECS)))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    parsed = done.stdout.split()
    assert parsed == sorted(verify_host.role_spec(role) for role in ("fleet", "verify"))
    assert all(os.path.exists(path) for path in parsed)


# the inventories a pin and an expectation are made from: plain, empty,
# partial, odd types, templates, and values only the templar takes; with the
# pin (verify_torch_pin) the templar renders for each
PIN_INVENTORIES = [
    ({}, ""),
    ({"torch_nightly_versions": {"torch": "2.13.0.dev20261201+cu130"}}, "2.13.0.dev20261201+cu130"),
    ({"torch_nightly_versions": {}, "torch_nightly_version_base": {"torch": "2.13.0"},
      "torch_nightly_date": "20261201", "torch_nightly_cuda_variant": "cu130"}, "2.13.0.dev20261201+cu130"),
    ({"torch_nightly_version_base": {"torch": "2.13.0"}, "torch_nightly_date": 20261201}, "2.13.0.dev20261201"),
    ({"torch_nightly_version_base": {"torch": "2.13.0"}, "torch_nightly_date": ""}, ""),
    ({"torch_nightly_version_base": {"torch": ""}, "torch_nightly_date": "20261201"}, ""),
    ({"torch_nightly_version_base": {}, "torch_nightly_date": "20261201", "torch_nightly_cuda_variant": "cu130"}, ""),
    ({"torch_nightly_versions": None, "torch_nightly_version_base": None, "torch_nightly_date": None}, ""),
    ({"torch_nightly_versions": {"torch": ""}, "torch_nightly_version_base": {"torch": "2.13.0"},
      "torch_nightly_date": "20261201", "torch_nightly_cuda_variant": ""}, "2.13.0.dev20261201"),
    ({"torch_nightly_versions": "2.13.0", "torch_nightly_version_base": {"torch": "2.13.0"},
      "torch_nightly_date": "20261201"}, "2.13.0.dev20261201"),
    ({"torch_nightly_versions": {"torch": 2.13}}, 2.13),
    ({"torch_nightly_version_base": {"torch": "2.13.0"}, "torch_nightly_date": True}, "2.13.0.devTrue"),
    ({"torch_nightly_version_base": {"torch": 2.13}, "torch_nightly_date": 20261201, "torch_nightly_cuda_variant": True},
     "2.13.dev20261201+True"),
    ({"torch_nightly_version_base": {"torch": "2.13.0"}, "torch_nightly_date": "{{ '2026' ~ '1201' }}",
      "torch_nightly_cuda_variant": "{{ variant | default('cu130') }}"}, "2.13.0.dev20261201+cu130"),
    ({"torch_nightly_version_base": {"torch": "2.13.0"}, "torch_nightly_date": "{{ nowhere }}"}, ""),
    ({"torch_nightly_version_base": {"torch": "2.13.0"}, "torch_nightly_date": "20261201",
      "torch_nightly_cuda_variant": "{{ nowhere }}"}, "2.13.0.dev20261201"),
    # templates inside the mappings, undefined ones too
    ({"torch_nightly_versions": {"torch": "{{ '2.13' ~ '.0' }}"}}, "2.13.0"),
    ({"torch_nightly_versions": {"torch": "{{ nowhere }}"}, "torch_nightly_version_base": {"torch": "2.13.0"},
      "torch_nightly_date": "20261201"}, "2.13.0.dev20261201"),
    ({"torch_nightly_version_base": {"torch": "{{ nowhere }}"}, "torch_nightly_date": "20261201"}, ""),
    ({"gpufleet_expect": {"sgl_kernel_version": "0.3.9", "consistent": False}}, ""),
    ({"gpufleet_expect": {"torch_version": "2.12.0"}, "torch_nightly_versions": {"torch": "2.13.0"}}, "2.13.0"),
    ({"gpufleet_expect": None}, ""),
    ({"gpufleet_expect": "{{ {'cuda_version': '13.0'} }}", "torch_nightly_versions": {"torch": "2.13.0"}}, "2.13.0"),
    ({"gpufleet_expect": {"cuda_version": "{{ cuda | default('13.0') }}"}}, ""),
    ({"gpufleet_expect": ["not", "a", "mapping"]}, ""),
]


def trusted(value):
    """value with every string in it a template, as the inventory's loader gives them."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return dict((k, trusted(v)) for k, v in value.items())
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return value


def plain(value):
    """A value as JSON: its kind and its content (a str subclass is a str)."""
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return [kind.__name__, kind(value)]
    if value is None:
        return ["none", None]
    if isinstance(value, Mapping):
        return ["dict", dict((str(k), plain(v)) for k, v in value.items())]
    if isinstance(value, (list, tuple)):
        return ["list", [plain(v) for v in value]]
    return [type(value).__name__, repr(value)]


def computed_defaults_side_by_side():
    """For each of PIN_INVENTORIES, verify_torch_pin and verify_expect as the
    templar renders the role's defaults and as the action computes them: a
    value (plain()), or ["error", the exception's class and its bases]."""
    out = []
    for inventory, dummy in PIN_INVENTORIES:
        variables = trusted(dict(inventory, **verify_host._ROLE_DEFAULTS))
        templar = Templar(loader=DataLoader(), variables=variables)
        row = {}
        for name in ("verify_torch_pin", "verify_expect"):
            act, dummy = action({"verify": {"link": "x"}}, {})
            act._templar = templar
            for who, render in (("templar", lambda: templar.template(variables[name])),
                                ("action", lambda: act._value(name, variables))):
                try:
                    row[name, who] = plain(render())
                except AnsibleError as exc:
                    row[name, who] = ["error", [c.__name__ for c in type(exc).__mro__]]
        out.append(dict(("%s %s" % key, value) for key, value in row.items()))
    return out


@pytest.fixture(scope="module")
def side_by_side():
    """computed_defaults_side_by_side() in a Python of its own that installs
    the collection loader first, as ansible-playbook does: the role's
    defaults call the collection's filters, which a templar finds only then."""
    collections = os.path.dirname(os.path.dirname(os.path.dirname(verify_host.ROOT)))
    code = ("import json, sys; from ansible.plugins.loader import init_plugin_loader; "
            "init_plugin_loader([sys.argv[1]]); sys.path.insert(0, sys.argv[2]); import test_verify_host as t; "
            "print(json.dumps(t.computed_defaults_side_by_side()))")
    done = subprocess.run([sys.executable, "-c", code, collections, os.path.dirname(os.path.abspath(__file__))],
                          capture_output=True, text=True, check=False,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("index", range(len(PIN_INVENTORIES)))
def test_the_computed_defaults_give_what_the_templar_gives(index, side_by_side):
    """verify_torch_pin and verify_expect, still the role's own defaults, are
    computed without Jinja: the result (or the error) must be the templar's;
    and the pin is the one the rule gives."""
    assert sorted(verify_host._ROLE_DEFAULTS) == ["verify_expect", "verify_torch_pin"]
    row = side_by_side[index]
    for name in ("verify_torch_pin", "verify_expect"):
        expected, found = row[name + " templar"], row[name + " action"]
        if expected[0] == "error":
            assert found[0] == "error" and expected[1][0] in found[1], (name, found)
        else:
            assert found == expected, name
    assert row["verify_torch_pin templar"] == plain(PIN_INVENTORIES[index][1])


def test_the_computed_defaults_need_no_templar_for_plain_pins():
    variables = dict((k, trust_as_template(v)) for k, v in verify_host._ROLE_DEFAULTS.items())
    variables.update(torch_nightly_version_base={"torch": "2.13.0"}, torch_nightly_date="20261201",
                     torch_nightly_cuda_variant="cu130", gpufleet_expect={"sgl_kernel_version": "0.3.9"})
    act, dummy = action({"verify": {"link": "x"}}, {})
    templated = []
    real = Templar(loader=DataLoader(), variables=variables)
    act._templar = MagicMock()
    act._templar.template.side_effect = lambda value: templated.append(value) or real.template(value)
    assert act._value("verify_expect", variables) == {
        "consistent": True, "torch_version": "2.13.0.dev20261201+cu130", "sgl_kernel_version": "0.3.9"}
    # the inventory's plain values only: no template compiled
    assert templated and not [v for v in templated if isinstance(v, str) and "{{" in v]
    # a default the inventory replaced is the templar's again
    variables["verify_torch_pin"] = trust_as_template("{{ '2.13.0' }}")
    act, dummy = action({"verify": {"link": "x"}}, {})
    act._templar = Templar(loader=DataLoader(), variables=variables)
    assert act._value("verify_expect", variables)["torch_version"] == "2.13.0"


@pytest.mark.parametrize("task_vars, found", [
    ({"verify_any_set": ["drain", "back"], "drain": [], "back": ""}, False),
    ({"verify_any_set": ["drain", "back"], "drain": None}, False),
    ({"verify_any_set": ["drain", "back"], "back": "/etc/gpufleet/return.yml"}, True),
    ({"verify_any_set": ["drain", "back"], "drain": ["scontrol", "update"]}, True),
    ({"verify_any_set": ["drain"], "drain": "{{ nowhere }}"}, False),
    ({"verify_any_set": [], "drain": ["x"]}, False),
    ({"drain": ["x"]}, False),
])
def test_any_set_says_whether_a_named_variable_is_set(task_vars, found):
    variables = dict((k, trust_as_template(v) if isinstance(v, str) else v)
                     for k, v in dict(task_vars, verify_venv_link="~/ml-env").items())
    act, dummy = action({"from_role": "verify"}, {verify_host.MODULE: GOOD})
    act._templar = Templar(loader=DataLoader(), variables=variables)
    assert act.run(task_vars=variables)["any_set"] is found


def test_any_set_is_false_for_a_host_lost_during_the_verification():
    act, dummy = action({"from_role": "verify"}, {verify_host.MODULE: AnsibleConnectionFailure("ssh: timed out")})
    res = act.run(task_vars={"verify_venv_link": "~/ml-env", "verify_any_set": ["drain"], "drain": ["x"]})
    assert res["host_unreachable"] and res["any_set"] is False


def test_any_set_names_must_be_a_list_of_names():
    act, calls = action({"from_role": "verify"}, {verify_host.MODULE: GOOD})
    with pytest.raises(AnsibleActionFail, match="verify_any_set must be a list of variable names"):
        act.run(task_vars={"verify_venv_link": "~/ml-env", "verify_any_set": "drain"})


@pytest.mark.parametrize("task_vars, checks, dirs, key", [
    # verify.yml: the role's own group, then the fleet role's; the textfile directory by its variable
    ({"verify_checks": [{"role": "fleet", "entry_point": "validate"}],
      "verify_writable_dirs": {"gpufleet_textfile_dir": trust_as_template("{{ gpufleet_textfile_dir }}")},
      "gpufleet_textfile_dir": "/var/lib/node_exporter", "verify_deploy_key": ""},
     [{"role": "verify"}, {"role": "fleet", "entry_point": "validate"}], {"gpufleet_textfile_dir": "/var/lib/node_exporter"},
     ""),
    # deploy.yml's fast path: the preflight checked the role's inputs already
    ({"fleet_preflight_done": True, "verify_checks": [], "verify_writable_dirs": {}, "verify_deploy_key": "{{ key }}",
      "key": "abc"}, [], {}, "abc"),
    ({"fleet_preflight_done": "{{ nowhere }}"}, [{"role": "verify"}], None, None),
])
def test_the_role_inputs_come_from_the_roles_variables(task_vars, checks, dirs, key):
    variables = dict((k, trust_as_template(v) if isinstance(v, str) else v) for k, v in task_vars.items())
    act, dummy = action({"from_role": "verify", "role_inputs": True}, {})
    act._templar = Templar(loader=DataLoader(), variables=variables)
    found = act._role_inputs("verify", variables)
    assert found["checks"] == checks
    assert found.get("writable_dirs") == dirs
    assert found.get("deploy_key") == key


def test_a_writable_directory_named_by_a_template_the_fast_path_does_not_take_is_the_templars():
    variables = {"verify_writable_dirs": {"d": trust_as_template("{{ base }}/textfile")}, "base": "/srv"}
    act, dummy = action({"from_role": "verify", "role_inputs": True}, {})
    act._templar = Templar(loader=DataLoader(), variables=variables)
    assert act._role_inputs("verify", variables)["writable_dirs"] == {"d": "/srv/textfile"}
