# -*- coding: utf-8 -*-
"""The served-request check: the judgement of sglang's answers, the command line,
the model override, the server's process group stopped on a timeout, and a
backend whose served request fails excluded for the next qualified one.

The hosts of these tests have no GPU, so sglang cannot serve here: STAND_IN is
a small HTTP server that stands in for sglang on a GPU. It is started as
``python -m sglang.launch_server`` from a folder on PYTHONPATH, takes the same
flags, answers ``GET /health`` and ``POST /generate`` (token ids in,
output_ids and meta_info.output_token_logprobs out) the way sglang 0.5.23
does, and answers NaN (as orjson writes it: null) for a backend named in
STANDIN_NAN_FOR. The real server runs on the GPU test machine."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys
import time

import pytest

from ansible_collections.gpufleet.inference.plugins.module_utils import backends, model_profile
from ansible_collections.gpufleet.inference.plugins.module_utils import served_check as sc

H200 = 'NVIDIA H200'


def output(ids, logprobs=None):
    """One output of /generate as sglang 0.5.23 answers with --skip-tokenizer-init."""
    logprobs = [-0.5 - index / 10.0 for index in range(len(ids))] if logprobs is None else logprobs
    return {'output_ids': ids, 'meta_info': {
        'id': 'a1', 'finish_reason': {'type': 'length', 'length': len(ids)}, 'prompt_tokens': 7,
        'output_token_logprobs': [[value, token, None] for value, token in zip(logprobs, ids)],
        'completion_tokens': len(ids), 'cached_tokens': 0}}


# ---------------------------------------------------------------- the output judgement (recorded-style answers)


def test_finite_logprobs_and_varied_tokens_pass():
    assert sc.judge_output(output([11, 42, 7, 42]), 4) == []


@pytest.mark.parametrize('value, shown', [
    (None, 'null'), (float('nan'), 'NaN'), (float('inf'), 'Infinity'), (float('-inf'), '-Infinity'), ('x', '"x"'),
    (True, 'true')])
def test_a_logprob_that_is_not_a_finite_number_fails(value, shown):
    problems = sc.judge_output(output([11, 42, 7, 42], [-0.1, value, -0.3, value]), 4)
    assert problems == ['2 of 4 logprobs not finite (first at token 1: %s; orjson writes NaN and inf as null)' % shown]


def test_one_token_repeated_is_degenerate():
    # the "!!!!" of the field: token 0, argmax of NaN logits, with logprobs that look fine
    assert sc.judge_output(output([0] * 16), 16) == ['degenerate output: token 0 repeated 16 times']


@pytest.mark.parametrize('answer, text', [
    ({'output_ids': [], 'meta_info': {'output_token_logprobs': []}}, 'empty output (output_ids [])'),
    ({'meta_info': {}}, 'empty output (output_ids null)'),
    ('Internal Server Error', 'expected an object with output_ids and meta_info, found str'),
    ({'error': {'message': 'boom'}}, "the server answered an error: {'message': 'boom'}"),
])
def test_an_empty_or_broken_output_fails(answer, text):
    assert sc.judge_output(answer, 4) == [text]


def test_missing_logprobs_and_a_short_output_are_named():
    answer = output([1, 2, 3])
    answer['meta_info']['output_token_logprobs'] = answer['meta_info']['output_token_logprobs'][:2]
    assert sc.judge_output(answer, 16) == [
        '3 output tokens where 16 were asked for (ignore_eos)',
        'meta_info.output_token_logprobs has 2 entries for 3 output tokens']


def test_a_batch_is_judged_per_prompt_and_by_its_length():
    body = {'input_ids': [[1, 2], [3, 4, 5]], 'sampling_params': {}, 'return_logprob': True}
    good = output(list(range(16)))
    assert sc.judge_answer('batch', body, 200, [good, good]) == []
    assert sc.judge_answer('batch', body, 200, [good, output([9] * 16)]) == [
        'batch, prompt 2: degenerate output: token 9 repeated 16 times']
    assert sc.judge_answer('batch', body, 200, [good]) == ['batch: expected 2 outputs, found 1']
    assert sc.judge_answer('batch', body, 400, {'error': 'x'}) == ["batch: HTTP 400: {'error': 'x'}"]


def test_the_requests_are_token_ids_greedy_with_logprobs_single_and_batched_of_odd_lengths():
    bodies = sc.request_bodies(151936)
    assert [label for label, dummy in bodies] == [label for label, dummy in sc.REQUESTS]
    for label, body in bodies:
        # sglang.api.v1's SamplingParams refuses unknown keys: these are its own
        assert body['sampling_params'] == {'max_new_tokens': 16, 'temperature': 0.0, 'ignore_eos': True}
        assert body['return_logprob'] is True
        prompts = body['input_ids'] if isinstance(body['input_ids'][0], list) else [body['input_ids']]
        assert all(sc.FIRST_ID <= token < sc.LAST_ID for ids in prompts for token in ids)
    lengths = [len(ids) for dummy, body in bodies
               for ids in (body['input_ids'] if isinstance(body['input_ids'][0], list) else [body['input_ids']])]
    assert any(length % 2 for length in lengths) and max(lengths) > 128
    assert any(isinstance(body['input_ids'][0], list) for dummy, body in bodies)
    assert all(token < 1000 for dummy, body in sc.request_bodies(1000) for ids in
               (body['input_ids'] if isinstance(body['input_ids'][0], list) else [body['input_ids']]) for token in ids)


# ---------------------------------------------------------------- the command line and the model override


def test_the_argv_for_a_profile_and_flags():
    config, quant, origin = sc.model_config({'model': 'qwen3-30b-a3b'})
    assert origin == 'the shipped profile qwen3-30b-a3b' and quant is None and 'source' not in config
    override = sc.override_args(config)
    args = backends.render_args({'moe_runner': 'triton'}).split()
    argv = sc.server_argv('/opt/ml-env-x/bin/python', '/tmp/m', args, 2, 31234, override)
    assert argv == ['/opt/ml-env-x/bin/python', '-m', 'sglang.launch_server', '--model-path', '/tmp/m',
                    '--load-format', 'dummy', '--json-model-override-args', '{"num_hidden_layers":2}',
                    '--skip-tokenizer-init', '--tp-size', '2', '--host', '127.0.0.1', '--port', '31234',
                    '--moe-runner-backend', 'triton']


def test_the_override_keeps_experts_heads_and_sizes_and_reduces_the_layers():
    for name in sorted(model_profile.PROFILES):
        config = sc.model_config({'model': name})[0]
        override = sc.override_args(config)
        inner = override.get('text_config', override)
        assert inner['num_hidden_layers'] == 2, name
        assert not set(inner) & set(sc.KEPT), name
    deepseek = sc.override_args(sc.model_config({'model': 'deepseek-v3'})[0])
    # 3 dense layers first: lowered so that layer 1 is MoE
    assert deepseek == {'num_hidden_layers': 2, 'first_k_dense_replace': 1}
    llama4 = sc.override_args(sc.model_config({'model': 'llama-4-scout'})[0])
    assert llama4 == {'text_config': {'num_hidden_layers': 2}}
    # a multimodal model serves its language model only (no processor files in the model folder)
    assert '--language-model-only' in sc.server_argv('/v/bin/python', '/tmp/m', [], 1, 1, llama4)
    assert '--language-model-only' not in sc.server_argv('/v/bin/python', '/tmp/m', [], 1, 1, deepseek)


def test_the_override_cuts_per_layer_lists_and_keeps_a_small_model_whole():
    config = {'num_hidden_layers': 4, 'layer_types': ['sliding_attention', 'full_attention'] * 2,
              'mlp_only_layers': [0, 3], 'num_experts': 4}
    assert sc.override_args(config) == {'num_hidden_layers': 2, 'layer_types': ['sliding_attention', 'full_attention'],
                                        'mlp_only_layers': [0]}
    assert sc.override_args({'num_hidden_layers': 1}) == {'num_hidden_layers': 1}
    with pytest.raises(sc.ServedCheckError, match='no num_hidden_layers'):
        sc.override_args({'hidden_size': 8})


def test_the_hosts_config_json_is_copied_with_its_quant_config(tmp_path):
    folder = tmp_path / 'model'
    folder.mkdir()
    (folder / 'config.json').write_text(json.dumps({'num_hidden_layers': 30, 'vocab_size': 1000}))
    (folder / 'hf_quant_config.json').write_text(json.dumps({'quantization': {'quant_algo': 'NVFP4'}}))
    config, quant, origin = sc.model_config({'model': str(folder)})
    assert origin == str(folder / 'config.json') and quant == {'quantization': {'quant_algo': 'NVFP4'}}
    written = sc.write_model_folder(str(tmp_path / 'copy'), config, quant)
    assert sorted(os.listdir(written)) == ['config.json', 'hf_quant_config.json']
    assert sc.vocab_size(config) == 1000


def test_the_first_tp_idle_gpus_by_index_never_uuid():
    # sglang 0.5.23 parses CUDA_VISIBLE_DEVICES as integers at tp >= 2: UUIDs would stop every server
    use = {'numeric': True, 'requested': 'auto', 'devices': [1, 3, 4],
           'gpus': [{'index': i, 'uuid': 'GPU-%d' % i} for i in range(5)]}
    assert sc.gpu_mask(use, 2) == ('1,3', [1, 3])
    assert sc.gpu_mask(use, 4) == (None, 'tp 4 needs 4 idle GPUs, found 3 (1, 3, 4)')
    assert sc.gpu_mask(dict(use, numeric=False, devices=[], requested='in_service'), 1) == (
        None, 'no idle GPU (mode in_service)')


# ---------------------------------------------------------------- the stand-in server, on loopback

STAND_IN = r'''
"""Stands in for sglang on a GPU (these hosts have none): python -m sglang.launch_server."""
import argparse, json, os, signal, subprocess, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer

parser = argparse.ArgumentParser()
for flag in ('--model-path', '--load-format', '--json-model-override-args', '--tp-size', '--host', '--port',
             '--moe-runner-backend', '--fp4-gemm-backend'):
    parser.add_argument(flag)
parser.add_argument('--skip-tokenizer-init', action='store_true')
args = parser.parse_args()
assert args.skip_tokenizer_init and args.load_format == 'dummy'
json.load(open(os.path.join(args.model_path, 'config.json')))
mode = os.environ.get('STANDIN_MODE', 'ok')
nan = args.moe_runner_backend in os.environ.get('STANDIN_NAN_FOR', '').split(',')
with open(os.environ['STANDIN_PIDS'], 'a') as handle:
    handle.write('%d\n' % os.getpid())
if mode == 'hang':
    # a scheduler-like child, and both deaf to SIGTERM: only SIGKILL of the group ends them
    child = subprocess.Popen([sys.executable, '-c', 'import signal, time; signal.signal(signal.SIGTERM, '
                              'signal.SIG_IGN); time.sleep(600)'])
    with open(os.environ['STANDIN_PIDS'], 'a') as handle:
        handle.write('%d\n' % child.pid)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
print('stand-in: loading dummy weights with %s' % (args.moe_runner_backend,), flush=True)
started = time.time()


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *rest):
        pass

    def _send(self, status, body):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        ready = mode != 'hang' and time.time() - started > 0.2
        self._send(200 if self.path == '/health' and ready else 503, '')

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        batch = isinstance(body['input_ids'][0], list)
        outs = []
        for ids in body['input_ids'] if batch else [body['input_ids']]:
            count = body['sampling_params']['max_new_tokens']
            out = [(ids[-1] + 31 * step) % 1000 for step in range(count)]
            logprobs = [None if nan else -1.5 for dummy in out]
            outs.append({'output_ids': out, 'meta_info': {'output_token_logprobs': [[v, t, None] for v, t in zip(logprobs, out)]}})
        self._send(200, outs if batch else outs[0])


HTTPServer((args.host, int(args.port)), Handler).serve_forever()
'''


def _alive(pid):
    try:
        with open('/proc/%d/stat' % pid) as handle:
            return handle.read().rsplit(')', 1)[1].split()[0] not in ('Z', 'X')
    except (IOError, OSError):
        return False


@pytest.fixture
def stand_in(tmp_path):
    root = tmp_path / 'stand-in'
    (root / 'sglang').mkdir(parents=True)
    (root / 'sglang' / '__init__.py').write_text('')
    (root / 'sglang' / 'launch_server.py').write_text(STAND_IN)
    work = tmp_path / 'work'
    work.mkdir()
    config = sc.model_config({'model': 'qwen3-30b-a3b'})[0]
    setup = {'python': sys.executable, 'model_dir': sc.write_model_folder(str(work / 'model'), config),
             'override': sc.override_args(config), 'tp': 1, 'workdir': str(work), 'vocab': sc.vocab_size(config),
             'ready_timeout': 20, 'stop_grace': 1, 'request_timeout': 20, 'sglang_version': '0.5.23',
             'environ': dict(os.environ, PYTHONPATH=str(root), STANDIN_PIDS=str(tmp_path / 'pids'))}
    return setup, tmp_path / 'pids'


def test_a_server_that_serves_finite_varied_tokens_passes_and_is_stopped(stand_in):
    setup, pids = stand_in
    record = sc.attempt(setup, {'moe_runner': 'triton'})
    assert record['status'] == 'passed', record
    assert record['args'] == '--moe-runner-backend triton' and record['stopped'] == 'stopped'
    assert record['ready_seconds'] > 0 and record['tokens_per_second'] > 0 and record['log_tail'] == []
    assert not any(_alive(int(pid)) for pid in pids.read_text().split())


def test_a_timeout_stops_the_whole_process_group(stand_in):
    setup, pids = stand_in
    setup['environ']['STANDIN_MODE'] = 'hang'
    setup['ready_timeout'] = 2
    started = time.time()
    record = sc.attempt(setup, {'moe_runner': 'triton'})
    assert record['status'] == 'failed' and record['reason'].startswith('timeout: http://127.0.0.1:')
    assert 'did not answer 200 within 2 s (last: HTTP 503)' in record['reason']
    # deaf to SIGTERM: killed, the child too, and the failure carries the server's log
    assert record['stopped'] == 'killed after 1 s'
    server, child = [int(pid) for pid in pids.read_text().split()]
    assert not _alive(server) and not _alive(child)
    assert record['log_tail'] == ['stand-in: loading dummy weights with triton'] and time.time() - started < 15


def test_a_backend_served_nan_is_excluded_and_the_next_qualified_one_serves(stand_in):
    setup, pids = stand_in
    setup['environ']['STANDIN_NAN_FOR'] = 'flashinfer_cutlass'
    verdict = {'status': 'qualified', 'reason': None, 'checks': [], 'devices': [0]}
    qualification = {H200: {'moe_runner': {'flashinfer_cutlass': verdict, 'triton': verdict}}}
    choice = {'qualification': qualification, 'families': ['moe_runner']}
    result = sc.check(setup, {'moe_runner': 'flashinfer_cutlass'}, choice)
    assert result['status'] == 'passed' and result['flags'] == {'moe_runner': 'triton'}
    assert result['excluded'] == ['moe_runner flashinfer_cutlass']
    first, second = result['attempts']
    assert first['status'] == 'failed' and 'logprobs not finite' in first['reason']
    assert first['log_tail'] == ['stand-in: loading dummy weights with flashinfer_cutlass']
    assert second['status'] == 'passed'
    assert not any(_alive(int(pid)) for pid in pids.read_text().split())


# ---------------------------------------------------------------- the backends tried in turn


def _choice(*names, **extra):
    verdict = {'status': 'qualified', 'reason': None, 'checks': [], 'devices': [0]}
    qualification = {H200: {'moe_runner': dict((name, dict(verdict)) for name in names)}}
    return dict({'qualification': qualification, 'families': ['moe_runner']}, **extra)


def _runner(failing):
    calls = []

    def run(setup, flags):
        calls.append(dict(flags))
        args = backends.render_args(flags)
        if flags.get('moe_runner') in failing:
            return {'flags': flags, 'args': args, 'status': 'failed', 'reason': 'single 7 tokens: degenerate output',
                    'log_tail': ['x', 'scheduler: NaN in logits'], 'ready_seconds': 50.0, 'tokens_per_second': None}
        return {'flags': flags, 'args': args, 'status': 'passed', 'reason': None, 'log_tail': [],
                'ready_seconds': 61.5, 'tokens_per_second': 812.0}
    return run, calls


def test_the_next_qualified_backend_in_the_order_of_preference_is_tried():
    run, calls = _runner({'flashinfer_cutlass'})
    result = sc.check({}, {'moe_runner': 'flashinfer_cutlass'},
                      _choice('flashinfer_cutlass', 'flashinfer_trtllm', 'triton'), run=run)
    assert calls == [{'moe_runner': 'flashinfer_cutlass'}, {'moe_runner': 'flashinfer_trtllm'}]
    assert result['status'] == 'passed' and result['args'] == '--moe-runner-backend flashinfer_trtllm'
    assert result['ready_seconds'] == 61.5 and result['tokens_per_second'] == 812.0


def test_where_no_backend_is_left_the_host_fails_naming_each():
    run, calls = _runner({'flashinfer_cutlass', 'triton'})
    result = sc.check({}, {'moe_runner': 'flashinfer_cutlass'}, _choice('flashinfer_cutlass', 'triton'), run=run)
    assert result['status'] == 'failed' and result['flags'] is None and len(calls) == 2
    assert result['excluded'] == ['moe_runner flashinfer_cutlass', 'moe_runner triton']
    assert result['reason'] == (
        'no qualified backend served a request: '
        'tried --moe-runner-backend flashinfer_cutlass (single 7 tokens: degenerate output); '
        'server log: scheduler: NaN in logits; '
        'tried --moe-runner-backend triton (single 7 tokens: degenerate output); server log: scheduler: NaN in logits')


def test_a_required_backend_has_no_other_to_try():
    run, calls = _runner({'triton'})
    result = sc.check({}, {'moe_runner': 'triton'},
                      _choice('flashinfer_cutlass', 'triton', required={'moe_runner': 'triton'}), run=run)
    assert result['status'] == 'failed' and calls == [{'moe_runner': 'triton'}]


def test_a_skip_is_never_a_pass():
    record = sc.skipped('sglang is not installed in the venv')
    assert record['status'] == 'skipped' and record['args'] is None and record['reason']


def test_a_signal_to_the_module_ends_the_check_through_its_finally_blocks():
    # SIGTERM's default would end the process without the finally blocks that stop the server's group
    import signal as signals
    before = signals.getsignal(signals.SIGTERM)
    stopped = []
    with pytest.raises(sc.Ended) as ended:
        with sc.signals_end_the_check():
            try:
                os.kill(os.getpid(), signals.SIGTERM)
                time.sleep(5)
            finally:
                stopped.append(True)
    assert stopped == [True] and ended.value.code == 128 + signals.SIGTERM
    assert signals.getsignal(signals.SIGTERM) is before
