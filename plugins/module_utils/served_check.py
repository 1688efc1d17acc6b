# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet.inference maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The served-request check: a request through sglang's own server, started
from the venv under test with the serving flags the kernel checks qualified.

The node's first users were served "!!!!" and NaN by a node that had passed
every import and kernel check; what they trusted in the end was a request
served by the real server with the backends named on its command line. This
file does that on the host, after the kernel checks, on idle GPUs only:

- the served model's own architecture - its config.json (the host's, the
  controller's gpufleet_model_config, or one written from a profile the
  collection ships) copied into a temporary model folder - reduced to a few
  layers through sglang's ``--json-model-override-args`` (experts, heads and
  hidden sizes kept), weights initialized by ``--load-format dummy``;
- ``--skip-tokenizer-init``: the hosts have no tokenizer files, so every
  request gives token ids (``input_ids``) and reads token ids back
  (``output_ids``);
- the configured tp on the first tp idle GPUs (CUDA_VISIBLE_DEVICES), on a
  free loopback port, in a process group of its own;
- a bounded wait for ``GET /health`` to answer 200 (sglang answers 503 while
  it starts), then REQUESTS through ``POST /generate``: single and batched
  prompts of odd lengths, greedy, with logprobs. A request passes only when
  every output token's logprob (``meta_info.output_token_logprobs``, entries
  ``[logprob, token_id, text]``) is a finite number - sglang writes its
  responses with orjson, which writes NaN and infinities as ``null`` - and no
  output is degenerate (one token repeated: the "!!!!" was token 0, argmax of
  NaN logits);
- the server's whole process group stopped (SIGTERM, then SIGKILL) and waited
  for, on a pass, a failure, a timeout or an error alike.

A backend whose served request fails is excluded and the next qualified one is
tried (backends.select over the qualification with the excluded backends
marked failed); where none is left, the host fails naming each attempt with
its flags and the server's last log lines.

sglang 0.5.23's interface, as read in its source: the flags are fields of
python/sglang/srt/arg_groups/fields/model.py (load_format with choice
``dummy``, json_model_override_args), serving.py (skip_tokenizer_init, host,
port) and parallel.py (tp_size), their flags derived from the field names
(arg_groups/arg_utils.py); the override is applied key by key onto the Hugging
Face config, a dict onto a sub-config such as text_config
(srt/utils/hf_transformers/config.py get_config); ``/health`` and
``/generate`` are srt/entrypoints/http_server.py's; the request's fields are
sglang.api.v1's GenerateRequest and SamplingParams (unknown sampling keys are
refused); the answer's output_ids and meta_info are built in
srt/managers/tokenizer_manager.py.

Standard library only: torch_verify runs it in the module's own process.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from http.client import HTTPException
from urllib.error import HTTPError, URLError

from ansible.module_utils.urls import open_url

from ansible_collections.gpufleet.inference.plugins.module_utils import backends, model_profile

CHOICES = ('auto', 'off')
# Layers the model is reduced to: enough for a layer to feed another, and
# (with first_k_dense_replace lowered) for a MoE layer to be among them.
LAYERS = 2
HOST = '127.0.0.1'
# Tokens each request generates (ignore_eos: always this many).
NEW_TOKENS = 16
# The fixed requests: (label, prompt lengths); one length is a single
# request, several a batch of one request each. Odd lengths on purpose: a
# kernel wrong for some batch sizes is wrong at one of these.
REQUESTS = (
    ('single 7 tokens', (7,)),
    ('single 129 tokens', (129,)),
    ('batch of 3 (1, 33, 65 tokens)', (1, 33, 65)),
    ('batch of 5 (3, 5, 17, 31, 127 tokens)', (3, 5, 17, 31, 127)),
)
# The prompt tokens are drawn from ids [FIRST_ID, min(vocab, LAST_ID)).
FIRST_ID = 100
LAST_ID = 30000
READY_POLL_SECONDS = 1.0
REQUEST_TIMEOUT = 300
STOP_GRACE_SECONDS = 20
LOG_TAIL_LINES = 20
# config.json fields kept as they are, whatever their value: what the kernels
# run at (the override changes the number of layers only).
KEPT = ('hidden_size', 'intermediate_size', 'moe_intermediate_size', 'num_attention_heads', 'num_key_value_heads',
        'head_dim', 'num_experts', 'num_local_experts', 'n_routed_experts', 'num_experts_per_tok')


class ServedCheckError(Exception):
    """Why the check could not be set up (the model's config.json, the folder)."""


# --- the model ---------------------------------------------------------------

def _text_config(config):
    """The dict that holds the language model's fields (config.json, or its text_config)."""
    text = config.get('text_config')
    return text if isinstance(text, dict) else config


def override_args(config, layers=LAYERS):
    """sglang's --json-model-override-args for config reduced to layers layers (a dict).

    num_hidden_layers becomes layers (where the model has more); a per-layer
    list (layer_types, a list as long as the model's layers) is cut to the
    layers kept; mlp_only_layers keeps the indexes below layers; a DeepSeek
    first_k_dense_replace is lowered so that a MoE layer is among them. A
    multimodal config.json's language model (text_config) is overridden
    inside it. Experts, heads and hidden sizes are never overridden."""
    text = _text_config(config)
    total = text.get('num_hidden_layers')
    if not isinstance(total, int) or isinstance(total, bool) or total < 1:
        raise ServedCheckError('config.json has no num_hidden_layers (a positive integer) to reduce')
    kept = min(layers, total)
    override = {'num_hidden_layers': kept}
    for key, value in sorted(text.items()):
        if isinstance(value, list) and len(value) == total and total > kept and key not in KEPT:
            override[key] = value[:kept]
    if isinstance(text.get('mlp_only_layers'), list) and text['mlp_only_layers']:
        override['mlp_only_layers'] = [index for index in text['mlp_only_layers']
                                       if isinstance(index, int) and index < kept]
    dense = text.get('first_k_dense_replace')
    if isinstance(dense, int) and not isinstance(dense, bool) and dense >= kept and kept > 1:
        override['first_k_dense_replace'] = kept - 1
    if text is not config:
        return {'text_config': override}
    return override


def vocab_size(config):
    """The vocabulary size (config.json or its text_config), or None."""
    for holder in (_text_config(config), config):
        value = holder.get('vocab_size')
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _load_json(path, what):
    try:
        with open(path, 'r') as handle:
            data = json.load(handle)
    except (IOError, OSError, ValueError) as exc:
        raise ServedCheckError('cannot read %s %s: %s' % (what, path, exc))
    if not isinstance(data, dict):
        raise ServedCheckError('%s %s is not a JSON object' % (what, path))
    return data


def model_config(params):
    """(config.json dict, hf_quant_config.json dict or None, where it came from) for
    the options model, model_config and model_quant_config."""
    model = params.get('model') or ''
    if params.get('model_config'):
        return dict(params['model_config']), params.get('model_quant_config') or None, 'gpufleet_model_config'
    if model in model_profile.PROFILES:
        config = dict((key, value) for key, value in model_profile.PROFILES[model].items() if key != 'source')
        return config, None, 'the shipped profile %s' % model
    path = os.path.expanduser(model)
    if os.path.isdir(path):
        path = os.path.join(path, 'config.json')
    config = _load_json(path, 'config.json')
    quant_path = os.path.join(os.path.dirname(path), 'hf_quant_config.json')
    quant = _load_json(quant_path, 'hf_quant_config.json') if os.path.isfile(quant_path) else None
    return config, quant, path


def write_model_folder(folder, config, quant=None):
    """A model folder sglang loads with --load-format dummy: config.json (and
    hf_quant_config.json where the model has one), no weights, no tokenizer."""
    os.makedirs(folder, mode=0o700)
    with open(os.path.join(folder, 'config.json'), 'w') as handle:
        json.dump(config, handle, indent=2, sort_keys=True)
    if quant:
        with open(os.path.join(folder, 'hf_quant_config.json'), 'w') as handle:
            json.dump(quant, handle, indent=2, sort_keys=True)
    return folder


# --- the server --------------------------------------------------------------

def server_argv(python, model_dir, args, tp, port, override):
    """sglang's command line: the venv's interpreter, the dummy-weight model
    reduced by override, token ids in and out, tp, the loopback port, then
    the serving flags (args: a list, as backends.render_args splits). A
    multimodal model (its override under text_config) serves its language
    model only: the model folder holds no processor files, which sglang
    would load at start for most multimodal architectures."""
    multimodal = ['--language-model-only'] if 'text_config' in override else []
    return [python, '-m', 'sglang.launch_server',
            '--model-path', model_dir,
            '--load-format', 'dummy',
            '--json-model-override-args', json.dumps(override, sort_keys=True, separators=(',', ':')),
            '--skip-tokenizer-init',
            '--tp-size', str(tp),
            '--host', HOST,
            '--port', str(port)] + multimodal + list(args)


def free_port(host=HOST):
    """A TCP port free on the loopback address now (the kernel's choice)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, 0))
        return sock.getsockname()[1]
    finally:
        sock.close()


def gpu_mask(use, tp):
    """(CUDA_VISIBLE_DEVICES for the first tp idle GPUs, their nvidia-smi indexes), or (None, reason)."""
    devices = use.get('devices')
    if not use.get('numeric') or not devices:
        return None, 'no idle GPU (mode %s)' % use.get('requested') if use.get('numeric') is False else 'no idle GPU'
    if len(devices) < tp:
        return None, 'tp %d needs %d idle GPUs, found %d (%s)' % (tp, tp, len(devices),
                                                                  ', '.join(str(index) for index in devices))
    chosen = list(devices[:tp])
    # nvidia-smi's indexes (with CUDA_DEVICE_ORDER=PCI_BUS_ID they are CUDA's), never UUIDs:
    # sglang 0.5.23 reads CUDA_VISIBLE_DEVICES as integers for tp 2 and more
    # (custom_all_reduce_utils.can_use_custom_all_reduce_with_nvlink, quick_all_reduce)
    return ','.join(str(index) for index in chosen), chosen


class Ended(SystemExit):
    """The module was told to end (SIGTERM, SIGHUP, SIGINT) while a server ran."""


@contextlib.contextmanager
def signals_end_the_check():
    """While the check runs, SIGTERM, SIGHUP and SIGINT raise Ended, so that the
    finally blocks stop the server's process group and remove the model folder:
    Python's default for SIGTERM and SIGHUP ends the process without them, and
    the server, in a session of its own, would keep the GPUs (an ssh session
    that drops, a job that is killed)."""
    def end(number, frame):
        raise Ended(128 + number)
    numbers = [signal.SIGTERM, signal.SIGHUP, signal.SIGINT]
    previous = dict((number, signal.signal(number, end)) for number in numbers)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def start(argv, environ, log_path):
    """The server, in a process group of its own, its output into log_path."""
    log = open(log_path, 'ab')
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=environ, start_new_session=True, close_fds=True)
    finally:
        log.close()


def _group_alive(pgid):
    """Whether a process of the group is left; a zombie (exited, not reaped yet) is not."""
    try:
        names = os.listdir('/proc')
    except OSError:
        names = None
    if names is None:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % name, 'rb') as handle:
                fields = handle.read().decode('ascii', 'replace').rsplit(')', 1)[1].split()
        except (IOError, OSError, IndexError):
            continue
        # after the command: state, ppid, pgrp
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ('Z', 'X'):
            return True
    return False


def stop(process, grace=STOP_GRACE_SECONDS):
    """Stop the server's whole process group: SIGTERM, then SIGKILL after grace
    seconds; wait until no process of the group is left (bounded). What was
    done, as a short sentence."""
    pgid = process.pid
    how = 'stopped'
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        how = 'had exited'
    deadline = time.time() + grace
    while time.time() < deadline:
        process.poll()
        if not _group_alive(pgid):
            break
        time.sleep(0.1)
    else:
        how = 'killed after %d s' % grace
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.time() + grace
        while _group_alive(pgid) and time.time() < deadline:
            process.poll()
            time.sleep(0.1)
        if _group_alive(pgid):
            how = 'still running after SIGKILL (process group %d)' % pgid
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        how = 'still running after SIGKILL (pid %d)' % pgid
    return how


def log_tail(log_path, lines=LOG_TAIL_LINES):
    """The log's last lines (a list of strings)."""
    try:
        with open(log_path, 'rb') as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - 16384))
            text = handle.read().decode('utf-8', 'replace')
    except (IOError, OSError):
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


def _http(method, url, body=None, timeout=10.0):
    """(status, parsed JSON or text) of one request; status None with the error where there was no answer."""
    data = None if body is None else json.dumps(body).encode('utf-8')
    headers = {'Content-Type': 'application/json'} if data is not None else None
    try:
        # loopback: never through a proxy the environment names
        response = open_url(url, data=data, method=method, headers=headers, timeout=timeout, use_proxy=False)
        status, raw = response.getcode(), response.read()
    except HTTPError as exc:
        status, raw = exc.code, exc.read()
    except (URLError, socket.timeout, OSError, HTTPException) as exc:
        # HTTPException: an answer cut short (IncompleteRead, BadStatusLine), as a server that dies mid-answer gives
        return None, str(getattr(exc, 'reason', exc)) or exc.__class__.__name__
    text = raw.decode('utf-8', 'replace')
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def wait_ready(process, url, timeout, poll=READY_POLL_SECONDS):
    """Seconds until GET url answered 200, or (None, why) where the server exited or timeout passed."""
    started = time.time()
    last = 'no answer yet'
    while time.time() - started < timeout:
        if process.poll() is not None:
            return None, 'the server exited with rc %s before %s answered 200' % (process.returncode, url)
        status, answer = _http('GET', url, timeout=min(10.0, max(1.0, timeout)))
        if status == 200:
            return round(time.time() - started, 3), None
        last = 'HTTP %s' % status if status is not None else answer
        time.sleep(poll)
    return None, 'timeout: %s did not answer 200 within %d s (last: %s)' % (url, timeout, last)


# --- the requests and their judgement ----------------------------------------

def prompt(length, vocab, seed):
    """A deterministic prompt of length token ids within the vocabulary."""
    top = max(FIRST_ID + 1, min(vocab or LAST_ID, LAST_ID))
    span = top - FIRST_ID
    return [FIRST_ID + (seed * 7919 + index * 104729) % span for index in range(length)]


def request_bodies(vocab, new_tokens=NEW_TOKENS):
    """[(label, body)] of REQUESTS: token ids, greedy, ignore_eos, logprobs."""
    bodies = []
    for number, (label, lengths) in enumerate(REQUESTS):
        prompts = [prompt(length, vocab, number * 10 + index + 1) for index, length in enumerate(lengths)]
        sampling = {'max_new_tokens': new_tokens, 'temperature': 0.0, 'ignore_eos': True}
        bodies.append((label, {'input_ids': prompts[0] if len(prompts) == 1 else prompts,
                               'sampling_params': sampling, 'return_logprob': True}))
    return bodies


def _is_finite(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def judge_output(output, expected_tokens):
    """The problems of one output of /generate ([] when it passes)."""
    if not isinstance(output, dict):
        return ['expected an object with output_ids and meta_info, found %s' % type(output).__name__]
    if output.get('error'):
        return ['the server answered an error: %s' % str(output['error'])[:300]]
    ids = output.get('output_ids')
    if not isinstance(ids, list) or not ids:
        return ['empty output (output_ids %s)' % json.dumps(ids)]
    problems = []
    if len(ids) != expected_tokens:
        problems.append('%d output tokens where %d were asked for (ignore_eos)' % (len(ids), expected_tokens))
    logprobs = (output.get('meta_info') or {}).get('output_token_logprobs')
    if not isinstance(logprobs, list) or len(logprobs) != len(ids):
        problems.append('meta_info.output_token_logprobs has %s entries for %d output tokens'
                        % (len(logprobs) if isinstance(logprobs, list) else 'no', len(ids)))
    else:
        bad = [index for index, entry in enumerate(logprobs)
               if not (isinstance(entry, (list, tuple)) and entry and _is_finite(entry[0]))]
        if bad:
            first = logprobs[bad[0]]
            value = first[0] if isinstance(first, (list, tuple)) and first else first
            problems.append('%d of %d logprobs not finite (first at token %d: %s; orjson writes NaN and inf as null)'
                            % (len(bad), len(logprobs), bad[0], json.dumps(value)))
    if len(ids) > 1 and len(set(ids)) == 1:
        problems.append('degenerate output: token %s repeated %d times' % (ids[0], len(ids)))
    return problems


def judge_answer(label, body, status, answer, new_tokens=NEW_TOKENS):
    """The problems of one request's answer, each prefixed with the request's label."""
    if status != 200:
        return ['%s: HTTP %s: %s' % (label, status, str(answer)[:300])]
    batch = isinstance(body['input_ids'][0], list)
    outputs = answer if batch else [answer]
    if batch and (not isinstance(answer, list) or len(answer) != len(body['input_ids'])):
        return ['%s: expected %d outputs, found %s' % (label, len(body['input_ids']),
                                                       len(answer) if isinstance(answer, list) else type(answer).__name__)]
    problems = []
    for index, output in enumerate(outputs):
        where = '%s, prompt %d' % (label, index + 1) if batch else label
        problems.extend('%s: %s' % (where, problem) for problem in judge_output(output, new_tokens))
    return problems


def send_requests(base_url, vocab, new_tokens=NEW_TOKENS, timeout=REQUEST_TIMEOUT):
    """(problems, output tokens, seconds) of REQUESTS sent one after the other."""
    problems = []
    tokens = 0
    seconds = 0.0
    for label, body in request_bodies(vocab, new_tokens):
        started = time.time()
        status, answer = _http('POST', base_url + '/generate', body, timeout=timeout)
        seconds += time.time() - started
        problems.extend(judge_answer(label, body, status, answer, new_tokens))
        for output in (answer if isinstance(answer, list) else [answer]) if status == 200 else []:
            if isinstance(output, dict) and isinstance(output.get('output_ids'), list):
                tokens += len(output['output_ids'])
    return problems, tokens, seconds


# --- one attempt, and the backends tried in turn ------------------------------

def attempt(setup, flags):
    """Serve the fixed requests once with flags ({family: backend}); the attempt's record:
    flags, args, status (passed / failed), reason, ready_seconds, tokens_per_second,
    log_tail (a failure's), stopped (how the server was stopped)."""
    args = backends.render_args(flags, setup['sglang_version'])
    record = {'flags': dict(flags), 'args': args, 'status': 'failed', 'reason': None, 'ready_seconds': None,
              'tokens_per_second': None, 'log_tail': [], 'stopped': None}
    port = setup.get('port') or free_port()
    log_path = os.path.join(setup['workdir'], 'server-%d.log' % len(os.listdir(setup['workdir'])))
    argv = server_argv(setup['python'], setup['model_dir'], args.split(), setup['tp'], port, setup['override'])
    record['argv'] = argv
    base = 'http://%s:%d' % (HOST, port)
    process = None
    try:
        process = start(argv, setup['environ'], log_path)
        ready, why = wait_ready(process, base + '/health', setup['ready_timeout'])
        if ready is None:
            record['reason'] = why
        else:
            record['ready_seconds'] = ready
            problems, tokens, seconds = send_requests(base, setup.get('vocab'), setup.get('new_tokens', NEW_TOKENS),
                                                      setup.get('request_timeout', REQUEST_TIMEOUT))
            record['tokens_per_second'] = round(tokens / seconds, 1) if seconds > 0 and tokens else None
            if problems:
                record['reason'] = '; '.join(problems[:6]) + ('; ...' if len(problems) > 6 else '')
            else:
                record['status'] = 'passed'
    except (OSError, ValueError) as exc:
        record['reason'] = 'the server could not be run: %s' % exc
    finally:
        if process is not None:
            record['stopped'] = stop(process, setup.get('stop_grace', STOP_GRACE_SECONDS))
    if record['status'] != 'passed':
        record['log_tail'] = log_tail(log_path)
    return record


def _excluding(qualification, excluded):
    """The qualification with each (family, backend) of excluded failed on every GPU model."""
    out = {}
    for gpu, families in qualification.items():
        out[gpu] = {}
        for family, per_backend in families.items():
            out[gpu][family] = {}
            for backend, verdict in per_backend.items():
                if (family, backend) in excluded:
                    verdict = dict(verdict, status='failed', reason='its served request failed')
                out[gpu][family][backend] = verdict
    return out


def next_flags(choice, flags, excluded):
    """After flags failed their served request: (the next flags, the (family, backend)
    excluded), or (None, None) where no other qualified backend is left. The backend
    excluded is that of the first family (backends.FAMILIES order) that has another
    qualified backend; choice: {qualification, families, preference, required}."""
    for family in sorted(flags, key=lambda name: backends.FAMILIES.index(name)
                         if name in backends.FAMILIES else len(backends.FAMILIES)):
        trial = set(excluded) | set([(family, flags[family])])
        selection = backends.select(_excluding(choice['qualification'], trial), choice['families'],
                                    choice.get('preference') or None, choice.get('required') or None)
        if not selection['problems'] and selection['flags'] != flags:
            return selection['flags'], (family, flags[family])
    return None, None


def describe(record):
    """One attempt in one line: its flags, what failed and the server's last log line."""
    text = '%s (%s)' % (record['args'] or 'no flags', record['reason'])
    if record.get('log_tail'):
        text += '; server log: %s' % record['log_tail'][-1][:240]
    return text


def check(setup, flags, choice, run=attempt):
    """The served check over the qualified backends: the flags first, then the next
    qualified backend after each failure. {'status': passed | failed, 'flags', 'args'
    (what served, None where nothing did), 'attempts', 'excluded', 'reason',
    'ready_seconds', 'tokens_per_second'}."""
    attempts = []
    excluded = []
    current = dict(flags)
    while current is not None:
        record = run(setup, current)
        attempts.append(record)
        if record['status'] == 'passed':
            return {'status': 'passed', 'flags': current, 'args': record['args'], 'attempts': attempts,
                    'excluded': ['%s %s' % pair for pair in excluded], 'reason': None,
                    'ready_seconds': record['ready_seconds'], 'tokens_per_second': record['tokens_per_second']}
        failed, (current, dropped) = current, next_flags(choice, current, excluded)
        if dropped is not None:
            excluded.append(dropped)
        else:
            # nothing else to try: the backends of the last flags are excluded as well
            excluded.extend(pair for pair in sorted(failed.items()) if pair not in excluded)
    reason = 'no qualified backend served a request: %s' % '; '.join(
        'tried %s' % describe(record) for record in attempts)
    return {'status': 'failed', 'flags': None, 'args': None, 'attempts': attempts,
            'excluded': ['%s %s' % pair for pair in excluded], 'reason': reason,
            'ready_seconds': None, 'tokens_per_second': None}


def skipped(why):
    """The record of a check that did not run: a skip is never a pass."""
    return {'status': 'skipped', 'reason': why, 'flags': None, 'args': None, 'attempts': [], 'excluded': [],
            'ready_seconds': None, 'tokens_per_second': None}


def prepare(params, python, environ, tp):
    """The setup of the check (a temporary folder holds the model and the server's logs; cleanup() removes it)."""
    config, quant, origin = model_config(params)
    override = override_args(config, params.get('served_layers') or LAYERS)
    workdir = tempfile.mkdtemp(prefix='gpufleet-served-')
    try:
        model_dir = write_model_folder(os.path.join(workdir, 'model'), config, quant)
    except (IOError, OSError) as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        raise ServedCheckError('cannot write the model folder: %s' % exc)
    return {'python': python, 'model_dir': model_dir, 'override': override, 'origin': origin, 'tp': tp,
            'environ': environ, 'workdir': workdir, 'vocab': vocab_size(config),
            'ready_timeout': params.get('served_timeout') or 600,
            'sglang_version': params.get('sglang_version') or backends.DEFAULT_SGLANG_VERSION}


def cleanup(setup):
    shutil.rmtree(setup['workdir'], ignore_errors=True)
