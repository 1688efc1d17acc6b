# -*- coding: utf-8 -*-
"""Dynamic symbols read from real tiny shared objects built with g++ at test time: a
"provider" (stands for torch) and a "consumer" (stands for an old extension) built
against an older signature of one provider function."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import subprocess

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import elf_symbols as es

PAD_BYTES = 32 * 1024 * 1024
PROVIDER_SONAME = 'libgfprovider.so.1'

PROVIDER_H = r'''
namespace c10 {
namespace cuda { void check(int code, const char* file, unsigned int line, bool warn); }
namespace other { void check(int code); }
struct Widget {
  virtual ~Widget();
  virtual int value() const;
};
}
'''

PROVIDER_CPP = r'''
#include "provider.h"
namespace c10 {
namespace cuda { void check(int, const char*, unsigned int, bool) {} }
namespace other { void check(int) {} }
Widget::~Widget() {}
int Widget::value() const { return 1; }
}
__attribute__((visibility("hidden"))) int hidden_helper() { return 2; }
__attribute__((visibility("protected"))) int protected_helper() { return hidden_helper(); }
__attribute__((weak)) int weak_helper() { return 3; }
inline int& unique_counter() { static int count = 0; ++count; return count; }
int bump() { return unique_counter(); }
extern "C" int plain_c(void) { return 4; }
__attribute__((used, section(".gfpad"))) static const char padding[PAD] = {1};
'''

# Declares the old signature (int line), as an extension built against an older torch would.
CONSUMER_CPP = r'''
#include <typeinfo>
namespace c10 {
namespace cuda { void check(int code, const char* file, int line, bool warn); }
struct Widget {
  virtual ~Widget();
  virtual int value() const;
};
}
extern "C" int plain_c(void);
int use_widget() {
  c10::cuda::check(0, __FILE__, __LINE__, true);
  c10::Widget* w = new c10::Widget();
  int v = w->c10::Widget::value() + plain_c();
  delete w;
  return v;
}
const std::type_info* widget_type() { return &typeid(c10::Widget); }
'''

OLD_CHECK = '_ZN3c104cuda5checkEiPKcib'
NEW_CHECK = '_ZN3c104cuda5checkEiPKcjb'
OTHER_CHECK = '_ZN3c105other5checkEi'
WIDGET_VALUE = '_ZNK3c106Widget5valueEv'
WIDGET_VTABLE = '_ZTVN3c106WidgetE'
WIDGET_TYPEINFO = '_ZTIN3c106WidgetE'


def _gxx(args, cwd):
    proc = subprocess.run(['g++'] + args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    assert proc.returncode == 0, proc.stdout.decode('utf-8', 'replace')


@pytest.fixture(scope='module')
def built(tmp_path_factory):
    if shutil.which('g++') is None:
        pytest.skip('g++ is not installed')
    work = tmp_path_factory.mktemp('elf')
    (work / 'provider.h').write_text(PROVIDER_H)
    (work / 'provider.cpp').write_text(PROVIDER_CPP)
    (work / 'consumer.cpp').write_text(CONSUMER_CPP)
    (work / 'object.cpp').write_text('int only_in_an_object() { return 1; }\n')
    _gxx(['-shared', '-fPIC', '-O1', '-DPAD=%d' % PAD_BYTES, '-Wl,-soname,' + PROVIDER_SONAME,
          '-o', 'libgfprovider.so', 'provider.cpp'], str(work))
    _gxx(['-shared', '-fPIC', '-O1', '-Wl,-soname,libgfconsumer.so.1', '-Wl,--no-as-needed',
          '-o', 'libgfconsumer.so', 'consumer.cpp', '-L.', '-lgfprovider'], str(work))
    _gxx(['-c', '-fPIC', '-o', 'object.o', 'object.cpp'], str(work))
    return {
        'dir': work,
        'provider': str(work / 'libgfprovider.so'),
        'consumer': str(work / 'libgfconsumer.so'),
        'object': str(work / 'object.o'),
    }


@pytest.fixture(scope='module')
def provider(built):
    return es.read_dynamic(built['provider'])


@pytest.fixture(scope='module')
def consumer(built):
    return es.read_dynamic(built['consumer'])


def test_needed_lists_the_sonames_in_link_order(consumer):
    needed = consumer['needed']
    assert PROVIDER_SONAME in needed
    assert 'libstdc++.so.6' in needed and 'libc.so.6' in needed
    assert needed.index(PROVIDER_SONAME) < needed.index('libstdc++.so.6') < needed.index('libc.so.6')
    assert len(needed) == len(set(needed))


def test_consumer_undefined_holds_the_old_signature_and_what_it_uses(consumer):
    undefined = consumer['undefined']
    for name in (OLD_CHECK, WIDGET_VALUE, WIDGET_VTABLE, WIDGET_TYPEINFO, 'plain_c'):
        assert name in undefined
    assert NEW_CHECK not in undefined
    assert '_Z10use_widgetv' in consumer['defined'] and '_Z10use_widgetv' not in undefined
    assert not [name for name in undefined if '@' in name or not name]


def test_provider_exports_by_binding_and_visibility(provider):
    defined = provider['defined']
    for name in (NEW_CHECK, OTHER_CHECK, WIDGET_VALUE, WIDGET_VTABLE, WIDGET_TYPEINFO, '_ZTSN3c106WidgetE',
                 'plain_c', '_Z11weak_helperv', '_Z16protected_helperv', '_Z4bumpv'):
        assert name in defined
    assert '_Z13hidden_helperv' not in defined
    assert OLD_CHECK not in defined
    assert not defined & provider['undefined']


def test_gnu_unique_symbol_is_exported(built, provider):
    # A static local of an inline function is STB_GNU_UNIQUE with g++ (nm type 'u').
    nm = shutil.which('nm')
    if nm is None:
        pytest.skip('nm is not installed')
    listing = subprocess.check_output([nm, '-D', '--defined-only', built['provider']]).decode()
    unique = [line.split()[-1] for line in listing.splitlines() if line.split()[1:2] == ['u']]
    if not unique:
        pytest.skip('this g++ emits no STB_GNU_UNIQUE symbol')
    assert set(unique) <= provider['defined']


@pytest.mark.parametrize('which', ['provider', 'consumer'])
def test_matches_nm(built, which):
    nm = shutil.which('nm')
    if nm is None:
        pytest.skip('nm is not installed')
    result = es.read_dynamic(built[which])
    defined = subprocess.check_output([nm, '-D', '--defined-only', built[which]]).decode()
    undefined = subprocess.check_output([nm, '-D', '--undefined-only', built[which]]).decode()
    assert result['defined'] == set(line.split()[-1].split('@')[0] for line in defined.splitlines() if line.strip())
    assert result['undefined'] == set(line.split()[-1].split('@')[0] for line in undefined.splitlines() if line.strip())


def test_torch_needed_picks_exactly_the_c10_symbols(consumer):
    assert es.torch_needed(consumer['undefined']) == sorted([OLD_CHECK, WIDGET_VALUE, WIDGET_VTABLE, WIDGET_TYPEINFO])


@pytest.mark.parametrize('name', [
    '_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib',
    '_ZNK2at10TensorBase4sizeEl',
    '_ZN2at4_ops3add4callERKNS_6TensorES4_RKN3c106ScalarE',
    '_ZN5torch7Library4_defEON3c1014FunctionSchemaEPNS1_12OperatorNameERKSt6vectorIN2at3TagESaIS9_EENS_16_RegisterOrVerifyE',
    '_ZNR5torch7Library3defEv',
    '_ZNO5torch7Library3defEv',
    '_ZNVK3c103Foo3barEv',
    '_ZN6caffe28TypeMeta3fooEv',
    '_ZN4c10d12ProcessGroupD2Ev',
    '_ZTVN3c1011StorageImplE',
    '_ZTIN3c1011StorageImplE',
    '_ZTSN3c1011StorageImplE',
    '_ZTTN3c1011StorageImplE',
])
def test_torch_symbol_re_matches(name):
    assert es.TORCH_SYMBOL_RE.match(name)
    assert es.torch_needed([name, name]) == [name]


@pytest.mark.parametrize('name', [
    '_ZNSt6vectorIiSaIiEE17_M_realloc_insertIJRKiEEEvN9__gnu_cxx17__normal_iteratorIPiS1_EEDpOT_',
    '_ZNSt6vectorIN2at6TensorESaIS1_EE9push_backERKS1_',
    '_ZN4cute3fooEv',
    'cudaMalloc',
    '_Z3c10v',       # a global function named c10(): unscoped, not torch's
    '_Z5torchi',
    '_ZN3c1x3fooEv',
    '_ZN23atomic_something_longerEv',
    '_ZN4c10x3fooEv',
    '_ZTVN4cute3FooE',
    '',
])
def test_torch_symbol_re_rejects(name):
    assert not es.TORCH_SYMBOL_RE.match(name)
    assert es.torch_needed([name]) == []


def test_resolve_reports_the_old_signature_missing(consumer, provider):
    count, missing = es.resolve(es.torch_needed(consumer['undefined']), provider['defined'])
    assert (count, missing) == (3, [OLD_CHECK])
    assert es.resolve(iter([OLD_CHECK, NEW_CHECK, NEW_CHECK]), iter([NEW_CHECK])) == (1, [OLD_CHECK])
    assert es.resolve([], provider['defined']) == (0, [])


def test_same_name_exports_finds_the_new_overload(provider):
    absent = '_ZN3c104cuda9not_thereEv'
    result = es.same_name_exports([OLD_CHECK, absent], provider['defined'])
    # c10::other::check has the same last identifier but another qualified name.
    assert result == {OLD_CHECK: [NEW_CHECK], absent: []}
    assert es.same_name_exports([], provider['defined']) == {}


def test_same_name_exports_lists_every_overload_sorted_and_not_the_name_itself():
    exports = [OLD_CHECK, NEW_CHECK, '_ZN3c104cuda5checkEv', OTHER_CHECK, '_ZN3c104cuda6check2Ev']
    result = es.same_name_exports([OLD_CHECK], exports)
    assert result == {OLD_CHECK: sorted([NEW_CHECK, '_ZN3c104cuda5checkEv'])}


def test_same_name_exports_demangles_only_candidates(monkeypatch):
    seen = []
    real = es.demangle

    def recording(names):
        names = list(names)
        seen.extend(names)
        return real(names)

    monkeypatch.setattr(es, 'demangle', recording)
    exports = ['_ZN3foo%dbarEv' % index for index in range(20000)] + [NEW_CHECK, OTHER_CHECK, 'cudaMalloc']
    result = es.same_name_exports([OLD_CHECK], exports)
    assert result == {OLD_CHECK: [NEW_CHECK]}
    assert sorted(seen) == sorted([OLD_CHECK, NEW_CHECK, OTHER_CHECK])


def test_same_name_exports_matches_constructors_and_member_operators():
    ctor_c1 = '_ZN3c106WidgetC1Ei'
    ctor_c2_other = '_ZN3c106WidgetC2El'
    call_old = '_ZN3c106WidgetclEi'
    call_new = '_ZN3c106WidgetclEl'
    result = es.same_name_exports([ctor_c1, call_old], [ctor_c2_other, call_new, WIDGET_VALUE])
    assert result == {ctor_c1: [ctor_c2_other], call_old: [call_new]}


def test_demangle(consumer):
    names = [OLD_CHECK, WIDGET_VTABLE, 'cudaMalloc', '_Zgarbage!', 'i', '']
    result = es.demangle(names)
    assert result[OLD_CHECK] == 'c10::cuda::check(int, char const*, int, bool)'
    assert result[WIDGET_VTABLE] == 'vtable for c10::Widget'
    for name in ('cudaMalloc', '_Zgarbage!', 'i', ''):
        assert result[name] == name
    assert set(result) == set(names)
    demangled = es.demangle(consumer['undefined'])
    assert demangled[WIDGET_VALUE] == 'c10::Widget::value() const'


def test_demangle_falls_back_to_cxxfilt(monkeypatch):
    if shutil.which('c++filt') is None:
        pytest.skip('c++filt is not installed')
    monkeypatch.setattr(es, '_cxa_demangler', lambda: None)
    result = es.demangle([OLD_CHECK, WIDGET_TYPEINFO, 'cudaMalloc', '_Zgarbage!'])
    assert result == {
        OLD_CHECK: 'c10::cuda::check(int, char const*, int, bool)',
        WIDGET_TYPEINFO: 'typeinfo for c10::Widget',
        'cudaMalloc': 'cudaMalloc',
        '_Zgarbage!': '_Zgarbage!',
    }


def test_demangle_without_any_demangler_keeps_names(monkeypatch, tmp_path):
    monkeypatch.setattr(es, '_cxa_demangler', lambda: None)
    monkeypatch.setenv('PATH', str(tmp_path))
    assert es.demangle([OLD_CHECK, 'plain_c']) == {OLD_CHECK: OLD_CHECK, 'plain_c': 'plain_c'}


@pytest.mark.parametrize('demangled, name', [
    ('c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool)', 'c10::cuda::c10_cuda_check_implementation'),
    ('c10::foo<void (int)>(int)', 'c10::foo<void (int)>'),
    ('void c10::foo<void (int), std::pair<int, long> >(std::function<void (int, int)>)', 'c10::foo<void (int), std::pair<int, long> >'),
    ('int const* at::TensorBase::const_data_ptr<int, 0>() const', 'at::TensorBase::const_data_ptr<int, 0>'),
    ('c10::Widget::operator()(int) const', 'c10::Widget::operator()'),
    ('c10::Widget::operator()()', 'c10::Widget::operator()'),
    ('c10::operator<<(std::ostream&, c10::Device const&)', 'c10::operator<<'),
    ('bool c10::operator< <int>(c10::Foo<int> const&, c10::Foo<int> const&)', 'c10::operator< <int>'),
    ('c10::Widget::operator bool() const', 'c10::Widget::operator bool'),
    ('c10::Widget::operator c10::Foo<int> const*() const', 'c10::Widget::operator c10::Foo<int> const*'),
    ('c10::Widget::operator new(unsigned long)', 'c10::Widget::operator new'),
    ('torch::Library::_def(c10::FunctionSchema&&, c10::OperatorName*) &', 'torch::Library::_def'),
    ('torch::Library::def() &&', 'torch::Library::def'),
    ('c10::Widget::value() const volatile &&', 'c10::Widget::value'),
    ('c10::Widget::~Widget()', 'c10::Widget::~Widget'),
    ('c10::Widget::name[abi:cxx11]() const', 'c10::Widget::name[abi:cxx11]'),
    ('c10::(anonymous namespace)::helper(int)', 'c10::(anonymous namespace)::helper'),
    ('c10::foo(int) [clone .constprop.0]', 'c10::foo'),
    ('vtable for c10::Foo', 'vtable for c10::Foo'),
    ('typeinfo name for c10::Foo<unsigned int>', 'typeinfo name for c10::Foo<unsigned int>'),
    ('non-virtual thunk to c10::Widget::value() const', 'non-virtual thunk to c10::Widget::value'),
    ('c10::kSomeConstant', 'c10::kSomeConstant'),
    ('cudaMalloc', 'cudaMalloc'),
])
def test_qualified_name(demangled, name):
    assert es.qualified_name(demangled) == name


def test_overloads_share_the_qualified_name():
    old = es.qualified_name('c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool)')
    new = es.qualified_name('c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, unsigned int, bool, '
                            'c10::cuda::CUDAErrorLogCapture*)')
    assert old == new


def _assert_elf_error(path, words):
    with pytest.raises(es.ElfError) as caught:
        es.read_dynamic(str(path))
    message = str(caught.value)
    assert str(path) in message
    assert words in message


def test_text_file_is_not_elf(tmp_path):
    path = tmp_path / 'notes.txt'
    path.write_text('this is not an ELF file, just some text that is long enough\n' * 3)
    _assert_elf_error(path, 'not an ELF file')


def test_empty_file_is_not_elf(tmp_path):
    path = tmp_path / 'empty.so'
    path.write_bytes(b'')
    _assert_elf_error(path, 'not an ELF file')


def test_truncated_elf(built, tmp_path):
    path = tmp_path / 'truncated.so'
    with open(built['provider'], 'rb') as handle:
        path.write_bytes(handle.read(100))
    _assert_elf_error(path, 'truncated')


def test_truncated_before_the_header_ends(built, tmp_path):
    path = tmp_path / 'short.so'
    with open(built['provider'], 'rb') as handle:
        path.write_bytes(handle.read(40))
    _assert_elf_error(path, 'truncated')


@pytest.mark.parametrize('ident, words', [
    (b'\x7fELF\x01\x01\x01', '32-bit'),
    (b'\x7fELF\x02\x02\x01', 'big-endian'),
])
def test_unsupported_elf_flavours(tmp_path, ident, words):
    path = tmp_path / 'other.so'
    path.write_bytes(ident + b'\0' * (64 - len(ident)))
    _assert_elf_error(path, words)
    _assert_elf_error(path, 'not supported')


def test_object_file_has_no_dynamic_symbol_table(built):
    _assert_elf_error(built['object'], 'no dynamic symbol table')


def test_reads_only_the_needed_ranges(built, monkeypatch):
    """The provider carries a 32 MiB section; read_dynamic must not read it."""
    counted = []

    class Counting(object):
        def __init__(self, handle):
            self._handle = handle

        def read(self, *args):
            data = self._handle.read(*args)
            counted.append(len(data))
            return data

        def __getattr__(self, name):
            return getattr(self._handle, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._handle.close()

    monkeypatch.setattr(es, 'open', lambda path, mode='r': Counting(open(path, mode)), raising=False)
    result = es.read_dynamic(built['provider'])
    size = os.path.getsize(built['provider'])
    assert size > PAD_BYTES
    assert NEW_CHECK in result['defined']
    assert counted and sum(counted) < 1024 * 1024
