# What scripts/ensure-*.sh share: each checks for its tools first (with
# have_commands where they are commands on PATH), and where one is missing,
# calls ensure_installer before its own apt-get lines, which it keeps so that
# what it installs stays in its text.

# have_commands reports whether every command it is given is on PATH.
have_commands() {
	local tool
	for tool in "$@"; do
		command -v "$tool" >/dev/null 2>&1 || return 1
	done
}

# ensure_installer NAME MISSING HINT sets the array sudo to what runs apt-get
# as root (nothing when this is root), or ends the script with one line
# saying why it cannot install: NAME is the script's, MISSING what is
# missing, HINT what to do where apt-get is not available.
ensure_installer() {
	local name=$1 missing=$2 hint=$3
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "$name: $missing is missing and apt-get is not available; $hint" >&2
		exit 1
	fi
	sudo=()
	if [ "$(id -u)" -ne 0 ]; then
		if ! command -v sudo >/dev/null 2>&1; then
			echo "$name: $missing is missing; run as root or install sudo" >&2
			exit 1
		fi
		sudo=(sudo)
	fi
}
