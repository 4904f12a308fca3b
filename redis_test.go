package main

import (
	"testing"

	"github.com/w8y/w8y/internal/redistest"
)

// testRedis is a redis-server that one test or benchmark starts on a free
// loopback port, keeping nothing on disk, and stops when it ends.
type testRedis = redistest.Server

// startTestRedis starts a testRedis. Tests fail without redis-server (make
// test installs it); benchmarks, which CI may skip, are skipped instead.
func startTestRedis(tb testing.TB) *testRedis {
	tb.Helper()
	return redistest.Start(tb)
}
