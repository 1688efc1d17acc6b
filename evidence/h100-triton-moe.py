"""Helper of h100-triton-moe.sh: the probe torch_verify sends, with the real
sglang 0.5.23 stack on its path, at shipped profiles' shapes, then the host's
side of the verification: model_verify.judge (qualification, flags) and
verify_steps.serving_stack (sglang's server imports, the flags through its own
parser, what its auto would run), and the report's model cell and notes.

    python3 evidence/h100-triton-moe.py NAME MODEL TP [fp8-per-tensor] [fault]

fault: sglang's fused_experts is wrapped in the probe's interpreter before the
probe runs, its output NaN in rows 3-4 for M >= 129 and scaled by 1.5 for M = 7.
Writes $OUT/NAME.json and prints a summary.
"""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, '.collections')
from ansible_collections.gpufleet.inference.plugins.module_utils import model_profile, model_verify, verify_steps  # noqa: E402
from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import parse_probe_output  # noqa: E402
from ansible_collections.gpufleet.inference.plugins.module_utils.probe_program import probe_argv  # noqa: E402
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import format as report_format  # noqa: E402
from ansible_collections.gpufleet.inference.plugins.plugin_utils.report import sections  # noqa: E402

FAULT = '''
import os as _os
_fd = _os.dup(1)
_os.dup2(2, 1)  # whatever the import prints stays off the probe's JSON channel
import torch
import sglang.srt.layers.moe.moe_runner.triton_utils.fused_moe as _fm
_os.dup2(_fd, 1)
_os.close(_fd)
_real = _fm.fused_experts
def _planted(hidden_states, *args, **kwargs):
    rows = hidden_states.shape[0]
    out = _real(hidden_states, *args, **kwargs)
    if rows >= 129:
        out[3:5] = float('nan')
    elif rows == 7:
        out.mul_(1.5)
    return out
_fm.fused_experts = _planted
'''


class Host(object):
    """What verify_steps needs of an AnsibleModule: run_command and get_bin_path."""

    def run_command(self, argv, environ_update=None, errors='replace'):
        env = dict(os.environ, **(environ_update or {}))
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, errors=errors, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    def get_bin_path(self, name):
        return None


def main():
    name, model, tp = sys.argv[1], sys.argv[2], int(sys.argv[3])
    flags = sys.argv[4:]
    if 'fp8-per-tensor' in flags:
        config = dict(model_profile.PROFILES[model])
        config['quantization_config'] = {'quant_method': 'fp8', 'activation_scheme': 'dynamic', 'fmt': 'e4m3'}
        profile = model_profile.profile_from_config(config, name=model + ' (per-tensor FP8)')
        resolved = {'profile': profile, 'shapes': model_profile.shard_shapes(profile, tp)}
    else:
        resolved = model_profile.resolve(model, tp)
    profile = resolved['profile']
    precision = profile['quantization']['method']
    params = {'imports': ['sgl_kernel', 'flashinfer'], 'kernels': False, 'timeout': 900, 'packages': False,
              'markers': [], 'model_shapes': resolved['shapes'], 'model_precision': precision, 'model_jit': 'cache_only',
              'model_fp8_block': profile['quantization'].get('block')}
    argv = probe_argv(sys.executable, params, isolated=False)
    if 'fault' in flags:
        argv[-2] = FAULT + argv[-2]
    started = time.time()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    try:
        facts = parse_probe_output(proc.returncode, proc.stdout, 900)
    except Exception:
        print(proc.stderr[-4000:])
        raise
    probe_seconds = time.time() - started
    model_info = dict(resolved, name=profile['name'], precision=precision, tp=tp,
                      families=[f for f, need in model_verify.NEEDED if need(profile)])
    opts = {'mode': 'auto', 'timeout': 900, 'isolated': False, 'environment': {}, 'sglang_version': '0.5.23'}
    mismatches = model_verify.judge(model_info, facts, opts, True)
    started = time.time()
    ran = {'cmd': [sys.executable]}
    mismatches += verify_steps.serving_stack(Host(), opts, facts, ran, {'numeric': True, 'mask': None}, model_info)
    stack_seconds = time.time() - started
    print('%s: %s tp %d (%s), probe %.1f s, serving stack %.1f s'
          % (name, profile['name'], tp, precision, probe_seconds, stack_seconds))
    for entry in facts['model_checks']:
        print('  %-28s dev %s %-8s err %-9s tol %-5s %7ss  %s' % (
            entry['check'], entry['device'], entry['status'], entry.get('relative_error'), entry.get('tolerance'),
            entry.get('seconds'), (entry.get('reason') or '')[:300]))
    chosen = facts['backends']
    print('  backends: %s, flags %s' % (chosen['status'], chosen.get('args')))
    print('  flags_check: %s' % chosen.get('flags_check'))
    print('  sglang_auto: %s (%s)' % (chosen.get('sglang_auto'), chosen.get('sglang_auto_how')))
    for module_name in ('sglang', 'sglang.launch_server', 'sglang.srt.entrypoints.http_server', 'sgl_kernel', 'flashinfer'):
        entry = facts['imports'].get(module_name) or {}
        print('  import %-36s ok=%s %s %s'
              % (module_name, entry.get('ok'), entry.get('version'), entry.get('diagnosis') or entry.get('error') or ''))
    for mismatch in mismatches:
        print('  mismatch: %s' % mismatch)
    row = {'model': sections.read_model(facts)}
    print('  report cell: %s' % report_format.format_model(row))
    for note in report_format.kernel_notes(row):
        print('  report note: %s' % note)
    keep = ('model_checks', 'model_checks_error', 'backends', 'devices', 'imports', 'sglang', 'torch_version',
            'model')
    with open(os.path.join(os.environ['OUT'], name + '.json'), 'w') as handle:
        json.dump({'facts': dict((key, facts.get(key)) for key in keep), 'mismatches': mismatches,
                   'probe_seconds': probe_seconds, 'stack_seconds': stack_seconds}, handle, indent=1, sort_keys=True)
    if proc.returncode:
        print(proc.stderr[-3000:])


if __name__ == '__main__':
    main()
