#!/usr/bin/env python
"""What torch_verify costs on a host beyond a bare ``import torch`` probe.

A (torch_verify): the module as the host runs it, the AnsiballZ payload that
Ansible sends (built once here with ANSIBLE_KEEP_REMOTE_FILES), which starts
the interpreter under test with the probe.
B (bare): ``PYTHON -c "import torch; ..."`` printing the same torch facts
(versions, CUDA, devices and their properties, cuDNN, NCCL, ABI, arch list).

A and B run in turn (A B A B ...) after warm-up runs that are not counted; the
ratio A/B is taken pair by pair and its median printed, so a drift of the
machine's speed during the run moves both sides of a pair alike.
Goal: median ratio <= 1.10.

    bench/torch_verify_overhead.py --python ~/ml-env/bin/python [--runs 9] [--json out.json]
"""
import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BARE = (
    "import json, torch\n"
    "def nccl_version():\n"
    "    import torch.cuda.nccl as nccl\n"
    "    return str(nccl.version()) if torch.cuda.is_available() else None\n"
    "n = torch.cuda.device_count() if torch.cuda.is_available() else 0\n"
    "p = [torch.cuda.get_device_properties(i) for i in range(n)]\n"
    "print(json.dumps(dict(v=str(torch.__version__), g=torch.version.git_version, c=torch.version.cuda, n=n,\n"
    "  d=[(x.name, x.major, x.minor, x.total_memory, x.multi_processor_count) for x in p],\n"
    "  cudnn=torch.backends.cudnn.version(), abi=torch.compiled_with_cxx11_abi(),\n"
    "  arch=torch.cuda.get_arch_list(), nccl=nccl_version())))\n"
)


def build_payload(python, workdir):
    """The AnsiballZ file Ansible would run on the host for torch_verify."""
    remote_tmp = os.path.join(workdir, 'remote-tmp')
    env = dict(os.environ, ANSIBLE_KEEP_REMOTE_FILES='1', ANSIBLE_PIPELINING='0',
               ANSIBLE_REMOTE_TMP=remote_tmp, ANSIBLE_CONFIG=os.path.join(ROOT, 'ansible.cfg'))
    argv = [sys.executable, '-m', 'ansible', 'adhoc', 'localhost', '-i', 'localhost,', '-c', 'local',
            '-e', 'ansible_python_interpreter=%s' % sys.executable,
            '-m', 'gpufleet.inference.torch_verify', '-a', 'python=%s' % python]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    found = glob.glob(os.path.join(remote_tmp, '*', 'AnsiballZ_torch_verify.py'))
    if proc.returncode != 0 or not found:
        sys.exit('could not build the torch_verify payload (rc %s):\n%s%s' % (proc.returncode, proc.stdout, proc.stderr))
    payload = os.path.join(workdir, 'AnsiballZ_torch_verify.py')
    shutil.copy(found[0], payload)
    return payload


# Neither side needs PYTHONPATH (the payload carries its module_utils; the probe runs
# with -I): without it, an ansible-core installed by PYTHONPATH cannot slow the bare
# import torch with extra sys.path entries and flatter the ratio.
CLEAN_ENV = dict((key, value) for key, value in os.environ.items() if key not in ('PYTHONPATH', 'PYTHONHOME'))


def timed(argv):
    started = time.perf_counter()
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          env=CLEAN_ENV, check=False)
    return time.perf_counter() - started, proc.returncode, proc.stdout


def summary(values):
    return {'min': round(min(values), 4), 'median': round(statistics.median(values), 4), 'max': round(max(values), 4)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('--python', required=True, help='interpreter under test (with torch)')
    parser.add_argument('--runs', type=int, default=9)
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--json', help='also write the figures to this file')
    args = parser.parse_args()
    python = os.path.expanduser(args.python)

    workdir = tempfile.mkdtemp(prefix='torch-verify-bench-')
    try:
        payload = build_payload(python, workdir)
        module_cmd = [sys.executable, payload]
        bare_cmd = [python, '-c', BARE]

        # Both must work before anything is timed: a failing run is fast, not cheap.
        seconds, rc, out = timed(module_cmd)
        result = json.loads(out)
        facts = result.get('ansible_facts', {}).get('gpufleet_torch')
        if result.get('failed') or not facts or not facts.get('torch_importable'):
            sys.exit('torch_verify failed: %s' % result.get('msg'))
        seconds, rc, out = timed(bare_cmd)
        if rc != 0:
            sys.exit('the bare probe failed (rc %s)' % rc)

        for dummy in range(args.warmup):
            timed(module_cmd)
            timed(bare_cmd)
        module_s, bare_s, ratios = [], [], []
        for dummy in range(args.runs):
            a = timed(module_cmd)[0]
            b = timed(bare_cmd)[0]
            module_s.append(a)
            bare_s.append(b)
            ratios.append(a / b)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    report = {
        'python': python,
        'torch_version': facts['torch_version'],
        'device_count': facts['device_count'],
        'runs': args.runs,
        'torch_verify_seconds': summary(module_s),
        'bare_seconds': summary(bare_s),
        'ratio': summary(ratios),
        'goal': 1.10,
    }
    print('%-28s %8s %8s %8s' % ('', 'min', 'median', 'max'))
    for label, key in (('torch_verify (AnsiballZ) s', 'torch_verify_seconds'), ('bare python -c s', 'bare_seconds'),
                       ('ratio (pairwise)', 'ratio')):
        row = report[key]
        print('%-28s %8.3f %8.3f %8.3f' % (label, row['min'], row['median'], row['max']))
    print('torch %s, %d device(s), %d pairs: median ratio %.3f (goal <= %.2f)'
          % (facts['torch_version'], facts['device_count'], args.runs, report['ratio']['median'], report['goal']))
    if args.json:
        with open(args.json, 'w') as handle:
            json.dump(report, handle, indent=2, sort_keys=True)


if __name__ == '__main__':
    main()
