"""torch_verify with a model (options model, model_config, tp_size,
backend_*) against a real torch (the 2.13.0 CPU wheel) on localhost: the
model's shard shapes and families in the facts, every model check listed as
skipped with its reason on a host without a GPU (no flags derived, not a
failure), and bad input refused before the interpreter runs, naming the
variable."""
import json
import sys
import textwrap

from conftest import run_playbook

PLAYBOOK = textwrap.dedent("""\
    - name: torch_verify with a model
      hosts: localhost
      gather_facts: false
      tasks:
        - name: Verify
          gpufleet.inference.torch_verify:
            python: "{{ venv }}/bin/python"
            model: "{{ model }}"
            model_config: "{{ model_config | default(omit) }}"
            tp_size: "{{ tp }}"
            backend_preference: "{{ preference | default({}) }}"
          register: verified
          ignore_errors: true
        - name: Keep the result
          ansible.builtin.copy:
            content: "{{ verified | to_json }}"
            dest: "{{ out }}"
            mode: "0644"
          changed_when: false
    """)


def _run(torch_cpu_venv, tmp_path, name, **extra):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
                         "      ansible_python_interpreter: %s\n" % sys.executable)
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    out = tmp_path / ("%s.json" % name)
    result = run_playbook(playbook, inventory, extra_vars=dict(venv=torch_cpu_venv, out=str(out), **extra))
    assert result.rc == 0, result.out
    return json.loads(out.read_text())


def test_model_shapes_and_skips_on_a_host_without_gpu(torch_cpu_venv, tmp_path):
    data = _run(torch_cpu_venv, tmp_path, "qwen", model="qwen3-30b-a3b", tp=2)
    assert data.get("failed") is not True, data.get("msg")
    facts = data["ansible_facts"]["gpufleet_torch"]
    model = facts["model"]
    assert model["name"] == "qwen3-30b-a3b" and model["tp"] == 2 and model["precision"] == "none"
    assert model["families"] == ["moe_runner"]
    assert {g["layer"]: [g["n"], g["k"]] for g in model["shapes"]["gemms"]} == {
        "qkv": [2560, 2048], "o": [2048, 2048], "gate_up": [768, 2048], "down": [2048, 384]}
    assert [(e["check"], e["status"], e["reason"]) for e in facts["model_checks"]] == [
        ("model.gemm.bf16", "skipped", "no CUDA device"),
        ("moe.flashinfer_cutlass.bf16", "skipped", "flashinfer is not installed"),
        # sglang's own MoE runner, where sglang is in the venv (this venv holds torch alone)
        ("moe.triton.bf16", "skipped", "sglang is not installed")]
    backends = facts["backends"]
    assert backends["status"] == "skipped" and backends["reason"] == "no CUDA device" and backends["env"] is None


def test_bad_model_input_is_refused_before_the_interpreter_runs(torch_cpu_venv, tmp_path):
    data = _run(torch_cpu_venv, tmp_path, "tp3", model="qwen3-30b-a3b", tp=3)
    assert data["failed"] is True and data["probed"] is False
    assert data["msg"].startswith("gpufleet_tp_size: ") and "32" in data["msg"], data["msg"]

    broken = tmp_path / "model"
    broken.mkdir()
    (broken / "config.json").write_text('{"hidden_size": 40')
    data = _run(torch_cpu_venv, tmp_path, "broken", model=str(broken), tp=1)
    assert data["failed"] is True and data["probed"] is False
    assert data["msg"].startswith("gpufleet_model: ") and "config.json" in data["msg"], data["msg"]

    data = _run(torch_cpu_venv, tmp_path, "pref", model="mixtral-8x7b", tp=1,
                preference={"moe_runner": ["flashinfer_cutless"]})
    assert data["failed"] is True and data["probed"] is False
    assert "gpufleet_backend_preference" in data["msg"] and "flashinfer_cutless" in data["msg"], data["msg"]
