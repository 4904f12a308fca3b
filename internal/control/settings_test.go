package control

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/settings"
)

// describeSettings is what set or unset did, or its error's text.
func describeSettings(results []SettingsResult, err error) string {
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, r := range results {
		part := fmt.Sprintf("%s:%d", r.Item, r.Changed)
		if r.WaitMs != 0 {
			part += "(waits)"
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, " ")
}

// TestSettingsBothWaysAlike: set and unset leave Redis the same and say the
// same whether they run as one script (keys colocated) or as a command per
// key; a cooldown and a schedule replace each other; a refused command
// (a bad value, an item the list lacks, a settings key of another type)
// changes nothing; every change is an event with who made it.
func TestSettingsBothWaysAlike(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	steps := []struct {
		name string
		do   func(*Fleet) ([]SettingsResult, error)
		want string // the results, or the error's text
	}{
		{"set", func(f *Fleet) ([]SettingsResult, error) {
			return f.Set(ctx, []string{"a", "b"}, settings.Stored{settings.Cooldown: "1h", settings.Timeout: "90s"})
		}, "a:2(waits) b:2"},
		{"a schedule replaces the cooldown", func(f *Fleet) ([]SettingsResult, error) {
			return f.Set(ctx, []string{"b"}, settings.Stored{settings.Schedule: "0 * * * *"})
		}, "b:1"},
		{"a bad value", func(f *Fleet) ([]SettingsResult, error) {
			return f.Set(ctx, []string{"a"}, settings.Stored{settings.FailureBackoff: "5s,1s"})
		}, `--failure-backoff "5s,1s": MAX 1s is less than MIN 5s`},
		{"not in the list", func(f *Fleet) ([]SettingsResult, error) {
			return f.Set(ctx, []string{"a", "zz"}, settings.Stored{settings.Timeout: "1s"})
		}, `"zz" is not in the list`},
		{"another type", func(f *Fleet) ([]SettingsResult, error) {
			return f.Set(ctx, []string{"a", "c"}, settings.Stored{settings.Timeout: "1s"})
		}, `holds a string, not an item's settings`},
		{"unset one", func(f *Fleet) ([]SettingsResult, error) {
			return f.Unset(ctx, []string{"a", "b"}, []string{settings.Cooldown})
		}, "a:1(waits) b:0"},
		{"unset all", func(f *Fleet) ([]SettingsResult, error) { return f.Unset(ctx, []string{"a"}, nil) }, "a:1(waits)"},
	}
	var dumps [2][]string
	for i, colocated := range []bool{false, true} {
		keys := schema.Keys{Prefix: fmt.Sprintf("s%v:", colocated), Colocated: colocated}
		redistest.Seed(t, rdb, keys.List(), "a", "b", "c")
		rdb.XAdd(ctx, &redis.XAddArgs{Stream: keys.Events(), Values: []any{"type", schema.EventStart, "item", "b"}})
		rdb.Set(ctx, keys.Cooldown("a"), "t", time.Hour)
		rdb.Set(ctx, keys.Settings("c"), "not a hash", 0)
		f := &Fleet{Client: rdb, Keys: keys, By: "ana@web-1"}
		for _, st := range steps {
			got, err := st.do(f)
			if text := describeSettings(got, err); !strings.Contains(text, st.want) {
				t.Errorf("colocated=%v, %s: %s, want %s", colocated, st.name, text, st.want)
			}
		}
		var events []string
		got, _, err := f.Events(ctx, EventFilter{Last: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range got {
			if e.Get("type") == schema.EventSet || e.Get("type") == schema.EventUnset {
				var fields []string
				for _, field := range e.Fields {
					fields = append(fields, field.Name+"="+field.Value)
				}
				events = append(events, strings.Join(fields, " "))
			}
		}
		wantEvents := []string{
			"type=set item=a by=ana@web-1 cooldown=1h0m0s timeout=1m30s",
			"type=set item=b by=ana@web-1 cooldown=1h0m0s timeout=1m30s",
			"type=set item=b by=ana@web-1 schedule=0 * * * *",
			"type=unset item=a by=ana@web-1 cooldown=",
			"type=unset item=a by=ana@web-1 timeout=",
		}
		if !colocated {
			// The path per key records what it was asked to change.
			wantEvents = append(wantEvents[:3], []string{"type=unset item=a by=ana@web-1 cooldown=", "type=unset item=b by=ana@web-1 cooldown=", "type=unset item=a by=ana@web-1"}...)
		}
		if !slices.Equal(events, wantEvents) {
			t.Errorf("colocated=%v: the events are\n%q\nwant\n%q", colocated, events, wantEvents)
		}
		dumps[i] = dump(t, rdb, keys.Prefix)
	}
	for i := range dumps {
		dumps[i] = slices.DeleteFunc(dumps[i], func(k string) bool { return strings.HasPrefix(k, "events ") })
	}
	if !slices.Equal(dumps[0], dumps[1]) {
		t.Errorf("per key left\n%q\nthe script\n%q", dumps[0], dumps[1])
	}
	want := []string{`cooldown:a string "t" (expires)`, `list list ["a" "b" "c"] (no expiry)`, `settings:b hash ["schedule=0 * * * *" "timeout=1m30s"] (no expiry)`, `settings:c string "not a hash" (no expiry)`}
	if !slices.Equal(dumps[1], want) {
		t.Errorf("left %q, want %q", dumps[1], want)
	}
}

// TestCheckFindsSettingsOfAnotherType: check reports an item's settings key
// that holds something other than a hash, which no worker reads and set
// refuses to change, and --fix deletes it.
func TestCheckFindsSettingsOfAnotherType(t *testing.T) {
	rdb, ctx := redistest.Client(t)
	keys := schema.Keys{Prefix: "ck:", Colocated: true}
	redistest.Seed(t, rdb, keys.List(), "a")
	rdb.Set(ctx, keys.Settings("a"), "--timeout 1h", 0)
	f := &Fleet{Client: rdb, Keys: keys}
	for _, fix := range []bool{false, true} {
		found, err := f.Check(ctx, 100, fix)
		if err != nil {
			t.Fatal(err)
		}
		if len(found) != 1 || found[0].Kind != FindingWrongType || found[0].Key != "ck:settings:a" ||
			!strings.Contains(found[0].Problem, "not a hash (w8yctl set writes a hash there): the workers apply none of it") || (found[0].Fixed != nil) != fix {
			t.Errorf("fix=%v: check found %+v", fix, found)
		}
	}
	if n := rdb.Exists(ctx, keys.Settings("a")).Val(); n != 0 {
		t.Errorf("--fix left the settings key of another type")
	}
}
