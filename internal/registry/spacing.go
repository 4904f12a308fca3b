package registry

import "time"

// FleetLookSpacing is the mean time between two fallback looks of the
// whole fleet of idle workers (see internal/wake: an idle worker waits for
// a wake, and looks again at the latest when its fallback comes), once it
// is large enough (more than --idle-wait/FleetLookSpacing workers, 20 at
// the default): a worker alone looks every second, a thousand every 50 s
// each, and a fleet of any size about 20 times a second. A fallback is one
// wait and one probe (a read-only script call), well under 0.1 ms of
// Redis' time, so an idle fleet of any size costs it a few ms/s of CPU in
// them; what an item waits for them (an outside RPUSH, which wakes no one)
// is about ln 2 × 50ms ≈ 35ms at the median in a large fleet. What w8y
// writes wakes a worker at once, and the spacing is also what spreads the
// workers that wait for the same due moment (see worker.idleWait).
const FleetLookSpacing = 50 * time.Millisecond

// LookInterval is the pause (before jitter) between one worker's looks,
// when lookers live workers look (see Presence.Lookers), this one among
// them: base while the fleet is small, and lookers times the fleet's
// spacing once it is larger, so that the fleet looks about once every
// min(FleetLookSpacing, base), as Sidekiq spaces its scheduled-job polls by
// the number of its processes. A base shorter than FleetLookSpacing stays
// the fleet's spacing: a fleet looks no less often than one of its workers
// would alone.
func LookInterval(base time.Duration, lookers int) time.Duration {
	return max(base, time.Duration(max(lookers, 1))*min(FleetLookSpacing, base))
}
