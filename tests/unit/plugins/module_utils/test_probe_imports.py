# -*- coding: utf-8 -*-
"""probe_imports: import-error diagnosis and Requires-Dist pin checks, as the
probe runs them inside the interpreter under test."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import itertools
import os
import re
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import probe_imports

CUDART_12 = 'libcudart.so.12: cannot open shared object file: No such file or directory'
LIBTORCHAUDIO = 'Could not load this library: /x/site-packages/torchaudio/lib/libtorchaudio.so'


def raised(build):
    """The exception that build() raises, with its chain as Python set it."""
    try:
        build()
    except Exception as exc:  # pylint: disable=broad-except
        return exc
    raise AssertionError('nothing raised')


def torchaudio_import():
    """torchaudio 2.9.1 under torch 2.11.0+cu130, as measured on an H200."""
    try:
        raise OSError(CUDART_12)
    except OSError as exc:
        raise OSError(LIBTORCHAUDIO) from exc


def torchvision_import():
    """torchvision 0.24.1 under torch 2.11.0+cu130."""
    raise RuntimeError('operator torchvision::nms does not exist')


def implicit_context():
    """An error raised while handling another, no 'from'."""
    try:
        raise ImportError('libcublas.so.12: cannot open shared object file: No such file or directory')
    except ImportError:
        raise RuntimeError('while loading the extension')  # pylint: disable=raise-missing-from


def cause_over_context():
    try:
        raise ValueError('the context')
    except ValueError:
        raise RuntimeError('outer') from KeyError('the cause')


def suppressed_context():
    try:
        raise OSError(CUDART_12)
    except OSError:
        raise ImportError('torchaudio could not be loaded') from None


def undefined_symbol():
    try:
        raise OSError('/x/torchvision/_C.so: undefined symbol: _ZN3c104cuda9SetDeviceEi, version libcudart.so.12')
    except OSError as exc:
        raise ImportError('torchvision._C failed') from exc


def lib_path_not_found():
    raise OSError('/opt/x/lib/libfoo_bar-1.so.3.2: cannot open shared object file: No such file or directory')


def cudnn_missing():
    raise OSError('libcudnn.so.9: cannot open shared object file: No such file or directory')


def driver_missing():
    raise OSError('libcuda.so.1: cannot open shared object file: No such file or directory')


DESCRIBE_CASES = [
    # (case, build, cuda_version, expected subset of the description)
    ('torchaudio-cu12-on-cu13', torchaudio_import, '13.0', {
        'error': 'OSError: ' + LIBTORCHAUDIO,
        'causes': ['OSError: ' + CUDART_12],
        'missing_library': 'libcudart.so.12',
        'undefined_symbol': None,
        'missing_operator': None,
        'diagnosis': 'libcudart.so.12 is missing: built for CUDA 12, the stack is CUDA 13.0',
    }),
    ('torchaudio-no-cuda-version', torchaudio_import, None, {
        'missing_library': 'libcudart.so.12',
        'diagnosis': 'libcudart.so.12 is missing: cannot open shared object file',
    }),
    ('torchaudio-same-major', torchaudio_import, '12.8', {
        'diagnosis': 'libcudart.so.12 is missing: cannot open shared object file',
    }),
    ('torchvision-operator', torchvision_import, '13.0', {
        'error': 'RuntimeError: operator torchvision::nms does not exist',
        'causes': [],
        'missing_library': None,
        'undefined_symbol': None,
        'missing_operator': 'torchvision::nms',
        'diagnosis': 'operator torchvision::nms is not registered: torchvision was built for another torch',
    }),
    ('implicit-context', implicit_context, '13.0', {
        'error': 'RuntimeError: while loading the extension',
        'causes': ['ImportError: libcublas.so.12: cannot open shared object file: No such file or directory'],
        'missing_library': 'libcublas.so.12',
        'diagnosis': 'libcublas.so.12 is missing: built for CUDA 12, the stack is CUDA 13.0',
    }),
    ('explicit-cause-wins', cause_over_context, None, {
        'causes': ["KeyError: 'the cause'"],
        'diagnosis': None,
    }),
    # 'from None' hides the context from tracebacks, not from the diagnosis.
    ('suppressed-context', suppressed_context, 13, {
        'causes': ['OSError: ' + CUDART_12],
        'diagnosis': 'libcudart.so.12 is missing: built for CUDA 12, the stack is CUDA 13',
    }),
    ('undefined-symbol', undefined_symbol, '13.0', {
        'undefined_symbol': '_ZN3c104cuda9SetDeviceEi',
        'missing_library': None,
        'diagnosis': None,
    }),
    ('library-by-path', lib_path_not_found, '13.0', {
        'missing_library': 'libfoo_bar-1.so.3.2',
        'diagnosis': 'libfoo_bar-1.so.3.2 is missing: cannot open shared object file',
    }),
    # cuDNN and the driver number their sonames on their own: a 9 or a 1 is no CUDA major.
    ('cudnn-own-numbering', cudnn_missing, '13.0', {
        'missing_library': 'libcudnn.so.9',
        'diagnosis': 'libcudnn.so.9 is missing: cannot open shared object file',
    }),
    ('driver-library', driver_missing, '13.0', {
        'diagnosis': 'libcuda.so.1 is missing: cannot open shared object file',
    }),
    ('plain-error', lambda: int('x'), '13.0', {
        'error': "ValueError: invalid literal for int() with base 10: 'x'",
        'causes': [],
        'missing_library': None,
        'undefined_symbol': None,
        'missing_operator': None,
        'diagnosis': None,
    }),
]


@pytest.mark.parametrize('build, cuda_version, expected', [c[1:] for c in DESCRIBE_CASES], ids=[c[0] for c in DESCRIBE_CASES])
def test_describe_exception(build, cuda_version, expected):
    description = probe_imports.describe_exception(raised(build), cuda_version=cuda_version)
    assert sorted(description) == ['causes', 'diagnosis', 'error', 'missing_library', 'missing_operator', 'undefined_symbol']
    assert {key: description[key] for key in expected} == expected


def test_error_matches_the_probe_error_text():
    exc = raised(torchaudio_import)
    assert probe_imports.describe_exception(exc)['error'] == '%s: %s' % (type(exc).__name__, exc)


def test_context_cycle_stops():
    first, second = ValueError('first'), KeyError('second')
    first.__context__, second.__context__ = second, first
    assert probe_imports.describe_exception(first)['causes'] == ["KeyError: 'second'"]


def test_self_cycle_stops():
    exc = RuntimeError('loop')
    exc.__cause__ = exc
    assert probe_imports.describe_exception(exc)['causes'] == []


def test_chain_is_bounded():
    outer = current = RuntimeError('0')
    for number in range(1, 20):
        current.__cause__ = RuntimeError(str(number))
        current = current.__cause__
    causes = probe_imports.describe_exception(outer)['causes']
    assert causes == ['RuntimeError: %d' % n for n in range(1, probe_imports.MAX_CAUSES + 1)]


def test_unprintable_exception():
    class Broken(Exception):
        def __str__(self):
            raise ValueError('no')

    assert probe_imports.describe_exception(Broken())['error'] == 'Broken: <unprintable>'


# ---------------------------------------------------------------- requirement_pins

class FakeDist:
    """What requirement_pins reads of an importlib.metadata.Distribution."""

    def __init__(self, name, version, requires):
        self.metadata = {'Name': name} if name is not None else {}
        self.version = version
        self.requires = requires


def pin(dist, version, requires, spec, marker=''):
    return {'dist': dist, 'version': version, 'requires': requires, 'spec': spec, 'marker': marker}


PIN_CASES = [
    ('exact', ['torch==2.9.1'], [pin('x', '1', 'torch', '==2.9.1')]),
    ('parenthesised', ['torch (==2.9.1)'], [pin('x', '1', 'torch', '==2.9.1')]),
    ('range', ['torch>=2.4,<3'], [pin('x', '1', 'torch', '>=2.4,<3')]),
    ('spaced-range', ['torch >= 2.4, < 3'], [pin('x', '1', 'torch', '>=2.4,<3')]),
    ('marker-kept', ["Torch ==2.9.1 ; platform_system == 'Linux'"],
     [pin('x', '1', 'torch', '==2.9.1', "platform_system == 'Linux'")]),
    ('unpinned', ['torchaudio'], [pin('x', '1', 'torchaudio', '')]),
    ('extras-stripped', ['torch[opt-einsum]>=2.0'], [pin('x', '1', 'torch', '>=2.0')]),
    ('normalised-name', ['TorchVision==0.24.1'], [pin('x', '1', 'torchvision', '==0.24.1')]),
    ('extra-skipped', ['torch>=2.0; extra == "gpu"', "torchaudio ; python_version >= '3.9' and extra=='audio'"], []),
    ('other-packages-skipped', ['numpy>=1.26', 'torch-tensorrt==2.9.0', 'nvidia-cudnn-cu12==9.10.2.21'], []),
    ('url-requirement', ['torch @ file:///wheels/torch-2.11.0-cp311.whl ; sys_platform == "linux"'],
     [pin('x', '1', 'torch', '@file:///wheels/torch-2.11.0-cp311.whl', 'sys_platform == "linux"')]),
    ('no-requires', None, []),
]


@pytest.mark.parametrize('requires, expected', [c[1:] for c in PIN_CASES], ids=[c[0] for c in PIN_CASES])
def test_requirement_pins(requires, expected):
    assert probe_imports.requirement_pins([FakeDist('x', '1', requires)]) == expected


def test_requirement_pins_names_and_broken_dists():
    dists = [
        FakeDist('torchvision', '0.24.1', ['numpy', 'torch==2.9.1', 'pillow!=8.3.*,>=5.3.0']),
        FakeDist(None, '1.0', ['torch==1.0']),  # no Name: unusable metadata
        FakeDist('xformers', '0.0.33', ['torch>=2.9']),
    ]
    assert probe_imports.requirement_pins(dists) == [
        pin('torchvision', '0.24.1', 'torch', '==2.9.1'), pin('xformers', '0.0.33', 'torch', '>=2.9')]
    assert probe_imports.requirement_pins(dists, names=('Pillow',)) == [
        pin('torchvision', '0.24.1', 'pillow', '!=8.3.*,>=5.3.0')]


# ---------------------------------------------------------------- version_satisfies

SATISFIES_CASES = [
    ('2.9.1', '', True),
    ('2.9.1', None, True),
    ('2.9.1', '==2.9.1', True),
    ('2.9.1', '==2.9.1.0', True),
    ('2.11.0+cu130', '==2.9.1', False),
    # a specifier without a local label ignores the candidate's
    ('2.11.0+cu130', '==2.11.0', True),
    ('2.11.0+cu130', '==2.11.0+cu130', True),
    ('2.11.0+cu130', '==2.11.0+cu128', False),
    ('2.11.0', '==2.11.0+cu130', False),
    ('2.11.0+cu130', '>=2.4', True),
    ('2.11.0+cu130', '<=2.11.0', True),
    ('2.11.0+cu130', '>2.11.0', False),
    ('2.11.0+cu130', '>=2.4,<3', True),
    ('2.11.0+cu130', '>=2.4,<2.11', False),
    # dev and pre-releases order before their release
    ('2.12.0.dev20260307', '<2.12.0', False),
    ('2.12.0.dev20260307', '<=2.12.0', True),
    ('2.12.0.dev20260307', '>=2.12.0', False),
    ('2.12.0.dev20260307', '>=2.11', True),
    ('2.12.0.dev20260307+cu130', '>2.11.0', True),
    ('2.12.0rc1', '<2.12.0rc2', True),
    ('2.12.0rc1', '>=2.12.0.dev1', True),
    ('2.11.0.post1', '>2.11.0', False),
    ('2.11.0.post1', '>=2.11.0', True),
    # release segments compare as numbers
    ('10.0', '>8', True),
    ('2.10.0', '>2.9', True),
    ('2.10.0', '<2.9', False),
    ('0.24.1', '~=0.24.0', True),
    ('0.25.0', '~=0.24.0', False),
    ('2.5', '~=2.4', True),
    ('3.0', '~=2.4', False),
    ('2.3', '~=2.4', False),
    ('2.11.0+cu130', '!=2.11.0', False),
    ('2.11.0', '!=2.10.*', True),
    ('2.10.3', '!=2.10.*', False),
    ('2.11.0+cu130', '==2.11.*', True),
    ('2.11.0+cu130', '==2.*', True),
    ('2.1', '==2.1.0.*', True),
    ('2.12.0.dev20260307', '==2.12.*', True),
    ('2.11.0', '==2.1.*', False),
    ('1!2.0', '>=3', True),
    ('2.9.1', '===2.9.1', True),
    ('2.9.1+cpu', '===2.9.1', False),
    ('2.9.1', '>=2.4, <3', True),
    # one failing clause decides even beside an unreadable one
    ('2.9.1', '>=3,=>1', False),
    # could not judge
    ('2.9.1', '=>2', None),
    ('2.9.1', '~=2', None),
    ('2.9.1', '>=2.0+cu130', None),
    ('2.9.1', '==2.*.1', None),
    ('not-a-version', '==2.9.1', None),
    (None, '==2.9.1', None),
    ('2.9.1', '@file:///wheels/torch.whl', None),
]


@pytest.mark.parametrize('version, spec, expected', SATISFIES_CASES)
def test_version_satisfies(version, spec, expected):
    assert probe_imports.version_satisfies(version, spec) is expected


def test_version_order():
    ordered = ['1.0.dev1', '1.0a1.dev1', '1.0a1', '1.0b2', '1.0rc1', '1.0', '1.0+local', '1.0.post1.dev1', '1.0.post1',
               '1.1.dev1', '1.1', '1.10', '2!0.1']
    keys = [probe_imports.parse_version(text).key() for text in ordered]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)


def test_against_packaging():
    """Where packaging is installed (the controller), it is the reference."""
    pytest.importorskip('packaging', minversion='22')
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    versions = [r + s + local for r in ('2.11', '2.11.0', '2.12.0', '10', '1!2.0')
                for s in ('', 'rc1', '.dev3', '.post1', '.post1.dev2', 'rc1.post1') for local in ('', '+cu130')]
    targets = [r + s for r in ('2.11', '2.11.0', '2.12', '10', '8') for s in ('', 'rc1', '.dev3', '.post1')]
    targets += ['2.11.*', '2.*', '2.11.0+cu130']
    for version, op, target in itertools.product(versions, ('==', '!=', '>=', '<=', '>', '<', '~='), targets):
        spec = op + target
        try:
            expected = SpecifierSet(spec).contains(Version(version), prereleases=True)
        except InvalidSpecifier:
            expected = None
        assert probe_imports.version_satisfies(version, spec) is expected, (version, spec)
    for left, right in itertools.product(versions, versions):
        left_key, right_key = probe_imports.parse_version(left).key(), probe_imports.parse_version(right).key()
        assert (left_key < right_key, left_key == right_key) == (Version(left) < Version(right), Version(left) == Version(right))


# ---------------------------------------------------------------- pin_conflicts

CONFLICT_CASES = [
    ('torchvision-pins-older-torch', [pin('torchvision', '0.24.1', 'torch', '==2.9.1')], {'torch': '2.11.0+cu130'},
     ['torchvision 0.24.1 requires torch==2.9.1, installed torch is 2.11.0+cu130']),
    ('range-written-without-spaces', [pin('xformers', '0.0.33', 'torch', '>=2.4,<2.10', "platform_system == 'Linux'")],
     {'torch': '2.11.0+cu130'}, ['xformers 0.0.33 requires torch>=2.4,<2.10, installed torch is 2.11.0+cu130']),
    ('could-not-compare', [pin('x', '1', 'torch', '=>2')], {'torch': '2.11.0'},
     ['x 1 requires torch=>2, installed torch is 2.11.0 (could not compare)']),
    ('not-installed-is-no-conflict', [pin('torchvision', '0.24.1', 'torch', '==2.9.1')], {}, []),
    ('sorted-and-deduplicated', [
        pin('torchvision', '0.24.1', 'torch', '==2.9.1'),
        pin('torchaudio', '2.9.1', 'torch', '==2.9.1'),
        pin('torchvision', '0.24.1', 'torch', '==2.9.1'),
    ], {'torch': '2.11.0+cu130'}, [
        'torchaudio 2.9.1 requires torch==2.9.1, installed torch is 2.11.0+cu130',
        'torchvision 0.24.1 requires torch==2.9.1, installed torch is 2.11.0+cu130',
    ]),
    ('conflict-free', [
        pin('torchvision', '0.26.0+cu130', 'torch', '==2.11.0'),
        pin('torchaudio', '2.11.0+cu130', 'torch', '==2.11.0'),
        pin('xformers', '0.0.35', 'torch', '>=2.10'),
        pin('vllm', '0.1', 'torchaudio', ''),
    ], {'torch': '2.11.0+cu130', 'torchaudio': '2.11.0+cu130'}, []),
]


@pytest.mark.parametrize('pins, installed, expected', [c[1:] for c in CONFLICT_CASES], ids=[c[0] for c in CONFLICT_CASES])
def test_pin_conflicts(pins, installed, expected):
    assert probe_imports.pin_conflicts(pins, installed) == expected


def test_pins_to_conflicts_end_to_end():
    dists = [FakeDist('torch', '2.11.0+cu130', ['filelock', 'nvidia-cuda-runtime==13.0.96; platform_system == "Linux"']),
             FakeDist('torchvision', '0.24.1', ['numpy', 'torch==2.9.1', 'gdown>=4.7.3; extra == "gdown"']),
             FakeDist('torchaudio', '2.9.1', ['torch==2.9.1'])]
    installed = {'torch': '2.11.0+cu130', 'torchvision': '0.24.1', 'torchaudio': '2.9.1'}
    assert probe_imports.pin_conflicts(probe_imports.requirement_pins(dists), installed) == [
        'torchaudio 2.9.1 requires torch==2.9.1, installed torch is 2.11.0+cu130',
        'torchvision 0.24.1 requires torch==2.9.1, installed torch is 2.11.0+cu130',
    ]


# ---------------------------------------------------------------- installed_distributions

def test_installed_distributions_reads_this_interpreter():
    dists, versions = probe_imports.installed_distributions()
    assert versions['pytest'] == pytest.__version__
    assert len(dists) == len(versions)
    assert all(name == probe_imports.canonical_name(name) for name in versions)


def test_source_runs_standalone():
    """The probe execs this file's source in the interpreter under test:
    it must need nothing beyond the standard library."""
    with open(probe_imports.__file__, encoding='utf-8') as handle:
        source = handle.read()
    assert not re.search(r'^\s*(from|import)\s+(ansible|packaging)\b', source, re.M)
    assert max(len(line) for line in source.splitlines()) <= 160
    check = source + '\nprint(len(installed_distributions()[1]) > 0, version_satisfies("2.11.0+cu130", "==2.11.0"))\n'
    out = subprocess.run([sys.executable, '-I', '-c', check], stdout=subprocess.PIPE, check=True,
                         env=dict(os.environ, PYTHONPATH='')).stdout
    assert out.decode().strip() == 'True True'
