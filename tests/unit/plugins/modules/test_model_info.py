# -*- coding: utf-8 -*-
"""gpufleet.inference.model_info on real files: what deploy.yml's preflight reads of a model path on the host."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import model_verify
from ansible_collections.gpufleet.inference.plugins.modules import model_info
from ansible_collections.gpufleet.inference.tests.unit.plugins.modules.module_harness import run_case

CONFIGS = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'fixtures', 'model_configs')


def run(monkeypatch, **params):
    result, dummy = run_case(model_info.main, {'input': params}, monkeypatch)
    return result


def model_dir(tmp_path, name='mixtral-8x7b.config.json'):
    shutil.copy(os.path.join(CONFIGS, name), str(tmp_path / 'config.json'))
    return str(tmp_path)


def test_a_model_directory_is_read_as_the_verification_reads_it(tmp_path, monkeypatch):
    path = model_dir(tmp_path)
    result = run(monkeypatch, model=path, tp_size=2)
    assert result['changed'] is False and not result.get('failed'), result
    assert result['path'] == os.path.join(path, 'config.json')
    expected, errors = model_verify.resolve({'model': path, 'tp_size': 2})
    assert errors == [] and result['model']['shapes'] == expected['shapes'] and result['model']['tp'] == 2


def test_a_path_under_home(tmp_path, monkeypatch):
    monkeypatch.setenv('HOME', str(tmp_path))
    model_dir(tmp_path)
    result = run(monkeypatch, model='~/config.json')
    assert result['path'] == str(tmp_path / 'config.json') and not result.get('failed'), result


@pytest.mark.parametrize('model, words', [
    ('{tmp}/missing/config.json', 'gpufleet_model: {tmp}/missing/config.json does not exist on the host'),
    ('{tmp}', "gpufleet_model: {tmp}/config.json does not exist on the host (from '{tmp}')"),
    ('models/m', 'gpufleet_model: must be a shipped profile'),
])
def test_a_path_with_no_config_json_is_refused_naming_it(tmp_path, monkeypatch, model, words):
    result = run(monkeypatch, model=model.format(tmp=tmp_path))
    assert result['failed'] and words.format(tmp=tmp_path) in result['msg'], result


def test_a_config_json_that_is_not_a_file(tmp_path, monkeypatch):
    (tmp_path / 'config.json').mkdir()
    result = run(monkeypatch, model=str(tmp_path))
    assert result['failed'] and 'is not a file' in result['msg'], result


def test_an_invalid_or_unreadable_config_json_is_refused_naming_it(tmp_path, monkeypatch):
    (tmp_path / 'config.json').write_text('{"hidden_size": 4096,')
    result = run(monkeypatch, model=str(tmp_path))
    assert result['failed'] and result['msg'].startswith(
        'gpufleet_model: %s is not valid JSON' % (tmp_path / 'config.json')), result

    def refuse(path):
        raise model_verify.model_profile.ProfileError('gpufleet_model', 'cannot read %s: Permission denied' % path)
    monkeypatch.setattr(model_verify, '_read', refuse)
    result = run(monkeypatch, model=str(tmp_path))
    assert result['failed'] and 'gpufleet_model: cannot read %s' % (tmp_path / 'config.json') in result['msg'], result


def test_a_tp_size_the_model_cannot_take(tmp_path, monkeypatch):
    result = run(monkeypatch, model=model_dir(tmp_path), tp_size=3)
    assert result['failed'] and result['msg'].startswith('gpufleet_tp_size'), result
