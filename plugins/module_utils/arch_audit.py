# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Which GPU targets a built CUDA artifact really carries, from cuobjdump listings.

Pure functions for gpufleet.inference.arch_audit: TORCH_CUDA_ARCH_LIST entries
("9.0a", "10.0f", "8.9"), cuobjdump target names ("sm_90a", "compute_100f"),
the coverage rules, and the audit of a set of shared objects.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import fnmatch
import re

# The lowest CUDA release whose nvcc compiles each target. Every entry compiles
# with nvcc 13.0 (checked with -gencode arch=compute_X,code=sm_X, except 10.1*,
# which 13.0 renamed 11.0). The minima are from the CUDA/PTX ISA release notes,
# not from running each older nvcc; marked "unconfirmed" where no release note
# was read for it.
MINIMUM_CUDA = {
    '7.5': '10.0',   # unconfirmed
    '8.0': '11.0',   # unconfirmed
    '8.6': '11.1',   # unconfirmed
    '8.7': '11.4',   # unconfirmed
    '8.8': '13.0',   # PTX ISA 9.0 added sm_88
    '8.9': '11.8',   # unconfirmed
    '9.0': '11.8',   # unconfirmed
    '9.0a': '12.0',  # PTX ISA 8.0 (CUDA 12.0) added sm_90a; unconfirmed by a 12.0 nvcc
    '10.0': '12.8',
    '10.0a': '12.8',
    '10.0f': '12.9',
    '10.1': '12.8',
    '10.1a': '12.8',
    '10.1f': '12.9',  # unconfirmed
    '10.3': '12.9',
    '10.3a': '12.9',
    '10.3f': '12.9',
    '11.0': '13.0',
    '11.0a': '13.0',
    '11.0f': '13.0',  # 12.9 had no 11.x target at all (Thor was 10.1 there)
    '12.0': '12.8',
    '12.0a': '12.8',
    '12.0f': '12.9',
    '12.1': '12.9',
    '12.1a': '12.9',
    '12.1f': '12.9',
}

# CUDA 13.0 renumbered SM101 (Thor) as SM110: its nvcc rejects sm_101*.
LAST_CUDA = {'10.1': '12.9', '10.1a': '12.9', '10.1f': '12.9'}

# "a": architecture-specific, runs only on exactly that GPU; "f": family-specific,
# runs on the GPUs of that major with the same or a higher minor.
SUFFIXES = ('', 'a', 'f')
TARGET_FORM = 'MAJOR.MINOR with an optional a or f suffix (9.0a, 10.0f, 8.9)'

_TARGET_RE = re.compile(r'^(\d{1,2})\.(\d)([af]?)$')
_NAME_RE = re.compile(r'^(sm|compute)_(\d{1,2})(\d)([af]?)$')
# cuobjdump --list-elf / --list-ptx: "ELF file    1: common_ops.1.sm_90a.cubin",
# "PTX file    1: common_ops.1.sm_90.ptx" (a PTX listing names its target sm_XY too).
_LISTED_RE = re.compile(r'^(ELF|PTX) file\s+\d+:\s+\S*?\.sm_(\d{1,2})(\d)([af]?)\.(?:cubin|ptx)\s*$')
# cuobjdump without options prints one header per fatbin member:
# "Fatbin elf code:" / "Fatbin ptx code:", a rule, then "arch = sm_100f".
_HEADER_RE = re.compile(r'^Fatbin (elf|ptx) code:\s*$')
_ARCH_RE = re.compile(r'^arch = sm_(\d{1,2})(\d)([af]?)\s*$')

# What cuobjdump prints (rc 255) for a file that is an ELF without a fatbin.
NO_DEVICE_CODE = 'does not contain device code'


def version_tuple(version):
    """'12.10' -> (12, 10): CUDA versions compare as numbers, never as strings."""
    return tuple(int(part) for part in str(version).split('.'))


def known_targets():
    """Every TORCH_CUDA_ARCH_LIST entry this module knows, lowest first."""
    return sorted(MINIMUM_CUDA, key=_entry_key)


def _entry_key(entry):
    major, minor, suffix = _TARGET_RE.match(entry).groups()
    return int(major), int(minor), SUFFIXES.index(suffix)


def parse_target(entry):
    """'12.0a' -> ('12', '0', 'a'); raise ValueError for anything that is not a known target."""
    text = str(entry).strip()
    match = _TARGET_RE.match(text)
    if not match or text not in MINIMUM_CUDA:
        raise ValueError('%r is not a CUDA target; allowed: %s (%s)'
                         % (entry, ', '.join(known_targets()), TARGET_FORM))
    return match.groups()


def target_entry(major, minor, suffix=''):
    return '%s.%s%s' % (major, minor, suffix)


def sass_name(entry):
    """'9.0a' -> 'sm_90a'."""
    major, minor, suffix = parse_target(entry)
    return 'sm_%s%s%s' % (major, minor, suffix)


def ptx_name(entry):
    """'9.0a' -> 'compute_90a'."""
    major, minor, suffix = parse_target(entry)
    return 'compute_%s%s%s' % (major, minor, suffix)


def parse_name(name):
    """'sm_120a' -> ('sm', 12, 0, 'a'); 'compute_90' -> ('compute', 9, 0, '')."""
    match = _NAME_RE.match(name)
    if not match:
        raise ValueError('%r is not a cuobjdump target name (sm_XY or compute_XY, optional a or f)' % (name,))
    kind, major, minor, suffix = match.groups()
    return kind, int(major), int(minor), suffix


def name_key(name):
    """Sort key: by GPU, then plain/a/f, SASS before PTX."""
    kind, major, minor, suffix = parse_name(name)
    return major, minor, SUFFIXES.index(suffix), 0 if kind == 'sm' else 1


def unique(names):
    """The items of names without repeats, in order of first appearance."""
    seen = []
    for name in names:
        if name not in seen:
            seen.append(name)
    return seen


def parse_listing(text):
    """Target names in cuobjdump output, deduplicated in order of appearance.

    Reads the --list-elf lines ("ELF file 1: x.1.sm_90a.cubin" -> sm_90a), the
    --list-ptx lines ("PTX file 1: x.1.sm_90.ptx" -> compute_90) and the fatbin
    headers that cuobjdump prints without options ("Fatbin elf code:" ...
    "arch = sm_100f" -> sm_100f). Other lines (info messages) are ignored.
    """
    names = []
    header_kind = None
    for line in (text or '').splitlines():
        line = line.strip()
        match = _LISTED_RE.match(line)
        if match:
            listed, major, minor, suffix = match.groups()
            names.append('%s_%s%s%s' % ('sm' if listed == 'ELF' else 'compute', major, minor, suffix))
            continue
        match = _HEADER_RE.match(line)
        if match:
            header_kind = match.group(1)
            continue
        match = _ARCH_RE.match(line)
        if match and header_kind:
            major, minor, suffix = match.groups()
            names.append('%s_%s%s%s' % ('sm' if header_kind == 'elf' else 'compute', major, minor, suffix))
            header_kind = None
    return unique(names)


def family_ambiguous(sass):
    """Whether an --list-elf result may hide an 'f' target.

    cuobjdump --list-elf names an sm_100f cubin "x.1.sm_100.cubin": the f is
    only in the fatbin header. Family targets exist from major 10 on, so a plain
    SASS name there must be read again from the headers.
    """
    for name in sass:
        kind, major, _minor, suffix = parse_name(name)
        if kind == 'sm' and suffix == '' and major >= 10:
            return True
    return False


def _sass_runs(target, name, arch_specific):
    """(runs, plain): whether SASS name runs target (major, minor, suffix), and whether it does so as plain
    code of an a target's GPU. A cubin of exactly the target runs it; f code runs every GPU of its family,
    the same major with the same or a higher minor (sm_100f: 10.0 and 10.3, so 10.0a, 10.3a and 10.3f
    too); plain code runs its own GPU, so an a target of it (sm_90 for 9.0a) unless arch_specific. a code
    covers no plain target: a build asked for 9.0 is not to depend on 9.0a's instructions."""
    major, minor, suffix = target
    _kind, s_major, s_minor, s_suffix = parse_name(name)
    if (s_major, s_minor, s_suffix) == (major, minor, suffix):
        return True, False
    if s_suffix == 'f':
        return s_major == major and s_minor <= minor, False
    # Plain SASS of the GPU's own capability runs on it, without the a target's arch-specific instructions.
    plain = suffix == 'a' and s_suffix == '' and (s_major, s_minor) == (major, minor) and not arch_specific
    return plain, plain


def _ptx_runs(target, name):
    """Whether the driver compiles PTX name for target (major, minor, suffix)."""
    major, minor, suffix = target
    _kind, p_major, p_minor, p_suffix = parse_name(name)
    if suffix == '':
        # The driver compiles plain PTX for any later GPU.
        return p_suffix == '' and (p_major, p_minor) <= (major, minor)
    if suffix == 'a':
        return (p_major, p_minor, p_suffix) == (major, minor, 'a')
    return p_suffix == 'f' and p_major == major and p_minor <= minor


def _target_numbers(entry):
    major, minor, suffix = parse_target(entry)
    return int(major), int(minor), suffix


def covered_by(entry, sass, ptx, arch_specific=False):
    """The SASS and PTX names in the given sets that can run target entry. arch_specific: an a target is
    not run by plain SASS of its GPU (sm_90 for 9.0a), only by its a or f code."""
    target = _target_numbers(entry)
    return ([name for name in sass if _sass_runs(target, name, arch_specific)[0]]
            + [name for name in ptx if _ptx_runs(target, name)])


def covers(entry, sass, ptx, arch_specific=False):
    """Whether SASS or PTX present runs target entry (see covered_by)."""
    return bool(covered_by(entry, sass, ptx, arch_specific))


def plain_only(entry, sass, ptx, arch_specific=False):
    """The plain SASS that alone runs a target entry (['sm_90'] for 9.0a with SASS sm_90 and no sm_90a,
    sm_90f or compute_90a), else []: that code runs without the target's arch-specific instructions."""
    target = _target_numbers(entry)
    found = covered_by(entry, sass, ptx, arch_specific)
    plain = [name for name in found if name in sass and _sass_runs(target, name, arch_specific)[1]]
    return plain if len(plain) == len(found) else []


def _either(names):
    """'a', 'a or b', 'a, b or c'."""
    return names[0] if len(names) == 1 else '%s or %s' % (', '.join(names[:-1]), names[-1])


def _family_sass(major, minor):
    """The f cubins that run a GPU major.minor, as words: 'sm_100f', 'sm_100f to sm_103f', or None."""
    family = [m for m in range(int(minor) + 1) if target_entry(major, m, 'f') in MINIMUM_CUDA]
    if not family:
        return None
    first, last = 'sm_%s%sf' % (major, family[0]), 'sm_%s%sf' % (major, family[-1])
    return first if first == last else '%s to %s' % (first, last)


def requirement(entry, arch_specific=False):
    """What would cover entry, in words: '(SASS sm_90a or PTX compute_90a)',
    '(SASS sm_100a, sm_100f or sm_100, or PTX compute_100a)'."""
    major, minor, suffix = parse_target(entry)
    sass = [sass_name(entry)] if suffix != 'f' else []
    family = _family_sass(major, minor)
    if family:
        sass.append(family)
    if suffix == 'a' and not arch_specific:
        sass.append(sass_name(target_entry(major, minor)))
    if suffix == '':
        ptx = 'compute_%s%s or lower' % (major, minor)
    elif suffix == 'a':
        ptx = ptx_name(entry)
    elif minor == '0':
        ptx = ptx_name(entry)
    else:
        ptx = 'compute_%s0f to compute_%s%sf' % (major, major, minor)
    return '(SASS %s%s or PTX %s)' % (_either(sass), ',' if len(sass) > 1 else '', ptx)


def describe_code(listing):
    """'SASS sm_90, sm_110a and PTX compute_90' / '... and no PTX' / 'no SASS and PTX ...'."""
    sass = sorted(listing.get('sass') or [], key=name_key)
    ptx = sorted(listing.get('ptx') or [], key=name_key)
    return '%s and %s' % ('SASS ' + ', '.join(sass) if sass else 'no SASS',
                          'PTX ' + ', '.join(ptx) if ptx else 'no PTX')


def normalize_targets(entries):
    """Validated requested targets, deduplicated, in the order given (ValueError on a bad one)."""
    found = []
    for entry in entries or []:
        text = str(entry).strip()
        parse_target(text)
        if text not in found:
            found.append(text)
    return found


def audit(requested, listings, arch_specific=False):
    """Audit cuobjdump listings against the requested targets.

    listings: {file: {'sass': [names], 'ptx': [names], 'device_code': bool}}.
    Returns {'requested', 'files', 'missing', 'unwanted', 'plain_only', 'compiled'}: missing and
    unwanted are lists of {'file', 'target'} (a requested entry for missing, a cuobjdump name for
    unwanted); plain_only lists {'file', 'target', 'sass'} where an a target runs on plain SASS alone
    (see plain_only()). A file without device code misses nothing; if no file has device code, every
    requested target is missing for file '*'. arch_specific: see covered_by().
    """
    requested = normalize_targets(requested)
    files = []
    missing = []
    unwanted = []
    plain = []
    compiled = set()
    for path in sorted(listings):
        listing = listings[path]
        sass = sorted(unique(listing.get('sass') or []), key=name_key)
        ptx = sorted(unique(listing.get('ptx') or []), key=name_key)
        device_code = bool(listing.get('device_code', sass or ptx)) and bool(sass or ptx)
        files.append({'file': path, 'device_code': device_code, 'sass': sass, 'ptx': ptx})
        if not device_code:
            continue
        compiled.update(sass)
        compiled.update(ptx)
        for entry in requested:
            if not covers(entry, sass, ptx, arch_specific):
                missing.append({'file': path, 'target': entry})
            plain.extend({'file': path, 'target': entry, 'sass': name}
                         for name in plain_only(entry, sass, ptx, arch_specific))
        for name in sass + ptx:
            alone = ([name], []) if name.startswith('sm_') else ([], [name])
            if not any(covers(entry, *alone, arch_specific=arch_specific) for entry in requested):
                unwanted.append({'file': path, 'target': name})
    if requested and not any(item['device_code'] for item in files):
        missing = [{'file': '*', 'target': entry} for entry in requested]
    return {
        'requested': requested,
        'files': files,
        'missing': missing,
        'unwanted': unwanted,
        'plain_only': plain,
        'compiled': sorted(compiled, key=name_key),
    }


def plain_only_notes(report):
    """One sentence per shared object and a target that it runs on plain SASS alone."""
    return ['%s runs on %s through plain SASS %s, without the arch-specific instructions of %s'
            % (item['file'], item['target'], item['sass'], sass_name(item['target']))
            for item in report['plain_only']]


def missing_message(report, root, arch_specific=False):
    """One sentence per shared object that lacks a requested target (arch_specific: as audit() was run)."""
    by_file = {}
    for item in report['missing']:
        by_file.setdefault(item['file'], []).append(item['target'])
    listings = dict((item['file'], item) for item in report['files'])
    sentences = []
    for path in sorted(by_file):
        needs = ', '.join('%s %s' % (entry, requirement(entry, arch_specific)) for entry in by_file[path])
        if path == '*':
            checked = [item['file'] for item in report['files']]
            why = ('no shared object in it has device code (host-only: %s)' % ', '.join(checked)
                   if checked else 'it has no shared object (*.so)')
            sentences.append('%s has no code for %s; %s' % (root, needs, why))
        else:
            sentences.append('%s has no code for %s; it has %s' % (path, needs, describe_code(listings[path])))
    return 'arch audit: ' + '. '.join(sentences)


def unwanted_message(report):
    """One sentence per shared object with targets that no requested target needs."""
    by_file = {}
    for item in report['unwanted']:
        by_file.setdefault(item['file'], []).append(item['target'])
    sentences = ['%s has code that no requested target needs: %s' % (path, ', '.join(by_file[path]))
                 for path in sorted(by_file)]
    return 'arch audit: %s (requested: %s)' % ('. '.join(sentences), ', '.join(report['requested']))


def minimum_cuda(entry):
    """The lowest CUDA release whose nvcc compiles entry ('10.0f' -> '12.9')."""
    parse_target(entry)
    return MINIMUM_CUDA[str(entry).strip()]


def can_compile(entry, cuda_version):
    """Whether the nvcc of cuda_version ('12.8', '13.0') accepts entry, compared numerically."""
    entry = str(entry).strip()
    version = version_tuple(cuda_version)[:2]
    if version < version_tuple(minimum_cuda(entry)):
        return False
    return entry not in LAST_CUDA or version <= version_tuple(LAST_CUDA[entry])


def scope_for(path, scope):
    """The first scope entry ({'files': glob, 'serves': [targets], 'reason': text}) whose glob matches
    path (fnmatch on the path inside the artifact), or None."""
    for entry in scope or []:
        if fnmatch.fnmatchcase(path, entry['files']):
            return entry
    return None


def scoped_audit(requested, listings, scope, arch_specific=False):
    """audit() where a shared object matched by a scope entry is audited only for the requested targets
    that the entry serves: libraries that serve some GPUs by design (FlashMLA, FA3) are not refused for the
    others. Adds 'scoped_out': [{'file', 'targets', 'reason'}], one per shared object with device code
    that was not audited for some requested target, so that what was left out is said."""
    requested = normalize_targets(requested)
    report = audit(requested, listings, arch_specific)
    missing = []
    plain = []
    scoped_out = []
    with_code = dict((item['file'], item) for item in report['files'])
    for path in sorted(listings):
        entry = scope_for(path, scope)
        serves = requested if entry is None else [t for t in requested if t in normalize_targets(entry['serves'])]
        if entry is not None and with_code[path]['device_code'] and len(serves) < len(requested):
            scoped_out.append({'file': path, 'targets': [t for t in requested if t not in serves],
                               'reason': entry.get('reason') or 'serves %s only' % ', '.join(entry['serves'])})
        missing.extend(item for item in report['missing'] if item['file'] == path and item['target'] in serves)
        plain.extend(item for item in report['plain_only'] if item['file'] == path and item['target'] in serves)
    # no shared object with device code at all: every target is missing for the artifact ('*')
    missing.extend(item for item in report['missing'] if item['file'] == '*')
    report['missing'] = missing
    report['plain_only'] = plain
    report['scoped_out'] = scoped_out
    return report


def scope_errors(scope):
    """Messages for a malformed scope (a list of {'files', 'serves', 'reason'})."""
    if not isinstance(scope, list):
        return ['must be a list of {files, serves, reason} (got %s)' % type(scope).__name__]
    errors = []
    for index, entry in enumerate(scope):
        if not isinstance(entry, dict) or not isinstance(entry.get('files'), str) or not entry.get('files'):
            errors.append('entry %d must have files, a glob of shared objects in the artifact' % index)
            continue
        serves = entry.get('serves')
        if not isinstance(serves, list):
            errors.append('entry %d (%s): serves must be a list of targets like 9.0a' % (index, entry['files']))
            continue
        try:
            normalize_targets(serves)
        except ValueError as exc:
            errors.append('entry %d (%s): serves: %s' % (index, entry['files'], exc))
    return errors
