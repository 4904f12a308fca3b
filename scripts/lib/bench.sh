# What the benchmark scripts share: source it after setting bench_name and
# root. It installs redis-server if need be, builds the lean static bin/w8y
# that cron's one-shot runs use (as make build does) into $w8y, starts a
# throwaway redis-server (see redis.sh) and sets port, url and rcli; broken
# ends the script with a line naming what broke, and stop_bg stops the
# workers that the script started in the background.

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	PATH="$PATH:/usr/local/go/bin"
fi

broken() {
	echo "$bench_name: BROKEN: $*" >&2
	exit 1
}

# wait_for runs its arguments until they succeed, for at most 600 s.
wait_for() {
	local i
	for i in $(seq 6000); do
		"$@" && return 0
		sleep 0.1
	done
	broken "timed out waiting for: $*"
}

# stop_bg sends SIGTERM to the processes listed in bg_pids, waits for them
# all, whatever they exit with, and empties the list.
stop_bg() {
	local pid
	for pid in "${bg_pids[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "${bg_pids[@]}"; do
		wait "$pid" || true
	done
	bg_pids=()
}

bash "$root/scripts/ensure-redis.sh"
CGO_ENABLED=0 go build -C "$root" -tags w8y_lean -o bin/w8y .
# W8Y=path measures another build of w8y (a lean build of main, for the
# figures before a change).
w8y=${W8Y:-$root/bin/w8y}

# shellcheck source=scripts/lib/redis.sh
source "$root/scripts/lib/redis.sh"
start_redis || broken "could not start redis-server on a free loopback port"
port=$redis_port
url="redis://127.0.0.1:$port"
rcli() { redis-cli -p "$port" "$@"; }

# cpu_ms prints the server's CPU time so far, user and system, in ms (INFO
# cpu), and since the CPU in ms since $1, a cpu_ms reading.
cpu_ms() {
	rcli INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.1f", s * 1000}'
}
since() { awk -v a="$1" -v b="$(cpu_ms)" 'BEGIN {printf "%.1f", b - a}'; }
# calls prints how many times Redis ran one command so far (0 before any),
# and usec those calls and the microseconds Redis spent in them (INFO
# commandstats).
calls() {
	rcli INFO commandstats | tr -d '\r' | awk -F'[:=,]' -v c="cmdstat_$1" '$1 == c {n = $3} END {print n + 0}'
}
usec() {
	rcli INFO commandstats | tr -d '\r' | awk -F'[:=,]' -v c="cmdstat_$1" '$1 == c {n = $3; u = $5} END {print n + 0, u + 0}'
}
