#!/usr/bin/env bash
# Makes sure valkey-server, valkey-sentinel and valkey-cli are on PATH, for
# the integration tests run on Valkey (W8Y_TEST_SERVER=valkey, see
# internal/redistest). Debian 12 ships Valkey only in bookworm-backports
# (8.0.x): the suite is added to apt's sources in a file of its own, which
# leaves every other package where it was (backports are never chosen
# unless asked for by name with -t). Neither valkey-redis-compat, whose
# redis-* names would stand in for Redis's own, nor a running server is
# installed: the tests start their own throwaway valkey-server. Idempotent,
# and silent when all are installed.
set -euo pipefail

# shellcheck source=scripts/lib/ensure.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/ensure.sh"
if have_commands valkey-server valkey-sentinel valkey-cli; then
	exit 0
fi
ensure_installer ensure-valkey "valkey-server, valkey-sentinel or valkey-cli" "install Valkey 8 by hand"

# Backports of the release this machine runs (bookworm on Debian 12).
codename="$(. /etc/os-release && echo "${VERSION_CODENAME:-}")"
if [ -z "$codename" ]; then
	echo "ensure-valkey: cannot tell the Debian release from /etc/os-release; install Valkey 8 by hand" >&2
	exit 1
fi
sources=/etc/apt/sources.list.d/w8y-backports.sources
if ! grep -rqs "$codename-backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
	echo "ensure-valkey: adding $codename-backports to apt's sources in $sources" >&2
	printf '%s\n' \
		'# Added by w8y'"'"'s scripts/ensure-valkey.sh for valkey-server.' \
		'Types: deb' \
		'URIs: http://deb.debian.org/debian' \
		"Suites: $codename-backports" \
		'Components: main' \
		'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' |
		"${sudo[@]}" tee "$sources" >/dev/null
fi

echo "ensure-valkey: installing valkey-server, valkey-sentinel and valkey-tools from $codename-backports with apt-get" >&2
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -t "$codename-backports" \
	valkey-server valkey-sentinel valkey-tools >/dev/null

if ! command -v valkey-server >/dev/null 2>&1 || ! command -v valkey-sentinel >/dev/null 2>&1 || ! command -v valkey-cli >/dev/null 2>&1; then
	echo "ensure-valkey: valkey-server, valkey-sentinel or valkey-cli still not on PATH after installing" >&2
	exit 1
fi
