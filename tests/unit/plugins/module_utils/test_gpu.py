# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import gpu


@pytest.mark.parametrize('value, text', [(13000, '13.0'), (12080, '12.8'), (12090, '12.9'), (13010, '13.1'), (None, None)])
def test_format_cuda_version(value, text):
    assert gpu.format_cuda_version(value) == text


def test_query_asks_for_every_fact_in_one_run():
    argv = gpu.nvidia_smi_argv('/usr/bin/nvidia-smi')
    # nvidia-smi of driver 580 on an H200 accepts all these field names together in one --query-gpu
    # (driver 580.159.04: evidence/h200-health)
    assert argv == ['/usr/bin/nvidia-smi',
                    '--query-gpu=index,name,uuid,compute_cap,memory.total,pci.bus_id,driver_version,serial,'
                    'persistence_mode,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,'
                    'pcie.link.width.max,ecc.mode.current,ecc.errors.uncorrected.volatile.total,retired_pages.pending,'
                    'clocks_event_reasons.active,temperature.gpu,power.draw,power.limit,clocks.sm,clocks.max.sm',
                    '--format=csv,noheader,nounits']
    assert gpu.nvidia_smi_argv('/usr/bin/nvidia-smi', health=False)[1] == (
        '--query-gpu=index,name,uuid,compute_cap,memory.total,pci.bus_id,driver_version,serial')
    assert gpu.remap_argv('nvidia-smi')[1] == '--query-gpu=index,remapped_rows.pending,remapped_rows.failure'


@pytest.mark.parametrize('key, text, value', [
    ('persistence_mode', 'Enabled', True),
    ('persistence_mode', 'Disabled', False),
    ('ecc_enabled', '[N/A]', None),
    ('retired_pages_pending', 'No', False),
    ('retired_pages_pending', 'Yes', True),
    ('retired_pages_pending', '[Not Supported]', None),
    ('remapped_rows_pending', 'No', False),
    ('remapped_rows_failure', 'Yes', True),
    ('pcie_gen_current', '4', 4),
    ('pcie_width_current', ' 8 ', 8),
    ('ecc_uncorrected_volatile', '0', 0),
    ('ecc_uncorrected_volatile', '[N/A]', None),
    ('clocks_event_reasons_active', '0x0000000000000048', 0x48),
    ('clocks_event_reasons_active', '0', 0),
    ('temperature_c', '41', 41),
    ('power_draw_w', '76.28', 76.28),
    ('power_limit_w', '[Unknown Error]', None),
    ('clocks_max_sm_mhz', '1980', 1980),
])
def test_every_health_field_parses(key, text, value):
    assert gpu.parse_health_value(key, text) == value


@pytest.mark.parametrize('key, text, reason', [
    ('persistence_mode', 'Maybe', "persistence_mode 'Maybe' is neither enabled/yes nor disabled/no"),
    ('pcie_gen_current', 'five', "pcie_gen_current 'five' is not a number"),
    ('clocks_event_reasons_active', '0xZZ', "clocks_event_reasons_active '0xZZ' is not a bit mask"),
])
def test_a_health_field_that_is_not_what_was_asked_fails_naming_it(key, text, reason):
    with pytest.raises(gpu.NvidiaSmiParseError) as info:
        gpu.parse_health_value(key, text, 'the line')
    assert info.value.reason == reason and info.value.line == 'the line'


def test_clock_event_reasons_are_decoded_in_bit_order():
    assert gpu.clock_event_reasons(0) == []
    assert gpu.clock_event_reasons(0x1) == ['gpu_idle']
    assert gpu.clock_event_reasons(0x48) == ['hw_slowdown', 'hw_thermal_slowdown']
    assert gpu.clock_event_reasons(0x24) == ['sw_power_cap', 'sw_thermal_slowdown']
    assert gpu.clock_event_reasons(None) is None


def test_the_remap_query_is_made_only_where_retired_pages_are_not_reported():
    line = ('0, NVIDIA H100, GPU-1, 9.0, 81559, 00000000:01:00.0, 580.82.07, 1650523019876, Enabled, 5, 5, 16, 16, Enabled, 0, %s, '
            '0x0, 35, 71.0, 700.0, 345, 1980')
    dummy, answered = gpu.parse_query(line % 'No', health=True)
    dummy, remapping = gpu.parse_query(line % '[N/A]', health=True)
    assert not gpu.needs_remap_query(answered)
    assert gpu.needs_remap_query(remapping)
    gpu.parse_remap('0, Yes, No\n', remapping)
    assert remapping[0]['health']['remapped_rows_pending'] is True
    assert remapping[0]['health']['remapped_rows_failure'] is False
    # without health (an older driver) nothing is asked
    assert not gpu.needs_remap_query(gpu.parse_query(line.rsplit(', Enabled, 5', 1)[0], health=False)[1])


def _gpu(index=0, **health):
    base = dict(persistence_mode=True, pcie_gen_current=5, pcie_gen_max=5, pcie_width_current=16, pcie_width_max=16,
                ecc_enabled=True, ecc_uncorrected_volatile=0, retired_pages_pending=None, remapped_rows_pending=False,
                remapped_rows_failure=False, clocks_event_reasons=[], clocks_event_reasons_active=0)
    base.update(health)
    return {'index': index, 'name': 'NVIDIA RTX PRO 6000', 'health': base}


ALL = dict(min_pcie_gen=5, min_pcie_width=16, no_pending_remaps=True, persistence_mode=True, no_clock_slowdown=True)


@pytest.mark.parametrize('gpus, expect, failures', [
    ([_gpu(0), _gpu(1)], ALL, []),
    ([_gpu(0), _gpu(3, pcie_gen_current=4)], ALL,
     ['min_pcie_gen: expected >= Gen5, found Gen4 (max Gen5) on GPU 3 (NVIDIA RTX PRO 6000)']),
    ([_gpu(2, pcie_width_current=8)], ALL,
     ['min_pcie_width: expected >= x16, found x8 (max x16) on GPU 2 (NVIDIA RTX PRO 6000)']),
    ([_gpu(0, pcie_gen_current=None)], {'min_pcie_gen': 4},
     ['min_pcie_gen: expected >= Gen4, found not reported on GPU 0 (NVIDIA RTX PRO 6000)']),
    # uncorrected ECC errors fail where ECC is on, also when no limit was set
    ([_gpu(0, ecc_uncorrected_volatile=2)], {'persistence_mode': True},
     ['max_ecc_uncorrected: expected <= 0 uncorrected ECC errors, found 2 on GPU 0 (NVIDIA RTX PRO 6000)']),
    ([_gpu(0, ecc_uncorrected_volatile=2)], {'max_ecc_uncorrected': 5}, []),
    ([_gpu(0, ecc_enabled=False, ecc_uncorrected_volatile=None)], {'persistence_mode': True}, []),
    ([_gpu(0, ecc_enabled=False, ecc_uncorrected_volatile=None)], {'max_ecc_uncorrected': 0},
     ['max_ecc_uncorrected: expected <= 0, found not reported (ECC off or not supported) on GPU 0 (NVIDIA RTX PRO 6000)']),
    ([_gpu(0, remapped_rows_pending=True)], ALL,
     ['no_pending_remaps: expected no pending row remaps or retired pages, found row remap pending on GPU 0 (NVIDIA RTX PRO 6000)']),
    ([_gpu(0, retired_pages_pending=True, remapped_rows_pending=None, remapped_rows_failure=None)], ALL,
     ['no_pending_remaps: expected no pending row remaps or retired pages, found retired pages pending on GPU 0 (NVIDIA RTX PRO 6000)']),
    ([_gpu(0, remapped_rows_pending=None, remapped_rows_failure=None)], {'no_pending_remaps': True},
     ['no_pending_remaps: expected no pending row remaps or retired pages, found neither retired pages nor row remapping '
      'reported on GPU 0 (NVIDIA RTX PRO 6000)']),
    ([_gpu(0, persistence_mode=False)], ALL, ['persistence_mode: expected on, found off on GPU 0 (NVIDIA RTX PRO 6000)']),
    ([_gpu(0, clocks_event_reasons=['gpu_idle', 'sw_power_cap'])], ALL, []),
    ([_gpu(0, clocks_event_reasons=['hw_slowdown', 'hw_thermal_slowdown'])], ALL,
     ['no_clock_slowdown: expected no hardware or thermal clock slowdown, found hw_slowdown, hw_thermal_slowdown '
      'on GPU 0 (NVIDIA RTX PRO 6000)']),
    ([{'index': 0, 'name': 'A100'}], {'min_pcie_gen': 4},
     ['min_pcie_gen: expected 4, found no GPU health (nvidia-smi refused a health field: Field x)']),
])
def test_health_expectations(gpus, expect, failures):
    facts = {'present': True, 'gpus': gpus, 'health_error': 'nvidia-smi refused a health field: Field x'}
    assert gpu.check_health_expectations(expect, facts) == failures


def test_cuda_driver_version_without_libcuda(monkeypatch):
    import ctypes

    def no_library(name):
        raise OSError('%s: cannot open shared object file' % name)

    monkeypatch.setattr(ctypes, 'CDLL', no_library)
    assert gpu.cuda_driver_version() is None


def test_cuda_driver_version_from_libcuda(monkeypatch):
    import ctypes

    class FakeLibcuda(object):
        @staticmethod
        def cuDriverGetVersion(pointer):
            pointer._obj.value = 13000
            return 0

    monkeypatch.setattr(ctypes, 'CDLL', lambda name: FakeLibcuda())
    assert gpu.cuda_driver_version() == '13.0'


def test_empty_output_is_no_gpu():
    facts = gpu.facts_from_query('\n', '13.0')
    assert facts['present'] is False and facts['gpus'] == [] and facts['error'] == 'nvidia-smi listed no GPU'


# The board serial number, read in the same query as the inventory (serial, after driver_version). The H200 of the
# test machine answered 1654124044948 (driver 580.159.04); GeForce boards answer [N/A].
SERIAL_LINE = '0, NVIDIA H200, GPU-e406cb23-9236-2ad4-6f65-0333fa24604b, 9.0, 143771, 00000000:00:06.0, 580.159.04, %s'
SERIAL_HEALTH = ', Enabled, 5, 5, 16, 16, Enabled, 0, [N/A], 0x0, 31, 76.28, 700.00, 345, 1980'


@pytest.mark.parametrize('text, serial', [
    ('1654124044948', '1654124044948'),
    # a string, never a number: the leading zero is kept
    ('0324118012345', '0324118012345'),
    ('[N/A]', None),
    ('[Not Supported]', None),
    ('N/A', None),
])
@pytest.mark.parametrize('health', [True, False], ids=['with_health', 'no_health_fallback'])
def test_serial_is_a_string_or_null(text, serial, health):
    line = SERIAL_LINE % text + (SERIAL_HEALTH if health else '')
    driver, gpus = gpu.parse_query(line + '\n', health=health)
    assert driver == '580.159.04'
    assert gpus[0]['serial'] == serial
    assert gpus[0]['pci_bus_id'] == '00000000:00:06.0' and ('health' in gpus[0]) is health
    if health:
        assert gpus[0]['health']['persistence_mode'] is True and gpus[0]['health']['clocks_max_sm_mhz'] == 1980


def test_serial_is_read_after_a_name_with_commas():
    line = '0, NVIDIA GB10, Grace, GPU-0a1b2c3d, 12.1, [N/A], 0000000F:01:00.0, 580.95.05, [N/A]'
    dummy, gpus = gpu.parse_query(line, health=False)
    assert gpus[0]['name'] == 'NVIDIA GB10, Grace' and gpus[0]['serial'] is None
    assert gpus[0]['pci_bus_id'] == '0000000F:01:00.0'


def test_a_row_without_the_serial_is_refused():
    with pytest.raises(gpu.NvidiaSmiParseError) as info:
        gpu.parse_gpu_line('0, NVIDIA H200, GPU-x, 9.0, 143771, 00000000:19:00.0, 580.159.04')
    assert 'expected 8 comma-separated fields' in info.value.reason and 'driver_version,serial' in info.value.reason


def test_serial_reaches_the_fleet_report_json(tmp_path):
    import datetime
    import json

    from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import store

    out = '\n'.join([SERIAL_LINE % '0324118012345' + SERIAL_HEALTH,
                     (SERIAL_LINE % '[N/A]' + SERIAL_HEALTH).replace('0, NVIDIA H200', '1, NVIDIA H200', 1)]) + '\n'
    facts = gpu.facts_from_query(out, '13.0', health=True)
    report = store.build_report({'mode': 'verify', 'hosts': ['gpu01'], 'results': [{'status': 'ok', 'gpu': facts}]},
                                now=datetime.datetime(2026, 3, 8, 12, 0, 0, tzinfo=datetime.timezone.utc))
    paths = store.write_report(report, str(tmp_path))
    with open(paths['json']) as handle:
        written = json.load(handle)
    rows = written['hosts'][0]['gpus']
    assert [(row['index'], row['serial']) for row in rows] == [(0, '0324118012345'), (1, None)]
