// Package registry is the registry of live workers: each w8y process
// announces itself under its prefix (its holder token, host, pid, version,
// when it started, whether it is idle or busy and with which items since
// when) in a hash that expires, listed in a sorted set scored with that
// expiry (see schema.Keys.Worker and schema.Keys.Workers). A Presence is
// one worker's own entry, which its beat keeps alive and which it removes
// when it stops; a worker that dies without a word is gone within TTL (in a
// fleet of up to 500; longer in a larger one, whose beats are spaced out).
// Read and Live are what w8yctl workers, the status and the dashboard read.
//
// A beat is one pipelined round trip of a few O(log n) commands. It also
// drops the members of dead workers, and counts the live workers that look
// for work (schema.Keys.Looking), which the loop spaces its looks with, so
// that an idle fleet's looks come at a rate that does not grow with it, and
// all the live workers, which the beats space themselves with, so that
// neither do the fleet's beats.
package registry
