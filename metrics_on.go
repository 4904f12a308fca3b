//go:build !w8y_lean

package main

import (
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/health"
	"github.com/w8y/w8y/internal/metrics"
	"github.com/w8y/w8y/internal/schema"
)

// This build serves --metrics-addr itself (see internal/metrics);
// metrics_off.go is the lean build's side, which must keep the same two
// functions.

// startMetrics serves the metrics and /healthz at addr until stop is called.
func startMetrics(addr string, client redis.UniversalClient, keys schema.Keys, log zerolog.Logger) (counts observer, beat *health.Heartbeat, stop func(), err error) {
	v, c := buildVersion()
	m, beat, stop, err := metrics.Start(addr, client, keys, v, c, log)
	if err != nil {
		return nil, nil, nil, err
	}
	return m, beat, stop, nil
}

// handOffMetrics does nothing in this build, which serves metrics itself.
func handOffMetrics(*Options, []string) error { return nil }
