#!/usr/bin/env bash
# Makes sure that what make image and the container image's test need is
# installed: podman and runc, which build and run the image (see
# scripts/podman.sh), and a static busybox (Debian's busybox-static), which
# gives the image sh, wget and the other tools that the examples' children
# use. Installs Debian's packages when they are missing. Idempotent, and
# silent when all are installed.
set -euo pipefail

# busybox_static reports whether /bin/busybox is a static executable, which
# Debian's busybox package (linked against libc) is not.
busybox_static() {
	[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1
}

if command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 && busybox_static; then
	exit 0
fi

# shellcheck source=scripts/lib/ensure.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/ensure.sh"
ensure_installer ensure-podman "podman, runc or a static /bin/busybox" "install them by hand"

echo "ensure-podman: installing podman, runc and busybox-static with apt-get" >&2
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc busybox-static ca-certificates >/dev/null

if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1 || ! busybox_static; then
	echo "ensure-podman: podman, runc or a static /bin/busybox still missing after installing" >&2
	exit 1
fi
