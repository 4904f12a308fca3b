package main

import "runtime/debug"

// version and commit are stamped at build time by make build, with
// -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

// buildVersion returns w8y's version and commit: those stamped at link
// time (make build), or else what Go stamps into every build: the main
// module's version (a tag, a pseudo-version, or v1.2.0 for go install
// ...@v1.2.0) and the VCS revision of the checkout it was built in, marked
// -dirty with uncommitted changes.
func buildVersion() (string, string) {
	v, c := version, commit
	info, ok := debug.ReadBuildInfo()
	if !ok || v != "dev" {
		return v, c
	}
	if mv := info.Main.Version; mv != "" && mv != "(devel)" {
		v = mv
	}
	var revision, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if revision != "" {
		c = revision[:min(len(revision), 12)]
		if modified == "true" {
			c += "-dirty"
		}
	}
	return v, c
}
