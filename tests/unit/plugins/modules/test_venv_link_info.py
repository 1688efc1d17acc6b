# -*- coding: utf-8 -*-
"""gpufleet.inference.venv_link_info on a real directory tree (no commands to mock)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.inference.plugins.modules import venv_link_info as venv_link
from ansible_collections.gpufleet.inference.tests.unit.plugins.modules.module_harness import run_case


def make_venv(path):
    os.makedirs(os.path.join(path, 'bin'))
    with open(os.path.join(path, 'bin', 'python'), 'w') as handle:
        handle.write('#!/bin/sh\n')
    return path


def run(monkeypatch, **params):
    result, dummy = run_case(venv_link.main, {'input': params}, monkeypatch)
    return result


def test_active_venv_history_and_target(tmp_path, monkeypatch):
    old = make_venv(str(tmp_path / 'ml-env-old'))
    new = make_venv(str(tmp_path / 'ml-env-new'))
    os.symlink(new, str(tmp_path / 'ml-env'))
    (tmp_path / '.ml-env.history').write_text('%s\n\n  %s  \n' % (old, new))
    result = run(monkeypatch, link=str(tmp_path / 'ml-env'))
    assert result['changed'] is False
    assert result['link_path'] == str(tmp_path / 'ml-env')
    assert result['history_path'] == str(tmp_path / '.ml-env.history')
    assert result['link_exists'] is True
    assert result['active_venv'] == new
    assert result['history'] == [old, new]
    assert result['target'] == new and result['target_python'] is True


def test_explicit_venv_under_home_with_trailing_slash(tmp_path, monkeypatch):
    monkeypatch.setenv('HOME', str(tmp_path))
    make_venv(str(tmp_path / 'ml-env-next'))
    result = run(monkeypatch, link='~/ml-env', venv='~/ml-env-next/')
    assert result['link_path'] == str(tmp_path / 'ml-env')
    assert result['link_exists'] is False and result['active_venv'] == '' and result['history'] == []
    assert result['target'] == str(tmp_path / 'ml-env-next') and result['target_python'] is True


def test_no_link_and_no_venv_gives_empty_target(tmp_path, monkeypatch):
    result = run(monkeypatch, link=str(tmp_path / 'ml-env'))
    assert result['target'] == '' and result['target_python'] is False


def test_target_without_interpreter(tmp_path, monkeypatch):
    (tmp_path / 'half-built').mkdir()
    result = run(monkeypatch, link=str(tmp_path / 'ml-env'), venv=str(tmp_path / 'half-built'))
    assert result['target_python'] is False


def test_link_resolved_through_symlinked_parent(tmp_path, monkeypatch):
    real = make_venv(str(tmp_path / 'disk' / 'ml-env-a'))
    os.symlink(str(tmp_path / 'disk'), str(tmp_path / 'alias'))
    os.symlink(str(tmp_path / 'alias' / 'ml-env-a'), str(tmp_path / 'ml-env'))
    result = run(monkeypatch, link=str(tmp_path / 'ml-env'))
    assert result['active_venv'] == real


def test_dangling_link_is_reported_not_failed(tmp_path, monkeypatch):
    os.symlink(str(tmp_path / 'gone'), str(tmp_path / 'ml-env'))
    result = run(monkeypatch, link=str(tmp_path / 'ml-env'))
    assert result['link_exists'] is True and result['active_venv'] == str(tmp_path / 'gone')
    assert result['target_python'] is False


def test_real_directory_at_the_stable_path_is_refused(tmp_path, monkeypatch):
    make_venv(str(tmp_path / 'ml-env'))
    result = run(monkeypatch, link=str(tmp_path / 'ml-env'))
    assert result.get('failed') is True
    assert 'exists and is not a symlink' in result['msg'] and str(tmp_path / 'ml-env') in result['msg']
    # the refusal names the variable that adopts it
    assert 'gpufleet_adopt_existing_venv=true' in result['msg']


def test_adopt_accepts_a_hand_built_venv_as_the_active_one(tmp_path, monkeypatch):
    hand = make_venv(str(tmp_path / 'ml-env'))
    (tmp_path / 'ml-env' / 'pyvenv.cfg').write_text('home = /usr/bin\n')
    result = run(monkeypatch, link=hand, adopt=True)
    assert result.get('failed') is not True, result
    assert result['link_exists'] is True and result['link_is_directory'] is True
    assert result['active_venv'] == hand and result['target'] == hand and result['target_python'] is True


def test_adopt_refuses_a_directory_that_is_not_a_venv_naming_what_it_holds(tmp_path, monkeypatch):
    (tmp_path / 'ml-env').mkdir()
    (tmp_path / 'ml-env' / 'notes.txt').write_text('x')
    result = run(monkeypatch, link=str(tmp_path / 'ml-env'), adopt=True)
    assert result.get('failed') is True
    assert 'is not a Python venv (no pyvenv.cfg; no bin/python; it holds notes.txt)' in result['msg']


def test_a_symlink_reads_the_same_with_adopt(tmp_path, monkeypatch):
    active = make_venv(str(tmp_path / 'ml-env-a'))
    os.symlink(active, str(tmp_path / 'ml-env'))
    result = run(monkeypatch, link=str(tmp_path / 'ml-env'), adopt=True)
    assert result['link_is_directory'] is False and result['active_venv'] == active


@pytest.mark.parametrize('params, name', [
    ({'link': 'ml-env'}, 'link'),
    ({'link': ''}, 'link'),
    ({'link': '/home/deploy/ml-env', 'venv': 'relative/venv'}, 'venv'),
])
def test_relative_paths_are_refused(params, name, monkeypatch):
    result = run(monkeypatch, **params)
    assert result.get('failed') is True
    assert result['msg'].startswith('%s must be an absolute or ~/ path' % name)


def test_markers_read_from_the_active_venv(tmp_path, monkeypatch):
    active = make_venv(str(tmp_path / 'ml-env-a'))
    os.symlink(active, str(tmp_path / 'ml-env'))
    (tmp_path / 'ml-env-a' / 'gpufleet-deployed.json').write_text('{"key": "k1", "venv": "%s"}' % active)
    (tmp_path / 'ml-env-a' / 'broken.json').write_text('{"key": ')
    result = run(monkeypatch, link=str(tmp_path / 'ml-env'),
                 markers=['gpufleet-deployed.json', 'broken.json', 'missing.json'])
    assert result['markers'] == {'gpufleet-deployed.json': {'key': 'k1', 'venv': active},
                                 'broken.json': None, 'missing.json': None}


def test_markers_without_active_venv_and_outside_it(tmp_path, monkeypatch):
    assert run(monkeypatch, link=str(tmp_path / 'ml-env'), markers=['gpufleet-deployed.json'])['markers'] == {}
    os.symlink(make_venv(str(tmp_path / 'ml-env-a')), str(tmp_path / 'ml-env'))
    result = run(monkeypatch, link=str(tmp_path / 'ml-env'), markers=['../../etc/shadow'])
    assert result.get('failed') is True and 'markers must be relative paths' in result['msg']


def test_exists_reports_each_path_read_in_the_same_run(tmp_path, monkeypatch):
    lock = tmp_path / 'gpufleet'
    dangling = tmp_path / 'dangling'
    os.symlink(str(tmp_path / 'nowhere'), str(dangling))
    paths = [str(lock), str(dangling)]
    assert run(monkeypatch, link=str(tmp_path / 'ml-env'), exists=paths)['exists'] == {paths[0]: False, paths[1]: True}
    lock.mkdir()
    assert run(monkeypatch, link=str(tmp_path / 'ml-env'), exists=paths)['exists'][paths[0]] is True
    assert run(monkeypatch, link=str(tmp_path / 'ml-env'))['exists'] == {}


def test_exists_refuses_a_relative_path(tmp_path, monkeypatch):
    result = run(monkeypatch, link=str(tmp_path / 'ml-env'), exists=['var/lock/gpufleet'])
    assert result.get('failed') is True and result['msg'] == 'exists takes absolute paths (got var/lock/gpufleet)'
