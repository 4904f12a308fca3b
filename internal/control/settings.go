package control

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/schema"
	"github.com/w8y/w8y/internal/script"
	"github.com/w8y/w8y/internal/settings"
)

// settingsScript sets and unsets items' own settings, one atomic call per
// command (settings.lua).
//
//go:embed settings.lua
var settingsSource string

var settingsScript = script.New(settingsSource)

// SettingsResult is what w8yctl set or unset did to one item.
type SettingsResult struct {
	Item string `json:"item"`
	// Changed is how many settings the command wrote (set) or removed
	// (unset).
	Changed int64 `json:"changed"`
	// WaitMs is how long the item's cooldown or backoff holds it yet, in
	// milliseconds (-1: until deleted; 0: nothing holds it): a changed
	// setting applies from the item's next run, and does not shorten a
	// wait under way (w8yctl run-now ends it).
	WaitMs int64 `json:"wait_ms"`
}

// Set gives the items the settings of set (field to value, each as
// settings.Check reads it), in place of the workers' own options. A
// cooldown removes the item's schedule and a schedule its cooldown: they
// are alternatives. A value that does not read is refused before anything
// is changed.
func (f *Fleet) Set(ctx context.Context, items []string, set settings.Stored) ([]SettingsResult, error) {
	if len(set) == 0 {
		return nil, errors.New("set needs at least one setting")
	}
	_, cooldown := set[settings.Cooldown]
	_, schedule := set[settings.Schedule]
	if cooldown && schedule {
		return nil, fmt.Errorf("%s and %s are alternatives: give one", settings.Option(settings.Cooldown), settings.Option(settings.Schedule))
	}
	pairs := set.Pairs()
	for i := 0; i < len(pairs); i += 2 {
		value, err := settings.Check(pairs[i], pairs[i+1])
		if err != nil {
			return nil, err
		}
		pairs[i+1] = value
	}
	return f.settings(ctx, schema.EventSet, items, pairs)
}

// Unset removes the settings named by fields from the items, or every
// setting where fields is empty: the workers' own options stand again.
func (f *Fleet) Unset(ctx context.Context, items []string, fields []string) ([]SettingsResult, error) {
	var pairs []string
	for _, field := range fields {
		if !slices.Contains(settings.Fields, field) {
			return nil, fmt.Errorf("%q is not a setting of an item: give %s", field, strings.Join(settings.Fields, ", "))
		}
		pairs = append(pairs, field, "")
	}
	return f.settings(ctx, schema.EventUnset, items, pairs)
}

// settings runs settings.lua for verb (set or unset) with pairs, or sends
// a command per key where the keys may live on other servers.
func (f *Fleet) settings(ctx context.Context, verb string, items []string, pairs []string) ([]SettingsResult, error) {
	if !f.Keys.Colocated {
		return f.settingsEach(ctx, verb, items, pairs)
	}
	args := []any{verb, f.Keys.Prefix, f.Who(), len(pairs) / 2}
	for _, p := range pairs {
		args = append(args, p)
	}
	for _, item := range items {
		args = append(args, item)
	}
	reply, err := settingsScript.Run(ctx, f.Client, []string{f.Keys.List(), f.Keys.Events()}, args...).Slice()
	if err != nil {
		return nil, redisconn.Wrap(verb+" in "+strconv.Quote(f.Keys.List()), err)
	}
	if err := f.refused("settings.lua", reply, false); err != nil {
		return nil, err
	}
	var out []SettingsResult
	for i := 1; i+2 < len(reply); i += 3 {
		item, _ := reply[i].(string)
		changed, _ := reply[i+1].(int64)
		wait, _ := reply[i+2].(int64)
		out = append(out, SettingsResult{Item: item, Changed: changed, WaitMs: waitMs(wait)})
	}
	return out, nil
}

// waitMs is a PTTL as SettingsResult.WaitMs says it.
func waitMs(pttl int64) int64 {
	if pttl == -2 {
		return 0
	}
	return pttl
}

// settingsEach is settings with a command per key, for where an item's
// keys may live on other servers than the list (Redis Cluster without a
// hash tag): the list and its items checked first, then each item's
// settings written, with its event, in one pipeline.
func (f *Fleet) settingsEach(ctx context.Context, verb string, items []string, pairs []string) ([]SettingsResult, error) {
	fields := make([]any, len(pairs))
	for i, p := range pairs {
		fields[i] = p
	}
	pipe := f.Client.Pipeline()
	kinds := make([]*redis.StatusCmd, len(items))
	for i, item := range items {
		kinds[i] = pipe.Type(ctx, f.Keys.Settings(item))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, redisconn.Wrap("read the items' settings", err)
	}
	for i, item := range items {
		if kind := kinds[i].Val(); kind != "hash" && kind != "none" {
			return nil, f.wrongSettingsType(item, kind)
		}
	}
	results, err := f.eachKey(ctx, verb, items, fields, func(pipe redis.Pipeliner, item string) []*redis.IntCmd {
		key := f.Keys.Settings(item)
		switch {
		case verb == schema.EventSet:
			for i := 0; i < len(pairs); i += 2 {
				switch pairs[i] {
				case settings.Cooldown:
					pipe.HDel(ctx, key, settings.Schedule)
				case settings.Schedule:
					pipe.HDel(ctx, key, settings.Cooldown)
				}
			}
			pipe.HSet(ctx, key, fields...)
			return nil
		case len(pairs) == 0:
			return []*redis.IntCmd{pipe.Del(ctx, key)}
		default:
			var names []string
			for i := 0; i < len(pairs); i += 2 {
				names = append(names, pairs[i])
			}
			return []*redis.IntCmd{pipe.HDel(ctx, key, names...)}
		}
	})
	if err != nil {
		return nil, err
	}
	// What holds each item yet, as settings.lua replies it.
	pipe = f.Client.Pipeline()
	waits := make([][2]*redis.DurationCmd, len(items))
	for i, item := range items {
		waits[i] = [2]*redis.DurationCmd{pipe.PTTL(ctx, f.Keys.Cooldown(item)), pipe.PTTL(ctx, f.Keys.Backoff(item))}
	}
	_, _ = pipe.Exec(ctx)
	out := make([]SettingsResult, len(results))
	for i, r := range results {
		out[i] = SettingsResult{Item: r.Item, Changed: r.Changed}
		if verb == schema.EventSet {
			out[i].Changed = int64(len(pairs) / 2)
		}
		for _, w := range waits[i] {
			// go-redis reads PTTL's -1 and -2 as those many nanoseconds.
			switch d := w.Val(); {
			case d == -1:
				out[i].WaitMs = -1
			case d > 0 && out[i].WaitMs >= 0:
				out[i].WaitMs = max(out[i].WaitMs, d.Milliseconds())
			}
		}
	}
	return out, nil
}

// wrongSettingsType refuses a command on an item whose settings key holds
// another type than a hash.
func (f *Fleet) wrongSettingsType(item, kind string) error {
	return refusal{msg: fmt.Sprintf("%q holds a %s, not an item's settings: delete it (nothing was changed)", f.Keys.Settings(item), kind)}
}
