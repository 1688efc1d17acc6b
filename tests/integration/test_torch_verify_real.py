"""torch_verify against a real torch (the 2.13.0 CPU wheel that pip finds
through its own configuration), on localhost and on a sandbox host over SSH:
the facts must equal what the same interpreter prints about itself."""
import json
import os
import subprocess
import sys
import textwrap


from conftest import ROOT, TORCH, _must_run as _run, run_playbook

sys.path.insert(0, os.path.join(ROOT, ".collections"))
from ansible_collections.gpufleet.inference.plugins.module_utils import torch_probe  # noqa: E402
from ansible_collections.gpufleet.inference.plugins.module_utils.expectations import check_health  # noqa: E402


# Written independently of the probe: what the interpreter says about itself.
SELF_REPORT = textwrap.dedent("""\
    import json, sys, torch
    print(json.dumps({
        "python_executable": sys.executable,
        "python_version": "%d.%d.%d" % sys.version_info[:3],
        "torch_version": str(torch.__version__),
        "torch_git_version": torch.version.git_version,
        "torch_cuda_version": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "device_count": torch.cuda.device_count(),
        "cxx11_abi": torch.compiled_with_cxx11_abi(),
        "arch_list": torch.cuda.get_arch_list(),
        "cudnn_version": torch.backends.cudnn.version(),
    }))
    """)

PLAYBOOK = textwrap.dedent("""\
    - name: torch_verify against a real torch
      hosts: "{{ target }}"
      gather_facts: false
      tasks:
        - name: Verify the venv
          gpufleet.inference.torch_verify:
            python: "{{ venv }}/bin/python"
            imports: [json, gpufleet_no_such_module]
            expect:
              torch_version: "2.13.0"
              device_count: 0
              cxx11_abi: true
          register: verified

        - name: What the interpreter prints about itself
          ansible.builtin.command:
            argv: ["{{ venv }}/bin/python", "-c", "{{ self_report }}"]
          register: self_report_run
          changed_when: false
          check_mode: false

        - name: Keep both on the controller
          ansible.builtin.copy:
            content: "{{ {'verified': verified, 'facts': gpufleet_torch, 'self': self_report_run.stdout | from_json} | to_json }}"
            dest: "{{ out }}"
            mode: "0644"
          delegate_to: localhost
          check_mode: false
          changed_when: false  # the test's own scratch file, not host state
    """)

PREPARE = textwrap.dedent("""\
    - name: A venv with the torch CPU wheel, from wheels pushed by the controller
      hosts: "{{ target }}"
      gather_facts: false
      tasks:
        - name: Push the wheels
          ansible.builtin.copy:
            src: "{{ wheels }}/"
            dest: "{{ remote_wheels }}/"
            mode: "0644"
        - name: Create the venv
          ansible.builtin.command:
            argv: [python3, -m, venv, "{{ venv }}"]
            creates: "{{ venv }}/bin/python"
        - name: Install torch without any index
          ansible.builtin.command:
            argv: ["{{ venv }}/bin/pip", install, -q, --no-index, --find-links, "{{ remote_wheels }}", "{{ torch }}"]
            creates: "{{ venv }}/bin/torchrun"
    """)


def _verify(inventory, target, venv, tmp_path, check=False):
    playbook = tmp_path / "verify.yml"
    playbook.write_text(PLAYBOOK)
    out = tmp_path / ("facts-%s%s.json" % (target, "-check" if check else ""))
    result = run_playbook(playbook, inventory, check=check, extra_vars={
        "target": target, "venv": venv, "out": str(out), "self_report": SELF_REPORT})
    assert result.rc == 0, result.out
    assert result.stats[target]["failed"] == 0 and result.stats[target]["changed"] == 0, result.out
    return json.loads(out.read_text())


def _assert_facts_equal_self_report(data, venv):
    facts, own = data["facts"], data["self"]
    assert data["verified"]["changed"] is False
    assert data["verified"]["mismatches"] == []
    assert facts == data["verified"]["ansible_facts"]["gpufleet_torch"]
    for key in ("python_executable", "python_version", "torch_version", "torch_git_version",
                "torch_cuda_version", "cuda_available", "device_count", "cxx11_abi", "arch_list"):
        assert facts[key] == own[key], "%s: probe says %r, the interpreter says %r" % (key, facts[key], own[key])
    assert facts["cudnn_version"] is None and own["cudnn_version"] is None
    assert facts["python_executable"] == venv + "/bin/python"
    assert facts["torch_version"] == "2.13.0+cpu"
    assert facts["imports"]["json"]["ok"] is True
    assert facts["imports"]["gpufleet_no_such_module"]["ok"] is False
    assert facts["imports"]["gpufleet_no_such_module"]["error"].startswith("ModuleNotFoundError")
    assert 0 < facts["torch_import_seconds"] < facts["probe_seconds"]


def test_localhost_facts_equal_the_interpreter(torch_cpu_venv, tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: %s\n" % sys.executable)
    data = _verify(inventory, "localhost", torch_cpu_venv, tmp_path)
    _assert_facts_equal_self_report(data, torch_cpu_venv)
    # libcudart and nvcc are what this host's loader and CUDA_HOME really give.
    ldconfig = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False,
                              env=dict(os.environ, PATH=os.environ.get("PATH", "") + ":/sbin:/usr/sbin")).stdout
    assert [entry["path"] for entry in data["facts"]["libcudart"]] == [
        line.split("=>")[-1].strip() for line in ldconfig.splitlines() if line.strip().startswith("libcudart.so")]
    # Check mode gives the same facts and changes nothing.
    checked = _verify(inventory, "localhost", torch_cpu_venv, tmp_path, check=True)
    assert {k: v for k, v in checked["facts"].items() if not k.endswith("seconds")} == \
        {k: v for k, v in data["facts"].items() if not k.endswith("seconds")}


def test_sandbox_host_over_ssh_facts_equal_the_interpreter(sandbox, torch_cpu_wheels, tmp_path):
    inventory = sandbox(1)
    venv = "/home/deploy/gpufleet-torch-venv"
    prepare = tmp_path / "prepare.yml"
    prepare.write_text(PREPARE)
    result = run_playbook(prepare, inventory, limit="sbx1", extra_vars={
        "target": "sbx1", "wheels": torch_cpu_wheels, "remote_wheels": "/home/deploy/.cache/gpufleet/test-wheels",
        "venv": venv, "torch": TORCH})
    assert result.rc == 0, result.out
    data = _verify(inventory, "sbx1", venv, tmp_path)
    _assert_facts_equal_self_report(data, venv)
    assert data["facts"]["python_version"].startswith("3.11.")  # Debian 12's python3, not the controller's


# The smoke test's own code (torch_probe.smoke) on a real torch, with the CPU
# standing in for CUDA devices: the products, the fp32 reference, the finite
# check and the error are real torch; only device placement and timing are shimmed.
CPU_AS_CUDA = textwrap.dedent("""\
    import contextlib, json, sys, time, types
    sys.path.insert(0, sys.argv[1])
    import torch
    import torch_probe

    class Event:
        def __init__(self, enable_timing=False):
            self.t = None
        def record(self):
            self.t = time.perf_counter()
        def synchronize(self):
            pass
        def elapsed_time(self, other):
            return (other.t - self.t) * 1000.0

    poison = sys.argv[2] if len(sys.argv) > 2 else None
    real_matmul = torch.matmul
    def matmul(a, b, out=None):
        result = real_matmul(a, b) if out is None else real_matmul(a, b, out=out)
        if poison and result.dtype == getattr(torch, poison):
            result.view(-1)[7] = float("nan")
        return result

    cuda = types.SimpleNamespace(
        device_count=lambda: 2, device=lambda index: contextlib.nullcontext(), Event=Event,
        synchronize=lambda device=None: None, get_device_name=lambda index: "cpu%d" % index,
        empty_cache=lambda: None)
    shim = types.SimpleNamespace(
        cuda=cuda, backends=torch.backends, device=lambda kind, index: torch.device("cpu"),
        Generator=lambda device: torch.Generator(device="cpu"), randn=torch.randn, matmul=matmul,
        isfinite=torch.isfinite, bfloat16=torch.bfloat16, float16=torch.float16)
    print(json.dumps(torch_probe.smoke(shim, 192, 2, ["bfloat16", "float16"])))
    """)


def _smoke_on_cpu(torch_cpu_venv, *poison):
    out = _run([os.path.join(torch_cpu_venv, "bin", "python"), "-c", CPU_AS_CUDA,
                os.path.dirname(torch_probe.__file__)] + list(poison), timeout=300)
    return json.loads(out.strip().splitlines()[-1])


def test_smoke_math_on_real_torch(torch_cpu_venv):
    results = _smoke_on_cpu(torch_cpu_venv)
    assert [(r["device"], r["dtype"]) for r in results] == [
        (0, "bfloat16"), (0, "float16"), (1, "bfloat16"), (1, "float16")]
    for entry in results:
        assert entry["nonfinite"] == 0 and entry["tflops"] > 0
        # bf16 keeps 8 mantissa bits, fp16 11: the error against fp32 says which ran.
        assert 0 < entry["relative_error"] < (0.01 if entry["dtype"] == "bfloat16" else 0.002)
    facts = {"torch_importable": True, "smoke": results}
    assert check_health(facts, True, 0.02) == []

    poisoned = _smoke_on_cpu(torch_cpu_venv, "float16")
    assert [r["nonfinite"] for r in poisoned] == [0, 1, 0, 1]
    failures = check_health({"torch_importable": True, "smoke": poisoned}, True, 0.02)
    assert failures == [
        "smoke: expected finite float16 results on device 0 (cpu0), found 1 NaN/Inf values of 36864",
        "smoke: expected finite float16 results on device 1 (cpu1), found 1 NaN/Inf values of 36864"]
