# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import arch_audit as aa

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'modules', 'fixtures')


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


@pytest.mark.parametrize('entry, parts', [
    ('9.0a', ('9', '0', 'a')),
    ('12.0a', ('12', '0', 'a')),
    ('8.9', ('8', '9', '')),
    ('10.0f', ('10', '0', 'f')),
    ('9.0', ('9', '0', '')),
    (' 12.1f ', ('12', '1', 'f')),
])
def test_parse_target(entry, parts):
    assert aa.parse_target(entry) == parts


@pytest.mark.parametrize('entry', ['9.1x', '9.1', '9.0f', '8.9a', 'sm_90a', '90a', '9', '12.0+PTX', '', None, '10.0af'])
def test_parse_target_refuses_naming_the_allowed_form(entry):
    with pytest.raises(ValueError) as caught:
        aa.parse_target(entry)
    message = str(caught.value)
    assert message.startswith('%r is not a CUDA target; allowed: 7.5, 8.0, ' % (entry,))
    assert message.endswith('(MAJOR.MINOR with an optional a or f suffix (9.0a, 10.0f, 8.9))')


@pytest.mark.parametrize('entry, sass, ptx', [
    ('9.0a', 'sm_90a', 'compute_90a'),
    ('12.0a', 'sm_120a', 'compute_120a'),
    ('10.0f', 'sm_100f', 'compute_100f'),
    ('8.9', 'sm_89', 'compute_89'),
])
def test_target_names(entry, sass, ptx):
    assert aa.sass_name(entry) == sass
    assert aa.ptx_name(entry) == ptx


@pytest.mark.parametrize('name, parts', [
    ('sm_120a', ('sm', 12, 0, 'a')),
    ('compute_90', ('compute', 9, 0, '')),
    ('sm_100f', ('sm', 10, 0, 'f')),
    ('compute_75', ('compute', 7, 5, '')),
])
def test_parse_name(name, parts):
    assert aa.parse_name(name) == parts


@pytest.mark.parametrize('name', ['sm90', 'sm_90x', 'compute-90', 'sass_90'])
def test_parse_name_refuses(name):
    with pytest.raises(ValueError):
        aa.parse_name(name)


# Real cuobjdump 13.2.78 output (recorded by tests/integration/test_arch_audit_real.py).
@pytest.mark.parametrize('name, targets', [
    ('cuobjdump-sm90a-list-elf.out.txt', ['sm_90a']),
    ('cuobjdump-sm90-list-elf.out.txt', ['sm_90']),
    ('cuobjdump-extra-list-elf.out.txt', ['sm_90a', 'sm_120a', 'sm_100a']),
    # A PTX listing names its target sm_90: it is PTX compute_90.
    ('cuobjdump-ptx90-list-ptx.out.txt', ['compute_90']),
    # --list-elf drops the f of a family cubin; --list-ptx and the headers keep it.
    ('cuobjdump-fam100-list-elf.out.txt', ['sm_100']),
    ('cuobjdump-fam100-list-ptx.out.txt', ['compute_100f']),
    ('cuobjdump-fam100-headers.out.txt', ['sm_100f', 'compute_100f']),
    ('cuobjdump-sm90-list-ptx.err.txt', []),
    ('cuobjdump-host-list-elf.err.txt', []),
])
def test_parse_listing_of_real_output(name, targets):
    assert aa.parse_listing(fixture(name)) == targets


@pytest.mark.parametrize('text, targets', [
    ('ELF file    1: common_ops.abi3.1.sm_90a.cubin\nELF file    2: common_ops.abi3.2.sm_120a.cubin\n', ['sm_90a', 'sm_120a']),
    ('PTX file    1: x.1.sm_120f.ptx\nPTX file    2: x.2.sm_75.ptx\n', ['compute_120f', 'compute_75']),
    ('ELF file   12: flash_sm90a.12.sm_110a.cubin', ['sm_110a']),
    ('', []),
    (None, []),
])
def test_parse_listing(text, targets):
    assert aa.parse_listing(text) == targets


@pytest.mark.parametrize('sass, ambiguous', [
    (['sm_100'], True), (['sm_90a', 'sm_120'], True), (['sm_90', 'sm_89'], False),
    (['sm_100a', 'sm_100f'], False), ([], False),
])
def test_family_ambiguous(sass, ambiguous):
    assert aa.family_ambiguous(sass) is ambiguous


@pytest.mark.parametrize('entry, sass, ptx, covered', [
    ('9.0a', ['sm_90a'], [], True),
    # Plain SASS of the a target's own GPU runs there (with a note, see plain_only); plain PTX does not do.
    ('9.0a', ['sm_90'], [], True),
    ('9.0a', ['sm_89'], [], False),
    ('9.0a', ['sm_80'], [], False),
    ('12.0a', ['sm_90'], [], False),
    ('9.0a', [], ['compute_90'], False),
    ('9.0a', [], ['compute_90a'], True),
    # Arch-specific SASS covers no plain target.
    ('9.0', ['sm_90a'], [], False),
    ('9.0', ['sm_90'], [], True),
    # Plain PTX is compiled by the driver for any later GPU, not for an earlier one.
    ('12.0', [], ['compute_90'], True),
    ('12.0', [], ['compute_120'], True),
    ('8.9', [], ['compute_90'], False),
    ('12.0a', [], ['compute_90'], False),
    ('12.0', [], ['compute_90a'], False),
    ('12.0', [], ['compute_100f'], False),
    # An f target: f SASS or f PTX of the same major and a lower or equal minor.
    ('10.0f', ['sm_100f'], [], True),
    ('10.0f', ['sm_100'], [], False),
    ('10.0f', ['sm_100a'], [], False),
    ('10.3f', ['sm_100f'], [], True),
    ('10.3f', ['sm_103f'], [], True),
    ('10.0f', ['sm_103f'], [], False),
    ('10.3f', [], ['compute_100f'], True),
    ('10.3f', [], ['compute_103f'], True),
    ('10.0f', [], ['compute_103f'], False),
    ('12.0f', [], ['compute_100f'], False),
    ('10.3f', [], ['compute_100'], False),
    ('12.1a', ['sm_120a'], ['compute_120a'], False),
    # Family SASS runs every GPU of its family, whatever the target's suffix.
    ('10.0', ['sm_100f'], [], True),
    ('10.0a', ['sm_100f'], [], True),
    ('10.3', ['sm_100f'], [], True),
    ('10.3a', ['sm_100f'], [], True),
    ('12.0a', ['sm_120f'], [], True),
    ('12.1', ['sm_120f'], [], True),
    ('12.1a', ['sm_120f'], [], True),
    ('10.0a', ['sm_103f'], [], False),
    ('12.0', ['sm_121f'], [], False),
    ('11.0a', ['sm_100f'], [], False),
    ('12.0a', ['sm_100f'], [], False),
    # No PTX of another suffix stands in: compute_100f is compiled for f targets only.
    ('10.0a', [], ['compute_100f'], False),
    ('10.0', [], ['compute_100f'], False),
])
def test_covers(entry, sass, ptx, covered):
    assert aa.covers(entry, sass, ptx) is covered


@pytest.mark.parametrize('entry, sass, ptx, covered', [
    # Required arch-specific code: plain SASS no longer covers an a target; a and f code still do.
    ('9.0a', ['sm_90'], [], False),
    ('10.0a', ['sm_100'], [], False),
    ('9.0a', ['sm_90a'], [], True),
    ('10.0a', ['sm_100f'], [], True),
    ('10.3a', ['sm_100f'], [], True),
    ('9.0a', [], ['compute_90a'], True),
    # Plain targets are as without it.
    ('9.0', ['sm_90'], [], True),
    ('12.0', [], ['compute_90'], True),
])
def test_covers_with_arch_specific_code_required(entry, sass, ptx, covered):
    assert aa.covers(entry, sass, ptx, arch_specific=True) is covered


@pytest.mark.parametrize('entry, sass, ptx, plain', [
    ('9.0a', ['sm_90'], [], ['sm_90']),
    ('9.0a', ['sm_80', 'sm_90', 'sm_120a'], [], ['sm_90']),
    ('10.0a', ['sm_100'], [], ['sm_100']),
    # Other code for the target as well: it runs with its arch-specific instructions.
    ('9.0a', ['sm_90', 'sm_90a'], [], []),
    ('9.0a', ['sm_90'], ['compute_90a'], []),
    ('10.0a', ['sm_100', 'sm_100f'], [], []),
    # Not covered, or a plain target: nothing to say.
    ('9.0a', ['sm_80'], [], []),
    ('9.0', ['sm_90'], [], []),
    ('10.0a', ['sm_100f'], [], []),
])
def test_plain_only(entry, sass, ptx, plain):
    assert aa.plain_only(entry, sass, ptx) == plain
    assert aa.plain_only(entry, sass, ptx, arch_specific=True) == []


def _listing(sass=(), ptx=(), device_code=True):
    return {'sass': list(sass), 'ptx': list(ptx), 'device_code': device_code}


AUDITS = [
    pytest.param(['9.0a', '12.0a'], {'ops.so': _listing(['sm_90a'])},
                 [{'file': 'ops.so', 'target': '12.0a'}], [], ['sm_90a'], id='missing_target'),
    pytest.param(['9.0a'], {'ops.so': _listing(['sm_90', 'sm_90'])}, [], [], ['sm_90'],
                 id='a_asked_only_plain_present'),
    pytest.param(['10.0a', '10.3a'], {'ops.so': _listing(['sm_100f', 'sm_120a'])},
                 [], [{'file': 'ops.so', 'target': 'sm_120a'}], ['sm_100f', 'sm_120a'], id='family_sass_for_a_targets'),
    pytest.param(['12.0', '9.0'], {'ops.so': _listing([], ['compute_90'])}, [], [], ['compute_90'],
                 id='ptx_compute_90_covers_plain_12.0'),
    pytest.param(['12.0a'], {'ops.so': _listing([], ['compute_90'])},
                 [{'file': 'ops.so', 'target': '12.0a'}], [{'file': 'ops.so', 'target': 'compute_90'}], ['compute_90'],
                 id='ptx_compute_90_does_not_cover_12.0a'),
    pytest.param(['9.0a'], {'ops.so': _listing(['sm_90a', 'sm_120a', 'sm_100a'], ['compute_90'])}, [],
                 [{'file': 'ops.so', 'target': 'sm_100a'}, {'file': 'ops.so', 'target': 'sm_120a'},
                  {'file': 'ops.so', 'target': 'compute_90'}],
                 ['compute_90', 'sm_90a', 'sm_100a', 'sm_120a'], id='unwanted_extra_targets'),
    pytest.param(['9.0a'], {'a/ops.so': _listing(['sm_90a']), 'a/cpu.so': _listing(device_code=False)}, [], [], ['sm_90a'],
                 id='host_only_so_misses_nothing'),
    pytest.param(['9.0a', '10.0f'], {'a/cpu.so': _listing(device_code=False), 'b/cpu.so': _listing(device_code=False)},
                 [{'file': '*', 'target': '9.0a'}, {'file': '*', 'target': '10.0f'}], [], [],
                 id='no_device_code_anywhere'),
    pytest.param(['9.0a'], {}, [{'file': '*', 'target': '9.0a'}], [], [], id='no_shared_object_at_all'),
    pytest.param(['10.0f', '10.3f'], {'ops.so': _listing(['sm_100f'], ['compute_100f'])}, [], [], ['sm_100f', 'compute_100f'],
                 id='family_sass_and_ptx'),
]


@pytest.mark.parametrize('requested, listings, missing, unwanted, compiled', AUDITS)
def test_audit(requested, listings, missing, unwanted, compiled):
    report = aa.audit(requested, listings)
    assert report['missing'] == missing
    assert report['unwanted'] == unwanted
    assert report['compiled'] == compiled
    assert report['requested'] == requested
    assert [entry['file'] for entry in report['files']] == sorted(listings)


def test_audit_lists_every_file_with_its_code():
    report = aa.audit(['9.0a'], {'z.so': _listing(['sm_120a', 'sm_90a', 'sm_90a'], ['compute_90a']),
                                 'cpu.so': _listing(device_code=False)})
    assert report['files'] == [
        {'file': 'cpu.so', 'device_code': False, 'sass': [], 'ptx': []},
        {'file': 'z.so', 'device_code': True, 'sass': ['sm_90a', 'sm_120a'], 'ptx': ['compute_90a']},
    ]


def test_audit_refuses_a_bad_target():
    with pytest.raises(ValueError):
        aa.audit(['9.0a', '9.1x'], {})


def test_missing_message_names_every_file_and_target():
    report = aa.audit(['9.0a', '12.0'], {
        'sgl_kernel/common_ops.abi3.so': _listing(['sm_89', 'sm_110a']),
        'sgl_kernel/flash_ops.so': _listing(['sm_90a'], ['compute_90']),
        'sgl_kernel/libcpu_ops.so': _listing(device_code=False)})
    assert aa.missing_message(report, 'dist/x.whl') == (
        'arch audit: sgl_kernel/common_ops.abi3.so has no code for 9.0a (SASS sm_90a or sm_90, or PTX compute_90a), '
        '12.0 (SASS sm_120 or sm_120f, or PTX compute_120 or lower); it has SASS sm_89, sm_110a and no PTX')


def test_audit_notes_an_a_target_run_by_plain_sass_alone():
    listings = {'sgl_kernel/infllm_ops.abi3.so': _listing(['sm_80', 'sm_90', 'sm_120a']),
                'sgl_kernel/common_ops.abi3.so': _listing(['sm_90', 'sm_90a', 'sm_120a'])}
    report = aa.audit(['9.0a', '12.0a'], listings)
    assert report['missing'] == []
    assert report['plain_only'] == [{'file': 'sgl_kernel/infllm_ops.abi3.so', 'target': '9.0a', 'sass': 'sm_90'}]
    assert aa.plain_only_notes(report) == [
        'sgl_kernel/infllm_ops.abi3.so runs on 9.0a through plain SASS sm_90, without the arch-specific instructions of sm_90a']
    strict = aa.audit(['9.0a', '12.0a'], listings, arch_specific=True)
    assert strict['missing'] == [{'file': 'sgl_kernel/infllm_ops.abi3.so', 'target': '9.0a'}]
    assert strict['plain_only'] == [] and aa.plain_only_notes(strict) == []
    # the plain code no requested target needs is unwanted then
    assert {'file': 'sgl_kernel/common_ops.abi3.so', 'target': 'sm_90'} in strict['unwanted']
    assert aa.missing_message(strict, 'x.whl', arch_specific=True) == (
        'arch audit: sgl_kernel/infllm_ops.abi3.so has no code for 9.0a (SASS sm_90a or PTX compute_90a); '
        'it has SASS sm_80, sm_90, sm_120a and no PTX')


@pytest.mark.parametrize('entry, text', [
    ('9.0a', '(SASS sm_90a or sm_90, or PTX compute_90a)'),
    ('9.0', '(SASS sm_90 or PTX compute_90 or lower)'),
    ('12.0', '(SASS sm_120 or sm_120f, or PTX compute_120 or lower)'),
    ('10.0a', '(SASS sm_100a, sm_100f or sm_100, or PTX compute_100a)'),
    ('10.3', '(SASS sm_103 or sm_100f to sm_103f, or PTX compute_103 or lower)'),
    ('12.1a', '(SASS sm_121a, sm_120f to sm_121f or sm_121, or PTX compute_121a)'),
    ('10.0f', '(SASS sm_100f or PTX compute_100f)'),
    ('10.3f', '(SASS sm_100f to sm_103f or PTX compute_100f to compute_103f)'),
])
def test_requirement(entry, text):
    assert aa.requirement(entry) == text


@pytest.mark.parametrize('entry, text', [
    ('9.0a', '(SASS sm_90a or PTX compute_90a)'),
    ('10.0a', '(SASS sm_100a or sm_100f, or PTX compute_100a)'),
    ('12.0', '(SASS sm_120 or sm_120f, or PTX compute_120 or lower)'),
])
def test_requirement_with_arch_specific_code_required(entry, text):
    assert aa.requirement(entry, arch_specific=True) == text


@pytest.mark.parametrize('entry, version', [
    ('8.9', '11.8'), ('9.0', '11.8'), ('9.0a', '12.0'), ('10.0', '12.8'), ('10.0a', '12.8'), ('10.1a', '12.8'),
    ('10.3a', '12.9'), ('12.0a', '12.8'), ('12.1a', '12.9'), ('11.0a', '13.0'), ('10.0f', '12.9'), ('10.3f', '12.9'),
    ('11.0f', '13.0'), ('12.0f', '12.9'), ('12.1f', '12.9'),
])
def test_minimum_cuda(entry, version):
    assert aa.minimum_cuda(entry) == version


def test_every_known_target_has_a_minimum_and_sorts_by_number():
    targets = aa.known_targets()
    assert targets[:3] == ['7.5', '8.0', '8.6']
    assert targets.index('9.0a') < targets.index('10.0') < targets.index('12.0a')
    assert all(aa.minimum_cuda(entry) for entry in targets)


@pytest.mark.parametrize('entry, cuda, ok', [
    ('12.0a', '12.8', True), ('12.0a', '12.6', False), ('12.1a', '12.10', True), ('10.0f', '12.8', False),
    ('10.0f', '12.9', True), ('11.0a', '12.9', False), ('11.0a', '13.0', True), ('9.0a', '13.1', True),
    # 13.0 renamed 10.1 (Thor) 11.0: its nvcc rejects sm_101.
    ('10.1a', '12.9', True), ('10.1a', '13.0', False), ('10.1', '12.10', False),
])
def test_can_compile_compares_versions_as_numbers(entry, cuda, ok):
    assert aa.can_compile(entry, cuda) is ok


def test_version_tuple():
    assert aa.version_tuple('12.10') > aa.version_tuple('12.9')
