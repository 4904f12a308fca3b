package main

import "github.com/w8y/w8y/internal/buildinfo"

// version and commit are stamped at build time by make build, as w8y's are,
// with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

// buildVersion returns w8yctl's version and commit (see buildinfo.Resolve).
func buildVersion() (string, string) { return buildinfo.Resolve(version, commit) }
