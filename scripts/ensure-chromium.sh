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

if ! command -v apt-get >/dev/null 2>&1; then
	echo "ensure-chromium: /usr/bin/chromium or chromedriver is missing and apt-get is not available; install them by hand" >&2
	exit 1
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "ensure-chromium: /usr/bin/chromium or chromedriver is missing; run as root or install sudo" >&2
		exit 1
	fi
	sudo=(sudo)
fi

echo "ensure-chromium: installing chromium and chromium-driver with apt-get" >&2
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver >/dev/null

if [ ! -x /usr/bin/chromium ] || ! command -v chromedriver >/dev/null 2>&1; then
	echo "ensure-chromium: /usr/bin/chromium or chromedriver still missing after installing" >&2
	exit 1
fi
