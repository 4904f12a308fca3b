package take

import (
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/w8y/w8y/internal/clock"
	"github.com/w8y/w8y/internal/script"
)

// The places of --fleet-max-running (Taker.FleetMax): a cap on the runs of
// the list at once across the whole fleet, which each take script checks
// and takes a place under in the same call as the lock (see place.lua, which
// each of them starts with). The lock is the place's lease: a run's place
// is freed with its lock, by its finish or by the lock's expiry, and never
// before.

//go:embed place.lua
var placeSource string

// ErrFull is returned by Pass.Take and TakeNamed when every place of
// --fleet-max-running was in use: nothing was looked at. It is an
// ErrNoWork, so that a worker waits as an idle one does, and looks again.
var ErrFull error = fullError{}

// fullError is ErrFull.
type fullError struct{}

func (fullError) Error() string        { return "every place of --fleet-max-running is in use" }
func (fullError) Is(target error) bool { return target == ErrNoWork }

// ErrPlacesNotColocated is returned by CheckPlaces when the cap cannot be
// enforced in the take's own step.
var ErrPlacesNotColocated = errors.New("--fleet-max-running needs every key of the list on one server: on Redis Cluster, put a hash tag in --key-prefix, such as {work}")

//go:embed settled.lua
var settledSource string

// withPlaces is the script of a take's source (its parts, joined), which Redis' clock
// (clock.Lua's redisNow), settled.lua's guard, place.lua's functions and
// rate.lua's come before.
func withPlaces(source ...string) *script.Script {
	return script.New(append([]string{clock.Lua, settledSource, "\n", placeSource, "\n", rateSource, "\n"}, source...)...)
}

// CheckPlaces says whether this Taker can enforce its FleetMax and its
// Rate: only where one script reaches the list, the places, the rate's log
// and every item's lock together
// (see schema.Keys.Colocated), so that no two takes can both count a
// place as free.
func (t *Taker) CheckPlaces() error {
	switch {
	case t.FleetMax > 0 && !t.Keys.Colocated:
		return ErrPlacesNotColocated
	case !t.Rate.IsZero() && !t.Keys.Colocated:
		return ErrRateNotColocated
	}
	return nil
}

// fullFence is the fence that batch.lua and look.lua reply with when every
// place was in use and they looked at nothing.
const fullFence = -1

// Places is --fleet-max-running as an option: how many places the fleet
// shares, at least 1 when given; 0 (not given) means no cap.
type Places int

// UnmarshalFlag implements go-flags' Unmarshaler: a whole number of at
// least 1. A cap of 0 would run nothing, and is refused rather than read as
// "no cap", which is the option left out.
func (p *Places) UnmarshalFlag(value string) error {
	n, err := strconv.Atoi(strings.TrimSpace(value))
	if err != nil || n < 1 {
		return fmt.Errorf("%q is not a number of places: give a whole number of at least 1 (leave the option out for no cap)", value)
	}
	*p = Places(n)
	return nil
}
