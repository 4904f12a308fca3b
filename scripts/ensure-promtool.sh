#!/usr/bin/env bash
# Makes sure that promtool is installed, for make test's check of the alert
# rules that ship in examples/monitoring/ (promtool check rules, promtool
# test rules). Debian's prometheus package has it; installing the package
# also starts a Prometheus server, which is stopped and disabled again here
# where systemd runs, since only promtool is wanted. Idempotent, and silent
# when promtool is installed.
set -euo pipefail

if command -v promtool >/dev/null 2>&1; then
	exit 0
fi

# shellcheck source=scripts/lib/ensure.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/ensure.sh"
ensure_installer ensure-promtool "promtool" "install Prometheus' promtool by hand"

echo "ensure-promtool: installing prometheus (for promtool) with apt-get" >&2
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
# policy-rc.d keeps the package's server from starting where invoke-rc.d
# honours it (containers, CI).
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 apt-get install -y --no-install-recommends prometheus >/dev/null
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
	"${sudo[@]}" systemctl disable --now prometheus >/dev/null 2>&1 || true
fi

if ! command -v promtool >/dev/null 2>&1; then
	echo "ensure-promtool: promtool still missing after installing prometheus" >&2
	exit 1
fi
