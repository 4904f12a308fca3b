package take

import "strconv"

// The take scripts (batch.lua, look.lua, and next.lua through look.lua) take
// their settings as one argument of words, name=value separated by spaces:
// Redis refuses commands of more than 10 parts before AUTH, and a server
// that wants a password we lack must say NOAUTH, not "Protocol error" (see
// batchCall.run). The words that every take sends are built here, and only
// here; each script's header lists the words it reads.

// takeWords are the words that every take script reads from this Taker's
// settings: how to record a take (state_ttl, events; nothing without a
// Record), --fleet-max-running (cap; nothing without a cap) and
// --fleet-rate (rate=N/MS; nothing without a rate). Each word starts with a
// space, so that the words follow a script's own.
func (t *Taker) takeWords() string {
	var words string
	if rec := t.Record; rec != nil {
		words += " state_ttl=" + strconv.FormatInt(rec.StateTTL.Milliseconds(), 10) +
			" events=" + strconv.FormatInt(rec.EventsMaxLen, 10)
	}
	if t.FleetMax > 0 {
		words += " cap=" + strconv.Itoa(t.FleetMax)
	}
	if !t.Rate.IsZero() {
		words += " rate=" + t.Rate.Record()
	}
	return words
}
