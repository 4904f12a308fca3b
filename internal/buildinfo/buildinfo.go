// Package buildinfo says which build of w8y runs: the version and commit that
// make build stamps into each command, or else what Go stamps into every
// build. w8y and w8yctl say it alike.
package buildinfo

import "runtime/debug"

// Resolve returns the version and commit of this build: stampedVersion and
// stampedCommit, a command's variables that make build sets at link time
// (-X main.version=... -X main.commit=...), or, where they were not set
// ("dev"), the main module's version (a tag, a pseudo-version, or v1.2.0 for
// go install ...@v1.2.0) and the VCS revision of the checkout it was built
// in, marked -dirty with uncommitted changes.
func Resolve(stampedVersion, stampedCommit string) (string, string) {
	v, c := stampedVersion, stampedCommit
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
