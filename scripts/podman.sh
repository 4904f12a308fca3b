#!/usr/bin/env bash
# podman as this project runs it, for make image and the container image's
# test: the sandboxes that the project's machines and CI run in refuse
# crun's setrlimit and its hybrid cgroups, so podman uses runc, cgroupfs
# and no default ulimits (scripts/containers.conf). Any podman arguments
# work: scripts/podman.sh run --rm --network=host localhost/w8y:dev --version
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CONTAINERS_CONF="$root/scripts/containers.conf"
exec podman --runtime runc --cgroup-manager cgroupfs "$@"
