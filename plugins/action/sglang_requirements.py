# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Action plugin gpufleet.inference.sglang_requirements: the pinned sglang's
requirements against the stack's pins, on the controller, before any change.

sglang pins exact versions of torch, torchaudio, flashinfer-python and its
kernel package. A stack whose own pins contradict them would fail to
resolve on every host after its torch, flashinfer and kernel stages ran, or
(installed package by package) serve with kernels sglang was not built
against. So the sglang role's preflight reads the release's core metadata
here, from the wheelhouse, the controller's cache or the indexes
(plugin_utils/sglang_source.py), and judges the pins of the stack's earlier
stages against it per PEP 440 (plugin_utils/sglang_pins.py): each
contradiction is named with both sides and what to change, and the host
fails before the first change. The extras asked for must be ones the release
declares. Nothing on the host is read or written.
"""

from __future__ import annotations

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpufleet.inference.plugins.plugin_utils import sglang_pins, sglang_source
from ansible_collections.gpufleet.inference.plugins.plugin_utils.sglang_plan import TORCH_FAMILY
from ansible_collections.gpufleet.inference.plugins.plugin_utils.sglang_pins import canonicalize_name

ARGUMENT_SPEC = {
    "version": {"type": "str", "required": True},
    "extras": {"type": "list", "elements": "str", "default": []},
    "wheelhouse": {"type": "str", "default": ""},
    "index_urls": {"type": "list", "elements": "str", "default": []},
    "cache_dir": {"type": "path", "required": True},
    "sha256": {"type": "str", "default": ""},
    "pythons": {"type": "list", "elements": "str", "default": list(sglang_pins.HOST_PYTHONS)},
    "torch": {"type": "dict", "default": {}},
    "flashinfer_version": {"type": "str"},
    "flashinfer_versions": {"type": "dict", "default": {}},
    "flashinfer_packages": {"type": "list", "elements": "str", "default": []},
    "kernel_package": {"type": "str"},
    "kernel_version": {"type": "str"},
    "timeout": {"type": "int", "default": sglang_source.TIMEOUT},
}

WAY_OUT = "nothing was changed (gpufleet_sglang_enabled: false deploys the stack without sglang)"


def unpinned_torch(metadata, pins, pythons):
    """Messages for the torch packages the release requires and the stack does not pin: the torch stage
    alone installs them (its constraints file keeps them)."""
    wanted = sglang_pins.applicable(metadata, pythons)
    pinned = set(canonicalize_name(p["name"]) for p in pins)
    messages = []
    for name in TORCH_FAMILY:
        if name in wanted and name not in pinned:
            messages.append("%s %s requires %s; the torch stage pins no %s (torch_nightly_packages): add it, with "
                            "the %s built for the torch you pin in torch_nightly_versions.%s, so that it is installed "
                            "and kept with torch, not added by sglang's install"
                            % (metadata["name"], metadata["version"], "; ".join(r["text"] for r in wanted[name]),
                               name, name, name))
    return messages


def judge(metadata, args):
    """(pins compared, messages): the stack's pins against the release's requirements, then its extras."""
    pins = sglang_pins.stack_pins(
        torch_nightly_versions=args["torch"], flashinfer_version=args["flashinfer_version"] or None,
        kernel_package=args["kernel_package"] or None, kernel_version=args["kernel_version"] or None,
        flashinfer_versions=args["flashinfer_versions"], flashinfer_packages=args["flashinfer_packages"])
    messages = sglang_pins.pin_errors(metadata, pins, tuple(args["pythons"]))
    if args["torch"]:
        messages += unpinned_torch(metadata, pins, tuple(args["pythons"]))
    declared = sglang_source.declared_extras(metadata)
    unknown = [extra for extra in args["extras"] if canonicalize_name(extra) not in declared]
    if unknown:
        messages.append("sglang_extras: %s %s declares no extra %s (its extras: %s)" % (
            metadata["name"], metadata["version"], ", ".join(unknown), ", ".join(sorted(declared)) or "none"))
    return pins, messages


def summary(metadata, pins):
    """{name: [requirement]} of what the release asks of the distributions the stack pins."""
    wanted = sglang_pins.applicable(metadata)
    names = set(canonicalize_name(p["name"]) for p in pins)
    # a kernel pinned under its old name is still what the new name's requirement is about
    for new, rename in sglang_pins.RENAMED.items():
        if new in names or rename["old"] in names:
            names |= {new, rename["old"]}
    return dict((name, [req["text"] for req in wanted[name]]) for name in sorted(names) if name in wanted)


class ActionModule(ActionBase):
    """Read the release's metadata on the controller and judge the stack's pins."""

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        result["changed"] = False
        try:
            found = sglang_source.locate(args["version"], args["wheelhouse"], args["index_urls"], args["cache_dir"],
                                         args["sha256"], args["timeout"])
            metadata = sglang_source.read(found["path"])
        except ValueError as exc:
            raise AnsibleActionFail("sglang %s: its requirements could not be read on the controller: %s; %s"
                                    % (args["version"], exc, WAY_OUT)) from exc
        pins, messages = judge(metadata, args)
        result.update({
            "sglang": {"name": metadata["name"], "version": metadata["version"]},
            "file": found["path"],
            "source": found["source"],
            "requires_python": metadata["requires_python"],
            "requirements": summary(metadata, pins),
            "pins": dict((p["name"], p["version"]) for p in pins),
            "problems": messages,
        })
        if messages:
            result["failed"] = True
            result["msg"] = "%s; %s" % ("; ".join(messages), WAY_OUT)
        else:
            result["msg"] = "%s %s (%s, from the %s) meets the stack's pins: %s" % (
                metadata["name"], metadata["version"], found["path"].rsplit("/", 1)[-1], found["source"],
                ", ".join("%s %s" % item for item in sorted(result["pins"].items())) or "none pinned")
        return result
