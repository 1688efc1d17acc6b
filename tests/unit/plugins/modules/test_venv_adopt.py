# -*- coding: utf-8 -*-
"""gpufleet.inference.venv_adopt on a real directory tree: the hand-built venv
is renamed (its inode kept: never copied), the stable path becomes a link, and
every refusal leaves the tree as it was."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible_collections.gpufleet.inference.plugins.modules import venv_adopt
from ansible_collections.gpufleet.inference.tests.unit.plugins.modules.module_harness import run_case


def make_venv(path, cfg=True):
    os.makedirs(os.path.join(path, 'bin'))
    with open(os.path.join(path, 'bin', 'python'), 'w') as handle:
        handle.write('#!/bin/sh\n')
    if cfg:
        with open(os.path.join(path, 'pyvenv.cfg'), 'w') as handle:
            handle.write('home = /usr/bin\n')
    return path


def run(monkeypatch, **params):
    result, dummy = run_case(venv_adopt.main, {'input': params}, monkeypatch)
    return result


def tree(root):
    return sorted((os.path.relpath(d, str(root)), sorted(f), os.path.islink(d)) for d, dummy, f in os.walk(str(root)))


def test_moves_the_venv_by_rename_and_links_the_stable_path(tmp_path, monkeypatch):
    hand = make_venv(str(tmp_path / 'ml-env'))
    new = make_venv(str(tmp_path / 'ml-env-2026-12-01-abc'))
    inode = os.stat(hand).st_ino
    result = run(monkeypatch, link=hand, target=new, destination=str(tmp_path / 'ml-env-adopted-20261201'))
    assert result['changed'] is True
    assert result['moved_from'] == hand and result['moved_to'] == str(tmp_path / 'ml-env-adopted-20261201')
    assert os.path.islink(hand) and os.readlink(hand) == new
    # the same directory (inode) under its new name, contents untouched
    assert os.stat(str(tmp_path / 'ml-env-adopted-20261201')).st_ino == inode
    assert (tmp_path / 'ml-env-adopted-20261201' / 'pyvenv.cfg').read_text() == 'home = /usr/bin\n'
    assert not os.path.lexists(hand + '.gpufleet-link')


def test_default_destination_carries_the_date(tmp_path, monkeypatch):
    monkeypatch.setenv('HOME', str(tmp_path))
    make_venv(str(tmp_path / 'ml-env'))
    make_venv(str(tmp_path / 'ml-env-new'))
    result = run(monkeypatch, link='~/ml-env', target='~/ml-env-new')
    assert result['changed'] is True
    name = os.path.basename(result['moved_to'])
    assert name.startswith('ml-env-adopted-') and len(name) == len('ml-env-adopted-20261201') and name[-8:].isdigit()


def test_second_run_finds_the_link_and_changes_nothing(tmp_path, monkeypatch):
    new = make_venv(str(tmp_path / 'ml-env-new'))
    os.symlink(new, str(tmp_path / 'ml-env'))
    result = run(monkeypatch, link=str(tmp_path / 'ml-env'), target=new)
    assert result['changed'] is False and result['moved_from'] == '' and os.readlink(str(tmp_path / 'ml-env')) == new


def test_check_mode_says_what_it_would_move_and_moves_nothing(tmp_path, monkeypatch):
    hand = make_venv(str(tmp_path / 'ml-env'))
    before = tree(tmp_path)
    result = run(monkeypatch, link=hand, target=str(tmp_path / 'not-built-yet'),
                 destination=str(tmp_path / 'ml-env-adopted-20261201'), _ansible_check_mode=True)
    assert result['changed'] is True and result['moved_to'] == str(tmp_path / 'ml-env-adopted-20261201')
    assert tree(tmp_path) == before and not os.path.islink(hand)


def test_not_a_venv_is_refused_and_untouched(tmp_path, monkeypatch):
    hand = make_venv(str(tmp_path / 'ml-env'), cfg=False)
    new = make_venv(str(tmp_path / 'ml-env-new'))
    before = tree(tmp_path)
    result = run(monkeypatch, link=hand, target=new)
    assert result.get('failed') is True
    assert result['msg'].startswith('%s is not a Python venv (no pyvenv.cfg; it holds bin)' % hand)
    assert tree(tmp_path) == before


def test_taken_destination_is_refused_and_nothing_moves(tmp_path, monkeypatch):
    hand = make_venv(str(tmp_path / 'ml-env'))
    new = make_venv(str(tmp_path / 'ml-env-new'))
    (tmp_path / 'ml-env-adopted-20261201').mkdir()
    before = tree(tmp_path)
    result = run(monkeypatch, link=hand, target=new, destination=str(tmp_path / 'ml-env-adopted-20261201'))
    assert result.get('failed') is True and 'already exists' in result['msg']
    assert tree(tmp_path) == before


def test_destination_elsewhere_is_refused(tmp_path, monkeypatch):
    hand = make_venv(str(tmp_path / 'ml-env'))
    new = make_venv(str(tmp_path / 'ml-env-new'))
    (tmp_path / 'other').mkdir()
    result = run(monkeypatch, link=hand, target=new, destination=str(tmp_path / 'other' / 'ml-env-adopted'))
    assert result.get('failed') is True and 'must stay beside' in result['msg'] and not os.path.islink(hand)


def test_target_without_interpreter_is_refused(tmp_path, monkeypatch):
    hand = make_venv(str(tmp_path / 'ml-env'))
    (tmp_path / 'half').mkdir()
    result = run(monkeypatch, link=hand, target=str(tmp_path / 'half'))
    assert result.get('failed') is True and 'half/bin/python does not exist' in result['msg']
    assert os.path.isdir(hand) and not os.path.islink(hand)


def test_check_mode_needs_no_target(tmp_path, monkeypatch):
    hand = make_venv(str(tmp_path / 'ml-env'))
    result = run(monkeypatch, link=hand, destination=hand + '-adopted-20261201', _ansible_check_mode=True)
    assert result['changed'] is True and result['moved_from'] == hand and os.path.isdir(hand)
    assert run(monkeypatch, link=hand)['msg'].startswith('target must be an absolute or ~/ path')


def test_relative_link_is_refused(monkeypatch):
    result = run(monkeypatch, link='ml-env', target='/srv/x')
    assert result.get('failed') is True and result['msg'].startswith('link must be an absolute or ~/ path')
