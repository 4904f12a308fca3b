package finish

import (
	"testing"

	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/script"
)

// TestScriptsLoad: every script that ends a run compiles in a real Redis,
// and each keeps the hash that EVALSHA finds it by.
func TestScriptsLoad(t *testing.T) {
	redistest.ScriptsLoad(t, map[string]*script.Script{
		"finish": finishScript, "count": countScript, "pause": pauseScript,
	})
}

// TestReleaseOnlyOurs: finish.lua given the lock alone keeps to
// compare-and-delete. (The refresh of a lock is tested at the root, its
// take in internal/take.)
func TestReleaseOnlyOurs(t *testing.T) {
	redistest.OnlyOurs(t, finishScript, "w:lock:x", []any{"x", ""}, redistest.TokenStep{Token: "other"},
		redistest.TokenStep{Token: "me", Want: 1}, redistest.TokenStep{Token: "me"})
}
