package control

import (
	"testing"

	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/script"
)

// TestScriptsLoad: every script that an operator's command runs compiles
// in a real Redis, and each keeps the hash that EVALSHA finds it by.
func TestScriptsLoad(t *testing.T) {
	redistest.ScriptsLoad(t, map[string]*script.Script{
		"control": controlScript, "cancel": cancelScript, "dedupe": dedupeScript,
	})
}

// TestDedupe: the extra occurrences go, the first stays where it was, and an
// item held once or not at all is left as it is.
func TestDedupe(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	rdb.RPush(ctx, "l", "a", "b", "a", "c", "a")
	for _, tt := range []struct {
		item string
		want int64
	}{{"a", 3}, {"a", 1}, {"b", 1}, {"zz", 0}} {
		if got, err := dedupeScript.Run(ctx, rdb, []string{"l"}, tt.item).Int64(); err != nil || got != tt.want {
			t.Errorf("Dedupe %q: %d, %v; want %d", tt.item, got, err, tt.want)
		}
	}
	if got := rdb.LRange(ctx, "l", 0, -1).Val(); len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Errorf("list after Dedupe: %q, want [a b c]", got)
	}
}
