# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the sglang install may do to the venv the stack's earlier stages
built, judged on the controller from what uv printed (the filters
uv_list_parse and sglang_plan_errors, plugins/filter/sglang.py, only wrap
these). Pure functions, no I/O.

The install runs with the installed versions of the guarded packages
(torch's family, flashinfer, the kernel) as constraints, so uv cannot
resolve another version of one; what it still could do is reinstall one,
add a torch package the torch stage does not pin (the next walk of the
chain would find the venv holding more than its pins), or add a package that
brings the same import under another name (sgl-kernel, renamed
sglang-kernel at 0.4.0: both install sgl_kernel, and the second would
overwrite the first's files). The plan is refused for each before anything
is installed.
"""

from __future__ import annotations

import json

from ansible_collections.gpufleet.inference.plugins.module_utils.freeze import canonical_name
from ansible_collections.gpufleet.inference.plugins.plugin_utils.sglang_pins import RENAMED

# The torch stage's packages: it alone installs them.
TORCH_FAMILY = ("torch", "torchvision", "torchaudio")


def uv_list_parse(text):
    """`uv pip list --format json` -> {canonical name: version}, every distribution (a wheel installed from a
    file too, which `uv pip freeze` writes as a direct reference without its version)."""
    return dict((canonical_name(item["name"]), str(item["version"])) for item in json.loads(text or "[]"))


def _twins(name):
    """The other names of the same distribution (sgl-kernel <-> sglang-kernel)."""
    out = []
    for new, rename in RENAMED.items():
        if name == new:
            out.append(rename["old"])
        elif name == rename["old"]:
            out.append(new)
    return out


def sglang_plan_errors(changes, held, guarded):
    """Why a dry-run plan may not run: [] when it leaves every guarded package the venv holds as it is.

    changes: uv_dry_run_changes of the plan; held: {name: version} of the guarded packages the venv holds;
    guarded: the guarded names (any spelling)."""
    guarded = set(canonical_name(name) for name in guarded)
    held = dict((canonical_name(name), version) for name, version in (held or {}).items())
    install = dict((canonical_name(name), version) for name, version in (changes.get("install") or {}).items())
    remove = dict((canonical_name(name), version) for name, version in (changes.get("remove") or {}).items())
    errors = []
    for name in sorted(held):
        if name in install and name in remove and install[name] == held[name]:
            errors.append("%s %s would be reinstalled (another build of the same version)" % (name, held[name]))
        elif name in install:
            errors.append("%s %s would become %s" % (name, held[name], install[name]))
        elif name in remove:
            errors.append("%s %s would be removed" % (name, held[name]))
    for name in sorted(set(install) & guarded - set(held)):
        if name in TORCH_FAMILY:
            errors.append("%s %s would be added, which the torch stage does not pin: add it to torch_nightly_packages "
                          "with its version in torch_nightly_versions.%s" % (name, install[name], name))
        for twin in _twins(name):
            if twin in held:
                rename = RENAMED.get(name) or RENAMED[twin]
                errors.append("%s %s would be installed beside %s %s: one distribution under two names (renamed at "
                              "%s), both installing %s, the second over the first's files"
                              % (name, install[name], twin, held[twin], rename["since"], rename["import"]))
    return errors
