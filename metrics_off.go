//go:build w8y_lean

package main

import (
	"errors"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/handoff"
	"github.com/w8y/w8y/internal/health"
	"github.com/w8y/w8y/internal/schema"
)

// The lean build (make build's bin/w8y, built with the tag w8y_lean) leaves
// out the Prometheus client and net/http. Linking them costs every run their
// package initialisation and page faults in a binary half again as large,
// in w8y and in its guard: about a millisecond of a one-shot run's few (see
// docs/benchmarks.md), paid by every cron job for metrics it never serves.
// A run with --metrics-addr, a long-running service, replaces itself at
// start-up with the full build, w8y-metrics, through execve: same PID, same
// arguments and environment, so systemd and Kubernetes see no difference.
// metrics_on.go is the full build's side, which must keep the same two
// functions.

// metricsBuild is the name of the full build that the lean one hands over to.
const metricsBuild = "w8y-metrics"

// startMetrics cannot be reached: handOffMetrics has replaced the process.
func startMetrics(string, redis.UniversalClient, schema.Keys, zerolog.Logger) (observer, *health.Heartbeat, func(), error) {
	return nil, nil, nil, errors.New("this build of w8y cannot serve metrics")
}

// handOffMetrics replaces this process with w8y-metrics, found next to this
// executable or else in PATH, given args, w8y's own arguments, when
// --metrics-addr is given. It returns only on failure.
func handOffMetrics(opts *Options, args []string) error {
	if opts.MetricsAddr == "" {
		return nil
	}
	return handoff.Exec(metricsBuild, "--metrics-addr", "the build of w8y with Prometheus metrics", args)
}
