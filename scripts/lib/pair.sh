# What the pair benchmarks (bench-idle-pair.sh, bench-fleet-pair.sh) share:
# two builds of w8y measured in turn on one throwaway redis-server over
# 10,000 items that all cool down for an hour. Source it after
# scripts/lib/redis.sh's start_redis.

# rcli runs redis-cli against the throwaway server.
rcli() { redis-cli -p "$redis_port" "$@"; }

# cpu_ms is Redis' CPU so far, user and system, in milliseconds.
cpu_ms() { rcli INFO cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.1f", s * 1000}'; }

# load_cooling empties the server and appends items i0..i9999 to
# <prefix>list, each with a cooldown of an hour set by another program.
load_cooling() {
	rcli FLUSHALL >/dev/null
	awk -v p="$1" 'BEGIN {for (i = 0; i < 10000; i++) {it = "i" i; k = p "cooldown:" it; l = p "list"
		printf "*3\r\n$5\r\nRPUSH\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(l), l, length(it), it
		printf "*5\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$5\r\nother\r\n$2\r\nPX\r\n$7\r\n3600000\r\n", length(k), k}}' |
		rcli --pipe >/dev/null
}
