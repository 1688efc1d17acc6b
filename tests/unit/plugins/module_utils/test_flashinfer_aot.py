# -*- coding: utf-8 -*-
"""flashinfer_aot: the rules, and the program the module runs, in a real venv
interpreter (python -I -c <source> <JSON>) over a small flashinfer package
that has flashinfer's layout and metadata: its generators return specs whose
build() writes a library the way JitSpec.build leaves one (the real build
with nvcc runs on the H200 test machine, evidence/h200-flashinfer-aot)."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import subprocess
import textwrap
import venv

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import flashinfer_aot as aot
from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import module_source

SPEC = textwrap.dedent('''\
    import os, pathlib

    class Spec(object):
        def __init__(self, name):
            self.name = name
            base = pathlib.Path(os.environ['FLASHINFER_WORKSPACE_BASE'])
            self.jit_library_path = base / 'cached_ops' / name / (name + '.so')

        def build(self, verbose=None):
            if os.environ.get('FAKE_BUILD_FAILS') == self.name:
                raise RuntimeError('ninja: build stopped: subcommand failed (nvcc not found)')
            self.jit_library_path.parent.mkdir(parents=True, exist_ok=True)
            self.jit_library_path.write_bytes(
                ('%s for %s' % (self.name, os.environ['FLASHINFER_CUDA_ARCH_LIST'])).encode() * 100)
    ''')


def make_venv(root, version='0.7.2.post1', renamed=None):
    """A venv (no pip) holding a flashinfer package of VERSION; RENAMED maps a
    module name to the name its spec gives."""
    venv.EnvBuilder(with_pip=False).create(str(root))
    python = str(root / 'bin' / 'python')
    purelib = subprocess.run([python, '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
                             capture_output=True, text=True, check=True).stdout.strip()
    package = os.path.join(purelib, 'flashinfer')
    os.makedirs(os.path.join(package, 'jit', 'gemm'))
    for path in ('__init__.py', 'jit/__init__.py', 'jit/gemm/__init__.py'):
        open(os.path.join(package, path), 'w').close()
    with open(os.path.join(package, 'jit', 'spec.py'), 'w') as handle:
        handle.write(SPEC)
    renamed = renamed or {}
    for name, (module, function, args) in aot.GENERATORS.items():
        path = os.path.join(purelib, *module.split('.')) + '.py'
        with open(path, 'a') as handle:
            handle.write('from flashinfer.jit.spec import Spec\n'
                         'def %s(*args):\n    return Spec(%r)\n' % (function, renamed.get(name, name)))
    dist = os.path.join(purelib, 'flashinfer_python-%s.dist-info' % version)
    os.makedirs(dist)
    with open(os.path.join(dist, 'METADATA'), 'w') as handle:
        handle.write('Metadata-Version: 2.1\nName: flashinfer-python\nVersion: %s\n' % version)
    return python, package


def program(python, **params):
    proc = subprocess.run([python, '-I', '-c', module_source(aot), json.dumps(params)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


COMMON = {'modules': ['norm', 'fused_moe_90'], 'arch_list': ['9.0a'], 'cuda_version': '13.0'}


@pytest.fixture(scope='module')
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp('builder')
    python, dummy = make_venv(root / 'venv')
    out = str(root / 'artifact')
    result, err = program(python, action='build', out=out, workspace=str(root / 'ws'), **COMMON)
    return out, result, err


# -- the rules


def test_module_names_known_once_each():
    assert aot.module_errors(['fused_moe_90', 'norm']) == []
    message, = aot.module_errors(['fused_moe_91'])
    assert message.startswith('flashinfer_aot_modules: expected flashinfer JIT module names from ')
    assert 'fused_moe_90' in message and "found 'fused_moe_91'" in message
    assert aot.module_errors(['norm', 'norm']) == [
        'flashinfer_aot_modules: expected each module once, found norm, norm']
    assert aot.module_errors('norm', 'modules') == [
        "modules: expected a list of flashinfer JIT module names, found 'norm'"]


@pytest.mark.parametrize('arch_list, ok', [
    (['9.0a'], True), (['10.0a', '12.0f', '8.9'], True),
    (['90'], False), (['sm_90a'], False), (['9.0x'], False), ([], False), ('9.0a', False)])
def test_arch_list(arch_list, ok):
    errors = aot.arch_errors(arch_list)
    assert (errors == []) is ok
    if not ok:
        assert errors[0].startswith('flashinfer_aot_arch_list: expected ')


def test_key_data_is_order_free_and_records_are_judged_field_by_field():
    data = aot.key_data('0.7.2.post1', '13.0', ['12.0f', '9.0a'], ['norm', 'fused_moe_90'])
    assert data == aot.key_data('0.7.2.post1', '13.0', ['9.0a', '12.0f'], ['fused_moe_90', 'norm'])
    record = {'schema': aot.SCHEMA, 'flashinfer_version': '0.7.2.post1', 'cuda_version': '13.0',
              'arch_list': ['12.0f', '9.0a'], 'modules': {'norm': {}, 'fused_moe_90': {}}}
    assert aot.record_errors(record, data) == []
    assert aot.record_errors(dict(record, flashinfer_version='0.7.3'), data) == [
        "flashinfer_version: expected '0.7.2.post1', found '0.7.3' in the build record"]
    assert aot.record_errors(dict(record, modules={'norm': {}}), data) == [
        'modules: expected fused_moe_90, found norm in the build record']
    assert aot.record_errors({'schema': 0}, data)[0].startswith('expected a build record of schema 1')


# -- the program: build


def test_build_writes_each_module_and_a_record_with_its_sha256(built):
    out, result, err = built
    record = result['record']
    assert result['changed'] is True
    assert record['flashinfer_version'] == '0.7.2.post1' and record['arch_list'] == ['9.0a']
    assert sorted(record['modules']) == ['fused_moe_90', 'norm']
    for name, entry in record['modules'].items():
        data = open(os.path.join(out, name + '.so'), 'rb').read()
        assert entry['sha256'] == hashlib.sha256(data).hexdigest() and entry['bytes'] == len(data)
        # the targets reached flashinfer as FLASHINFER_CUDA_ARCH_LIST
        assert data.startswith(('%s for 9.0a' % name).encode())
    assert json.load(open(os.path.join(out, aot.RECORD))) == record
    assert 'building norm (1/2)' in err and 'built fused_moe_90 in ' in err


def test_build_refuses_a_module_flashinfer_names_otherwise(tmp_path):
    python, dummy = make_venv(tmp_path / 'venv', renamed={'fused_moe_90': 'fused_moe_90_h20_prebuilt_d'})
    result, dummy = program(python, action='build', out=str(tmp_path / 'out'), workspace=str(tmp_path / 'ws'),
                            **COMMON)
    assert result['failed'] is True
    assert 'fused_moe_90: expected flashinfer to name the module fused_moe_90, found fused_moe_90_h20_prebuilt_d' \
        in result['msg']
    assert not os.path.exists(str(tmp_path / 'out' / aot.RECORD))


def test_a_failed_build_leaves_no_record(tmp_path, monkeypatch):
    python, dummy = make_venv(tmp_path / 'venv')
    env = dict(os.environ, FAKE_BUILD_FAILS='fused_moe_90')
    proc = subprocess.run([python, '-I', '-c', module_source(aot), json.dumps(dict(
        COMMON, action='build', out=str(tmp_path / 'out'), workspace=str(tmp_path / 'ws')))],
        capture_output=True, text=True, env=env, check=False)
    result = json.loads(proc.stdout)
    assert result['failed'] is True and 'nvcc not found' in result['msg'] and result['msg'].startswith('build: ')
    assert os.path.exists(str(tmp_path / 'out' / 'norm.so'))
    assert not os.path.exists(str(tmp_path / 'out' / aot.RECORD))


# -- the program: install and status


def placed(package):
    aot_dir = os.path.join(package, 'data', 'aot')
    if not os.path.isdir(aot_dir):
        return []
    return sorted(name for name in os.listdir(aot_dir) if os.path.isfile(os.path.join(aot_dir, name, name + '.so')))


def test_install_places_checked_modules_once_and_status_reads_them(built, tmp_path):
    out, record, dummy = built
    python, package = make_venv(tmp_path / 'venv')
    params = dict(COMMON, action='install', src=out, key='k1')
    first, dummy = program(python, **params)
    assert first['changed'] is True and sorted(first['placed']) == ['fused_moe_90', 'norm']
    assert placed(package) == ['fused_moe_90', 'norm']
    for name in COMMON['modules']:
        assert open(os.path.join(package, 'data', 'aot', name, name + '.so'), 'rb').read() == \
            open(os.path.join(out, name + '.so'), 'rb').read()
    second, dummy = program(python, **params)
    assert second['changed'] is False and second['placed'] == []
    status, dummy = program(python, action='status')
    assert status['intact'] is True and status['marker']['key'] == 'k1'
    assert status['marker']['sha256'] == {name: entry['sha256'] for name, entry in record['record']['modules'].items()}
    os.remove(os.path.join(package, 'data', 'aot', 'norm', 'norm.so'))
    status, dummy = program(python, action='status')
    assert status['intact'] is False and status['present']['norm'] is None


def test_install_check_mode_says_and_writes_nothing(built, tmp_path):
    out, dummy, dummy = built
    python, package = make_venv(tmp_path / 'venv')
    result, dummy = program(python, action='install', src=out, check_mode=True, **COMMON)
    assert result['changed'] is True and sorted(result['placed']) == ['fused_moe_90', 'norm']
    assert placed(package) == [] and not os.path.exists(os.path.join(package, 'data', 'aot', aot.MARKER))


@pytest.mark.parametrize('case', ['changed byte', 'missing file', 'other flashinfer', 'other arch'])
def test_install_refuses_a_wrong_artifact_before_placing_anything(built, tmp_path, case):
    out, dummy, dummy = built
    src = tmp_path / 'artifact'
    src.mkdir()
    for name in os.listdir(out):
        (src / name).write_bytes(open(os.path.join(out, name), 'rb').read())
    params = dict(COMMON, action='install', src=str(src))
    version = '0.7.2.post1'
    if case == 'changed byte':
        data = bytearray((src / 'fused_moe_90.so').read_bytes())
        data[10] ^= 1
        (src / 'fused_moe_90.so').write_bytes(bytes(data))
        expected = 'fused_moe_90: expected sha256 '
    elif case == 'missing file':
        (src / 'fused_moe_90.so').unlink()
        expected = 'fused_moe_90: expected %s, found no file' % (src / 'fused_moe_90.so')
    elif case == 'other flashinfer':
        version = '0.7.3'
        expected = "flashinfer_version: expected '0.7.3', found '0.7.2.post1' in the build record"
    else:
        params['arch_list'] = ['10.0a']
        expected = "arch_list: expected ['10.0a'], found ['9.0a'] in the build record"
    python, package = make_venv(tmp_path / 'venv', version=version)
    result, dummy = program(python, **params)
    assert result['failed'] is True and expected in result['msg'], result['msg']
    assert placed(package) == []  # norm was fine, and still not placed


def test_a_shorter_list_removes_what_it_no_longer_names_and_an_empty_one_removes_all(built, tmp_path):
    out, dummy, dummy = built
    python, package = make_venv(tmp_path / 'venv')
    program(python, action='install', src=out, **COMMON)
    narrower = dict(COMMON)
    narrower['modules'] = ['norm']
    result, dummy = program(python, action='install', src=out, **narrower)
    assert result['changed'] is True and result['removed'] == ['fused_moe_90'] and result['placed'] == []
    assert placed(package) == ['norm']
    result, dummy = program(python, action='install', modules=[])
    assert result['changed'] is True and result['removed'] == ['norm']
    assert placed(package) == [] and not os.path.exists(os.path.join(package, 'data', 'aot', aot.MARKER))
    result, dummy = program(python, action='install', modules=[])
    assert result['changed'] is False


def test_status_is_not_intact_for_another_flashinfer_version(built, tmp_path):
    out, dummy, dummy = built
    python, package = make_venv(tmp_path / 'venv')
    program(python, action='install', src=out, **COMMON)
    meta = [os.path.join(root, 'METADATA') for root, dummy, files in os.walk(os.path.dirname(package))
            if 'METADATA' in files][0]
    with open(meta, 'w') as handle:
        handle.write('Metadata-Version: 2.1\nName: flashinfer-python\nVersion: 0.7.3\n')
    status, dummy = program(python, action='status')
    assert status['flashinfer_version'] == '0.7.3' and status['intact'] is False


def test_no_flashinfer_is_an_error_naming_the_interpreter(tmp_path):
    venv.EnvBuilder(with_pip=False).create(str(tmp_path / 'venv'))
    result, dummy = program(str(tmp_path / 'venv' / 'bin' / 'python'), action='status')
    assert result['failed'] is True
    assert 'flashinfer: expected it installed in this interpreter' in result['msg']


def test_status_gives_the_key_of_what_is_asked_and_whether_this_venv_lacks_it(built, tmp_path):
    out, dummy, dummy = built
    python, dummy = make_venv(tmp_path / 'venv')
    ask = dict(COMMON, action='status')
    data = aot.key_data('0.7.2.post1', '13.0', ['9.0a'], ['fused_moe_90', 'norm'])
    before, dummy = program(python, **ask)
    assert before['key_data'] == data and before['key'] == aot.aot_key(data) and len(before['key']) == 16
    assert before['needed'] is True
    program(python, action='install', src=out, key=before['key'], **COMMON)
    after, dummy = program(python, **ask)
    assert after['key'] == before['key'] and after['needed'] is False
    # another target architecture is another key, which this venv lacks
    wider = dict(ask)
    wider['arch_list'] = ['9.0a', '12.0f']
    other, dummy = program(python, **wider)
    assert other['key'] != before['key'] and other['needed'] is True
    # no modules asked: no key
    plain, dummy = program(python, action='status')
    assert 'key' not in plain and plain['intact'] is True
