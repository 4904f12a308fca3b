package registry

import "time"

// FleetLookSpacing is the mean time between two looks of the whole fleet,
// once it is large enough (more than 125ms/FleetLookSpacing = 2.5 idle
// workers, at w8y's longest pause between looks): two workers look every
// 125ms each, a thousand every 50 s each, and either fleet looks about 20
// times a second. An idle worker's look is mostly a probe of plain reads
// (see take.LookEvery), well under 0.1 ms of Redis' time, so an idle fleet
// of any size costs it about 2 ms/s of CPU in looks; and as the looks of
// many workers come at random moments, an item made due waits for the
// next one about ln 2 × 50ms ≈ 35ms at the median, well within the 100ms
// that a pickup may take.
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
