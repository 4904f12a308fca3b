package take

import (
	_ "embed"
	"strconv"
	"time"

	"github.com/w8y/w8y/internal/script"
)

// The due index's upkeep (index.lua): every item a take passes over gets
// an entry for when its blockers expire, and the fleet's sweep reads the
// whole list, a step per look, so that an item that neither the index nor
// the appended items show (a key deleted by hand, an entry lost, an item
// appended behind an outside LREM) waits for the next sweep, and no longer.

//go:embed index.lua
var indexSource string

// countsSource is the upkeep of the counts' indexes at a take (counts.lua).
//
//go:embed counts.lua
var countsSource string

//go:embed start.lua
var startSource string

// indexed is the script of a take that passes over items or sweeps
// (batch.lua, look.lua and next.lua): place.lua's functions, counts.lua's,
// index.lua's, start.lua's and settings.lua's, then source's parts.
func indexed(source ...string) *script.Script {
	return withPlaces(append([]string{countsSource, "\n", indexSource, "\n", startSource, "\n", settingsSource, "\n"}, source...)...)
}

const (
	// SweepStep is how many items of the list one look's step of the sweep
	// reads: 1.5 to 2.5ms of Redis' time (3 to 5µs an item, see
	// BenchmarkSweepStep and docs/benchmarks.md), so that a step never
	// holds Redis up for long; a list of up to this many items is swept in
	// one look. Each step is a call that wakes Redis, and an idle worker
	// over a list that has a sweep due every few seconds makes them: 256
	// items a step made a lone worker over 1,000 cooling items send 2
	// commands a second, 512 make it 1.7 (scripts/bench.sh's idle load).
	SweepStep = 512
	// SweepPerItem is how long the fleet waits between two sweeps for each
	// item of the list: a sweep reads every item once, at 3 to 5µs of
	// Redis' time an item (BenchmarkSweepStep and scripts/bench-fleet.sh, on
	// a loaded 2-core VM), so waiting 6ms an item keeps the sweeps to under
	// a tenth of a percent of one core (about half a millisecond a second,
	// what the sweeps cost before there were steps) whatever the list's
	// length.
	SweepPerItem = 6 * time.Millisecond
	// SweepMin is the least wait between two sweeps: a short list's sweep
	// costs Redis next to nothing, and what an item waits for it should be
	// short, but an idle worker should not run a script for it more than
	// now and then.
	SweepMin = 5 * time.Second
	// SweepMax is the most the fleet waits between two sweeps, however long
	// the list: beyond 600,000 items, the sweeps' share of Redis' time
	// grows with the list instead.
	SweepMax = time.Hour
	// sweepLease is how long the caller that made a sweep's last step keeps
	// the next ones its own: an idle worker drives the sweep step after
	// step, the others' looks leave it to it, and a driver that stops (it
	// took an item, or died) hands it to the next look a second later.
	sweepLease = time.Second
)

// SweepEvery is how long the fleet waits between two sweeps of a list of
// length items (index.lua's sweepEvery): the longest that an item can wait
// for what only the sweep finds, besides the sweep's own steps.
func SweepEvery(length int64) time.Duration {
	if length <= 0 {
		return SweepMin
	}
	if length >= int64(SweepMax/SweepPerItem) {
		return SweepMax
	}
	return min(max(time.Duration(length)*SweepPerItem, SweepMin), SweepMax)
}

// sweepWords are the options of look.lua that make a look take its step of
// the sweep when one is due.
func sweepWords() string {
	return " sweep=" + strconv.Itoa(SweepStep) +
		" every_ms=" + strconv.FormatFloat(float64(SweepPerItem)/float64(time.Millisecond), 'f', -1, 64) +
		" sweep_min=" + strconv.FormatInt(SweepMin.Milliseconds(), 10) +
		" sweep_max=" + strconv.FormatInt(SweepMax.Milliseconds(), 10) +
		" sweep_lease=" + strconv.FormatInt(sweepLease.Milliseconds(), 10)
}
