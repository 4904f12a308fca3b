package dashboard

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/status"
)

// summaryEvery is the least time between two summaries, and between two
// reads of the whole list for a search: a summary counted from the indexes
// costs Redis well under a millisecond whatever the list's length, and a
// whole read of 100,000 items about a fifth of a second of small commands
// (see docs/benchmarks.md), which every 5 seconds is a twenty-fifth of one
// core at most (cached stretches the time for slower reads), whatever the
// number of browsers open.
const summaryEvery = 5 * time.Second

// Kinds an item is counted as in a summary: each item is counted once. An
// operator's pause comes before a run under way, since the run is the last
// until the item is resumed: a paused item that runs counts as paused (and
// in PausedRunning).
const (
	kindRunning  = "running"
	kindPaused   = "paused"
	kindBackoff  = "backoff"
	kindCooling  = "cooling"
	kindIdle     = "idle"
	kindBlocked  = "blocked"
	kindInvalid  = "invalid"
	kindFailing  = "failing"
	maxSearchHit = MaxPage
)

// Counts is how many items of the list are of each kind. Running, Paused,
// Backoff, Cooling, Idle, Blocked and Invalid add up to the items; Failing
// (the last run failed, or it backs off or cannot run) and PausedRunning
// (paused while a run goes on) count again some of them.
type Counts struct {
	Running       int64 `json:"running"`
	Paused        int64 `json:"paused"`
	PausedRunning int64 `json:"paused_running"`
	Backoff       int64 `json:"backoff"`
	Cooling       int64 `json:"cooling"`
	Idle          int64 `json:"idle"`
	Blocked       int64 `json:"blocked"`
	Invalid       int64 `json:"invalid"`
	Failing       int64 `json:"failing"`
}

// Summary is the whole list, counted at one read, with how far behind the
// fleet is.
type Summary struct {
	// Items is how many entries the list holds, and Duplicates how many
	// of them repeat an earlier one, as w8y --status counts them (see
	// status.Summary); the counts count each item once.
	Items      int64  `json:"items"`
	Duplicates int64  `json:"duplicates"`
	Counts     Counts `json:"counts"`
	Lag        Lag    `json:"lag"`
	// FleetMax is the places of --fleet-max-running in use and the cap,
	// or null without a cap (see status.Reader.Places).
	FleetMax *status.Places `json:"fleet_max_running"`
	// FleetRate is the rate of --fleet-rate and the fleet's starts in its
	// window, or null without a rate (see status.Reader.Rate).
	FleetRate *status.Rate `json:"fleet_rate"`
	// Redis is what w8y needs of the server (see docs/operating.md, "The
	// Redis w8y needs"), or null where INFO cannot be read.
	Redis *RedisNeeds `json:"redis"`
	// At is when the read ended, in Unix milliseconds; Took how long it
	// took.
	At     int64 `json:"at"`
	TookMs int64 `json:"took_ms"`

	// names and kinds are every item and its kind, which a search looks
	// through without reading Redis; folded is each name case-folded (see
	// fold), which the search matches.
	names  []string
	folded []string
	kinds  []string
	fails  []bool
	// listed says that names, folded, kinds and fails hold the whole list
	// (readListing); a summary counted from the indexes has none.
	listed bool
}

// kind is what st is counted as.
func kind(st status.Item) string {
	switch {
	case st.State == status.StateInvalid:
		return kindInvalid
	case st.State == status.StateBlocked:
		return kindBlocked
	case st.Pause != nil:
		return kindPaused
	case st.State == status.StateLocked:
		return kindRunning
	case st.State == status.StateBackoff:
		return kindBackoff
	case st.State == status.StateCooldown:
		return kindCooling
	default:
		return kindIdle
	}
}

// failing reports whether st needs a look: its last run failed, or it backs
// off, or it cannot run. The page's "failing first" says the same.
func failing(st status.Item) bool {
	return st.ConsecutiveFailures > 0 || st.State == status.StateBackoff || st.State == status.StateBlocked || st.State == status.StateInvalid
}

// readSummary counts the list: from the indexes that every writer keeps,
// without reading the list, where they are kept (see status.Reader.Count),
// else by reading the whole list (readListing), which a search then looks
// through too. Then the lag, the places under a cap, the rate and what the
// server says of itself.
func (s *Server) readSummary(ctx context.Context) (*Summary, error) {
	start := s.Now()
	counted, err := s.Status.Count(ctx, true)
	if err != nil {
		return nil, err
	}
	var sum *Summary
	if counted != nil {
		sum = &Summary{Items: counted.Items, Duplicates: counted.Duplicates}
		sum.Counts = Counts{
			Running: counted.Running - counted.PausedRunning, Paused: counted.Paused, PausedRunning: counted.PausedRunning,
			Backoff: counted.BackingOff, Cooling: counted.Cooling, Idle: counted.Idle,
			Blocked: counted.Blocked, Invalid: counted.Invalid,
			Failing: counted.Failing + counted.BackoffNotFailing + counted.Blocked + counted.Invalid,
		}
	} else if sum, err = s.readListing(ctx); err != nil {
		return nil, err
	}
	end := s.Now()
	if sum.Lag, err = readLag(ctx, s.Fleet.Client, s.Fleet.Keys, end); err != nil {
		return nil, err
	}
	if sum.FleetMax, err = s.Status.Places(ctx); err != nil {
		return nil, err
	}
	if sum.FleetRate, err = s.Status.Rate(ctx); err != nil {
		return nil, err
	}
	sum.Redis = readNeeds(ctx, s.Fleet.Client)
	sum.At, sum.TookMs = end.UnixMilli(), end.Sub(start).Milliseconds()
	return sum, nil
}

// readListing reads the whole list, a status.Batch at a time (one short
// read and one or two pipelines of small reads per batch, so that no
// command holds Redis up), and counts it, keeping each item's name and kind
// for a search.
func (s *Server) readListing(ctx context.Context) (*Summary, error) {
	start := s.Now()
	sum := &Summary{}
	entries, err := s.Status.ReadCounting(ctx, func(batch []status.Item) error {
		for _, st := range batch {
			k := kind(st)
			c := &sum.Counts
			switch k {
			case kindRunning:
				c.Running++
			case kindPaused:
				c.Paused++
				if st.State == status.StateLocked {
					c.PausedRunning++
				}
			case kindBackoff:
				c.Backoff++
			case kindCooling:
				c.Cooling++
			case kindIdle:
				c.Idle++
			case kindBlocked:
				c.Blocked++
			case kindInvalid:
				c.Invalid++
			}
			f := failing(st)
			if f {
				c.Failing++
			}
			sum.names = append(sum.names, st.Item)
			sum.folded = append(sum.folded, fold(st.Item))
			sum.kinds = append(sum.kinds, k)
			sum.fails = append(sum.fails, f)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sum.Items, sum.Duplicates = entries, entries-int64(len(sum.names))
	end := s.Now()
	sum.At, sum.TookMs = end.UnixMilli(), end.Sub(start).Milliseconds()
	sum.listed = true
	s.Status.RecordWhole(ctx, &status.Summary{Items: sum.Items, Duplicates: sum.Duplicates, Blocked: sum.Counts.Blocked, Invalid: sum.Counts.Invalid}, sum.At)
	return sum, nil
}

// RedisNeeds is what the summary says of the server: whether it may evict
// w8y's keys (with its maxmemory and policy) and whether it is a replica,
// each of which breaks w8y's promises.
type RedisNeeds struct {
	MayEvict  bool   `json:"may_evict"`
	MaxMemory int64  `json:"maxmemory"`
	Policy    string `json:"maxmemory_policy"`
	Replica   bool   `json:"replica"`
}

// readNeeds reads RedisNeeds from INFO, or nil where it cannot.
func readNeeds(ctx context.Context, client any) *RedisNeeds {
	c, ok := client.(redisconn.Infoer)
	if !ok {
		return nil
	}
	srv, err := redisconn.ReadServer(ctx, c)
	if err != nil {
		return nil
	}
	return &RedisNeeds{MayEvict: srv.MayEvict(), MaxMemory: srv.MaxMemory, Policy: srv.Policy, Replica: srv.Replica()}
}

// summary is GET /api/summary: the whole list counted, at most
// summaryEvery old.
func (s *Server) summary(w http.ResponseWriter, r *http.Request) {
	sum, err := s.summaries.get(r.Context())
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sum)
}

// searchReply is GET /api/search's reply: the first matches, read now,
// and how many items of the summary match.
type searchReply struct {
	Query   string        `json:"query"`
	State   string        `json:"state"`
	Matches int64         `json:"matches"`
	Now     int64         `json:"now"`
	At      int64         `json:"summary_at"`
	Items   []status.Item `json:"items"`
}

// search is GET /api/search?q=TEXT[&state=KIND][&limit=N]: the items of
// the whole list whose name holds TEXT (in any case) and, if given, that
// are of KIND (or "failing"), in list order as the summary read them; the
// first limit of them are read anew, so that their rows are current.
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("q")
	want := r.URL.Query().Get("state")
	switch want {
	case "", kindRunning, kindPaused, kindBackoff, kindCooling, kindIdle, kindBlocked, kindInvalid, kindFailing:
	default:
		writeError(w, http.StatusBadRequest, errors.New("state "+strconv.Quote(want)+": give running, paused, backoff, cooling, idle, blocked, invalid or failing"))
		return
	}
	limit, err := number(r, "limit", DefaultPage, 1, maxSearchHit)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	sum, err := s.summaries.get(r.Context())
	if err == nil && !sum.listed {
		// Counted without the list: a search reads it, for every browser
		// at once and at most every summaryEvery (see cached).
		sum, err = s.listings.get(r.Context())
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	needle := fold(q)
	var hits []string
	var matches int64
	for i, name := range sum.names {
		if want == kindFailing && !sum.fails[i] || want != "" && want != kindFailing && sum.kinds[i] != want {
			continue
		}
		if needle != "" && !strings.Contains(sum.folded[i], needle) {
			continue
		}
		matches++
		if int64(len(hits)) < limit {
			hits = append(hits, name)
		}
	}
	items, err := s.Status.Items(r.Context(), hits)
	if err != nil {
		s.fail(w, err)
		return
	}
	if items == nil {
		items = []status.Item{}
	}
	writeJSON(w, http.StatusOK, searchReply{Query: q, State: want, Matches: matches, Now: s.Now().UnixMilli(), At: sum.At, Items: items})
}

// fold is s with each character replaced by the smallest of those that
// Unicode's simple case folding makes equal to it, so that two strings
// that differ only in case fold to the same: "Backup-DB" and "backup-db",
// and, where lower-casing alone falls short, "ΣΊΣΥΦΟΣ" and "σίσυφος"
// (Σ, σ and the final ς) or "K" and the Kelvin sign. A search matches the
// folded query in the folded names.
func fold(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}
