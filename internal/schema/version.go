package schema

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Version is the version of this layout of w8y's keys. Workers record it
// under Keys.Schema once the list exists, and refuse to run beside a fleet
// that recorded a later one: a change that older workers would misread
// (a key of another type, a field that means something else) raises it, and
// a change that they may ignore (a new key, a new field) does not. Versions
// of w8y that record none (before it was kept) read this layout.
//
// Version 2 keeps the counts' indexes (Locks, Pauses, Backoffs, Failing)
// and the due index in step with every item's keys, so that a summary
// counts the list without reading it: a fleet recorded as 2 has no worker
// of version 1, which would take and finish without them. A list that an
// earlier fleet has run is recorded as 1 (Unindexed) until w8yctl check
// --fix builds the indexes and records 2.
const Version = 2

// Unindexed is the version that a worker records on a list that an
// earlier fleet has run without recording a version (its marks are
// there): the layout it reads, without the counts' indexes, which only a
// whole pass can build (w8yctl check --fix).
const Unindexed = 1

// Schema is the version of the layout that the fleet on the list keeps
// (Version when it was written), a number without expiry. A worker sets it
// only where it is missing (SET NX), and refuses to run where it holds a
// later version than its own, or something other than a number.
func (k Keys) Schema() string { return k.Prefix + "schema" }

// ErrNewerSchema is a list that a newer w8y keeps in a layout of its keys
// that this one does not know, or whose version key holds something that
// is not a version.
var ErrNewerSchema = errors.New("the list's keys are kept in a layout that this w8y does not know")

// SchemaError is ErrNewerSchema for one list, in the words a user acts on.
type SchemaError struct {
	Keys  Keys
	Found string
}

func (e *SchemaError) Error() string {
	if _, err := strconv.Atoi(e.Found); err != nil {
		return fmt.Sprintf("%q holds %q, not a version of the layout of w8y's keys: delete it if no w8y wrote it (w8y writes %d)", e.Keys.Schema(), e.Found, Version)
	}
	return fmt.Sprintf("the list %q is kept in version %s of the layout of w8y's keys, by a newer w8y; this one knows version %d: upgrade w8y", e.Keys.List(), e.Found, Version)
}

func (e *SchemaError) Is(target error) bool { return target == ErrNewerSchema }

// VersionClient is the part of a Redis client that ClaimVersion needs.
type VersionClient interface {
	Get(ctx context.Context, key string) *redis.StringCmd
	Exists(ctx context.Context, keys ...string) *redis.IntCmd
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
}

// ClaimVersion records Version under keys.Schema where the list exists and
// no version is recorded yet, and returns a *SchemaError where a later
// version than Version is, or something that is not a version. Any other
// error is Redis', which the caller's next command meets too.
func ClaimVersion(ctx context.Context, client VersionClient, keys Keys) error {
	// The version is read alone: once a fleet has recorded it, a start
	// costs one GET, and reads nothing of the list.
	found, err := client.Get(ctx, keys.Schema()).Result()
	switch {
	case err == nil:
		return checkVersion(keys, found)
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		return &SchemaError{Keys: keys, Found: "a key of another type"}
	case !errors.Is(err, redis.Nil):
		return err
	}
	if n, err := client.Exists(ctx, keys.List()).Result(); err != nil || n == 0 {
		return err
	}
	// A list that a fleet before the version has run (its marks, its
	// fencing token or its events are there: w8yctl writes none of them)
	// has items held by keys that no index mirrors: recorded as Unindexed, it is counted by a whole read
	// until w8yctl check --fix indexes it.
	// One EXISTS a key: on a Cluster without a hash tag they may live in
	// other slots. This runs once a list, until a version is recorded.
	version := Version
	for _, mark := range []string{keys.Fence(), keys.Seen(), keys.Untried(), keys.Events()} {
		n, err := client.Exists(ctx, mark).Result()
		if err != nil {
			return err
		}
		if n > 0 {
			version = Unindexed
			break
		}
	}
	return client.SetNX(ctx, keys.Schema(), version, 0).Err()
}

// checkVersion refuses found, the recorded version, unless this w8y knows
// it.
func checkVersion(keys Keys, found string) error {
	if n, err := strconv.Atoi(found); err != nil || n > Version {
		return &SchemaError{Keys: keys, Found: found}
	}
	return nil
}
