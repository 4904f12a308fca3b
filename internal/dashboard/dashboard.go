// Package dashboard serves w8yctl serve's web page for one list: the items,
// a page at a time, their status, the live workers (internal/registry), the
// events stream as it happens, and,
// where a token is configured, the buttons that pause, resume, run now,
// cancel, add and remove items through the same internal/control calls as
// w8yctl's verbs (dashboard.go, actions.go). Over the whole list it serves
// a summary (counts, lag and search: summary.go, lag.go), read for every
// browser at once (cache.go), and from the events stream an item's runs and
// a chart of the list's runs and failures (history.go).
//
// The page is static (web/, embedded): it holds no item, no list name and
// no secret, and builds every cell with textContent, so that an item value
// is always shown as text. Its Content-Security-Policy allows only its own
// scripts, a second line against markup slipping in.
package dashboard

import (
	"cmp"
	"context"
	"crypto/subtle"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/duration"
	"github.com/w8y/w8y/internal/redisconn"
	"github.com/w8y/w8y/internal/registry"
	"github.com/w8y/w8y/internal/status"
)

//go:embed web
var web embed.FS

// Paging bounds: a page is what one refresh reads, and MaxPage keeps it to
// one status.Batch, the most that w8y --status reads in one round trip.
const (
	DefaultPage = 100
	MaxPage     = status.Batch
	// maxEvents is the most events one GET /api/events returns.
	maxEvents = 200
	// maxStreams bounds the event streams served at once: each holds a
	// Redis connection in XREAD (see serveConns in cmd/w8yctl).
	maxStreams = 8
)

// Server serves the dashboard of the list under Fleet's prefix. Its
// actions record Fleet.Who() as who asked for them.
type Server struct {
	Fleet  *control.Fleet
	Status *status.Reader
	// Token, if not "", turns the actions on: a POST must carry it as
	// "Authorization: Bearer TOKEN".
	Token string
	Log   zerolog.Logger
	// Now is the clock that pauses and run-now stamp.
	Now func() time.Time

	streams   chan struct{}
	summaries *cached[*Summary]
	// listings is the whole list read for a search, where the summary is
	// counted without it.
	listings *cached[*Summary]
	charts   *cached[*Chart]
}

// Handler returns the dashboard's routes.
func (s *Server) Handler() http.Handler {
	s.streams = make(chan struct{}, maxStreams)
	s.summaries = newCached(summaryEvery, s.Now, s.readSummary)
	s.listings = newCached(summaryEvery, s.Now, s.readListing)
	s.charts = newCached(chartEvery, s.Now, s.readChart)
	files, _ := fs.Sub(web, "web")
	mux := http.NewServeMux()
	mux.Handle("/", readOnly(http.FileServerFS(files)))
	mux.HandleFunc("GET /api/config", s.config)
	mux.HandleFunc("GET /api/items", s.items)
	mux.HandleFunc("GET /api/item", s.item)
	mux.HandleFunc("GET /api/workers", s.workers)
	mux.HandleFunc("GET /api/events", s.events)
	mux.HandleFunc("GET /api/events/stream", s.stream)
	mux.HandleFunc("GET /api/summary", s.summary)
	mux.HandleFunc("GET /api/search", s.search)
	mux.HandleFunc("GET /api/runs", s.runs)
	mux.HandleFunc("GET /api/chart", s.chart)
	for name, act := range map[string]func(context.Context, action) ([]control.Result, error){
		"pause": s.pause, "resume": s.resume, "run-now": s.runNow, "cancel": s.cancel,
		"add": s.add, "remove": s.remove,
	} {
		mux.Handle("/api/"+name, s.guard(name, act))
	}
	return secure(mux)
}

// readOnly lets through GET and HEAD alone: the page's files, like the
// /api/ reads, change nothing.
func readOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, errors.New("the page is read-only: actions are POSTs to /api/"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// secure sets the headers that keep the page from being framed, sniffed or
// made to run scripts other than its own.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}

// config is what the page needs to know of the server: the list's key and
// whether actions are on. Nothing secret: the Redis URL stays here.
func (s *Server) config(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"list": s.Fleet.Keys.List(), "actions": s.Token != ""})
}

// itemsPage is GET /api/items' reply.
type itemsPage struct {
	// Length is the list's length; Offset where the page starts.
	Length int64 `json:"length"`
	Offset int64 `json:"offset"`
	// Now is the server's clock in Unix milliseconds, which the page
	// counts the times it shows from.
	Now   int64         `json:"now"`
	Items []status.Item `json:"items"`
}

// items is GET /api/items?offset=N&limit=M: one page of the list.
func (s *Server) items(w http.ResponseWriter, r *http.Request) {
	offset, err := number(r, "offset", 0, 0, 1<<40)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	limit, err := number(r, "limit", DefaultPage, 1, MaxPage)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	length, page, err := s.Status.Page(r.Context(), offset, limit)
	if err != nil {
		s.fail(w, err)
		return
	}
	if page == nil {
		page = []status.Item{}
	}
	writeJSON(w, http.StatusOK, itemsPage{Length: length, Offset: offset, Now: s.Now().UnixMilli(), Items: page})
}

// workersPage is GET /api/workers' reply.
type workersPage struct {
	// Now is the server's clock in Unix milliseconds.
	Now     int64            `json:"now"`
	Workers []registry.Entry `json:"workers"`
}

// workers is GET /api/workers: the live workers of the registry, as
// w8yctl workers --json lists them.
func (s *Server) workers(w http.ResponseWriter, r *http.Request) {
	now := s.Now()
	entries, err := registry.Read(r.Context(), s.Fleet.Client, s.Fleet.Keys)
	if err != nil {
		s.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, workersPage{Now: now.UnixMilli(), Workers: entries})
}

// item is GET /api/item?item=ITEM: what the item's state hash keeps of its
// last run, with its fence, its reason and, under --keep-output, the tail
// of its output, which an item's view shows.
func (s *Server) item(w http.ResponseWriter, r *http.Request) {
	item := r.URL.Query().Get("item")
	if item == "" {
		writeError(w, http.StatusBadRequest, errTheItem)
		return
	}
	pipe := s.Fleet.Client.Pipeline()
	state := pipe.HGetAll(r.Context(), s.Fleet.Keys.State(item))
	if _, err := pipe.Exec(r.Context()); err != nil {
		s.fail(w, redisconn.Wrap("read "+strconv.Quote(s.Fleet.Keys.State(item)), err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"item": item, "state": state.Val()})
}

// event is an event as the page reads it.
type event struct {
	ID     string            `json:"id"`
	Time   int64             `json:"time"`
	Fields map[string]string `json:"fields"`
}

func newEvent(e control.Event) event {
	fields := make(map[string]string, len(e.Fields))
	for _, f := range e.Fields {
		fields[f.Name] = f.Value
	}
	return event{ID: e.ID, Time: e.Time().UnixMilli(), Fields: fields}
}

// events is GET /api/events?n=N[&item=ITEM]: the latest events, oldest
// first, and the newest entry's ID, from which the stream goes on.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	n, err := number(r, "n", 50, 1, maxEvents)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	latest, newest, err := s.Fleet.Events(r.Context(), control.EventFilter{Item: r.URL.Query().Get("item"), Last: n})
	if errors.Is(err, control.ErrRefused) {
		// No list and no stream yet: nothing to show, not a failure.
		latest, newest, err = nil, "0", nil
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	out := make([]event, 0, len(latest))
	for _, e := range latest {
		out = append(out, newEvent(e))
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": out, "newest": newest})
}

// validStreamID reports whether id is a stream ID that the stream can go
// on from: a Unix millisecond time, with or without its sequence number.
func validStreamID(id string) bool {
	ms, seq, _ := strings.Cut(id, "-")
	if _, err := strconv.ParseUint(ms, 10, 64); err != nil {
		return false
	}
	if seq != "" {
		if _, err := strconv.ParseUint(seq, 10, 64); err != nil {
			return false
		}
	}
	return true
}

// stream is GET /api/events/stream?after=ID: server-sent events, one for
// each entry added to the events stream after ID (or after the browser's
// Last-Event-ID, when it reconnects), as it is added.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) {
	after := r.Header.Get("Last-Event-ID")
	if after == "" {
		after = r.URL.Query().Get("after")
	}
	if after != "" && !validStreamID(after) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("after %q: give a stream ID such as 1795600800000-0", after))
		return
	}
	if after == "" {
		// From the newest entry now, not XREAD's "$", which each call of
		// Follow's loop would read anew, missing what came in between.
		_, newest, err := s.Fleet.Events(r.Context(), control.EventFilter{Last: 1})
		if err != nil && !errors.Is(err, control.ErrRefused) {
			s.fail(w, err)
			return
		}
		after = cmp.Or(newest, "0")
	}
	select {
	case s.streams <- struct{}{}:
		defer func() { <-s.streams }()
	default:
		// The browser's EventSource tries again by itself.
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("%d event streams are served already", maxStreams))
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, errors.New("streaming is not supported"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	// A first comment, so that the browser sees the stream open at once.
	fmt.Fprint(w, ": w8y events\n\n")
	flusher.Flush()
	err := s.Fleet.Follow(r.Context(), after, r.URL.Query().Get("item"), func(e control.Event) error {
		data, err := json.Marshal(newEvent(e))
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "id: %s\ndata: %s\n\n", e.ID, data); err != nil {
			return err
		}
		flusher.Flush()
		return nil
	})
	if err != nil && r.Context().Err() == nil {
		s.Log.Warn().Err(err).Msg("the dashboard's event stream ended")
	}
}

// action is the body of a POST to an action: the item, and for pause and
// cancel their options.
type action struct {
	Item      string `json:"item"`
	Reason    string `json:"reason"`
	For       string `json:"for"`
	AsFailure bool   `json:"as_failure"`
}

// maxBody bounds an action's body: an item, a reason and a duration.
const maxBody = 1 << 20

// guard lets through to act only a POST from the dashboard's own origin
// that carries the token, with a JSON body; it refuses anything else before
// Redis is touched.
func (s *Server) guard(name string, act func(context.Context, action) ([]control.Result, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, errors.New("actions are POST only"))
			return
		}
		if s.Token == "" {
			writeError(w, http.StatusForbidden, errors.New("actions are off: start w8yctl serve with W8Y_DASHBOARD_TOKEN or --token-file"))
			return
		}
		if !sameOrigin(r) {
			writeError(w, http.StatusForbidden, errors.New("cross-site request refused"))
			return
		}
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="w8y dashboard"`)
			writeError(w, http.StatusUnauthorized, errors.New("a valid token is needed for actions"))
			return
		}
		// A cross-site form cannot send JSON without a CORS preflight,
		// which this server never grants.
		if mediaType, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(mediaType) != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, errors.New("send the action as application/json"))
			return
		}
		var a action
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("read the action: %w", err))
			return
		}
		if a.Item == "" {
			writeError(w, http.StatusBadRequest, errTheItem)
			return
		}
		result, err := act(r.Context(), a)
		var bad badRequest
		switch {
		case errors.As(err, &bad), errors.Is(err, control.ErrReasonTooLong):
			writeError(w, http.StatusBadRequest, err)
		case errors.Is(err, control.ErrRefused), errors.Is(err, control.ErrNotRunning), errors.Is(err, control.ErrNotColocated):
			writeError(w, http.StatusConflict, err)
		case err != nil:
			s.fail(w, err)
		default:
			s.Log.Info().Str("action", name).Str("item", a.Item).Str("from", r.RemoteAddr).Msg("dashboard action")
			writeJSON(w, http.StatusOK, actionReply{Action: name, Results: result})
		}
	})
}

// sameOrigin reports whether r comes from the dashboard's own page, or
// from no browser at all (curl sends neither header): the Origin that a
// browser sends with every POST must name this host, and Sec-Fetch-Site,
// where sent, must not say cross-site.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host == r.Host
}

// authorized reports whether r carries the token, compared in constant
// time.
func (s *Server) authorized(r *http.Request) bool {
	given, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(given), []byte(s.Token)) == 1
}

// badRequest is an action's option that does not parse.
type badRequest struct{ msg string }

func (e badRequest) Error() string { return e.msg }

func (s *Server) pause(ctx context.Context, a action) ([]control.Result, error) {
	p := control.Pause{Reason: a.Reason}
	if a.For != "" {
		d, err := duration.Parse(a.For)
		switch {
		case err != nil:
			return nil, badRequest{fmt.Sprintf("for %q: %s", a.For, err)}
		case d < time.Millisecond:
			return nil, badRequest{fmt.Sprintf("for %q: a pause lasts at least 1ms (leave it empty to pause until resumed)", a.For)}
		case d < duration.Forever:
			p.For = d
		}
	}
	return s.Fleet.PauseItems(ctx, []string{a.Item}, p, s.Now())
}

func (s *Server) resume(ctx context.Context, a action) ([]control.Result, error) {
	return s.Fleet.Resume(ctx, []string{a.Item})
}

func (s *Server) runNow(ctx context.Context, a action) ([]control.Result, error) {
	return s.Fleet.RunNow(ctx, []string{a.Item})
}

// number reads the query parameter name as a whole number from min to
// max, or def when it is missing.
func number(r *http.Request, name string, def, min, max int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < min || n > max {
		return 0, fmt.Errorf("%s %q: give a whole number from %d to %d", name, v, min, max)
	}
	return n, nil
}

// fail answers a failure to read or change Redis: the page shows the
// message, which names no password (redisconn's errors never do).
func (s *Server) fail(w http.ResponseWriter, err error) {
	s.Log.Warn().Err(err).Msg("dashboard request failed")
	writeError(w, http.StatusBadGateway, err)
}

func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

// writeJSON writes v as JSON, whose encoder escapes <, > and & in every
// string, so that even a reply read as HTML holds no markup.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
