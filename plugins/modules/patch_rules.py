#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.inference contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: patch_rules
short_description: Apply declarative, idempotent text patch rules to a source tree
version_added: 0.1.0
description:
  - Applies a list of patch rules (file, pattern, replacement or inserted block,
    reason, the refs it applies to) to the files of a source tree.
  - A rule is satisfied when its result text (the replacement or the inserted block)
    is already in the file, so a second run changes nothing.
  - A rule whose pattern no longer matches and whose result is not already present
    fails with the rule's name, its file and the source ref, instead of letting an
    unpatched tree be built.
  - In check mode nothing is written; with C(--diff) the change of every file is shown.
options:
  path:
    description: Root of the source tree; rule files are relative to it.
    type: path
    required: true
  ref:
    description: Source ref the tree was taken from; matched against each rule's C(refs)
      and named in failures.
    type: str
    required: true
  rules:
    description: The patch rules, applied in order.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Unique name of the rule (named in failures).
        type: str
        required: true
      file:
        description: File to patch, relative to O(path).
        type: str
        required: true
      reason:
        description: Why the rule exists (kept with the rule, shown in the result).
        type: str
        required: true
      pattern:
        description: Text to find (literal unless O(rules[].regex) is true).
        type: str
        required: true
      regex:
        description: Treat O(rules[].pattern) as a Python regular expression (multiline mode).
        type: bool
        default: false
      replacement:
        description: Text that replaces every match of the pattern.
          Exactly one of O(rules[].replacement), O(rules[].insert_after), O(rules[].insert_before).
        type: str
      insert_after:
        description: Block inserted after the first match of the pattern.
        type: str
      insert_before:
        description: Block inserted before the first match of the pattern.
        type: str
      refs:
        description: Glob patterns of the source refs this rule applies to; other refs skip it.
        type: list
        elements: str
        default: ['*']
      enabled:
        description: A disabled rule is left out (and reported in RV(not_applicable)).
        type: bool
        default: true
attributes:
  check_mode:
    description: Writes nothing in check mode and reports what each rule would change.
    support: full
  diff_mode:
    description: Returns the unified diff of every patched file.
    support: full
  idempotent:
    description: A rule whose result is already in the file changes nothing.
    support: full
author:
  - gpufleet.inference maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Guard a CMake policy call
  gpufleet.inference.patch_rules:
    path: /srv/src/sgl-kernel
    ref: 3ec6e09487cbf7424f7875cb098860a2142666a3
    rules:
      - name: cmake-policy-cmp0169-guard
        file: CMakeLists.txt
        reason: CMake builds without policy CMP0169 reject SET on an unknown policy
        pattern: "cmake_policy(SET CMP0169 OLD)"
        replacement: |-
          if(POLICY CMP0169)
            cmake_policy(SET CMP0169 OLD)
          endif()
"""

RETURN = r"""
applied:
  description: Names of the rules that changed (or in check mode would change) a file.
  type: list
  elements: str
  returned: always
present:
  description: Names of the rules whose result was already in the file.
  type: list
  elements: str
  returned: always
not_applicable:
  description: Names of the rules left out (disabled, or not for this ref).
  type: list
  elements: str
  returned: always
files:
  description: Files that changed (or would change), relative to O(path).
  type: list
  elements: str
  returned: always
"""

import fnmatch
import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_text

ACTIONS = ("replacement", "insert_after", "insert_before")


class RuleError(Exception):
    pass


def _find(rule, text):
    """Return (start, end) spans of the rule's pattern in text."""
    if rule.get("regex"):
        try:
            return [m.span() for m in re.finditer(rule["pattern"], text, re.MULTILINE)]
        except re.error as exc:
            raise RuleError("patch rule '%s': invalid regex %r: %s" % (rule["name"], rule["pattern"], exc))
    spans, start = [], 0
    pat = rule["pattern"]
    while True:
        i = text.find(pat, start)
        if i < 0:
            return spans
        spans.append((i, i + len(pat)))
        start = i + len(pat)


def apply_rule(rule, text, ref):
    """Return (new_text, state) with state in 'applied' | 'present'; raise RuleError."""
    action = [a for a in ACTIONS if rule.get(a) is not None]
    if len(action) != 1:
        raise RuleError("patch rule '%s': set exactly one of %s" % (rule["name"], ", ".join(ACTIONS)))
    action = action[0]
    result = rule[action]
    if result and result in text:
        return text, "present"
    spans = _find(rule, text)
    if not spans:
        raise RuleError(
            "patch rule '%s' no longer matches source ref %s: pattern %r not found in %s and its %s is not "
            "present; the upstream file changed, review the rule before building"
            % (rule["name"], ref, rule["pattern"], rule["file"], action))
    if action == "replacement":
        if rule.get("regex"):
            return re.sub(rule["pattern"], lambda m: result, text, flags=re.MULTILINE), "applied"
        return text.replace(rule["pattern"], result), "applied"
    s, e = spans[0]
    block = result if result.endswith("\n") else result + "\n"
    if action == "insert_after":
        nl = text.find("\n", e)
        pos = len(text) if nl < 0 else nl + 1
        prefix = text[:pos] if nl >= 0 or text.endswith("\n") else text[:pos] + "\n"
        return prefix + block + text[pos:], "applied"
    ls = text.rfind("\n", 0, s) + 1
    return text[:ls] + block + text[ls:], "applied"


def ref_matches(rule, ref):
    return any(fnmatch.fnmatchcase(ref, p) for p in (rule.get("refs") or ["*"]))


def run(root, ref, rules):
    """Pure core: return (result dict, {relpath: (before, after)}); raise RuleError."""
    names = [r["name"] for r in rules]
    dup = sorted(set(n for n in names if names.count(n) > 1))
    if dup:
        raise RuleError("patch rules: duplicate names %s" % dup)
    files, result = {}, {"applied": [], "present": [], "not_applicable": [], "reasons": {}}
    for rule in rules:
        if not rule.get("enabled", True) or not ref_matches(rule, ref):
            result["not_applicable"].append(rule["name"])
            continue
        rel = rule["file"]
        if os.path.isabs(rel) or ".." in rel.split("/"):
            raise RuleError("patch rule '%s': file %r must be relative to the source tree" % (rule["name"], rel))
        if rel not in files:
            full = os.path.join(root, rel)
            if not os.path.isfile(full):
                raise RuleError("patch rule '%s' no longer matches source ref %s: file %s does not exist"
                                % (rule["name"], ref, rel))
            with open(full, "rb") as f:
                before = to_text(f.read(), errors="surrogate_or_strict")
            files[rel] = [before, before]
        files[rel][1], state = apply_rule(rule, files[rel][1], ref)
        result[state].append(rule["name"])
        result["reasons"][rule["name"]] = rule["reason"]
    changed = dict((k, tuple(v)) for k, v in files.items() if v[0] != v[1])
    result["files"] = sorted(changed)
    return result, changed


def main():
    rule_spec = dict(
        name=dict(type="str", required=True),
        file=dict(type="str", required=True),
        reason=dict(type="str", required=True),
        pattern=dict(type="str", required=True),
        regex=dict(type="bool", default=False),
        replacement=dict(type="str"),
        insert_after=dict(type="str"),
        insert_before=dict(type="str"),
        refs=dict(type="list", elements="str", default=["*"]),
        enabled=dict(type="bool", default=True),
    )
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            ref=dict(type="str", required=True),
            rules=dict(type="list", elements="dict", required=True, options=rule_spec),
        ),
        supports_check_mode=True,
    )
    root, ref = module.params["path"], module.params["ref"]
    if not os.path.isdir(root):
        module.fail_json(msg="patch_rules: source tree %s does not exist (ref %s)" % (root, ref))
    try:
        result, changed = run(root, ref, module.params["rules"])
    except RuleError as exc:
        module.fail_json(msg=str(exc), ref=ref)
    diff = [dict(before=b, after=a, before_header=rel, after_header=rel + " (patched)")
            for rel, (b, a) in sorted(changed.items())]
    if changed and not module.check_mode:
        for rel, (before, after) in changed.items():
            full = os.path.join(root, rel)
            tmp = full + ".gpufleet-tmp"
            with open(tmp, "wb") as f:
                f.write(to_bytes(after, errors="surrogate_or_strict"))
            os.chmod(tmp, os.stat(full).st_mode & 0o7777)
            module.atomic_move(tmp, full)
    module.exit_json(changed=bool(changed), diff=diff, ref=ref, **result)


if __name__ == "__main__":
    main()
