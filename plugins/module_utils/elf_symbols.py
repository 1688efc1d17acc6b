# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Dynamic symbols of ELF shared objects, read without binutils.

Pure functions for judging a prebuilt wheel's C++ extensions against the torch
of a venv: the DT_NEEDED list, the undefined and the exported dynamic symbols
of a shared object (ELF64 little-endian: x86_64, aarch64), which undefined
symbols torch must provide, and, for those torch lacks, which exports carry
the same qualified name with other parameters (an overload that replaced the
old one).

Only the byte ranges needed are read (ELF header, section headers, .dynsym,
its string table, .dynamic), never the whole file: torch's libraries and the
extensions are up to 1 GB. Demangling uses libstdc++'s __cxa_demangle through
ctypes, else c++filt, else leaves names as they are.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import bisect
import ctypes
import ctypes.util
import os
import re
import struct
import subprocess

_EHDR = struct.Struct('<16sHHIQQQIHHHHHH')
_SHDR = struct.Struct('<IIQQQQIIQQ')
_SYM = struct.Struct('<IBBHQQ')
_DYN = struct.Struct('<qQ')

SHT_DYNAMIC = 6
SHT_DYNSYM = 11
SHN_UNDEF = 0
SHN_XINDEX = 0xffff
DT_NULL = 0
DT_NEEDED = 1
STB_GLOBAL = 1
STB_WEAK = 2
STB_GNU_UNIQUE = 10
STV_DEFAULT = 0
STV_PROTECTED = 3

_EXPORT_BINDINGS = frozenset((STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE))
_EXPORT_VISIBILITIES = frozenset((STV_DEFAULT, STV_PROTECTED))


class ElfError(Exception):
    """A file that cannot be read as an ELF64 little-endian shared object."""


class _Reader(object):
    """Byte ranges of an open file, checked against its size."""

    def __init__(self, handle, path):
        self.handle = handle
        self.path = path
        self.size = os.fstat(handle.fileno()).st_size

    def read(self, offset, length, what):
        """Bytes [offset, offset + length), or ElfError if the file is shorter."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ElfError('%s: truncated ELF file: %s at offset %d, %d bytes, file has %d bytes' % (self.path, what, offset, length, self.size))
        self.handle.seek(offset)
        data = self.handle.read(length)
        if len(data) != length:
            raise ElfError('%s: truncated ELF file: short read of %s' % (self.path, what))
        return data


def _string_at(table, offset, cache):
    """The NUL-terminated string at offset of a string table (bytes), decoded."""
    name = cache.get(offset)
    if name is None:
        end = table.find(b'\0', offset)
        if end < 0:
            end = len(table)
        name = table[offset:end].decode('utf-8', 'surrogateescape')
        cache[offset] = name
    return name


def read_dynamic(path):
    """DT_NEEDED sonames and the undefined and exported dynamic symbols of an ELF64 LE file.

    Returns {'needed': [soname, ...] in .dynamic order, 'undefined': set(names),
    'defined': set(names)}. 'defined' holds the symbols another object can bind
    to: defined (st_shndx != SHN_UNDEF), binding GLOBAL, WEAK or GNU_UNIQUE,
    visibility DEFAULT or PROTECTED. Names are as in .dynsym, without
    symbol versions. Raises ElfError naming path and what is wrong.
    """
    with open(path, 'rb') as handle:
        reader = _Reader(handle, path)
        if reader.size < 16:
            raise ElfError('%s: not an ELF file (%d bytes)' % (path, reader.size))
        ident = reader.read(0, 16, 'ELF identification')
        if ident[:4] != b'\x7fELF':
            raise ElfError('%s: not an ELF file' % path)
        if ident[4] != 2 or ident[5] != 1:
            raise ElfError('%s: %s-bit %s-endian ELF not supported (ELF64 little-endian only)' % (
                path, {1: '32', 2: '64'}.get(ident[4], '?'), {1: 'little', 2: 'big'}.get(ident[5], '?')))
        header = _EHDR.unpack(reader.read(0, _EHDR.size, 'ELF header'))
        shoff, shentsize, shnum = header[6], header[11], header[12]
        if shoff == 0:
            raise ElfError('%s: no section headers, so no dynamic symbol table' % path)
        if shentsize != _SHDR.size:
            raise ElfError('%s: unexpected section header size %d' % (path, shentsize))
        if shnum == 0:
            # More than SHN_LORESERVE sections: the count is in section 0's sh_size.
            shnum = _SHDR.unpack(reader.read(shoff, _SHDR.size, 'section header 0'))[5]
        table = reader.read(shoff, shnum * _SHDR.size, 'section headers')
        sections = list(_SHDR.iter_unpack(table))

        dynsym = [sec for sec in sections if sec[1] == SHT_DYNSYM]
        if not dynsym:
            raise ElfError('%s: no dynamic symbol table (.dynsym)' % path)
        symtab = dynsym[0]
        if symtab[6] >= len(sections):
            raise ElfError('%s: .dynsym links to section %d of %d' % (path, symtab[6], len(sections)))
        strsec = sections[symtab[6]]
        strtab = reader.read(strsec[4], strsec[5], 'dynamic string table')
        entsize = symtab[9] or _SYM.size
        if entsize != _SYM.size:
            raise ElfError('%s: unexpected .dynsym entry size %d' % (path, entsize))
        count = symtab[5] // _SYM.size
        symbols = reader.read(symtab[4], count * _SYM.size, '.dynsym')

        needed = []
        dynamic = [sec for sec in sections if sec[1] == SHT_DYNAMIC]
        if dynamic:
            dynsec = dynamic[0]
            if dynsec[6] == symtab[6] or dynsec[6] >= len(sections):
                dynstr = strtab
            else:
                linked = sections[dynsec[6]]
                dynstr = reader.read(linked[4], linked[5], '.dynamic string table')
            block = reader.read(dynsec[4], (dynsec[5] // _DYN.size) * _DYN.size, '.dynamic')
            cache = {}
            for tag, value in _DYN.iter_unpack(block):
                if tag == DT_NULL:
                    break
                if tag == DT_NEEDED:
                    if value >= len(dynstr):
                        raise ElfError('%s: DT_NEEDED string offset %d outside the string table' % (path, value))
                    needed.append(_string_at(dynstr, value, cache))

    undefined = set()
    defined = set()
    cache = {}
    limit = len(strtab)
    for st_name, st_info, st_other, st_shndx, _value, _size in _SYM.iter_unpack(symbols):
        if st_name == 0 or st_name >= limit:
            continue
        if st_shndx == SHN_UNDEF:
            undefined.add(_string_at(strtab, st_name, cache))
        elif st_info >> 4 in _EXPORT_BINDINGS and (st_other & 3) in _EXPORT_VISIBILITIES:
            defined.add(_string_at(strtab, st_name, cache))
    undefined.discard('')
    defined.discard('')
    return {'needed': needed, 'undefined': undefined, 'defined': defined}


# Itanium-mangled names whose outermost namespace is one of torch's: c10, at,
# torch, caffe2, c10d (torch.distributed's C++). A namespaced entity is always
# a <nested-name> (N ... E), possibly after a cv/ref qualifier (K, V, r, R, O)
# of a member function, or inside a vtable/VTT/typeinfo/typeinfo-name special
# name (_ZTV, _ZTT, _ZTI, _ZTS). Without the N the name is unscoped: _Z3c10v is
# a global function called c10(), not part of torch, and does not match.
# std:: templates over torch types (_ZNSt6vectorIN2at6TensorE...) are not torch's
# to provide and do not match either.
TORCH_SYMBOL_RE = re.compile(r'^_Z(?:T[VTIS])?N[rVKRO]*(?:3c10|4c10d|2at|5torch|6caffe2)')


def torch_needed(names):
    """Sorted mangled names, of names, that torch must provide."""
    return sorted(set(name for name in names if TORCH_SYMBOL_RE.match(name)))


_DEMANGLER = []


def _load_cxa_demangle():
    """(__cxa_demangle, free) as ctypes functions, or None if libstdc++ or libc cannot be loaded."""
    try:
        stdcxx = ctypes.CDLL(ctypes.util.find_library('stdc++') or 'libstdc++.so.6')
        libc = ctypes.CDLL(ctypes.util.find_library('c') or 'libc.so.6')
        cxa = getattr(stdcxx, '__cxa_demangle')
        free = libc.free
    except (OSError, AttributeError):
        return None
    cxa.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    cxa.restype = ctypes.c_void_p
    free.argtypes = [ctypes.c_void_p]
    free.restype = None
    return cxa, free


def _cxa_demangler():
    """A function mangled -> demangled (None if it does not demangle) through __cxa_demangle; None if unavailable."""
    if _DEMANGLER:
        return _DEMANGLER[0]
    loaded = _load_cxa_demangle()
    function = None
    if loaded is not None:
        cxa, free = loaded

        def demangle_one(name):
            status = ctypes.c_int(-1)
            result = cxa(name.encode('utf-8', 'surrogateescape'), None, None, ctypes.byref(status))
            if not result:
                return None
            try:
                if status.value != 0:
                    return None
                return ctypes.string_at(result).decode('utf-8', 'surrogateescape')
            finally:
                free(result)
        function = demangle_one
    _DEMANGLER.append(function)
    return function


def _cxxfilt(names):
    """Mangled -> demangled through c++filt (one name a line on stdin), or {} if it cannot run."""
    env = dict(os.environ)
    env['LC_ALL'] = 'C'
    try:
        proc = subprocess.run(['c++filt'], input=('\n'.join(names) + '\n').encode('utf-8', 'surrogateescape'),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=False)
    except OSError:
        return {}
    lines = proc.stdout.decode('utf-8', 'surrogateescape').split('\n')
    if proc.returncode != 0 or len(lines) < len(names):
        return {}
    return dict(zip(names, lines))


def demangle(names):
    """Dict mangled -> demangled for names; a name that does not demangle maps to itself.

    Only names starting with _Z are given to the demangler (a bare 'i' would
    come back as 'int'). With neither __cxa_demangle nor c++filt every name maps
    to itself.
    """
    names = list(names)
    result = dict((name, name) for name in names)
    mangled = sorted(set(name for name in names if name.startswith('_Z') and '\n' not in name))
    if not mangled:
        return result
    function = _cxa_demangler()
    if function is not None:
        for name in mangled:
            text = function(name)
            if text:
                result[name] = text
        return result
    for name, text in _cxxfilt(mangled).items():
        if text:
            result[name] = text
    return result


_SPECIAL_PREFIXES = (
    'vtable for ', 'VTT for ', 'construction vtable for ', 'typeinfo for ', 'typeinfo name for ',
    'typeinfo fn for ', 'non-virtual thunk to ', 'virtual thunk to ', 'covariant return thunk to ',
    'guard variable for ', 'TLS init function for ', 'TLS wrapper function for ', 'transaction clone for ',
    'hidden alias for ', 'java Class for ',
)
_TRAILING_QUALIFIERS = re.compile(r'\)(?: (?:const|volatile|restrict|&&|&|noexcept|transaction_safe))+$')
_CLONE_SUFFIX = re.compile(r'(?: \[clone [^\]]*\])+$')
_OPEN = {'<': '>', '(': ')', '[': ']', '{': '}'}
_CLOSE = frozenset(_OPEN.values())
_IDENT_CHAR = re.compile(r'[A-Za-z0-9_$]')


def _strip_return_type(text):
    """text (a name, maybe with a return type before it) from the start of the name on.

    The name starts after the last space outside <>, (), [], {} that comes
    before an 'operator' keyword at that level: what follows the keyword
    (operator<<, operator new[], operator int const*) is all name.
    """
    depth = 0
    start = 0
    index = 0
    length = len(text)
    while index < length:
        char = text[index]
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth = max(depth - 1, 0)
        elif depth == 0:
            if char == ' ':
                start = index + 1
            elif (text.startswith('operator', index) and (index == 0 or not _IDENT_CHAR.match(text[index - 1]))
                  and (index + 8 == length or not _IDENT_CHAR.match(text[index + 8]))):
                break
        index += 1
    return text[start:]


def qualified_name(demangled):
    """The demangled name without return type, top-level parameter list and trailing qualifiers.

    'c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool)'
    -> 'c10::cuda::c10_cuda_check_implementation'; 'void c10::f<void (int)>(int)' ->
    'c10::f<void (int)>'; 'c10::Foo::operator()(int) const' -> 'c10::Foo::operator()'.
    Template arguments and [abi:...] tags stay. Special names keep their prefix:
    'vtable for c10::Foo' -> itself, 'non-virtual thunk to c10::Foo::f()' ->
    'non-virtual thunk to c10::Foo::f'. A function returning a function pointer
    ('void (*c10::f())(int)') is not taken apart: the result still holds '(*'.
    """
    text = _CLONE_SUFFIX.sub('', demangled.strip())
    for prefix in _SPECIAL_PREFIXES:
        if text.startswith(prefix):
            return prefix + qualified_name(text[len(prefix):])
    text = _TRAILING_QUALIFIERS.sub(')', text)
    if text.endswith(')'):
        depth = 0
        index = len(text) - 1
        while index >= 0:
            char = text[index]
            if char == ')':
                depth += 1
            elif char == '(':
                depth -= 1
                if depth == 0:
                    break
            index -= 1
        if index > 0:
            text = text[:index]
    return _strip_return_type(text)


def _last_identifier(name):
    """The last plain identifier among the '::' components of a qualified name ('' if none).

    Template arguments and [abi:...] tags are dropped from each component;
    operators and lambdas are skipped; '~Foo' gives 'Foo'.
    """
    components = []
    depth = 0
    current = []
    index = 0
    while index < len(name):
        char = name[index]
        if char in _OPEN:
            depth += 1
        elif char in _CLOSE:
            depth = max(depth - 1, 0)
        elif depth == 0 and name.startswith('::', index):
            components.append(''.join(current))
            current = []
            index += 2
            continue
        elif depth == 0:
            current.append(char)
        index += 1
    components.append(''.join(current))
    for component in reversed(components):
        component = component.strip().lstrip('~')
        if component.startswith('operator') and not _IDENT_CHAR.match(component[8:9] or ' '):
            continue
        if re.match(r'^[A-Za-z_$][A-Za-z0-9_$]*$', component):
            return component
    return ''


def same_name_exports(missing, exports):
    """Dict each missing mangled name -> sorted exported mangled names with the same qualified name.

    Same qualified name means qualified_name(demangled) is equal: another
    overload, or the other constructor/destructor variant (C1/C2, D0/D1/D2).
    Only exports whose mangled text holds '<length><identifier>' of the missing
    name's last identifier are demangled. Missing names with no such export,
    or none to search by (a global operator), map to [].
    """
    missing = sorted(set(missing))
    result = dict((name, []) for name in missing)
    if not missing:
        return result
    exported = sorted(set(exports))
    text = '\n'.join(exported)
    starts = []
    offset = 0
    for name in exported:
        starts.append(offset)
        offset += len(name) + 1
    missing_text = demangle(missing)
    wanted = {}
    for name in missing:
        ident = _last_identifier(qualified_name(missing_text[name]))
        if ident:
            wanted.setdefault('%d%s' % (len(ident), ident), []).append(name)
    candidates = {}
    for needle, names in wanted.items():
        position = text.find(needle)
        while position >= 0:
            index = bisect.bisect_right(starts, position) - 1
            for name in names:
                candidates.setdefault(exported[index], set()).add(name)
            position = text.find(needle, starts[index] + len(exported[index]) + 1)
    candidate_text = demangle(candidates)
    for export, names in candidates.items():
        export_name = qualified_name(candidate_text[export])
        for name in names:
            if export != name and export_name == qualified_name(missing_text[name]):
                result[name].append(export)
    for name in missing:
        result[name].sort()
    return result


def resolve(needed, exports):
    """(how many of needed are in exports, sorted list of those that are not)."""
    if not isinstance(exports, (set, frozenset)):
        exports = set(exports)
    needed = set(needed)
    missing = sorted(name for name in needed if name not in exports)
    return len(needed) - len(missing), missing
