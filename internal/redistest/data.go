package redistest

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Items returns n items named i0, i1, ...: a list for a test to fill.
func Items(n int) []string {
	items := make([]string, n)
	for i := range items {
		items[i] = "i" + strconv.Itoa(i)
	}
	return items
}

// IsRotation reports whether got is want turned round: the same items in
// the same circular order, as a rotation that stopped anywhere leaves a
// list.
func IsRotation(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	if len(want) == 0 {
		return true
	}
	for turn := range want {
		if slices.Equal(got, append(slices.Clone(want[turn:]), want[:turn]...)) {
			return true
		}
	}
	return false
}

// Values returns items as the ...any arguments of a go-redis command.
func Values(items []string) []any {
	out := make([]any, len(items))
	for i, item := range items {
		out[i] = item
	}
	return out
}

// seedChunk is how many items one RPUSH of Seed sends: a million items go
// in a hundred commands, none of them large enough to hold Redis up.
const seedChunk = 10_000

// Seed replaces key with the list of items.
func Seed(tb testing.TB, c redis.Cmdable, key string, items ...string) {
	tb.Helper()
	ctx := context.Background()
	if err := c.Del(ctx, key).Err(); err != nil {
		tb.Fatal(err)
	}
	for chunk := range slices.Chunk(items, seedChunk) {
		if err := c.RPush(ctx, key, Values(chunk)...).Err(); err != nil {
			tb.Fatal(err)
		}
	}
}
