# -*- coding: utf-8 -*-
"""The serving unit (the sglang role's entry point unit): the unit template
rendered with example inputs, its tasks, its place in deploy.yml's chain (off
by default: one skipped task) and the value rules of its inputs."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import yaml
from jinja2 import Environment, StrictUndefined

from ansible.plugins.filter import core
from ansible_collections.gpufleet.inference.plugins.plugin_utils.rules import sglang as rules

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

EXAMPLE = {
    'ansible_managed': 'Ansible managed',
    'sglang_unit_user': 'deploy', 'sglang_unit_env_file': 'gpufleet-serving.env', 'sglang_unit_tp': '2',
    'sglang_unit_host': '0.0.0.0', 'sglang_unit_port': 30000,
    '_sglang_unit_link': '/home/deploy/ml-env', '_sglang_unit_model_path': '/models/Qwen3-30B-A3B',
}


def _load(*parts):
    with open(os.path.join(ROOT, *parts), encoding='utf-8') as handle:
        return yaml.safe_load(handle)


def _render(values):
    env = Environment(undefined=StrictUndefined, keep_trailing_newline=True)
    env.filters.update(core.FilterModule().filters())
    with open(os.path.join(ROOT, 'roles/sglang/templates/gpufleet-sglang.service.j2'), encoding='utf-8') as handle:
        return env.from_string(handle.read()).render(**values)


def test_the_served_unit_template_renders_the_inventorys_inputs():
    text = _render(EXAMPLE)
    lines = text.splitlines()
    assert 'User=deploy' in lines
    assert 'EnvironmentFile=/home/deploy/ml-env/gpufleet-serving.env' in lines
    assert ('ExecStart=/home/deploy/ml-env/bin/python -m sglang.launch_server --model-path /models/Qwen3-30B-A3B '
            '--tp-size 2 --host 0.0.0.0 --port 30000 $SGLANG_ARGS') in lines
    assert 'Description=sglang serving Qwen3-30B-A3B (gpufleet.inference)' in lines
    assert 'KillMode=control-group' in lines and 'WantedBy=multi-user.target' in lines
    assert [line for line in lines if line.startswith('[')] == ['[Unit]', '[Service]', '[Install]']


def test_the_served_unit_is_installed_and_enabled_never_started_here():
    tasks = _load('roles/sglang/tasks/unit.yml')
    block = tasks[1]['block']
    assert tasks[1]['become'] is True
    assert block[0]['ansible.builtin.template']['dest'] == '/etc/systemd/system/{{ sglang_unit_name }}.service'
    systemd = block[1]['ansible.builtin.systemd_service']
    assert systemd['enabled'] is True and systemd['daemon_reload'] is True and 'state' not in systemd


def test_the_served_unit_stage_is_off_by_default_and_one_task_in_deploys_chain():
    assert _load('roles/fleet/defaults/main.yml')['gpufleet_serving_unit'] is False
    assert _load('roles/sglang/defaults/main.yml')['sglang_unit_enabled'] == "{{ gpufleet_serving_unit | default(false) }}"
    chain = _load('roles/fleet/tasks/stages.yml')[0]['block']
    names = [task['name'] for task in chain]
    stage = chain[names.index('The serving unit')]
    assert names.index('The serving unit') == names.index('Activate the verified venv') + 1
    assert stage['when'] == 'gpufleet_serving_unit | bool'
    assert stage['ansible.builtin.include_role'] == {
        'name': 'gpufleet.inference.sglang', 'tasks_from': 'unit', 'apply': {'tags': ['activate', 'sglang_unit']}}


def _unit_values(**changed):
    values = {'sglang_unit_enabled': True, 'sglang_unit_name': 'gpufleet-sglang', 'sglang_unit_user': 'deploy',
              'sglang_unit_model_path': '/models/Qwen3-30B-A3B', 'sglang_unit_venv_link': '~/ml-env',
              'sglang_unit_env_file': 'gpufleet-serving.env', 'sglang_unit_host': '127.0.0.1',
              'sglang_unit_port': 30000, 'sglang_unit_tp': 1}
    values.update(changed)
    return values


def test_the_served_unit_inputs_are_judged_only_where_it_is_asked_for():
    assert rules.unit_errors(_unit_values()) == []
    assert rules.unit_errors(_unit_values(sglang_unit_enabled=False, sglang_unit_user='')) == []
    assert rules.unit_errors(_unit_values(sglang_unit_user='', sglang_unit_model_path='models', sglang_unit_port=0)) == [
        "sglang_unit_user (gpufleet_serving_user) must name the user the server runs as (got '')",
        "sglang_unit_model_path (gpufleet_serving_model_path) must be the absolute path of the model's folder on the "
        "host, without spaces (got 'models')",
        'sglang_unit_port (gpufleet_serving_port) must be a port, 1 to 65535 (got 0)']
