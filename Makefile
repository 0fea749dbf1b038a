# Entry points of jupyterhub-mlplatform. `make demo` and `make test` work on a fresh clone.
#
#   make demo          local JupyterHub on http://127.0.0.1:$(DEMO_PORT) (prints the password)
#   make demo-kube     the Kubernetes runtime on one machine (a demonstration, not a cluster): the tests'
#                      control plane and process-mode kubelet with declared GPU/MIG nodes, CoreDNS, the real
#                      Training Operator and Katib, JupyterHub with PlatformSpawner on the same port (as root)
#   make test          all tiers (unit, local, kube, hub, browser), one after another, timed (the first
#                      run builds the Kubernetes control plane from Go modules: make cluster);
#                      fails if any tier fails or collects no tests
#   make test-<tier>   one tier: test-unit, test-local, test-kube, test-hub, test-browser
#   make bench         benchmarks: spawn cost on the real API server, PlatformSpawner vs KubeSpawner;
#                      GPUs shared under contention, Kueue vs quota refusal;
#                      the same job on Training Operator v1 and Trainer v2 (first pod, first log line);
#                      job log streaming (SSE) of a 100 MB log; local sweep trials vs the bare script;
#                      notebook widget traffic (10 running jobs; a 100 MB log into a JobDetail);
#                      submit → first log line in the JupyterLab panel beside the widget; the
#                      panel with 1,000 jobs and a 40 MB log (render, update, heap, long tasks);
#                      a 40 MB and a 100 MB log streamed by the server into the panel's viewer;
#                      the operator's webhook latency under 50 concurrent creations beside none;
#                      dataset loader throughput vs a plain copy (S3, GCS emulators); operator
#                      memory and API requests at 1000 dataset PVCs; 20 pods held for a dataset: Loaded
#                      to Running, beside pods never held; 10 writable copies of a dataset beside 10 loads
#                      real Katib: sweep creation -> first trial pod Running beside the local
#                      Optuna sweep, and status of a sweep with real Trials; the hub's /hub/metrics
#                      with 1,000 running servers beside JupyterHub's own metrics alone
#
# PYTEST_ARGS passes extra options to pytest, e.g. `make test-hub PYTEST_ARGS=-x` (`PYTEST_ARGS=-n0`: one
# process for the tiers that otherwise run on every core, see XDIST below).

SHELL := /bin/bash
PYTHON3 ?= python3
VENV := .venv
PY := $(VENV)/bin/python
TIERS := unit local kube hub browser
DEMO_PORT ?= 8000
PYTEST_ARGS ?=
# pytest-xdist per tier (empty: one process): the local tier's tests spread over every core. The unit tier
# too: 33 s in two processes against 49 s in one on the 2-core machine (each worker collects for ~12 s).
XDIST.unit := -n auto
XDIST.local := -n auto
# The hub tier too (each worker starts its own control plane, hub and servers, so at most 4 of them):
# 532 s in one process on the quiet 2-core machine; 331 s and 459 s in two while helpers ran builds. A module's
# tests run on one worker (--dist loadscope): a module-scoped hub (test_login, test_jobs_api_hub) starts once.
XDIST.hub := -n auto --maxprocesses 4 --dist loadscope
# The kube tier too (a control plane, CoreDNS and Training Operator per worker; its tests mostly wait on
# controllers): 765 s in one process at cfb7698; 541 s under -n 2 while a Go build shared the 2 cores. A
# module's tests run on one worker (--dist loadscope), so a module's controllers (Katib, Kueue, Trainer v2)
# start once, not on each worker its tests were spread over.
XDIST.kube := -n auto --maxprocesses 4 --dist loadscope
# The browser tier too (each test starts its own hub or notebook server and Chromium; they mostly wait):
# 380 s in one process, 263-282 s in two (four runs) on the 2-core machine. A module's tests run on one
# worker (--dist loadscope): tests/browser/test_demo_kube.py's three tests share one `make demo-kube`.
XDIST.browser := -n auto --maxprocesses 4 --dist loadscope
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test $(addprefix test-,$(TIERS)) bench chromium venv cluster labextension controllers dnsutils postgresql nftables

# The tests' Kubernetes control plane (kube-apiserver, kube-controller-manager, kube-scheduler, etcd),
# built from the Go module proxy by tests/cluster/build.sh; rebuilt only when its module changes.
CLUSTER := tests/cluster/bin/.stamp
cluster: $(CLUSTER) nftables

$(CLUSTER): tests/cluster/go.mod tests/cluster/go.sum tests/cluster/main.go tests/cluster/build.sh
	bash tests/cluster/build.sh
	touch $@

# The real Kubeflow controllers the kube tier runs (Training Operator v1.9.4; Trainer v2.3.0 and JobSet
# v0.12.0; Katib v0.19.0's Go
# parts) and the test cluster's DNS server (CoreDNS), built from the Go module proxy by
# tests/controllers/build.sh (about 10 minutes on 2 cores with cold Go caches, seconds when warm).
CONTROLLERS := tests/controllers/bin/.stamp
KATIB_PYTHON := tests/controllers/bin/katib-python/.stamp
controllers: $(CONTROLLERS) $(KATIB_PYTHON) dnsutils postgresql nftables

$(CONTROLLERS): tests/controllers/build.sh $(wildcard tests/controllers/*/go.mod tests/controllers/*/go.sum \
                tests/controllers/*/*.go tests/controllers/*/*/*.go)
	bash tests/controllers/build.sh
	touch $@

# Katib's Python services (skopt, hyperopt, optuna, hyperband, medianstop), each in a virtual
# environment of its own from its own requirements.txt (PyPI), from the Katib module's source
# (tests/controllers/build_python.sh; about a minute with a warm pip cache, 1.4 GB).
$(KATIB_PYTHON): tests/controllers/build_python.sh $(CONTROLLERS)
	bash tests/controllers/build_python.sh
	touch $@

# `nslookup` for the Training Operator's released init container (`init-pytorch`, alpine's
# `nslookup <master>`; the test kubelet runs it with the host's tools); installed only when missing.
dnsutils:
	@if ! command -v nslookup >/dev/null; then \
	  set -e; \
	  $(SUDO) apt-get update; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y bind9-dnsutils; \
	fi

# `nft` for the test cluster's NetworkPolicy enforcement (tests/cluster/netpol.py: the pods' traffic
# filtered by nftables rules derived from the policies); installed only when missing.
nftables:
	@if ! command -v nft >/dev/null; then \
	  set -e; \
	  $(SUDO) apt-get update; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y nftables; \
	fi

# Debian's PostgreSQL for Katib's db-manager (tests/controllers/katib_system.py runs it as `nobody`
# in the session's temporary directory); installed only when no server binary is there.
postgresql:
	@if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then \
	  set -e; \
	  $(SUDO) apt-get update; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y postgresql; \
	fi

venv: $(VENV)/.stamp

# Re-run only when pyproject.toml changes.
$(VENV)/.stamp: pyproject.toml
	$(PYTHON3) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	SKIP_JUPYTER_BUILDER=1 $(PY) -m pip install -e '.[test]'  # the panel: $(LABEXT) below
	touch $@

# Project-local configurable-http-proxy (node_modules/.bin); updates package-lock.json.
node_modules/.stamp: package.json
	npm install --no-audit --no-fund
	touch $@

# The JupyterLab panel (labextension/): npm packages from its lockfile, then the prebuilt extension
# in build/labextension (what the wheel carries: pyproject's shared-data), linked into the venv's
# share/jupyter/labextensions (an editable install carries no shared data). Rebuilt when a source changes.
LABEXT := $(VENV)/.labextension-stamp
LABEXT_SRC := $(wildcard labextension/src/*.ts labextension/style/* labextension/schema/*.json) \
	labextension/package.json labextension/tsconfig.json labextension/install.json
labextension: $(LABEXT)

labextension/node_modules/.stamp: labextension/package.json labextension/package-lock.json
	cd labextension && nice -n 10 npm ci --no-audit --no-fund
	touch $@

build/labextension/package.json: labextension/node_modules/.stamp $(LABEXT_SRC)
	cd labextension && nice -n 10 npm run build:prod
	touch $@

$(LABEXT): $(VENV)/.stamp build/labextension/package.json
	mkdir -p $(VENV)/share/jupyter/labextensions
	rm -rf $(VENV)/share/jupyter/labextensions/jupyterhub-mlplatform
	ln -s $(CURDIR)/build/labextension $(VENV)/share/jupyter/labextensions/jupyterhub-mlplatform
	touch $@

# Debian's Chromium for the browser tier; installed only when missing.
chromium:
	@if [ ! -x /usr/bin/chromium ]; then \
	  set -e; \
	  $(SUDO) apt-get update; \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y chromium; \
	fi

demo: $(VENV)/.stamp node_modules/.stamp $(LABEXT)
	DEMO_PORT=$(DEMO_PORT) exec $(VENV)/bin/mlplatform demo

# tests/harness/demo_kube.py: built from the tests' infrastructure; Ctrl-C stops every part of it.
.PHONY: demo-kube
demo-kube: $(VENV)/.stamp node_modules/.stamp $(LABEXT) $(CLUSTER) controllers
	exec $(PY) -m tests.harness.demo_kube --port $(DEMO_PORT)

test: $(VENV)/.stamp node_modules/.stamp $(LABEXT) chromium $(CLUSTER) controllers
	@failed=""; $(foreach t,$(TIERS),xdist_$(t)='$(XDIST.$(t))';) \
	for tier in $(TIERS); do \
	  start=$$(date +%s); eval "xdist=\$$xdist_$$tier"; \
	  $(PY) -m pytest -m $$tier $$xdist --durations=15 $(PYTEST_ARGS); rc=$$?; \
	  echo "tier $$tier: $$(( $$(date +%s) - start )) s (exit $$rc)"; \
	  [ $$rc -eq 0 ] || failed="$$failed $$tier(exit $$rc)"; \
	done; \
	if [ -n "$$failed" ]; then echo "FAILED tiers:$$failed; exit 1 = a test failed, 5 = none collected"; exit 1; fi

test-unit: $(VENV)/.stamp
	$(PY) -m pytest -m unit $(XDIST.unit) $(PYTEST_ARGS)

test-local: $(VENV)/.stamp $(LABEXT)
	$(PY) -m pytest -m local $(XDIST.local) $(PYTEST_ARGS)

test-kube: $(VENV)/.stamp node_modules/.stamp $(CLUSTER) controllers
	$(PY) -m pytest -m kube $(XDIST.kube) $(PYTEST_ARGS)

test-hub: $(VENV)/.stamp node_modules/.stamp $(CLUSTER) nftables
	$(PY) -m pytest -m hub $(XDIST.hub) $(PYTEST_ARGS)

test-browser: $(VENV)/.stamp node_modules/.stamp $(LABEXT) chromium $(CLUSTER) controllers
	$(PY) -m pytest -m browser $(XDIST.browser) $(PYTEST_ARGS)

bench: $(VENV)/.stamp $(CLUSTER) $(LABEXT) chromium controllers
	$(PY) -m tests.bench.spawn --spawns 64
	$(PY) -m tests.bench.contention --jobs 120 --spawns 20
	$(PY) -m tests.bench.trainer_v1_v2 --rounds 5
	$(PY) -m tests.bench.jobs_list --jobs 5000 --calls 200
	$(PY) -m tests.bench.sweep_status --trials 1000 --calls 200 --changes 50
	$(PY) -m tests.bench.katib_sweep --rounds 5 --trials 40 --parallel 8 --calls 200
	$(PY) -m tests.bench.katib_algorithms --trials 12 --parallel 3
	$(PY) -m tests.bench.idle_lists --seconds 60 --watch-timeout 10
	$(PY) -m tests.bench.sse_logs --mb 100
	$(PY) -m tests.bench.local_trials --trials 10 --seconds 1
	$(PY) -m tests.bench.widget_traffic --jobs 10 --seconds 20 --mb 100
	$(PY) -m tests.bench.login_ready --rounds 5
	$(PY) -m tests.bench.submit_first_log --rounds 10
	$(PY) -m tests.bench.panel_first_log --rounds 10 --skip-directory-uri
	$(PY) -m tests.bench.panel_load --jobs 1000 --mb 40
	$(PY) -m tests.bench.panel_log_stream --mb 40 100
	$(PY) -m tests.bench.operator_webhooks --pods 50 --rounds 3
	$(PY) -m tests.bench.dataset_loader --objects 1000 --mb 100 --rounds 3
	$(PY) -m tests.bench.operator_datasets --pvcs 1000
	$(PY) -m tests.bench.held_pods --pods 20
	$(PY) -m tests.bench.dataset_copies --copies 10
	$(PY) -m tests.bench.hub_metrics --servers 1000 --scrapes 50
