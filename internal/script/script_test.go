package script_test

import (
	"crypto/sha1"
	"encoding/hex"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/script"
)

// TestBuiltAtFirstUse: New joins and hashes nothing; the first use does,
// once, and every use after it sees the same script, whoever asks first.
func TestBuiltAtFirstUse(t *testing.T) {
	part := strings.Repeat("-- a comment of a large script\n", 1<<15)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := script.New(part, "return 1")
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<10 {
		t.Errorf("New allocated %d bytes for a script of %d: it joined its parts before their first use", grew, len(part))
	}

	sum := sha1.Sum([]byte(part + "return 1"))
	want := hex.EncodeToString(sum[:])
	var wg sync.WaitGroup
	got := make([]any, 8)
	for i := range got {
		wg.Go(func() { got[i] = s.Script() })
	}
	wg.Wait()
	for i, g := range got {
		if g != got[0] {
			t.Errorf("use %d saw another script than use 0: built twice", i)
		}
	}
	if h := s.Hash(); h != want {
		t.Errorf("Hash() = %s, want the SHA1 of the parts joined, %s", h, want)
	}
}

// TestRunsOnARealRedis: Run sends the script by its hash and, on a server
// that does not have it, by its source; EvalSha alone then finds it.
func TestRunsOnARealRedis(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	s := script.New(`return KEYS[1] .. "`, `:" .. ARGV[1]`)
	if err := s.EvalSha(ctx, rdb, []string{"k"}, "v").Err(); err == nil || !strings.Contains(err.Error(), "NOSCRIPT") {
		t.Fatalf("EvalSha before any load: %v, want NOSCRIPT", err)
	}
	got, err := s.Run(ctx, rdb, []string{"k"}, "v").Text()
	if err != nil || got != "k:v" {
		t.Fatalf("Run: %q, %v; want \"k:v\"", got, err)
	}
	if got, err := s.EvalSha(ctx, rdb, []string{"a"}, "b").Text(); err != nil || got != "a:b" {
		t.Errorf("EvalSha after Run: %q, %v; want \"a:b\"", got, err)
	}
	if sha, err := s.Load(ctx, rdb).Result(); err != nil || sha != s.Hash() {
		t.Errorf("Load: %s, %v; want %s", sha, err, s.Hash())
	}
	if got, err := s.Eval(ctx, rdb, []string{"c"}, "d").Text(); err != nil || got != "c:d" {
		t.Errorf("Eval: %q, %v; want \"c:d\"", got, err)
	}
}
