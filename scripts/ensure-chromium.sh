#!/usr/bin/env bash
# Makes sure that what the dashboard's browser test needs is installed:
# Debian's chromium, which the test runs headless and drives over the
# DevTools protocol (integration_test/dashboard_test.go), and
# chromium-driver, for those who drive it with WebDriver instead. Installs
# Debian's packages when they are missing. Idempotent, and silent when all
# are installed.
set -euo pipefail

if [ -x /usr/bin/chromium ] && command -v chromedriver >/dev/null 2>&1; then
	exit 0
fi

# shellcheck source=scripts/lib/ensure.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/ensure.sh"
ensure_installer ensure-chromium "/usr/bin/chromium or chromedriver" "install them by hand"

echo "ensure-chromium: installing chromium and chromium-driver with apt-get" >&2
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver >/dev/null

if [ ! -x /usr/bin/chromium ] || ! command -v chromedriver >/dev/null 2>&1; then
	echo "ensure-chromium: /usr/bin/chromium or chromedriver still missing after installing" >&2
	exit 1
fi
