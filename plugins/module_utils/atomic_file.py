# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A file replaced whole or not at all.

The collection's small records (the verification's proof, a model's serving
flags, the fleet report and its textfile metrics) are read by others while
they may be rewritten: a serving unit's EnvironmentFile=, node_exporter's
textfile collector, the next run. Each is written to a temporary file in the
same directory (so that the rename stays on one filesystem) and renamed over
its path: a reader sees the old file or the new one, never a part of one,
and a write that fails leaves the old file as it was and no temporary file
behind.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import os
import tempfile


def write_text(path, text, mode=0o644, prefix='.tmp-'):
    """Replace ``path`` with ``text`` (UTF-8) atomically. ``mode`` is the
    new file's mode; None keeps the temporary file's (0600). Raises what
    the write raised, after removing the temporary file."""
    directory = os.path.dirname(path) or '.'
    handle, tmp = tempfile.mkstemp(prefix=prefix, dir=directory)
    try:
        with io.open(handle, 'w', encoding='utf-8') as out:
            out.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        os.rename(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
