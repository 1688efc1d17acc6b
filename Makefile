# gpufleet.inference: the two commands a newcomer needs are `make deploy` and
# `make test`; both do all set-up themselves (controller venv, podman, the test
# image, the wheelhouse, the sandbox fleet).
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := $(CURDIR)/.venv
export PATH := $(VENV)/bin:$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
SANDBOX_HOSTS ?= 3
INVENTORY ?= inventories/sandbox
WHEELHOUSE := $(CURDIR)/.cache/wheelhouse
# The torch the tests use: pip finds it through its own configuration (a local
# wheel location on CI machines, the package index elsewhere).
TEST_TORCH ?= torch==2.13.0

.PHONY: help bootstrap bootstrap-dev lock test-hosts wheelhouse sandbox-up sandbox-down deploy verify \
        test test-quick lint sanity unit molecule integration build clean ee

help:
	@echo "make deploy        bring up the sandbox fleet and run playbooks/deploy.yml on it"
	@echo "make test          every test: lint, sanity, unit, molecule, fleet; prints 'N passed, N failed'"
	@echo "make test-quick    lint, sanity, unit and the uv_venv scenario (the edit-test loop, about 2.5 minutes)"
	@echo "make verify INVENTORY=inventories/cluster   fleet re-verification with a report"
	@echo "make sandbox-up SANDBOX_HOSTS=3 / make sandbox-down"
	@echo "make bootstrap     controller venv (.venv) with what running the collection needs"
	@echo "make bootstrap-dev and what developing it needs (make test installs both)"
	@echo "make ee            the execution environment image (localhost/gpufleet-ee:<version>) for AWX and ansible-runner"

# What running the collection needs (requirements/controller.txt); the
# targets that develop and test it add requirements/dev.txt and the checkout
# on the venv's import path (bootstrap-dev).
bootstrap: $(VENV)/.bootstrap-stamp

bootstrap-dev: bootstrap $(VENV)/.bootstrap-dev-stamp $(VENV)/.collections-path-stamp

# Re-runs in well under a second when the requirements did not change.
$(VENV)/.bootstrap-stamp: requirements/controller.txt requirements/controller.lock
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@echo "bootstrap: installing the pinned controller requirements into .venv"
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check \
	    -r requirements/controller.txt -c requirements/controller.lock
	@touch $@

$(VENV)/.bootstrap-dev-stamp: $(VENV)/.bootstrap-stamp requirements/dev.txt requirements/controller.lock
	@echo "bootstrap-dev: installing the pinned development requirements into .venv"
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check \
	    -r requirements/dev.txt -c requirements/controller.lock
	@touch $@

# The checkout's collection link (.collections, ansible.cfg's collections_path)
# on the controller venv's import path, as an installed collection would be:
# the tests and bench scripts import ansible_collections.gpufleet.inference.
# Only for developing: ansible scans the import path for collections too, so
# in a venv that runs the collection the checkout would shadow an installed
# copy (ansible-galaxy collection install -p: "Nothing to do", FQCN runs from
# the checkout). tools/fleet_verify.py puts its own copy first itself.
$(VENV)/.collections-path-stamp: $(VENV)/.bootstrap-stamp
	@$(VENV)/bin/python -c 'import site, sys; open(site.getsitepackages()[0] + "/gpufleet-checkout.pth", "w").write(sys.argv[1] + "\n")' '$(CURDIR)/.collections'
	@touch $@

lock: bootstrap-dev
	$(VENV)/bin/python -m pip freeze --exclude-editable > requirements/controller.lock

test-hosts:
	@scripts/test-hosts.sh

wheelhouse: $(WHEELHOUSE)/.stamp

# torch with its dependencies (the hosts install with no index), uv, and the
# project's own fixture wheels (flashinfer stand-ins, a package that wants
# another torch).
$(WHEELHOUSE)/.stamp: tests/fixtures/wheels/build_wheels.py
	@mkdir -p $(WHEELHOUSE)
	$(PYTHON) -m pip download -q --only-binary=:all: -d $(WHEELHOUSE) '$(TEST_TORCH)' uv==0.13.9 \
	    scikit-build-core==0.11.6 cmake==3.31.10 ninja==1.13.0 wheel==0.45.1
	$(PYTHON) tests/fixtures/wheels/build_wheels.py $(WHEELHOUSE) >/dev/null
	@touch $@

ee: bootstrap-dev test-hosts
	@scripts/ee.sh

sandbox-up: bootstrap test-hosts
	@$(VENV)/bin/python scripts/sandbox.py up --hosts $(SANDBOX_HOSTS)

sandbox-down:
	@$(VENV)/bin/python scripts/sandbox.py down

deploy: bootstrap test-hosts wheelhouse sandbox-up
	ansible-playbook -i inventories/sandbox playbooks/deploy.yml
	@echo "deploy: fleet report: $(CURDIR)/reports/fleet-report.md (also fleet-report.html, fleet-report.json)"

# make ends 2 on any failed recipe: cron and scripts that tell an unhealthy
# fleet (1) from a broken run (2) call tools/fleet_verify.py themselves.
verify: bootstrap
	$(VENV)/bin/python tools/fleet_verify.py -i $(INVENTORY) $(if $(LIMIT),--limit $(LIMIT))

# run-tests.sh makes test-hosts and wheelhouse itself, beside the first stages
# that need neither.
test: bootstrap-dev
	@scripts/run-tests.sh

# The edit-test loop: lint, changelog, sanity, unit and the uv_venv scenario, side by side.
test-quick: bootstrap-dev
	@scripts/run-tests.sh --quick

lint: bootstrap-dev
	ansible-lint

sanity: bootstrap-dev
	@scripts/sanity.sh

unit: bootstrap-dev
	pytest -q tests/unit

build: bootstrap
	ansible-galaxy collection build --force --output-path .cache/dist .

clean: sandbox-down
	rm -rf .cache reports
