package redistest

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/poll"
)

func TestScriptsLoadNamesTheScriptThatDoesNot(t *testing.T) {
	failure := poll.Failure(t, func(tb testing.TB) {
		ScriptsLoad(tb, map[string]*redis.Script{
			"good": redis.NewScript(`return 1`),
			"bad":  redis.NewScript(`return (`),
		})
	})
	if !strings.Contains(failure, "bad.lua does not load") || strings.Contains(failure, "good.lua") {
		t.Errorf("ScriptsLoad of one good and one broken script failed with %q, want only bad.lua named", failure)
	}
}
