# One command runner. `make test` is the README's test command: it installs what
# the tests need, then runs ruff, mypy (strict on the packages) and pytest.
# Everything Python runs from the project's own virtualenv (made by `make install`), so the set-up
# works where the system Python refuses pip installs (stock Debian 12, PEP 668).
VENV ?= .venv
export AGENTIHOOKS_VENV := $(VENV)
PYTHON ?= $(VENV)/bin/python
# The venv's console scripts (agentihooks, agentihooks-worker, lint-imports) come first on PATH.
export PATH := $(abspath $(VENV))/bin:$(PATH)
PYTEST_ARGS ?=

.PHONY: install control-plane node-binaries images fault-proxy lint typecheck pytest pytest-compat test bench clean demo evidence dist

install:
	./scripts/install-deps.sh

# etcd, kube-apiserver and kube-controller-manager for the integration tests: from $$KUBEBUILDER_ASSETS,
# or built once with Go into ~/.cache/agentihooks/control-plane (see docs/development.md).
# The compatibility tier's control plane is built (or found) the same way at COMPAT_KUBE_VERSION.
control-plane:
	./scripts/control-plane.sh
	AGENTIHOOKS_KUBE_VERSION=$(COMPAT_KUBE_VERSION) ./scripts/control-plane.sh

# kubelet, kube-scheduler and kube-proxy for the real-node tier (tests/testsupport/realnode.py), built once
# like the control plane; only where that tier can run (root).
node-binaries:
	@if [ "$$(id -u)" = 0 ]; then ./scripts/node-binaries.sh; else echo "not root: the real-node tier will be skipped"; fi

# The operator and worker images, built here from deploy/Dockerfile.* with buildah FROM a local Debian base,
# cached by a hash of their inputs (scripts/images.sh); the real node runs them. Only as root, like the node.
images:
	@if [ "$$(id -u)" = 0 ]; then ./scripts/images.sh >/dev/null; else echo "not root: the real-node tier will be skipped"; fi

# toxiproxy-server, the TCP fault proxy of the fault campaign (partitions and latency between each operator
# replica and Redis / the API server), built once with Go into ~/.cache/agentihooks (scripts/fault-proxy.sh).
fault-proxy:
	./scripts/fault-proxy.sh >/dev/null

lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(VENV)/bin/lint-imports --config pyproject.toml

typecheck:
	$(PYTHON) -m mypy

pytest:
	$(PYTHON) -m pytest $(PYTEST_ARGS)

# The oldest Kubernetes minor the chart accepts (Chart.yaml's kubeVersion) and docs/install.md claims:
# after the whole suite on the pinned version, the tests of everything the operator and the chart ask of
# the API server (CRD schema and CEL rules, RBAC, the garbage collector, Pod Security, helm install,
# upgrade and uninstall, recovery on the real API server) run again on a control plane of this version.
COMPAT_KUBE_VERSION ?= v1.30.14
COMPAT_TESTS = tests/integration/compat \
	tests/integration/operator/test_spec_validation.py tests/integration/operator/test_ready_condition.py \
	tests/integration/operator/test_escalation_probe.py tests/integration/operator/test_two_namespaces.py \
	tests/integration/operator/test_failure_reasons.py tests/integration/operator/test_replicas.py \
	tests/integration/operator/test_ownership.py tests/integration/operator/test_lost_launch_real.py \
	tests/integration/operator/test_decisions_real.py tests/integration/operator/test_pod_template.py \
	tests/integration/chart/test_helm_install_real.py tests/integration/chart/test_crd_upgrade.py \
	tests/integration/chart/test_uninstall_real.py tests/integration/chart/test_operator_boots_from_chart.py \
	tests/integration/chart/test_crd_explain.py

pytest-compat:
	AGENTIHOOKS_KUBE_VERSION=$(COMPAT_KUBE_VERSION) $(PYTHON) -m pytest $(COMPAT_TESTS)

test: install control-plane node-binaries images fault-proxy lint typecheck pytest pytest-compat

bench:
	@for b in bench/*.py; do echo "== $$b"; $(PYTHON) $$b || exit 1; done

clean:
	rm -rf build dist *.egg-info .mypy_cache .ruff_cache $(VENV)

# Release artefacts in dist/: the wheel and sdist (built from this venv's setuptools, the wheel from the
# sdist, so a file missing from the sdist fails here) and the packaged Helm chart (docs/development.md,
# "Releasing"). The pinned helm is the one install-deps.sh installs.
HELM ?= $(or $(AGENTIHOOKS_TOOLS_DIR),$(HOME)/.cache/agentihooks-tools)/bin/helm
DIST ?= dist
dist: install
	rm -rf $(DIST)
	$(PYTHON) -m build --no-isolation --outdir $(DIST) .
	$(HELM) package charts/agentihooks-recovery --destination $(DIST)

# The README's main command: the whole product on this machine, no cluster (DEMO_ARGS=--keep to explore).
DEMO_ARGS ?=
demo: install
	$(PYTHON) -m agentihooks_demo.main $(DEMO_ARGS)

# The live evidence record of SV2-CKP-05, produced by a run (never written by hand).
evidence: install
	$(PYTHON) -m agentihooks_demo.main --evidence evidence/SV2-CKP-05/result.json
