# -*- coding: utf-8 -*-
"""Busy GPUs (module_utils gpu's compute processes and usage, module_utils busy):
nvidia-smi's answers -> each GPU's busy judgement -> what a run may do on each
GPU in each mode."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import busy, gpu

UUIDS = ['GPU-5c3f2a1e-8d4b-7e6f-9a0b-1c2d3e4f5a6%d' % index for index in range(4)]
SGLANG = 'python3 -m sglang.launch_server --model-path /models/llama'


def query_line(index, used, util, uuid=None, name='NVIDIA H200'):
    """One row of nvidia_smi_argv(health=True, usage=True): the base fields, the health, memory.used, utilization."""
    return ('%d, %s, %s, 9.0, 143771, 00000000:%02X:00.0, 580.159.04, 1654124044948, Enabled, 5, 5, 16, 16, Enabled, 0, [N/A], '
            '0x0000000000000001, 34, 78.30, 700.00, 345, 1980, %s, %s'
            % (index, name, uuid or UUIDS[index], 0x19 + index, used, util))


def fake_proc(tmp_path, cmdlines):
    """A /proc with <pid>/cmdline (NUL-separated, as the kernel writes it)."""
    for pid, argv in cmdlines.items():
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / 'cmdline').write_bytes(b''.join(part + b'\0' for part in argv))
    return str(tmp_path)


# --- nvidia-smi's answers -> busy judgement ------------------------------------------------------------------

JUDGE_CASES = [
    dict(id='one_gpu_no_process_idle',
         query=[query_line(0, 1, 0)], apps='',
         busy={0: None}),
    dict(id='one_gpu_one_process_with_its_command_line',
         query=[query_line(0, 88166, 97)], apps='%s, 4242, python3, 88160\n' % UUIDS[0],
         cmdlines={4242: [b'python3', b'-m', b'sglang.launch_server', b'--model-path', b'/models/llama']},
         busy={0: 'busy (pid 4242 %s, 86.1 GiB)' % SGLANG}),
    dict(id='one_gpu_several_processes_listed_in_order',
         query=[query_line(0, 30000, 40)],
         apps=''.join('%s, %d, python3, %d\n' % (UUIDS[0], pid, 10240) for pid in (101, 102, 103)),
         busy={0: 'busy (pid 101 python3, 10.0 GiB; pid 102 python3, 10.0 GiB; pid 103 python3, 10.0 GiB)'}),
    dict(id='five_processes_show_three_and_a_count',
         query=[query_line(0, 30000, 40)],
         apps=''.join('%s, %d, python3, 1024\n' % (UUIDS[0], pid) for pid in range(101, 106)),
         busy_contains={0: ['pid 103 python3, 1.0 GiB and 2 more)']}, not_contains={0: ['pid 104']}),
    dict(id='four_gpus_one_and_three_busy',
         query=[query_line(0, 1, 0), query_line(1, 88166, 97), query_line(2, 3, 0), query_line(3, 70000, 88)],
         apps='%s, 4242, python3, 88160\n%s, 5151, python3, 69000\n' % (UUIDS[1], UUIDS[3]),
         busy={0: None, 1: 'busy (pid 4242 python3, 86.1 GiB)', 2: None, 3: 'busy (pid 5151 python3, 67.4 GiB)'}),
    dict(id='used_memory_not_available',
         query=[query_line(0, 500, 3)], apps='%s, 4242, python3, [N/A]\n' % UUIDS[0],
         busy={0: 'busy (pid 4242 python3, memory not reported)'}),
    dict(id='process_name_not_available_and_no_command_line',
         query=[query_line(0, 500, 3)], apps='%s, 4242, [N/A], 400\n' % UUIDS[0],
         busy={0: 'busy (pid 4242 unknown process, 0.4 GiB)'}),
    dict(id='process_name_with_a_comma',
         query=[query_line(0, 500, 3)], apps='%s, 4242, sglang, worker 0, 400\n' % UUIDS[0],
         busy={0: 'busy (pid 4242 sglang, worker 0, 0.4 GiB)'}, process_name={0: 'sglang, worker 0'}),
    dict(id='memory_in_use_by_another_container_without_a_listed_process',
         query=[query_line(0, 88166, 97)], apps='',
         busy={0: 'busy (86.1 GiB in use by processes not visible from this host)'}),
    dict(id='memory_just_below_the_threshold_is_idle',
         query=[query_line(0, 2047, 0)], apps='', busy={0: None}),
    dict(id='memory_at_the_threshold_is_busy',
         query=[query_line(0, 2048, 0)], apps='',
         busy={0: 'busy (2.0 GiB in use by processes not visible from this host)'}),
    dict(id='a_higher_threshold_makes_the_same_memory_idle',
         query=[query_line(0, 6000, 0)], apps='', threshold=8192, busy={0: None}),
    dict(id='processes_not_read_and_memory_not_reported_is_unknown',
         query=[query_line(0, '[N/A]', '[N/A]')], apps=None,
         processes_error='compute processes not read: nvidia-smi rc 2: Field "used_memory" is not a valid field',
         busy={0: 'busy state unknown (compute processes not read: nvidia-smi rc 2: '
                  'Field "used_memory" is not a valid field)'}),
    dict(id='processes_not_read_but_little_memory_in_use_is_idle',
         query=[query_line(0, 5, 0)], apps=None, processes_error='compute processes not read: nvidia-smi rc 2: x',
         busy={0: None}),
    dict(id='memory_not_reported_no_process_no_error_is_idle',
         query=[query_line(0, '[N/A]', '[N/A]')], apps='', busy={0: None}),
    dict(id='the_probes_own_process_is_left_out',
         query=[query_line(0, 500, 2)], apps='%s, 4242, python3, 480\n' % UUIDS[0], own=[4242],
         busy={0: None}),
    dict(id='own_process_left_out_another_kept',
         query=[query_line(0, 500, 2)], apps='%s, 4242, python3, 480\n%s, 77, vllm, 20\n' % (UUIDS[0], UUIDS[0]),
         own=[4242], busy={0: 'busy (pid 77 vllm, 0.0 GiB)'}),
]


@pytest.mark.parametrize('case', JUDGE_CASES, ids=[case['id'] for case in JUDGE_CASES])
def test_nvidia_smi_answers_give_each_gpus_busy_judgement(case, tmp_path):
    proc = fake_proc(tmp_path, case.get('cmdlines', {}))
    facts = gpu.facts_from_query('\n'.join(case['query']) + '\n', '13.0', health=True, usage=True)
    facts['processes_error'] = case.get('processes_error')
    if case['apps'] is not None:
        gpu.attach_processes(facts['gpus'], gpu.parse_compute_apps(case['apps']), set(case.get('own', [])), proc=proc)
    found = busy.judge(facts, case.get('threshold', busy.DEFAULT_BUSY_MEMORY_MIB))
    by_index = dict((entry['index'], entry) for entry in facts['gpus'])
    for index, reason in case.get('busy', {}).items():
        assert by_index[index]['busy_reason'] == reason
        assert by_index[index]['busy'] is (reason is not None)
    for index, texts in case.get('busy_contains', {}).items():
        assert by_index[index]['busy'] is True
        for text in texts:
            assert text in by_index[index]['busy_reason']
    for index, texts in case.get('not_contains', {}).items():
        for text in texts:
            assert text not in by_index[index]['busy_reason']
    for index, name in case.get('process_name', {}).items():
        assert [process['process_name'] for process in by_index[index]['processes']] == [name]
    assert [entry['index'] for entry in found] == sorted(index for index, entry in by_index.items() if entry['busy'])


def test_usage_is_read_from_the_last_two_fields():
    argv = gpu.nvidia_smi_argv('/usr/bin/nvidia-smi', usage=True)
    assert argv[1].endswith(',clocks.max.sm,memory.used,utilization.gpu')
    assert gpu.nvidia_smi_argv('/usr/bin/nvidia-smi', health=False, usage=True)[1] == (
        '--query-gpu=index,name,uuid,compute_cap,memory.total,pci.bus_id,driver_version,serial,memory.used,utilization.gpu')
    assert gpu.compute_apps_argv('nvidia-smi') == [
        'nvidia-smi', '--query-compute-apps=gpu_uuid,pid,process_name,used_memory', '--format=csv,noheader,nounits']
    entry, driver = gpu.parse_gpu_line(query_line(0, 88166, 97, name='NVIDIA GB10, Grace'), health=True, usage=True)
    assert entry['usage'] == {'memory_used_mib': 88166, 'utilization_pct': 97}
    assert entry['name'] == 'NVIDIA GB10, Grace' and entry['health']['clocks_max_sm_mhz'] == 1980
    assert driver == '580.159.04' and entry['serial'] == '1654124044948'
    entry, dummy = gpu.parse_gpu_line(
        '0, NVIDIA H200, GPU-x, 9.0, 143771, 00000000:19:00.0, 580.159.04, 1654124044948, [N/A], [N/A]', usage=True)
    assert entry['usage'] == {'memory_used_mib': None, 'utilization_pct': None} and 'health' not in entry
    entry, dummy = gpu.parse_gpu_line('0, NVIDIA H200, GPU-x, 9.0, 143771, 00000000:19:00.0, 580.159.04, 1654124044948')
    assert 'usage' not in entry and entry['uuid'] == 'GPU-x' and entry['serial'] == '1654124044948'


def test_usage_that_is_not_a_whole_number_fails_naming_it():
    with pytest.raises(gpu.NvidiaSmiParseError) as caught:
        gpu.parse_gpu_line(query_line(0, '88166 MiB', 97), health=True, usage=True)
    assert "memory.used '88166 MiB' is not a whole number" in str(caught.value)


@pytest.mark.parametrize('out, apps', [
    ('', []),
    ('\n\n', []),
    ('GPU-a, 4242, python3, 88160\n', [dict(gpu_uuid='GPU-a', pid=4242, process_name='python3', used_memory_mib=88160)]),
    ('GPU-a, 1, /usr/bin/python3, 10\nGPU-b, 2, [N/A], [N/A]\n',
     [dict(gpu_uuid='GPU-a', pid=1, process_name='/usr/bin/python3', used_memory_mib=10),
      dict(gpu_uuid='GPU-b', pid=2, process_name=None, used_memory_mib=None)]),
    ('[N/A], 7, x, 1\n', [dict(gpu_uuid=None, pid=7, process_name='x', used_memory_mib=1)]),
    ('GPU-a, 4242, tritonserver, model a, model b, 512\n',
     [dict(gpu_uuid='GPU-a', pid=4242, process_name='tritonserver, model a, model b', used_memory_mib=512)]),
])
def test_parse_compute_apps(out, apps):
    assert gpu.parse_compute_apps(out) == apps


@pytest.mark.parametrize('line, reason', [
    ('No running processes found', 'expected gpu_uuid,pid,process_name,used_memory'),
    ('GPU-a, 4242, python3', 'expected gpu_uuid,pid,process_name,used_memory'),
    ('GPU-a, abc, python3, 10', "pid 'abc' is not a number"),
    ('GPU-a, 4242, python3, 10 MiB', "used_memory '10 MiB' is not a number of MiB"),
])
def test_a_compute_apps_line_that_is_not_the_csv_row_fails_naming_it(line, reason):
    with pytest.raises(gpu.NvidiaSmiParseError) as caught:
        gpu.parse_compute_apps('GPU-a, 1, ok, 1\n' + line + '\n')
    assert caught.value.line == line and caught.value.reason == reason
    assert repr(line) in str(caught.value)


def test_command_line_from_proc(tmp_path):
    proc = fake_proc(tmp_path, {4242: [b'python3', b'-m', b'sglang.launch_server'], 7: [],
                                8: [b'caf\xe9', b'x' * 200]})
    assert gpu.command_line(4242, proc) == 'python3 -m sglang.launch_server'
    assert gpu.command_line(4242, proc, limit=len('python3 -m sglang.launch_server')) == 'python3 -m sglang.launch_server'
    cut = gpu.command_line(4242, proc, limit=12)
    assert cut == 'python3 -...' and len(cut) == 12
    assert gpu.command_line(7, proc) is None  # an empty cmdline (a kernel thread, a zombie)
    assert gpu.command_line(9999, proc) is None  # another PID namespace, or ended
    long = gpu.command_line(8, proc)
    assert long.startswith('caf\ufffd xxx') and len(long) == 120 and long.endswith('...')


def _stat(tmp_path, pid, ppid, comm='python3'):
    (tmp_path / str(pid)).mkdir()
    (tmp_path / str(pid) / 'stat').write_text('%d (%s) S %d 1 1 0 -1\n' % (pid, comm, ppid))


def test_own_pids_are_this_process_and_its_descendants(tmp_path):
    _stat(tmp_path, 100, 1)
    _stat(tmp_path, 101, 100, comm='ansible (worker) 1')  # parentheses and spaces in the command name
    _stat(tmp_path, 102, 101)
    _stat(tmp_path, 200, 1)
    _stat(tmp_path, 201, 200)
    (tmp_path / '300').mkdir()
    (tmp_path / '300' / 'stat').write_text('garbage')
    (tmp_path / 'self').mkdir()
    assert gpu.own_pids(100, str(tmp_path)) == set([100, 101, 102])
    assert gpu.own_pids(200, str(tmp_path)) == set([200, 201])
    assert gpu.own_pids(555, str(tmp_path / 'absent')) == set([555])
    assert os.getpid() in gpu.own_pids()


def test_attach_processes(tmp_path):
    proc = fake_proc(tmp_path, {5: [b'vllm', b'serve']})
    gpus = [dict(index=0, uuid='GPU-a'), dict(index=1, uuid='GPU-b'), dict(index=2, uuid='GPU-c')]
    apps = gpu.parse_compute_apps('GPU-b, 5, vllm, 100\nGPU-b, 6, python3, 10\nGPU-z, 7, x, 1\nGPU-c, 8, me, 1\n')
    gpu.attach_processes(gpus, apps, own=set([8]), proc=proc)
    assert gpus[0]['processes'] == [] and gpus[2]['processes'] == []
    assert gpus[1]['processes'] == [
        dict(gpu_uuid='GPU-b', pid=5, process_name='vllm', used_memory_mib=100, command='vllm serve'),
        dict(gpu_uuid='GPU-b', pid=6, process_name='python3', used_memory_mib=10, command=None)]
    # one GPU: an answer without a matching uuid is still that GPU's
    single = [dict(index=0, uuid='GPU-a')]
    gpu.attach_processes(single, gpu.parse_compute_apps('[N/A], 5, vllm, 100\n'), proc=proc)
    assert [process['pid'] for process in single[0]['processes']] == [5]


# --- busy_reason ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize('process, text', [
    (dict(pid=1, command='vllm serve x', process_name='python3', used_memory_mib=2048), 'pid 1 vllm serve x, 2.0 GiB'),
    (dict(pid=1, command=None, process_name='python3', used_memory_mib=None), 'pid 1 python3, memory not reported'),
    (dict(pid=1, command=None, process_name=None, used_memory_mib=0), 'pid 1 unknown process, 0.0 GiB'),
])
def test_describe_process(process, text):
    assert busy.describe_process(process) == text


# --- plan ----------------------------------------------------------------------------------------------------

def host(busy_indexes, count=4, no_uuid=()):
    """gpu_facts of a host with count GPUs, those of busy_indexes with a compute process each (pid 4000 + index)."""
    gpus = []
    for index in range(count):
        processes = [dict(pid=4000 + index, process_name='python3', used_memory_mib=80000, command=SGLANG)] \
            if index in busy_indexes else []
        gpus.append(dict(index=index, uuid=None if index in no_uuid else UUIDS[index],
                         usage=dict(memory_used_mib=80000 if index in busy_indexes else 1, utilization_pct=0),
                         processes=processes))
    facts = dict(present=True, gpus=gpus, processes_error=None)
    busy.judge(facts)
    return facts


def reason(index):
    return 'busy (pid %d %s, 78.1 GiB)' % (4000 + index, SGLANG)


HOSTS = {
    'all_idle': lambda: host(()),
    'some_busy': lambda: host((1, 3)),
    'all_busy': lambda: host((0, 1, 2, 3)),
    'no_gpu': lambda: dict(present=False, gpus=[], error='nvidia-smi not found'),
}
NO_GPU_TIME = 'in_service run: no GPU time'
REFUSED = 'full verification refused before any CUDA work: %s; drain the host first (gpufleet_drain_hook) or verify it in_service'

PLAN_CASES = [
    ('auto', 'all_idle', dict(numeric=True, devices=[0, 1, 2, 3], mask=None, visible=None, refused=None, skipped=[],
                              collectives_skip=None, busy=[])),
    ('auto', 'some_busy', dict(numeric=True, devices=[0, 2], mask='%s,%s' % (UUIDS[0], UUIDS[2]), visible=[0, 2],
                               refused=None, skipped=[dict(gpu=1, reason=reason(1)), dict(gpu=3, reason=reason(3))],
                               collectives_skip='GPU 1, 3 busy', busy=[1, 3])),
    ('auto', 'all_busy', dict(numeric=False, devices=[], mask='', visible=[], refused=None,
                              skipped=[dict(gpu=index, reason=reason(index)) for index in range(4)],
                              collectives_skip='GPU 0, 1, 2, 3 busy', busy=[0, 1, 2, 3])),
    ('auto', 'no_gpu', dict(numeric=True, devices=None, mask=None, visible=None, refused=None, skipped=[],
                            collectives_skip=None, busy=[])),
    ('in_service', 'all_idle', dict(numeric=False, devices=[], mask=','.join(UUIDS), visible=[0, 1, 2, 3], refused=None,
                                    skipped=[dict(gpu=index, reason=NO_GPU_TIME) for index in range(4)],
                                    collectives_skip=NO_GPU_TIME, busy=[])),
    ('in_service', 'some_busy', dict(numeric=False, devices=[], mask='%s,%s' % (UUIDS[0], UUIDS[2]), visible=[0, 2],
                                     refused=None,
                                     skipped=[dict(gpu=0, reason=NO_GPU_TIME), dict(gpu=1, reason=reason(1)),
                                              dict(gpu=2, reason=NO_GPU_TIME), dict(gpu=3, reason=reason(3))],
                                     collectives_skip=NO_GPU_TIME, busy=[1, 3])),
    ('in_service', 'all_busy', dict(numeric=False, devices=[], mask='', visible=[], refused=None,
                                    skipped=[dict(gpu=index, reason=reason(index)) for index in range(4)],
                                    collectives_skip=NO_GPU_TIME, busy=[0, 1, 2, 3])),
    ('in_service', 'no_gpu', dict(numeric=False, devices=[], mask=None, visible=None, refused=None,
                                  skipped=[dict(gpu='cpu', reason='in_service run: no numeric checks')],
                                  collectives_skip=NO_GPU_TIME, busy=[])),
    ('full', 'all_idle', dict(numeric=True, devices=[0, 1, 2, 3], mask=None, visible=None, refused=None, skipped=[],
                              collectives_skip=None, busy=[])),
    # full on a busy GPU hides it too: a probe with nothing numeric to do never sees it
    ('full', 'some_busy', dict(numeric=False, devices=[], mask='%s,%s' % (UUIDS[0], UUIDS[2]), visible=[0, 2],
                               refused=REFUSED % ('GPU 1 %s; GPU 3 %s' % (reason(1), reason(3))),
                               skipped=[dict(gpu=1, reason=reason(1)), dict(gpu=3, reason=reason(3))],
                               collectives_skip=None, busy=[1, 3])),
    ('full', 'all_busy', dict(numeric=False, devices=[], mask='', visible=[],
                              refused=REFUSED % '; '.join('GPU %d %s' % (index, reason(index)) for index in range(4)),
                              skipped=[dict(gpu=index, reason=reason(index)) for index in range(4)],
                              collectives_skip=None, busy=[0, 1, 2, 3])),
    ('full', 'no_gpu', dict(numeric=True, devices=None, mask=None, visible=None, refused=None, skipped=[],
                            collectives_skip=None, busy=[])),
]


@pytest.mark.parametrize('mode, kind, expected', PLAN_CASES, ids=['%s-%s' % (mode, kind) for mode, kind, dummy in PLAN_CASES])
def test_plan_per_mode_and_host(mode, kind, expected):
    assert busy.plan(mode, HOSTS[kind]()) == dict(expected, requested=mode)


def test_full_refusal_names_the_gpu_and_the_pid():
    refused = busy.plan('full', host((2,)))['refused']
    assert refused.startswith('full verification refused before any CUDA work: GPU 2 busy (pid 4002 python3 -m sglang')


@pytest.mark.parametrize('mode', busy.MODES)
def test_no_gpu_facts_at_all(mode):
    out = busy.plan(mode, None)
    assert out['mask'] is None and out['visible'] is None and out['refused'] is None and out['busy'] == []
    assert out['numeric'] is (mode != 'in_service')


@pytest.mark.parametrize('mode, mask, visible', [
    ('auto', '0,2', [0, 2]),
    ('in_service', '0,2', [0, 2]),
])
def test_mask_by_index_where_a_uuid_is_missing(mode, mask, visible):
    out = busy.plan(mode, host((1, 3), no_uuid=(2,)))
    assert out['mask'] == mask and out['visible'] == visible


def test_mask_by_uuid_where_only_a_busy_gpu_has_none():
    out = busy.plan('auto', host((1, 3), no_uuid=(1,)))
    assert out['mask'] == '%s,%s' % (UUIDS[0], UUIDS[2])


@pytest.mark.parametrize('mode', ['auto', 'in_service'])
def test_the_users_own_cuda_visible_devices_narrows_the_gpus(mode):
    facts = host((1, 3))
    # GPU 0 (idle) and GPU 1 (busy) named by the caller, by index and by uuid: the mask keeps GPU 0 only
    out = busy.plan(mode, facts, {'CUDA_VISIBLE_DEVICES': '0,%s' % UUIDS[1], 'CUDA_HOME': '/usr/local/cuda'})
    assert out['mask'] == UUIDS[0] and out['visible'] == [0]
    assert out['busy'] == [1, 3]  # every busy GPU still reported
    assert [s['gpu'] for s in out['skipped'] if s['reason'].startswith('busy')] == [1]
    # only idle GPUs named: nothing to hide, torch's order is the caller's
    out = busy.plan(mode, facts, {'CUDA_VISIBLE_DEVICES': '2,0'})
    if mode == 'auto':
        assert out['mask'] is None and out['visible'] == [2, 0] and out['devices'] == [2, 0] and out['numeric']
    else:
        assert out['mask'] == '%s,%s' % (UUIDS[2], UUIDS[0]) and out['visible'] == [2, 0]


@pytest.mark.parametrize('mode, refused', [('full', True), ('auto', False)])
def test_a_cuda_visible_devices_that_cannot_be_read_keeps_every_busy_gpu_in_play(mode, refused):
    out = busy.plan(mode, host((1, 3)), {'CUDA_VISIBLE_DEVICES': 'MIG-9d8b3c2a'})
    assert out['numeric'] is False and out['mask'] is None
    assert bool(out['refused']) is refused
    assert [s['gpu'] for s in out['skipped']] == [1, 3]


def test_user_devices_reads_indexes_uuids_and_prefixes_in_order():
    gpus = host(())['gpus']
    assert [g['index'] for g in busy.user_devices('3, %s' % UUIDS[1], gpus)] == [3, 1]
    assert busy.user_devices('7', gpus) is None  # no such GPU
    assert busy.user_devices('0,0', gpus) is None  # named twice
    assert busy.user_devices('GPU-5c3f', gpus) is None  # a prefix of every uuid: not unique
    assert busy.user_devices('', gpus) == []


def test_an_unknown_mode_raises():
    with pytest.raises(ValueError) as caught:
        busy.plan('fast', host(()))
    assert str(caught.value) == "mode: expected one of auto, in_service, full, found 'fast'"


@pytest.mark.parametrize('visible, torch_index, smi_index', [
    ([1, 3], 0, 1),
    ([1, 3], 1, 3),
    ([1, 3], 2, 2),  # beyond the mask: left as it is
    ([1, 3], 'cpu', 'cpu'),
    ([], 0, 0),
    (None, 1, 1),
])
def test_torch_to_smi(visible, torch_index, smi_index):
    assert busy.torch_to_smi(dict(visible=visible), torch_index) == smi_index


def test_torch_to_smi_through_a_plan():
    out = busy.plan('auto', host((0, 2)))
    assert [busy.torch_to_smi(out, index) for index in range(2)] == [1, 3]
