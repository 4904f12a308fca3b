# A throwaway redis-server for the scripts that need one (demo.sh and
# bench.sh), as the Go tests have redistest: on a free loopback port, keeping
# nothing on disk, never touching any other Redis, and gone when the script
# ends, however it ends. Source it and call start_redis.

# port_in_use reports whether something accepts connections on the loopback
# port $1.
port_in_use() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# start_redis makes the script's scratch directory, $tmp; starts
# redis-server on a random free loopback port, logging to $tmp/redis.log;
# waits until it answers PING; and sets redis_port and redis_pid. If another
# process takes the port between the check and the start, it tries another;
# after 20 ports it prints the log and returns 1. From its start, an EXIT
# trap kills the background processes that the script lists in bg_pids,
# stops the server and removes $tmp.
start_redis() {
	local candidate
	tmp="$(mktemp -d)"
	bg_pids=()
	redis_port="" redis_pid=""
	trap end_redis EXIT
	for _ in $(seq 1 20); do
		candidate=$((20000 + RANDOM % 40000))
		port_in_use "$candidate" && continue
		redis-server --port "$candidate" --bind 127.0.0.1 --save '' --appendonly no \
			--dir "$tmp" --daemonize no --loglevel warning >"$tmp/redis.log" 2>&1 &
		redis_pid=$!
		# The server gives no signal that it is ready but its answer.
		for _ in $(seq 1 50); do
			if redis-cli -p "$candidate" ping >/dev/null 2>&1; then
				redis_port=$candidate
				return 0
			fi
			kill -0 "$redis_pid" 2>/dev/null || break
			sleep 0.1
		done
		stop_redis
	done
	cat "$tmp/redis.log" >&2 || true
	return 1
}

# stop_redis stops the server, if it runs, and waits for it.
stop_redis() {
	if [ -n "${redis_pid:-}" ]; then
		kill "$redis_pid" 2>/dev/null || true
		wait "$redis_pid" 2>/dev/null || true
		redis_pid=""
	fi
}

# end_redis is the EXIT trap: what still runs in bg_pids at the end is a
# broken run's, so it is killed outright.
end_redis() {
	local pid
	for pid in "${bg_pids[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
	done
	stop_redis
	rm -rf "$tmp"
}
