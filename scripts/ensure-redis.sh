#!/usr/bin/env bash
# Makes sure redis-server and redis-cli are on PATH, with the tools the
# integration tests drive them with (flock, unshare and script, from
# util-linux and bsdutils) and systemd-analyze, which checks the systemd unit
# in scripts/ (from the systemd package, which installs without taking over
# the machine: it is systemd-sysv that makes systemd PID 1), installing
# Debian's packages if they are not. The
# integration tests and the demo start their own throwaway redis-server, so
# nothing is started here. Idempotent, and silent when all are installed.
set -euo pipefail

# shellcheck source=scripts/lib/ensure.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/ensure.sh"
if have_commands redis-server redis-cli flock unshare script systemd-analyze; then
	exit 0
fi
ensure_installer ensure-redis "redis-server, redis-cli, flock, unshare, script or systemd-analyze" "install Redis by hand"

echo "ensure-redis: installing redis-server, util-linux, bsdutils and systemd with apt-get" >&2
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server util-linux bsdutils systemd >/dev/null

# The Debian package starts a system redis-server on port 6379 where a service
# manager runs; w8y's tests and demo never use it.
if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
	echo "ensure-redis: redis-server or redis-cli still not on PATH after installing" >&2
	exit 1
fi
