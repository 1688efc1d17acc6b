# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Explain why an import failed, and which installed wheels pin another torch.

This file's source is run inside the interpreter under test, next to the probe
(see torch_probe), so it uses the standard library of Python 3.6+ only: no
``packaging`` (it may not be installed there) and no ansible imports.

- describe_exception() walks an exception chain and pulls out the facts that
  name the cause: a shared library that could not be opened, an undefined
  symbol, a torch operator that is not registered.
- requirement_pins(), version_satisfies() and pin_conflicts() find the
  Requires-Dist pins on torch/torchvision/torchaudio that the installed
  versions break, the way ``pip check`` would, with a minimal PEP 440
  comparison.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# How far describe_exception follows __cause__/__context__: a real chain is 1-3
# deep; the bound keeps a pathological one from flooding the probe's JSON.
MAX_CAUSES = 8

_MISSING_LIBRARY_RE = re.compile(r'(lib[\w.+-]+\.so[\w.]*): cannot open shared object file')
_UNDEFINED_SYMBOL_RE = re.compile(r'undefined symbol: ([^\s,]+)')
_MISSING_OPERATOR_RE = re.compile(r'operator ([\w.]+::[\w.]+) does not exist')
# A CUDA library whose soname carries a major version: libcudart.so.12, libcudnn.so.9 ...
_CUDA_LIBRARY_RE = re.compile(r'lib(cu\w*|nv\w*|cudnn\w*)\.so\.(\d+)')
# The libraries whose soname major *is* the CUDA major (libcudart.so.12 ships
# with CUDA 12.x only). Others have their own numbering (libcudnn.so.9,
# libcufft.so.11 of CUDA 12, libcuda.so.1 of the driver): for those a different
# major says nothing about the CUDA version, so no "built for CUDA N" is claimed.
_CUDA_MAJOR_SONAMES = frozenset(['cudart', 'cublas', 'cublasLt', 'nvblas', 'nvrtc', 'nvJitLink', 'cupti'])


def _exception_text(exc):
    """'TypeName: message', like the probe's error fields; an exception whose
    __str__ itself fails must not break the report."""
    try:
        message = str(exc)
    except Exception:  # pylint: disable=broad-except
        message = '<unprintable>'
    return '%s: %s' % (type(exc).__name__, message)


def _exception_chain(exc):
    """The exceptions behind exc, outermost first, exc excluded.

    The explicit cause (raise ... from ...) wins over the implicit context.
    The context is followed even under ``from None``: what it hides (say, the
    libcudart error under a package's own message) is the useful part here.
    """
    chain = []
    seen = {id(exc)}
    current = exc
    while len(chain) < MAX_CAUSES:
        current = current.__cause__ if current.__cause__ is not None else current.__context__
        if current is None or id(current) in seen:  # the end, or a cycle
            break
        seen.add(id(current))
        chain.append(current)
    return chain


def _first_match(pattern, texts):
    for text in texts:
        match = pattern.search(text)
        if match:
            return match.group(1)
    return None


def _cuda_major(cuda_version):
    """13 from '13.0' (or 13.0, 13); None when absent or unreadable."""
    match = re.match(r'\s*(\d+)', str(cuda_version)) if cuda_version is not None else None
    return int(match.group(1)) if match else None


def _library_diagnosis(library, cuda_version):
    match = _CUDA_LIBRARY_RE.match(library)
    stack_major = _cuda_major(cuda_version)
    tracks_cuda = bool(match) and match.group(1) in _CUDA_MAJOR_SONAMES
    if tracks_cuda and stack_major is not None and int(match.group(2)) != stack_major:
        return '%s is missing: built for CUDA %s, the stack is CUDA %s' % (library, match.group(2), cuda_version)
    return '%s is missing: cannot open shared object file' % library


def describe_exception(exc, cuda_version=None):
    """What an import error says about its cause.

    Returns {error, causes, missing_library, undefined_symbol, missing_operator,
    diagnosis}; see the module's tests for the wording. cuda_version (e.g.
    '13.0', the stack's CUDA) lets a missing libcudart.so.12 be told apart as
    a wheel built for another CUDA major.
    """
    error = _exception_text(exc)
    causes = [_exception_text(cause) for cause in _exception_chain(exc)]
    texts = [error] + causes
    missing_library = _first_match(_MISSING_LIBRARY_RE, texts)
    missing_operator = _first_match(_MISSING_OPERATOR_RE, texts)
    diagnosis = None
    # The library comes first: it is the root cause, and an operator missing
    # after a failed library load is only its consequence.
    if missing_library:
        diagnosis = _library_diagnosis(missing_library, cuda_version)
    elif missing_operator:
        package = missing_operator.split('::', 1)[0]
        diagnosis = 'operator %s is not registered: %s was built for another torch' % (missing_operator, package)
    return {
        'error': error,
        'causes': causes,
        'missing_library': missing_library,
        'undefined_symbol': _first_match(_UNDEFINED_SYMBOL_RE, texts),
        'missing_operator': missing_operator,
        'diagnosis': diagnosis,
    }


# ---------------------------------------------------------------- requirements

def canonical_name(name):
    """PEP 503 normalised name: 'Torch_Audio' -> 'torch-audio'."""
    return re.sub(r'[-_.]+', '-', name).lower()


# name, optional [extras], the rest (specifier and marker).
_REQUIREMENT_RE = re.compile(r'^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$')
# A marker that only applies to an extra: not part of a plain install, so not a pin.
_EXTRA_MARKER_RE = re.compile(r'\bextra\s*==')


def _parse_requirement(line):
    """(canonical name, specifier without spaces, marker text) of a Requires-Dist line; None if unreadable."""
    match = _REQUIREMENT_RE.match(line)
    if not match:
        return None
    rest = match.group(2)
    # A URL may itself hold ';', so after '@ url' only ' ;' starts the marker (PEP 508).
    parts = re.split(r'\s;', rest, 1) if rest.startswith('@') else rest.split(';', 1)
    marker = parts[1].strip() if len(parts) > 1 else ''
    spec = re.sub(r'\s+', '', parts[0])
    if spec.startswith('(') and spec.endswith(')'):  # the old 'torch (==2.9.1)' form
        spec = spec[1:-1]
    return canonical_name(match.group(1)), spec, marker


def _dist_name(dist):
    # importlib's metadata returns None for a missing key; a plain dict raises.
    try:
        return dist.metadata['Name']
    except (KeyError, TypeError):
        return None


def requirement_pins(distributions, names=('torch', 'torchvision', 'torchaudio')):
    """Requires-Dist lines of `distributions` that name one of `names`.

    Returns a list of {dist (its Name), version, requires (the required
    project, canonical), spec ('' when unpinned), marker ('' when none)}.
    Lines under an extra are skipped; other markers are kept as text, not
    evaluated.
    """
    wanted = set(canonical_name(name) for name in names)
    pins = []
    for dist in distributions:
        name = _dist_name(dist)
        try:
            version, requires = dist.version, dist.requires or []
        except Exception:  # pylint: disable=broad-except
            continue  # broken metadata of one wheel must not break the probe
        if not name:
            continue
        for line in requires:
            parsed = _parse_requirement(line)
            if parsed is None or parsed[0] not in wanted or _EXTRA_MARKER_RE.search(parsed[2]):
                continue
            pins.append({'dist': name, 'version': version, 'requires': parsed[0], 'spec': parsed[1], 'marker': parsed[2]})
    return pins


# ---------------------------------------------------------------- PEP 440

_VERSION_RE = re.compile(r"""
    ^\s*v?
    (?:(?P<epoch>\d+)!)?
    (?P<release>\d+(?:\.\d+)*)
    (?:[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>\d+)?)?
    (?:-(?P<post_n1>\d+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>\d+)?)?
    (?:[-_.]?(?P<dev>dev)[-_.]?(?P<dev_n>\d+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?
    \s*$""", re.VERBOSE | re.IGNORECASE)
_PRE_RANK = {'a': 0, 'alpha': 0, 'b': 1, 'beta': 1, 'c': 2, 'rc': 2, 'pre': 2, 'preview': 2}


class _Version:
    """A parsed PEP 440 version: `key` orders like packaging.version.Version."""

    def __init__(self, match):
        self.epoch = int(match.group('epoch') or 0)
        self.release = tuple(int(part) for part in match.group('release').split('.'))
        self.pre = None
        if match.group('pre_l'):
            self.pre = (_PRE_RANK[match.group('pre_l').lower()], int(match.group('pre_n') or 0))
        self.post = None
        if match.group('post_n1') is not None or match.group('post_l'):
            self.post = int(match.group('post_n1') or match.group('post_n2') or 0)
        self.dev = int(match.group('dev_n') or 0) if match.group('dev') else None
        local = match.group('local')
        self.local = tuple(re.split(r'[-_.]', local.lower())) if local else None
        self.is_prerelease = self.pre is not None or self.dev is not None

    def base(self):
        """Epoch and release, trailing zeros dropped: 2.12.0.dev1 and 2.12 share it."""
        release = list(self.release)
        while len(release) > 1 and release[-1] == 0:
            release.pop()
        return (self.epoch, tuple(release))

    def key(self, with_local=True):
        # Sentinels as packaging uses them: a dev-only release sorts before its
        # pre-releases, a final after them; no post before any post; no dev after any dev.
        if self.pre is None and self.post is None and self.dev is not None:
            pre = (-1,)
        else:
            pre = (1,) if self.pre is None else (0,) + self.pre
        post = (-1,) if self.post is None else (0, self.post)
        dev = (1,) if self.dev is None else (0, self.dev)
        local = ()  # no local label sorts before any
        if with_local and self.local:
            # numeric segments sort after alphanumeric ones, and among themselves by value
            local = tuple((1, int(seg), '') if seg.isdigit() else (0, 0, seg) for seg in self.local)
        return self.base() + (pre, post, dev, local)


def parse_version(text):
    """A _Version, or None when text is not a PEP 440 version."""
    match = _VERSION_RE.match(text or '')
    return _Version(match) if match else None


_CLAUSE_RE = re.compile(r'^\s*(~=|===|==|!=|<=|>=|<|>)\s*(\S+?)\s*$')


def _prefix_match(candidate, prefix):
    """==X.Y.* : the candidate's release, zero-padded, starts with X.Y (pre/post/dev/local ignored)."""
    if not re.match(r'^(\d+!)?\d+(\.\d+)*$', prefix):
        return None  # only epoch and release may precede '.*'
    wanted = parse_version(prefix)
    release = candidate.release + (0,) * max(0, len(wanted.release) - len(candidate.release))
    return candidate.epoch == wanted.epoch and release[:len(wanted.release)] == wanted.release


def _clause_satisfied(candidate, text, op, target_text):
    """One 'op version' clause; None when it cannot be judged."""
    if op == '===':  # arbitrary equality: the strings, nothing more
        return text.strip().lower() == target_text.lower()
    if candidate is None:
        return None
    if op in ('==', '!=') and target_text.endswith('.*'):
        matched = _prefix_match(candidate, target_text[:-2])
        return matched if matched is None or op == '==' else not matched
    target = parse_version(target_text)
    if target is None or (target.local and op not in ('==', '!=')):
        return None
    if op in ('==', '!='):
        # A specifier without a local label ignores the candidate's: 2.11.0+cu130 == 2.11.0.
        equal = candidate.key(with_local=bool(target.local)) == target.key()
        return equal if op == '==' else not equal
    public, wanted = candidate.key(with_local=False), target.key()
    if op == '~=':
        if len(target.release) < 2:
            return None  # '~=2' is not a valid specifier
        # '~=2.4.1' is '>=2.4.1, ==2.4.*'
        prefix = '%d!%s' % (target.epoch, '.'.join(str(n) for n in target.release[:-1]))
        return public >= wanted and _prefix_match(candidate, prefix) is True
    if op == '>=':
        return public >= wanted
    if op == '<=':
        return public <= wanted
    if candidate.base() != target.base():  # the carve-outs below concern V's own family only
        return candidate.key() < wanted if op == '<' else candidate.key() > wanted
    if op == '<':
        # '<2.12' is '<2.12.dev0': it excludes 2.12's pre-releases, unless it names one itself;
        # '<2.12.post1' excludes only that post-release's own dev releases.
        if not target.is_prerelease and candidate.is_prerelease and (target.post is None or (candidate.pre is None and candidate.post == target.post)):
            return False
        return candidate.key() < wanted
    # '>2.11' excludes 2.11's post-releases (unless it names one), and any
    # '>V' excludes V's local builds: 2.11.0+cu130 is not above 2.11.0.
    if target.dev is None and target.post is None and candidate.pre == target.pre:
        return False
    if candidate.local and public == wanted:
        return False
    return candidate.key() > wanted


def version_satisfies(version, spec):
    """Whether `version` meets `spec` ('>=2.4,<3'): True, False, or None when
    either cannot be read. Pre-releases count as allowed (an installed one is
    judged, like pip check does). An empty spec is met by anything."""
    clauses = [part for part in (spec or '').split(',') if part.strip()]
    if not clauses:
        return True
    candidate = parse_version(version)
    verdicts = []
    for part in clauses:
        match = _CLAUSE_RE.match(part)
        verdicts.append(_clause_satisfied(candidate, version or '', match.group(1), match.group(2)) if match else None)
    if False in verdicts:  # one failing clause decides, even beside one that cannot be judged
        return False
    return None if None in verdicts else True


def pin_conflicts(pins, installed):
    """Messages, sorted and de-duplicated, for each pin (from requirement_pins)
    that the installed version breaks; installed is {canonical name: version}.
    A required project that is not installed is left to the import error."""
    messages = set()
    for pin in pins:
        have = installed.get(pin['requires'])
        if have is None:
            continue
        verdict = version_satisfies(have, pin['spec'])
        if verdict is True:
            continue
        message = '%s %s requires %s%s, installed %s is %s' % (
            pin['dist'], pin['version'], pin['requires'], pin['spec'], pin['requires'], have)
        messages.add(message if verdict is False else message + ' (could not compare)')
    return sorted(messages)


def installed_distributions():
    """(distributions, {canonical name: version}) of this interpreter.

    When a project is found twice on sys.path, the first one wins, as for
    import. Python < 3.8 has no importlib.metadata: ([], {}).
    """
    try:
        from importlib import metadata
    except ImportError:
        return [], {}
    dists, versions = [], {}
    for dist in metadata.distributions():
        name = _dist_name(dist)
        if not name or canonical_name(name) in versions:
            continue
        dists.append(dist)
        versions[canonical_name(name)] = dist.version
    return dists, versions
