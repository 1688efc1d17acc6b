"""requirements/: what running the collection needs (controller.txt, `make
bootstrap`) apart from what developing it needs (dev.txt, `make test`), every
package pinned, and both resolved together in controller.lock."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REQ = os.path.join(ROOT, "requirements")
PIN = re.compile(r"^([A-Za-z0-9_.-]+)(\[[a-z,]+\])?==([0-9][0-9A-Za-z.+-]*)$")
# tools that only build, lint or test the collection
DEV_ONLY = {"molecule", "molecule-plugins", "ansible-lint", "pytest", "antsibull-changelog", "prometheus-client", "ansible"}


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(name):
    out, includes = {}, []
    with open(os.path.join(REQ, name), encoding="utf-8") as fh:
        for line in fh:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("-r "):
                includes.append(line[3:].strip())
                continue
            match = PIN.match(line)
            assert match, "%s: %r is not pinned with ==" % (name, line)
            out[_norm(match.group(1))] = match.group(3)
    return out, includes


def test_running_needs_no_development_tool():
    run, includes = pins("controller.txt")
    assert includes == []
    assert {"ansible-core", "ansible-runner"} <= set(run)
    assert not set(run) & DEV_ONLY, "development tools in controller.txt: %s" % sorted(set(run) & DEV_ONLY)


def test_development_adds_to_running_and_the_lock_resolves_both():
    run, dummy = pins("controller.txt")
    dev, includes = pins("dev.txt")
    assert includes == ["controller.txt"]
    assert DEV_ONLY - {"ansible"} <= set(dev)
    assert not set(run) & set(dev), "listed twice: %s" % sorted(set(run) & set(dev))
    lock, dummy = pins("controller.lock")
    for name, version in dict(run, **dev).items():
        assert lock.get(name) == version, "%s==%s is %s in controller.lock" % (name, version, lock.get(name))
