package redistest

import (
	"strings"
	"testing"

	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/script"
)

func TestScriptsLoadNamesTheScriptThatDoesNot(t *testing.T) {
	failure := poll.Failure(t, func(tb testing.TB) {
		ScriptsLoad(tb, map[string]*script.Script{
			"good": script.New(`return 1`),
			"bad":  script.New(`return (`),
		})
	})
	if !strings.Contains(failure, "bad.lua does not load") || strings.Contains(failure, "good.lua") {
		t.Errorf("ScriptsLoad of one good and one broken script failed with %q, want only bad.lua named", failure)
	}
}
