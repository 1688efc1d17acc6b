# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pinned sglang's requirements and flag choices, read on the controller.

sglang pins exact versions of torch, its kernel package and flashinfer; a stack
whose pins contradict them either fails to resolve on every host or, installed
package by package, serves with kernels sglang was not built against. The
controller reads what the pinned sglang asks for before anything is changed:

- its core metadata (Requires-Dist with extras and markers, Requires-Python)
  straight from the wheel's .dist-info/METADATA, without installing or
  importing it, or from a package index's entry where only that is at hand
  (parse_metadata, read_wheel_metadata, metadata_from_pypi_json,
  metadata_from_simple_entry);
- whether the stack's pins meet those requirements, each contradiction named
  with both sides and what to change (stack_pins, check_pins, pin_errors);
- the choices of its flags, read from its source with ast, never imported
  (read_wheel_flags), and how the collection's own table of backend names
  (module_utils/backends.py) differs from them (compare_backend_table).

Version comparison is PEP 440's, through packaging (a controller requirement:
ansible-core depends on it). The hosts never run this file.
"""

from __future__ import annotations

import ast
import email.parser
import hashlib
import os
import posixpath
import zipfile

try:
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version
except ImportError as _exc:  # ansible-core requires packaging; ansible-test's import check runs without it
    _PACKAGING_ERROR = str(_exc)

    class _NoPackaging(ValueError):
        """Every use of PEP 440 without packaging ends here, naming what is missing."""

        def __init__(self, *args, **kwargs):
            raise ImportError("sglang_pins needs the Python package 'packaging' on the controller "
                              "(a requirement of ansible-core): " + _PACKAGING_ERROR)

    InvalidRequirement = InvalidSpecifier = InvalidVersion = _NoPackaging
    Requirement = SpecifierSet = Version = _NoPackaging

    def canonicalize_name(name):
        raise ImportError("sglang_pins needs the Python package 'packaging': " + _PACKAGING_ERROR)

from ansible_collections.gpufleet.inference.plugins.module_utils import backends
from ansible_collections.gpufleet.inference.plugins.module_utils.flashinfer_aot import sha256_file

# The published sglang wheels the collection reads, per release: the CPython
# 3.12 manylinux x86_64 wheel, as PyPI's simple index lists it. 0.5.23 ships
# binary wheels only (cp311, cp312, cp313), no sdist.
SGLANG_WHEELS = {
    '0.5.23': {
        'filename': 'sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl',
        'url': ('https://files.pythonhosted.org/packages/ca/5f/'
                'fb9c2417fc4c650f62ef98ddee2cc25988456c94e8a6ca8661ef0cbe0b09/'
                'sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl'),
        'sha256': '8d257a319395b322bb1be327d05e5528859358153c8563b04c0a4a3c8af164b6',
        'size': 39046590,
    },
}
# Under the controller's cache folder (GPUFLEET_CACHE_DIR, else .cache).
WHEEL_CACHE_SUBDIR = 'sglang-wheels'

# The interpreters the hosts' venvs may have (uv_venv_python_version) and
# their platform: a requirement's marker is evaluated for each, with no extra
# requested, so an optional dependency of sglang is never checked.
HOST_PYTHONS = ('3.11', '3.12')
HOST_PLATFORM = {
    'os_name': 'posix',
    'sys_platform': 'linux',
    'platform_system': 'Linux',
    'platform_machine': 'x86_64',
    'platform_release': '',
    'platform_version': '',
    'implementation_name': 'cpython',
    'platform_python_implementation': 'CPython',
}

# Distributions published under another name from some version on: a pin of
# one name never meets a requirement on the other. The import stays sgl_kernel.
RENAMED = {
    'sglang-kernel': {'old': 'sgl-kernel', 'since': '0.4.0', 'import': 'sgl_kernel'},
}
# What an exact pin means where the index holds more than one build of it.
PIN_NOTES = {
    ('torch', '2.14.1'): "the release index's CUDA 13.0 build",
}
FLASHINFER_PACKAGES = ('flashinfer-python', 'flashinfer-cubin', 'flashinfer-jit-cache')
PYTHON_VARIABLE = 'uv_venv_python_version'
KERNEL_PACKAGE_VARIABLE = 'sgl_kernel_wheel_package'
KERNEL_VERSION_VARIABLE = 'sgl_kernel_wheel_version'

# Where sglang keeps its flags. From 0.5.23 the choice lists are module-level
# constants of arg_groups/choices.py and each flag is a dataclass field of
# arg_groups/fields/*.py annotated A[type, Arg(choices=..., cli_name=...)];
# earlier releases declare both in server_args.py (parser.add_argument).
CHOICES_MODULE = 'sglang/srt/arg_groups/choices.py'
FIELDS_PACKAGE = 'sglang/srt/arg_groups/fields/'
SERVER_ARGS_MODULE = 'sglang/srt/server_args.py'
# The flags whose values an operator names: the backends and the quantization.
FLAGS = ('--attention-backend', '--moe-runner-backend', '--fp8-gemm-backend', '--fp4-gemm-backend',
         '--quantization')


# ---------------------------------------------------------------- core metadata


def _metadata(name, version, requires_python, requires_dist, source):
    """The one form every reader returns; requires_dist None: not known from that source."""
    if not name or not version:
        raise ValueError('%s: no Name or Version in the core metadata' % source)
    if requires_dist is not None:
        for line in requires_dist:
            try:
                Requirement(line)
            except InvalidRequirement as exc:
                raise ValueError('%s: Requires-Dist %r: %s' % (source, line, exc)) from exc
    if requires_python:
        try:
            SpecifierSet(requires_python)
        except InvalidSpecifier as exc:
            raise ValueError('%s: Requires-Python %r: %s' % (source, requires_python, exc)) from exc
    return {
        'name': name,
        'version': version,
        'requires_python': requires_python or '',
        'requires_dist': None if requires_dist is None else list(requires_dist),
        'source': source,
    }


def parse_metadata(text, source='METADATA'):
    """A METADATA (or PKG-INFO) text: {'name', 'version', 'requires_python', 'requires_dist', 'source'}.

    Only the headers are read (RFC 822, folded lines joined), so a long
    License field or the description after them do not matter.
    """
    headers = email.parser.HeaderParser().parsestr(text)
    return _metadata(headers.get('Name', '').strip(), headers.get('Version', '').strip(),
                     headers.get('Requires-Python', '').strip(),
                     [' '.join(line.split()) for line in headers.get_all('Requires-Dist') or ()], source)


def wheel_name_version(filename):
    """sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl -> ('sglang', '0.5.23')."""
    parts = posixpath.basename(filename).split('-')
    if not filename.endswith('.whl') or len(parts) not in (5, 6):
        raise ValueError('%s: not a wheel file name (NAME-VERSION[-BUILD]-PY-ABI-PLATFORM.whl)' % filename)
    return parts[0], parts[1]


def read_wheel_metadata(path):
    """The core metadata of a .whl (a zip), read from its NAME-VERSION.dist-info/METADATA.

    ValueError when the wheel has no such file, several, or one whose Name or
    Version is not that of the file name.
    """
    name, version = wheel_name_version(os.path.basename(path))
    with zipfile.ZipFile(path) as wheel:
        found = [member for member in wheel.namelist()
                 if member.count('/') == 1 and member.endswith('.dist-info/METADATA')]
        if len(found) != 1:
            raise ValueError('%s: %s .dist-info/METADATA at the top of the wheel'
                             % (path, 'several' if found else 'no'))
        text = wheel.read(found[0]).decode('utf-8')
    metadata = parse_metadata(text, '%s!%s' % (os.path.basename(path), found[0]))
    if canonicalize_name(metadata['name']) != canonicalize_name(name) or \
            Version(metadata['version']) != Version(version):
        raise ValueError('%s: its METADATA says %s %s, its file name %s %s'
                         % (path, metadata['name'], metadata['version'], name, version))
    return metadata


def metadata_from_pypi_json(document, version=None):
    """The core metadata of one release from PyPI's JSON API.

    document: the parsed /pypi/NAME/VERSION/json, or /pypi/NAME/json, whose
    info describes the latest release only: with version given, a document
    about another release is refused (ValueError), never read as that one.
    """
    info = (document or {}).get('info') or {}
    if version is not None and info.get('version') and Version(info['version']) != Version(version):
        raise ValueError('the index document describes %s %s, not %s' % (info.get('name'), info['version'], version))
    return _metadata(info.get('name'), info.get('version'), info.get('requires_python'),
                     info.get('requires_dist') or [], 'PyPI JSON %s %s' % (info.get('name'), info.get('version')))


def metadata_from_simple_entry(entry, metadata_text=None):
    """The core metadata of a file from its entry in a simple index page (PEP 691 JSON).

    The entry gives Requires-Python only; the requirements come from the
    METADATA file the index serves beside the wheel (PEP 658, the entry's
    core-metadata hashes) when its text is given, checked against that hash.
    Without it requires_dist is None: not known, and check_pins refuses it.
    """
    name, version = wheel_name_version(entry['filename'])
    requires_python = entry.get('requires-python') or ''
    if metadata_text is None:
        return _metadata(name, version, requires_python, None, 'simple index entry %s' % entry['filename'])
    declared = entry.get('core-metadata') or entry.get('data-dist-info-metadata') or {}
    expected = declared.get('sha256') if isinstance(declared, dict) else None
    data = metadata_text.encode('utf-8') if isinstance(metadata_text, str) else metadata_text
    if expected and hashlib.sha256(data).hexdigest() != expected.lower():
        raise ValueError('%s.metadata: sha256 %s, the index says %s'
                         % (entry['filename'], hashlib.sha256(data).hexdigest(), expected))
    metadata = parse_metadata(data.decode('utf-8'), '%s.metadata' % entry['filename'])
    if requires_python and metadata['requires_python'] != requires_python:
        raise ValueError('%s: Requires-Python %r in its METADATA, %r in the index entry'
                         % (entry['filename'], metadata['requires_python'], requires_python))
    return metadata


def simple_entry_wheel(entry):
    """{'filename', 'url', 'sha256', 'size'} of a simple index entry, the form of SGLANG_WHEELS."""
    return {
        'filename': entry['filename'],
        'url': entry['url'],
        'sha256': (entry.get('hashes') or {}).get('sha256'),
        'size': entry.get('size'),
    }


def cached_wheel(cache_dir, version):
    """Where the pinned wheel of that sglang release lies in the controller's cache."""
    if version not in SGLANG_WHEELS:
        raise ValueError('no pinned sglang wheel for %r; pinned: %s' % (version, ', '.join(sorted(SGLANG_WHEELS))))
    return os.path.join(cache_dir, WHEEL_CACHE_SUBDIR, SGLANG_WHEELS[version]['filename'])


def verify_wheel(path, version):
    """ValueError unless the file is the pinned wheel of that release (its sha256)."""
    expected = SGLANG_WHEELS[version]['sha256']
    found = sha256_file(path)
    if found != expected:
        raise ValueError('%s: sha256 %s, the pinned sglang %s wheel is %s' % (path, found, version, expected))


# ---------------------------------------------------------------- requirements


def marker_environment(python):
    """The marker variables of a host with that Python ('3.12' or '3.12.3') and no extra."""
    parts = str(python).split('.')
    full = '.'.join((parts + ['0', '0'])[:3])
    return dict(HOST_PLATFORM, python_version='.'.join(parts[:2]), python_full_version=full,
                implementation_version=full, extra='')


def requirements(metadata, pythons=HOST_PYTHONS):
    """The metadata's Requires-Dist, each {'name', 'text', 'specifier', 'extras', 'marker', 'pythons'}.

    name is canonical (flashinfer_python -> flashinfer-python); text is the
    requirement as written, without its marker; pythons are those of the
    hosts' Pythons for which the marker holds ([] : it never applies there).
    """
    if metadata.get('requires_dist') is None:
        raise ValueError('%s: the requirements of %s %s are not known from it'
                         % (metadata['source'], metadata['name'], metadata['version']))
    out = []
    for line in metadata['requires_dist']:
        req = Requirement(line)
        marker = req.marker
        req.marker = None
        out.append({
            'name': canonicalize_name(req.name),
            'text': str(req),
            'specifier': str(req.specifier),
            'extras': sorted(req.extras),
            'marker': str(marker) if marker else '',
            'pythons': [p for p in pythons if marker is None or marker.evaluate(marker_environment(p))],
        })
    return out


def applicable(metadata, pythons=HOST_PYTHONS):
    """{canonical name: [requirement]} of those that apply on at least one of the hosts' Pythons."""
    out = {}
    for req in requirements(metadata, pythons):
        if req['pythons']:
            out.setdefault(req['name'], []).append(req)
    return out


# ---------------------------------------------------------------- the stack's pins


def pin(name, version, variable, name_variable=None):
    """One pinned distribution of the stack and the variables that set it."""
    return {'name': name, 'version': str(version), 'variable': variable, 'name_variable': name_variable}


def stack_pins(torch_nightly_versions=None, flashinfer_version=None, kernel_package=None, kernel_version=None,
               flashinfer_versions=None, flashinfer_packages=FLASHINFER_PACKAGES):
    """The stack's pins from the inventory's variables, each named by the variable that sets it.

    torch_nightly_versions: {torch, torchvision, torchaudio: version};
    flashinfer_version for every package of flashinfer_packages, where
    flashinfer_versions (per package) does not set another; the kernel:
    sgl_kernel_wheel_package (sgl-kernel or sglang-kernel) and
    sgl_kernel_wheel_version. A variable left None pins nothing.
    """
    pins = []
    for name, version in (torch_nightly_versions or {}).items():
        pins.append(pin(name, version, 'torch_nightly_versions.%s' % name))
    per_package = flashinfer_versions or {}
    for name in flashinfer_packages:
        if per_package.get(name):
            pins.append(pin(name, per_package[name], 'flashinfer_versions.%s' % name))
        elif flashinfer_version:
            pins.append(pin(name, flashinfer_version, 'flashinfer_version'))
    if kernel_package and kernel_version:
        pins.append(pin(kernel_package, kernel_version, KERNEL_VERSION_VARIABLE, KERNEL_PACKAGE_VARIABLE))
    return pins


def _other_name(name):
    """The name the same distribution had or has (sgl-kernel <-> sglang-kernel), else None."""
    for new, rename in RENAMED.items():
        if name == new:
            return rename['old']
        if name == rename['old']:
            return new
    return None


def _wanted(req):
    """What to set a pin to for that requirement: its version where it names exactly one."""
    specs = list(SpecifierSet(req['specifier']))
    if len(specs) == 1 and specs[0].operator in ('==', '===') and not specs[0].version.endswith('*'):
        note = PIN_NOTES.get((req['name'], specs[0].version))
        return specs[0].version, '%s%s' % (specs[0].version, ' (%s)' % note if note else '')
    return None, 'a version that meets %s' % req['specifier']


def _post_note(version, req):
    """Why X.postN fails ==X: PEP 440's == compares the whole release, post part included."""
    exact, dummy = _wanted(req)
    if exact and version.is_postrelease and Version(exact).release == version.release and not Version(exact).is_postrelease:
        return ' (PEP 440 == %s excludes its post releases)' % exact
    return ''


def _way_out(metadata):
    return 'or pin an %s whose requirements it meets' % metadata['name']


def _where(req, pythons):
    return '' if req['pythons'] == list(pythons) else ' on Python %s' % ', '.join(req['pythons'])


def _contradiction(metadata, req, pinned, message):
    return {
        'package': req['name'],
        'requirement': req['text'],
        'variable': pinned['name_variable'] if canonicalize_name(pinned['name']) != req['name'] and
        pinned.get('name_variable') else pinned['variable'],
        'pinned': '%s %s' % (pinned['name'], pinned['version']),
        'sglang': '%s %s' % (metadata['name'], metadata['version']),
        'message': message,
    }


def _check_pin(metadata, req, pinned, pythons):
    """The contradiction of one pin with one requirement on the same distribution, or None."""
    who = '%s %s requires %s%s' % (metadata['name'], metadata['version'], req['text'], _where(req, pythons))
    way_out = _way_out(metadata)
    dummy, wanted = _wanted(req)
    if canonicalize_name(pinned['name']) != req['name']:
        rename = RENAMED.get(req['name']) or RENAMED[canonicalize_name(pinned['name'])]
        new = req['name'] if req['name'] in RENAMED else canonicalize_name(pinned['name'])
        change = 'set %s to %s' % (pinned['name_variable'] or pinned['variable'], req['name'])
        if pinned.get('name_variable'):
            change += ' and %s to %s' % (pinned['variable'], wanted)
        at = '%s %s' % (pinned['variable'], pinned['version']) if pinned.get('name_variable') else \
            'at %s' % pinned['version']
        return _contradiction(metadata, req, pinned, (
            '%s; %s is %s (%s), which does not meet it: %s was renamed %s at %s (the import stays %s) and a '
            'distribution under one name never meets a requirement on the other: %s, %s'
            % (who, pinned['name_variable'] or pinned['variable'], pinned['name'], at,
               rename['old'], new, rename['since'], rename['import'], change, way_out)))
    try:
        version = Version(pinned['version'])
    except InvalidVersion:
        return _contradiction(metadata, req, pinned, '%s; %s is %r, not a PEP 440 version: set it to %s, %s'
                              % (who, pinned['variable'], pinned['version'], wanted, way_out))
    # The stack pins what it installs, a pre-release or nightly included: the
    # version alone decides, not pip's rule of skipping pre-releases.
    if SpecifierSet(req['specifier']).contains(version, prereleases=True):
        return None
    return _contradiction(metadata, req, pinned, '%s; %s is %s%s: set it to %s, %s'
                          % (who, pinned['variable'], pinned['version'], _post_note(version, req), wanted, way_out))


def check_pins(metadata, pins, pythons=HOST_PYTHONS):
    """The contradictions between the stack's pins and the sglang release's requirements.

    metadata: from one of the readers above; pins: stack_pins() or pin()s;
    pythons: the hosts' Pythons, each checked against Requires-Python and used
    to evaluate the markers (Linux x86_64, no extra). A list of
    {'package', 'requirement', 'variable', 'pinned', 'sglang', 'message'}, [] when the
    stack meets every requirement. A pin of a distribution sglang does not
    name passes; extras are not compared, only the version.
    """
    found = []
    if metadata.get('requires_python'):
        allowed = SpecifierSet(metadata['requires_python'])
        for python in pythons:
            if not allowed.contains(Version(python), prereleases=True):
                found.append({
                    'package': 'python', 'requirement': 'Python %s' % metadata['requires_python'],
                    'variable': PYTHON_VARIABLE, 'pinned': 'python %s' % python,
                    'sglang': '%s %s' % (metadata['name'], metadata['version']),
                    'message': '%s %s requires Python %s; %s is %s: set it to a Python that meets %s, %s'
                               % (metadata['name'], metadata['version'], metadata['requires_python'], PYTHON_VARIABLE,
                                  python, metadata['requires_python'], _way_out(metadata)),
                })
    wanted = applicable(metadata, pythons)
    pinned_names = set(canonicalize_name(p['name']) for p in pins)
    for pinned in pins:
        name = canonicalize_name(pinned['name'])
        reqs = wanted.get(name)
        if reqs is None:
            other = _other_name(name)
            # Under the other name only when nothing pins that one itself.
            reqs = wanted.get(other) if other and other not in pinned_names else None
        for req in reqs or ():
            problem = _check_pin(metadata, req, pinned, pythons)
            if problem:
                found.append(problem)
    return found


def pin_errors(metadata, pins, pythons=HOST_PYTHONS):
    """check_pins' messages only."""
    return [problem['message'] for problem in check_pins(metadata, pins, pythons)]


# ---------------------------------------------------------------- flag choices


def _literal(node, constants):
    """The strings of a choices expression, or None where it is not made of literals.

    A list, tuple or set of strings, a dict's string keys (argparse offers
    those), a name read before, set()/frozenset()/list()/tuple()/sorted() of
    one of these, and the concatenation of two with +.
    """
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [elt.value for elt in node.elts if isinstance(elt, ast.Constant) and isinstance(elt.value, str)]
        return items if len(items) == len(node.elts) else None
    if isinstance(node, ast.Dict):
        keys = [key.value for key in node.keys if isinstance(key, ast.Constant) and isinstance(key.value, str)]
        return keys if len(keys) == len(node.keys) else None
    if isinstance(node, ast.Name):
        return list(constants[node.id]) if node.id in constants else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords and \
            node.func.id in ('set', 'frozenset', 'list', 'tuple', 'sorted') and len(node.args) == 1:
        items = _literal(node.args[0], constants)
        return sorted(items) if items is not None and node.func.id == 'sorted' else items
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left, constants), _literal(node.right, constants)
        return left + right if left is not None and right is not None else None
    return None


def module_constants(source, filename='<source>', constants=None):
    """{NAME: [str]} of the module-level assignments made of string literals (see _literal).

    constants: names an earlier module defined, which this one may use.
    """
    known = dict(constants or {})
    found = {}
    for node in ast.parse(source, filename).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        else:
            continue
        items = _literal(value, known)
        if items is not None:
            known[target] = found[target] = items
    return found


def _keyword(call, name):
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return None


def _choices_entry(call, constants, filename, field):
    node = _keyword(call, 'choices')
    if node is None:
        return None
    return {
        'choices': _literal(node, constants),
        'from': ast.unparse(node),
        'file': filename,
        'field': field,
    }


def _field_flags(tree, constants, filename):
    """{flag: entry} of the A[type, Arg(..., choices=...)] fields of a fields module (0.5.23 on)."""
    found = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(node.annotation, ast.Subscript)):
            continue
        parts = node.annotation.slice.elts if isinstance(node.annotation.slice, ast.Tuple) else ()
        for part in parts:
            if isinstance(part, ast.Call) and getattr(part.func, 'id', getattr(part.func, 'attr', None)) == 'Arg':
                entry = _choices_entry(part, constants, filename, node.target.id)
                if entry is None:
                    continue
                cli = _keyword(part, 'cli_name')
                # sglang's own rule when no cli_name is given (arg_utils._field_to_cli_name)
                names = [cli.value if isinstance(cli, ast.Constant) else '--' + node.target.id.replace('_', '-')]
                aliases = _literal(_keyword(part, 'aliases'), constants) if _keyword(part, 'aliases') else None
                for flag in names + (aliases or []):
                    found.setdefault(flag, entry)
    return found


def _argparse_flags(tree, constants, filename):
    """{flag: entry} of the parser.add_argument('--flag', ..., choices=...) calls (before 0.5.23)."""
    found = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, 'attr', None) == 'add_argument':
            flags = [arg.value for arg in node.args
                     if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith('--')]
            entry = _choices_entry(node, constants, filename, flags[0][2:].replace('-', '_') if flags else None)
            if entry is not None:
                for flag in flags:
                    found.setdefault(flag, entry)
    return found


def flag_choices(sources, flags=FLAGS):
    """{flag: {'choices', 'from', 'file', 'field'}} from sglang's source files, never imported.

    sources: {path in the wheel: text}, the choices module first where there
    is one: its constants serve the others. 'from' is the expression the
    choices were read from (MOE_RUNNER_BACKEND_CHOICES); 'choices' is None
    where that is not made of literals. A flag sglang does not have is left
    out; flags=None keeps every flag that has choices.
    """
    constants = {}
    trees = []
    for path in sorted(sources, key=lambda p: (p != CHOICES_MODULE, p)):
        constants.update(module_constants(sources[path], path, constants))
        trees.append((path, ast.parse(sources[path], path)))
    found = {}
    for path, tree in trees:
        for flag, entry in list(_field_flags(tree, constants, path).items()) + \
                list(_argparse_flags(tree, constants, path).items()):
            found.setdefault(flag, entry)
    return dict((flag, found[flag]) for flag in (found if flags is None else flags) if flag in found)


def wheel_sources(path):
    """{path: text} of the files of a sglang wheel that declare its flags and their choices."""
    with zipfile.ZipFile(path) as wheel:
        names = [name for name in wheel.namelist()
                 if name in (CHOICES_MODULE, SERVER_ARGS_MODULE)
                 or (name.startswith(FIELDS_PACKAGE) and name.endswith('.py'))]
        return dict((name, wheel.read(name).decode('utf-8')) for name in names)


def read_wheel_flags(path, flags=FLAGS):
    """flag_choices() of a sglang wheel, with the release it is: {'version', 'source', 'flags'}."""
    dummy, version = wheel_name_version(os.path.basename(path))
    sources = wheel_sources(path)
    if not sources:
        raise ValueError('%s: none of %s, %s*.py, %s in the wheel'
                         % (path, CHOICES_MODULE, FIELDS_PACKAGE, SERVER_ARGS_MODULE))
    return {'version': version, 'source': os.path.basename(path), 'flags': flag_choices(sources, flags)}


def choice_errors(wheel_flags, values):
    """Messages for the flag values sglang would refuse. values: {flag: name}."""
    errors = []
    for flag, name in values.items():
        entry = wheel_flags['flags'].get(flag)
        if entry is None:
            errors.append('%s: sglang %s has no such flag with choices' % (flag, wheel_flags['version']))
        elif entry['choices'] is not None and name not in entry['choices']:
            errors.append('%s %s: not a choice of sglang %s; allowed: %s'
                          % (flag, name, wheel_flags['version'], ', '.join(entry['choices'])))
    return errors


def compare_backend_table(wheel_flags, sglang_version=None):
    """How backends.SGLANG_SERVER_ARGS' table of that release differs from the wheel's choices.

    Per family: {'family', 'flag', 'table_only', 'wheel_only', 'same_order',
    'flag_in_wheel'}; table_only are names the table has and the wheel lacks
    (names sglang would refuse), wheel_only the reverse. sglang_version
    defaults to the wheel's own.
    """
    version = sglang_version or wheel_flags['version']
    out = []
    for family, spec in backends.families_of(version).items():
        entry = wheel_flags['flags'].get(spec['flag'])
        table = list(spec['choices'])
        wheel = list(entry['choices'] or ()) if entry else []
        out.append({
            'family': family,
            'flag': spec['flag'],
            'flag_in_wheel': entry is not None,
            'table_only': [name for name in table if name not in wheel],
            'wheel_only': [name for name in wheel if name not in table],
            'same_order': table == wheel,
        })
    return out


def backend_table_errors(wheel_flags, sglang_version=None):
    """compare_backend_table() as messages, [] when the table has the wheel's choices."""
    version = sglang_version or wheel_flags['version']
    errors = []
    for row in compare_backend_table(wheel_flags, version):
        where = "backends.SGLANG_SERVER_ARGS['%s'] %s (%s)" % (version, row['family'], row['flag'])
        if not row['flag_in_wheel']:
            errors.append('%s: sglang %s (%s) has no flag %s'
                          % (where, wheel_flags['version'], wheel_flags['source'], row['flag']))
            continue
        if row['table_only']:
            errors.append('%s names what %s lacks: %s' % (where, wheel_flags['source'], ', '.join(row['table_only'])))
        if row['wheel_only']:
            errors.append('%s lacks what %s offers: %s' % (where, wheel_flags['source'], ', '.join(row['wheel_only'])))
    return errors
