"""Hardening on a real sandbox host (sbx1): index credentials never reach the
output, the logs, the report or the host's files, on the way that works and
on the ways that fail; and what the roles write has the intended owner and
mode.

The credentials run deploy.yml against an isolated stable path (~/leak-env,
never ~/ml-env) with a random password planted in every place the roles take
one: torch_nightly_index_username/password, flashinfer index URLs with
user:token in them, an sgl-kernel git URL with a token. The index is a small
HTTP server on the host that serves the pushed wheelhouse only to requests
carrying exactly those credentials, so the successful run also proves that
the credentials still reach uv.
"""
import base64
import glob
import hashlib
import json
import os
import re
import secrets
import subprocess

import pytest

from conftest import ROOT, base_env, run_playbook, venv_bin

HOST = "sbx1"
DEPLOY = os.path.join(ROOT, "playbooks", "deploy.yml")
PORT = 18765
LOGIN = "gpufleet-leak"
SECRET = "leak" + secrets.token_hex(16)
# Server on the host: PEP 503 pages for the wheels in a folder, only with the
# right Basic credentials; it holds a digest of them, never the password.
INDEX_SERVER = r'''
import hashlib, http.server, os, re, shutil, sys, urllib.parse
port, wheels, digest, log = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
with open("server.pid", "w") as fh:
    fh.write("%d\n" % os.getpid())
def norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()
class Index(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self):
        self.do_GET(body=False)
    def do_GET(self, body=True):
        auth = self.headers.get("Authorization", "")
        ok = auth.startswith("Basic ") and hashlib.sha256(auth[6:].strip().encode()).hexdigest() == digest
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        with open(log, "a") as fh:
            fh.write("%s %s\n" % ("auth" if ok else "noauth", path))
        if not ok:
            self.send_response(401)
            self.send_header("WWW-Authenticate", 'Basic realm="gpufleet"')
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        page = re.match(r"^/simple/([^/]+)/?$", path)
        if page:
            files = sorted(f for f in os.listdir(wheels) if f.endswith(".whl") and norm(f.split("-")[0]) == norm(page.group(1)))
            if not files:
                self.send_error(404)
                return
            page_body = "".join('<a href="/files/%s">%s</a><br>\n' % (urllib.parse.quote(f), f) for f in files).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(page_body)))
            self.end_headers()
            if body:
                self.wfile.write(page_body)
            return
        name = os.path.join(wheels, os.path.basename(path))
        if not path.startswith("/files/") or not os.path.isfile(name):
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(os.path.getsize(name)))
        self.end_headers()
        if body:
            with open(name, "rb") as fh:
                shutil.copyfileobj(fh, self.wfile)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), Index).serve_forever()
'''


def host_shell(inventory, script, become=False):
    """Run a shell script on HOST; return (rc, stdout, stderr)."""
    argv = [venv_bin("ansible"), "-i", str(inventory), HOST, "-m", "ansible.builtin.shell", "-a", script]
    if become:
        argv.append("--become")
    env = base_env({"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json"})
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    try:
        result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"][HOST]
    except (ValueError, KeyError, IndexError):
        raise AssertionError("ansible on %s: %s %s" % (HOST, proc.stdout[-3000:], proc.stderr[-3000:]))
    return result.get("rc", 1), result.get("stdout", ""), result.get("stderr", "") + result.get("msg", "")


def ok_shell(inventory, script, become=False):
    rc, out, err = host_shell(inventory, script, become)
    assert rc == 0, (script, out, err)
    return out


@pytest.fixture(scope="module")
def deployed(sandbox, tmp_path_factory):
    """The sandbox with the stack deployed on HOST by this checkout's roles:
    deploy.yml on HOST (a no-op when it is deployed already)."""
    inventory = sandbox(3)
    reports = str(tmp_path_factory.mktemp("deploy-reports"))
    result = run_playbook(DEPLOY, inventory, extra_vars={"gpufleet_report_dir": reports}, limit=HOST)
    assert result.rc == 0, result.out[-6000:]
    return inventory


# ---------------------------------------------------------------- owner and mode

def test_deployed_files_have_the_intended_owner_and_mode(deployed):
    out = ok_shell(deployed, r"""
        set -e
        target=$(readlink -f ~/ml-env)
        echo "link $(stat -c '%U' ~/ml-env)"
        echo "target $(stat -c '%U %G %a' "$target")"
        echo "venv-not-deploy $(find "$target" ! -user deploy | wc -l)"
        echo "venv-world-writable $(find "$target" -perm -0002 ! -type l | wc -l)"
        echo "history $(stat -c '%U %a' ~/.ml-env.history)"
        echo "uv-prefix $(stat -c '%U %G %a' /opt/gpufleet /opt/gpufleet/uv /opt/gpufleet/uv/bin/uv | tr '\n' ' ')"
        echo "uv-not-root $(find /opt/gpufleet ! -user root | wc -l)"
        echo "uv-group-or-world-writable $(find /opt/gpufleet -perm /0022 ! -type l | wc -l)"
        echo "wheelhouse $(stat -c '%U' ~/.cache/gpufleet/wheelhouse)"
        echo "target-path $target"
    """)
    facts = dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    assert re.match(r"^/home/deploy/ml-env-[0-9a-f]{12}$", facts["target-path"]), facts
    assert facts["link"] == "deploy"
    owner, group, mode = facts["target"].split()
    assert (owner, group) == ("deploy", "deploy") and int(mode, 8) & 0o022 == 0, facts
    assert facts["venv-not-deploy"] == "0", facts
    assert facts["venv-world-writable"] == "0", facts
    hist_owner, hist_mode = facts["history"].split()
    assert hist_owner == "deploy" and int(hist_mode, 8) & 0o022 == 0, facts
    for entry in re.findall(r"(\S+ \S+ \d+)", facts["uv-prefix"]):
        owner, group, mode = entry.split()
        assert (owner, group) == ("root", "root") and int(mode, 8) & 0o022 == 0, facts
    assert facts["uv-not-root"] == "0", facts
    assert facts["uv-group-or-world-writable"] == "0", facts
    assert facts["wheelhouse"] == "deploy"


# ---------------------------------------------------------------- credentials

def leak_run(inventory, tmp, label, verbosity, extra):
    """deploy.yml on HOST into ~/leak-env with the planted credentials;
    returns the run and every file the controller wrote for it."""
    reports = os.path.join(tmp, label, "reports")
    log = os.path.join(tmp, label, "ansible.log")
    os.makedirs(reports)
    extra_vars = dict({
        "gpufleet_venv_link": "~/leak-env",
        "gpufleet_report_dir": reports,
        "torch_nightly_wheelhouse": "",
        "flashinfer_wheelhouse": "",
    }, **extra)
    # A vars file, as an inventory or vault would give them: not on the controller's command line.
    vars_file = os.path.join(tmp, label + ".vars.json")
    with open(vars_file, "w", encoding="utf-8") as fh:
        json.dump(extra_vars, fh)
    result = run_playbook(DEPLOY, inventory, limit=HOST, timeout=600, env={"ANSIBLE_LOG_PATH": log},
                          args=["-e", "@" + vars_file] + ([verbosity] if verbosity else []))
    return {"label": label, "result": result, "reports": reports, "log": log}


def index(port=PORT, auth=True):
    return "http://%s127.0.0.1:%d/simple" % ("%s:%s@" % (LOGIN, SECRET) if auth else "", port)


@pytest.fixture(scope="module")
def leak_runs(deployed, tmp_path_factory):
    inventory = deployed
    tmp = str(tmp_path_factory.mktemp("leak"))
    digest = hashlib.sha256(base64.b64encode(("%s:%s" % (LOGIN, SECRET)).encode())).hexdigest()
    ok_shell(inventory, "rm -rf ~/leak-env ~/leak-env-* ~/.leak-env.history /tmp/gpufleet-leak-index; "
                        "mkdir -m 0700 /tmp/gpufleet-leak-index")
    with open(os.path.join(tmp, "server.py"), "w", encoding="utf-8") as fh:
        fh.write(INDEX_SERVER)
    rc = subprocess.run([venv_bin("ansible"), "-i", str(inventory), HOST, "-m", "ansible.builtin.copy",
                         "-a", "src=%s dest=/tmp/gpufleet-leak-index/server.py mode=0600" % os.path.join(tmp, "server.py")],
                        cwd=ROOT, env=base_env(), capture_output=True, text=True, timeout=120, check=False)
    assert rc.returncode == 0, rc.stdout + rc.stderr
    ok_shell(inventory, "cd /tmp/gpufleet-leak-index && setsid -f python3 server.py %d ~/.cache/gpufleet/wheelhouse %s "
                        "/tmp/gpufleet-leak-index/requests.log </dev/null >server.out 2>&1; "
                        "for i in $(seq 50); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", %d), 1)' "
                        "2>/dev/null && exit 0; sleep 0.2; done; cat server.out; exit 1" % (PORT, digest, PORT))

    def sources(port, stack):
        """Every credential the roles take, for an index on port."""
        return {
            "gpufleet_stack": {"leak-test": stack},
            "torch_nightly_index_url": index(port, auth=False),
            "torch_nightly_index_username": LOGIN,
            "torch_nightly_index_password": SECRET,
            "flashinfer_index_urls": [index(port)],
            "flashinfer_default_index_url": index(port),
        }

    runs = []
    try:
        # Everything through the index that wants the credentials; -vvv shows every
        # command line, environment string and module argument ansible sends.
        runs.append(leak_run(inventory, tmp, "served-vvv", "-vvv", sources(PORT, "served-index")))
        # The install fails (nothing listens there), at the default verbosity and at -v.
        for verbosity in ("", "-v"):
            runs.append(leak_run(inventory, tmp, "unreachable%s" % verbosity, verbosity,
                                 dict(sources(1, "unreachable-index"), torch_nightly_extra_index_urls=[index(1)])))
        # torch and flashinfer are in place (the first run's venv): the sgl-kernel
        # clone from a URL with a token fails on the controller.
        runs.append(leak_run(inventory, tmp, "git-token-vvv", "-vvv", dict(
            sources(PORT, "served-index"),
            sgl_kernel_source="git",
            sgl_kernel_repo="https://x-access-token:%s@127.0.0.1:1/sgl-project/sglang.git" % SECRET,
            sgl_kernel_ref="3ec6e09487cbf7424f7875cb098860a2142666a3")))
    finally:
        requests_log = host_shell(inventory, "cd /tmp/gpufleet-leak-index && cat requests.log; "
                                             "kill $(cat server.pid) || true")[1]
    yield {"inventory": inventory, "runs": runs, "requests": requests_log, "tmp": tmp}
    host_shell(inventory, "rm -rf ~/leak-env ~/leak-env-* ~/.leak-env.history /tmp/gpufleet-leak-index")


def files_under(folder, limit=8 * 1024 * 1024):
    """(path, content) of the files under folder (binaries above limit left out)."""
    for path in glob.glob(os.path.join(folder, "**"), recursive=True):
        if os.path.isfile(path) and os.path.getsize(path) <= limit:
            with open(path, "rb") as fh:
                yield path, fh.read()


def test_the_served_run_used_the_credentials(leak_runs):
    served = leak_runs["runs"][0]
    assert served["result"].rc == 0, served["result"].out[-6000:]
    # uv sent the credentials (the server answers nothing without them) ...
    assert re.search(r"^auth /simple/torch/?$", leak_runs["requests"], re.M), leak_runs["requests"]
    assert re.search(r"^auth /files/torch-2\.13\.0\+cpu-", leak_runs["requests"], re.M), leak_runs["requests"]
    assert re.search(r"^auth /simple/flashinfer-python/?$", leak_runs["requests"], re.M), leak_runs["requests"]
    # ... and the -vvv output really shows the remote command lines and the index URL.
    out = served["result"].out
    assert "SSH: EXEC" in out and "127.0.0.1:%d/simple" % PORT in out
    link = ok_shell(leak_runs["inventory"], "readlink ~/leak-env")
    assert re.match(r"^/home/deploy/leak-env-[0-9a-f]{12}$", link.strip()), link


def test_the_failing_runs_failed_where_planted(leak_runs):
    by_label = {run["label"]: run for run in leak_runs["runs"]}
    # The sgl-kernel source is resolved by the preflight (or, before it, by the role's stage).
    for label, stages in (("unreachable", ["torch"]), ("unreachable-v", ["torch"]),
                          ("git-token-vvv", ["preflight", "sgl_kernel"])):
        run = by_label[label]
        assert run["result"].rc != 0, (label, run["result"].out[-4000:])
        with open(os.path.join(run["reports"], "fleet-report.json"), encoding="utf-8") as fh:
            row = {r["host"]: r for r in json.load(fh)["hosts"]}[HOST]
        assert row["status"] == "failed" and row["stage"] in stages, (label, row)


@pytest.mark.parametrize("label", ["served-vvv", "unreachable", "unreachable-v", "git-token-vvv"])
def test_no_credential_in_output_log_or_report(leak_runs, label):
    run = {r["label"]: r for r in leak_runs["runs"]}[label]
    assert SECRET not in run["result"].out
    assert os.path.getsize(run["log"]) > 0
    leaks = [path for folder in (os.path.dirname(run["log"]),) for path, data in files_under(folder)
             if SECRET.encode() in data]
    assert leaks == []


def test_no_credential_on_the_controller(leak_runs):
    """Fact cache, artifact and source caches, reports and venv freezes of the checkout."""
    folders = [os.path.join(ROOT, ".cache", name) for name in ("facts", "artifacts", "ansible-tmp")]
    folders += [os.path.join(ROOT, "reports")]
    leaks = [path for folder in folders for path, data in files_under(folder) if SECRET.encode() in data]
    assert leaks == []


def unquoted(secret):
    """A pattern that matches the secret but does not contain it: this grep's
    own command line is logged on the host (module invocations go to the
    journal), and must not be what it finds."""
    return "[%s]%s" % (secret[0], secret[1:])


def test_no_credential_on_the_host(leak_runs):
    """The deploy user's files (venvs, uv's cache, the wheelhouse, scratch
    directories), /tmp, /var/log and the journal, and no netrc left behind."""
    # Left out: files above 8 MiB (wheels, shared libraries) and torch's own
    # unpacked files (in the venvs and in uv's cache): credentials would be in
    # small text files (metadata, caches, configuration, scratch files).
    out = ok_shell(leak_runs["inventory"],
                   "find /home/deploy /tmp /var/log -type f -size -8M ! -path '/tmp/gpufleet-leak-index/*'"
                   " ! -path '*/site-packages/torch/*' ! -path '*/.cache/uv/archive-v0/*/torch/*' -print0 2>/dev/null"
                   " | xargs -0 -r grep -lE -- '%s' || true; "
                   "journalctl --no-pager 2>/dev/null | grep -cE -- '%s' || true; "
                   "find /tmp /home/deploy -name netrc -path '*gpufleet-netrc*' 2>/dev/null || true"
                   % (unquoted(SECRET), unquoted(SECRET)), become=True)
    assert out.strip() == "0", out
