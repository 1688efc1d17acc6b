# -*- coding: utf-8 -*-
"""Make ``ansible_collections.gpufleet.inference`` importable from a plain checkout.

The committed link .collections/ansible_collections/gpufleet/inference points at
the repository root (see ansible.cfg); ansible-test sets its own paths and is not
disturbed by this.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

_COLLECTIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '.collections')
if os.path.isdir(_COLLECTIONS) and os.path.abspath(_COLLECTIONS) not in sys.path:
    sys.path.insert(0, os.path.abspath(_COLLECTIONS))
