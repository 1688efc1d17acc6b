# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import stat
import zipfile

from ansible_collections.gpufleet.inference.plugins.modules import arch_audit
from ansible_collections.gpufleet.inference.tests.unit.plugins.modules.module_harness import load_cases, run_case

# The directory the module extracts a wheel into (tempfile.mkdtemp(prefix='arch_audit_')).
_EXTRACTED_RE = re.compile(r'^.*/arch_audit_[^/]+/')


def _substitute(value, tmp):
    if isinstance(value, dict):
        return dict((key, _substitute(item, tmp)) for key, item in value.items())
    if isinstance(value, list):
        return [_substitute(item, tmp) for item in value]
    if isinstance(value, str):
        return value.replace('{tmp}', tmp)
    return value


def _make_artifact(artifact, tmp):
    """A real zip for a wheel, placeholder files otherwise: cuobjdump itself is replayed."""
    if 'wheel' in artifact:
        with zipfile.ZipFile(os.path.join(tmp, artifact['wheel']), 'w') as wheel:
            for member in artifact['members']:
                wheel.writestr(member, b'\x7fELF' if '.so' in member else b'')
    for name in artifact.get('files', []):
        path = os.path.join(tmp, name)
        if not os.path.isdir(os.path.dirname(path)):
            os.makedirs(os.path.dirname(path))
        with open(path, 'wb') as handle:
            handle.write(b'\x7fELF' if '.so' in name else b'not a zip')
    # A cuobjdump that exists, for the cases that give cuda_home or cuobjdump.
    fake = os.path.join(tmp, 'cuda', 'bin', 'cuobjdump')
    os.makedirs(os.path.dirname(fake))
    with open(fake, 'w') as handle:
        handle.write('#!/bin/sh\nexit 99\n')
    os.chmod(fake, stat.S_IRWXU)


@load_cases('test_arch_audit.yaml')
def test_arch_audit(case, monkeypatch, tmp_path):
    tmp = str(tmp_path)
    _make_artifact(case.get('artifact', {}), tmp)
    case = _substitute(case, tmp)
    scratch = tmp_path / 'remote_tmp'
    case['input']['_ansible_remote_tmp'] = str(scratch)

    def matcher(args):
        return [_EXTRACTED_RE.sub('{wheel}/', arg) for arg in args]

    result, calls = run_case(arch_audit.main, case, monkeypatch, command_matcher=matcher)
    for args, kwargs, environ in calls:
        assert isinstance(args, list)
        assert kwargs.get('errors') == 'replace'
        assert environ['LC_ALL'] == 'C' and environ['LANG'] == 'C'
    # The extracted wheel is gone once the module has answered.
    leftovers = [name for _root, dirs, _files in os.walk(tmp) for name in dirs if name.startswith('arch_audit_')]
    assert leftovers == []
    # Read-only: never a change, audit passed or failed.
    assert result.get('changed', False) is False
