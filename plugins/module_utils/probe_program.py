# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The program gpufleet.inference.torch_verify sends to the interpreter under test.

It is one ``-c`` string: a prelude that builds each helper of PROBE_HELPERS from
its source as ``gpufleet_<name>`` in sys.modules, then torch_probe's source.
Nothing is written to the target's disk, so the probe reaches those helpers by
name (torch_probe.helper), never by import.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib
import json
import os
import re

# AnsiballZ ships only the module_utils a module imports: the helpers below are
# loaded through PROBE_HELPERS, these imports are what puts them on the target.
from ansible_collections.gpufleet.inference.plugins.module_utils import (  # pylint: disable=unused-import
    collectives, kernel_checks, model_checks, probe_imports, torch_probe)

COLLECTION = 'ansible_collections.gpufleet.inference'

# The module_utils the probe loads by name (torch_probe.helper(name), model_checks' kernel_checks):
# name -> its file in the collection. The prelude builds them in this order.
PROBE_HELPERS = {
    'kernel_checks': 'plugins/module_utils/kernel_checks.py',
    'model_checks': 'plugins/module_utils/model_checks.py',
    'probe_imports': 'plugins/module_utils/probe_imports.py',
    'collectives': 'plugins/module_utils/collectives.py',
}


def helper_module(path):
    """The loaded module of a file of PROBE_HELPERS."""
    return importlib.import_module(COLLECTION + '.' + os.path.splitext(path)[0].replace('/', '.'))


def module_source(module):
    """A module's source text, read from wherever the module_utils were loaded
    (the AnsiballZ zip on a target, the checkout in unit tests)."""
    loader = getattr(module, '__loader__', None)
    source = None
    if loader is not None and hasattr(loader, 'get_source'):
        source = loader.get_source(module.__name__)
    if not source:
        with open(module.__file__) as handle:
            source = handle.read()
    return source


def probe_source():
    """The probe as one program: a prelude that builds the helper modules from
    their sources (as gpufleet_<name> in sys.modules), then torch_probe."""
    prelude = ['import sys as _gpufleet_sys, types as _gpufleet_types']
    for name, path in PROBE_HELPERS.items():
        # __gpufleet_source__: a helper that starts child interpreters (collectives) hands them its source
        prelude.append(
            '_gpufleet_m = _gpufleet_types.ModuleType(%r)\n'
            '_gpufleet_m.__gpufleet_source__ = %r\n'
            'exec(compile(_gpufleet_m.__gpufleet_source__, %r, "exec"), _gpufleet_m.__dict__)\n'
            '_gpufleet_sys.modules[%r] = _gpufleet_m'
            % ('gpufleet_' + name, module_source(helper_module(path)), os.path.basename(path), 'gpufleet_' + name))
    # A __future__ import must open a program; in Python 3 these are no-ops.
    main = re.sub(r'(?m)^from __future__ import .*$', '', module_source(torch_probe))
    return '\n'.join(prelude) + '\n' + main


def probe_argv(python, params, isolated=True):
    argv = [python]
    if isolated:
        argv.append('-I')  # no user site, no PYTHON* variables, no cwd on sys.path
    return argv + ['-c', probe_source(), json.dumps(params, sort_keys=True)]
