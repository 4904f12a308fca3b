package integration_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/doctest"
	"github.com/w8y/w8y/internal/poll"
	"github.com/w8y/w8y/internal/redistest"
	"github.com/w8y/w8y/internal/schema"
)

// TestTLS runs w8y against a redis-server that speaks only TLS, with
// certificates the test makes: the right CA works, a wrong CA, a wrong
// server name or no CA at all fails with 125 and one line that names the
// certificate, in continuous mode too, without touching the list; skipping
// verification works only with its own option and a loud warning; a server
// that wants client certificates gets one from --tls-cert and --tls-key.
func TestTLS(t *testing.T) {
	t.Parallel()
	right, wrong := redistest.NewPKI(t, "right"), redistest.NewPKI(t, "wrong")
	s := redistest.Start(t, redistest.TLS(right, false))
	url := s.URL
	items := []string{"a", "b", "c"}
	seed := func() {
		s.Client.Del(context.Background(), "tls:list")
		if err := s.Client.RPush(context.Background(), "tls:list", redistest.Values(items)...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	seed()
	list := func() []string {
		got, err := s.Client.LRange(context.Background(), "tls:list", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	for _, tt := range []struct {
		name string
		args []string
		code int
		line string
	}{
		{"wrong CA", []string{"--tls-ca-cert", wrong.CACert}, 125, "certificate signed by unknown authority"},
		{"wrong CA, continuous", []string{"--tls-ca-cert", wrong.CACert, "-c"}, 125, "TLS certificate was not accepted"},
		{"system CAs only", nil, 125, "TLS certificate was not accepted"},
		{"wrong server name", []string{"--tls-ca-cert", right.CACert, "--tls-server-name", "redis.example.com"}, 125, "redis.example.com"},
		{"TLS options without rediss", []string{"--tls-ca-cert", right.CACert, "-u", "redis://127.0.0.1:" + itoa(s.Port)}, 125, "need a rediss:// URL"},
		{"CA file missing", []string{"--tls-ca-cert", filepath.Join(t.TempDir(), "none.pem")}, 125, "read --tls-ca-cert"},
		{"CA file not PEM", []string{"--tls-ca-cert", "/dev/null"}, 125, "holds no PEM certificate"},
		{"cert without key", []string{"--tls-ca-cert", right.CACert, "--tls-cert", right.ClientCert}, 125, "--tls-cert and --tls-key go together"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := runW8y(t, nil, append(append([]string{"-u", url, "-k", "tls"}, tt.args...), "printf", "%s", "{}")...)
			r.wantExit(t, tt.code)
			r.wantStdout(t, "") // no child
			oneLine(t, r.Stderr, tt.line)
			if got := list(); !slices.Equal(got, items) {
				t.Errorf("list %q, want it untouched: %q", got, items)
			}
		})
	}

	r := runW8y(t, nil, "-u", url, "-k", "tls", "--tls-ca-cert", right.CACert, "printf", "%s", "{}")
	r.wantExit(t, 0)
	r.wantStdout(t, "a")
	// A name in the certificate other than the URL's host.
	r = runW8y(t, nil, "-u", url, "-k", "tls", "--tls-ca-cert", right.CACert, "--tls-server-name", "localhost", "printf", "%s", "{}")
	r.wantExit(t, 0)
	r.wantStdout(t, "b")
	r = runW8y(t, nil, "-u", url, "-k", "tls", "--tls-insecure-skip-verify", "printf", "%s", "{}")
	r.wantExit(t, 0)
	r.wantStdout(t, "c")
	r.wantStderr(t, "TLS CERTIFICATE VERIFICATION IS OFF")

	mutual := redistest.Start(t, redistest.TLS(right, true))
	murl := mutual.URL
	if err := mutual.Client.RPush(context.Background(), "m:list", "x").Err(); err != nil {
		t.Fatal(err)
	}
	r = runW8y(t, nil, "-u", murl, "-k", "m", "--tls-ca-cert", right.CACert, "printf", "%s", "{}")
	r.wantExit(t, 125) // no client certificate
	r.wantStdout(t, "")
	oneLine(t, r.Stderr, "")
	r = runW8y(t, nil, "-u", murl, "-k", "m", "--tls-ca-cert", right.CACert, "--tls-cert", right.ClientCert, "--tls-key", right.ClientKey, "printf", "%s", "{}")
	r.wantExit(t, 0)
	r.wantStdout(t, "x")
}

// aclCommands are the commands that w8y needs, as docs/recipes.md's ACL example
// grants them: those it sends, those its scripts call, and those of the
// schedule (EXISTS on the cooldown and backoff keys in every take; PTTL,
// TYPE and SET to set them, HSET and HINCRBY to count failures), INCR for the
// fencing token, the record (HDEL of a cancelled run's reason), the cancel
// request (HMGET at each refresh, HGET and DEL at the finish), the due
// index (ZMSCORE and ZSCORE to keep it: see internal/take/index.lua),
// --status (ZCOUNT for its lag) and /healthz, --fleet-max-running's set of
// running locks (SADD, SREM, SCARD, SMEMBERS) and --fleet-rate's log of
// starts (LPUSH). The scripts call the record's with pcall, so a
// missing one would only show as a missing record: the tests check it, and
// the cooldown and backoff (checkSchedule).
const aclCommands = "+evalsha +eval +llen +lmove +rpoplpush +wait " +
	"+lrange +exists +mget +set +rpush +ltrim +type +get +pexpire +del " +
	"+hset +hincrby +hdel +hget +xadd +lindex +lpos +pttl +hmget +ping +incr " +
	"+zadd +zrem +zrangebyscore +zcount +lrem +zremrangebyscore +zmscore +zscore +time +info +multi +exec +blpop +zrange +hgetall " +
	"+sadd +srem +scard +smembers +lpush"

// checkRecord fails the test unless each of items ran once, as its state
// hash says, and events holds a start and an end for each: the ACL rule
// must let w8y write its record.
func checkRecord(t *testing.T, c redis.Cmdable, prefix string, items ...string) {
	t.Helper()
	for _, item := range items {
		state, err := c.HGetAll(ctx(t), prefix+"state:"+item).Result()
		if err != nil {
			t.Fatal(err)
		}
		if state["runs"] != "1" || state["last_result"] != "success" || state["last_start"] == "" {
			t.Errorf("state of %s: %v, want one successful run", item, state)
		}
	}
	if n, err := c.XLen(ctx(t), prefix+"events").Result(); err != nil || n != int64(2*len(items)) {
		t.Errorf("%d events (%v), want %d", n, err, 2*len(items))
	}
}

// checkSchedule runs w8y as the ACL user (env, args) once with --cooldown
// on a child that succeeds and then with --failure-backoff on one that
// fails, and fails the test unless the runs took success and failure, left
// the cooldown and the backoff keys with their expiries, and counted the
// failure: docs/recipes.md's rule must let w8y keep the schedule, and read
// an item's own settings (success has a cooldown of its own of 2h).
func checkSchedule(t *testing.T, c redis.Cmdable, prefix string, env, args []string, success, failure string) {
	t.Helper()
	c.HSet(ctx(t), prefix+"settings:"+success, "cooldown", "2h0m0s")
	r := runW8y(t, env, append(slices.Clone(args), "--cooldown", "1h", "printf", "%s", "{}")...)
	r.wantExit(t, 0)
	r.wantStdout(t, success)
	checkPause(t, c, prefix+"cooldown:"+success, 119*time.Minute, 2*time.Hour)
	checkStreak(t, c, prefix, success, "0")
	r = runW8y(t, env, append(slices.Clone(args), "--failure-backoff", "20m,1h", "sh", "-c", `printf %s "$W8Y_ITEM"; exit 3`)...)
	r.wantExit(t, 3)
	r.wantStdout(t, failure)
	checkPause(t, c, prefix+"backoff:"+failure, 15*time.Minute-time.Second, 20*time.Minute)
	checkStreak(t, c, prefix, failure, "1")
	for _, item := range []string{success, failure} {
		if n := c.Exists(ctx(t), prefix+"lock:"+item).Val(); n != 0 {
			t.Errorf("the lock of %q was left behind", item)
		}
	}
}

// checkStatus fails the test unless w8y --status --json, run with args as
// the ACL user, lists want in that order (see statusJSON).
func checkStatus(t *testing.T, env []string, args []string, want ...string) {
	t.Helper()
	var got []string
	for _, it := range statusJSON(t, env, args...) {
		got = append(got, it["item"].(string))
	}
	if !slices.Equal(got, want) {
		t.Errorf("--status lists %q, want %q", got, want)
	}
}

// setACLUser makes the ACL user name on s, or remakes it, with password:
// it may use the keys that match the pattern keys, no channel, and only
// commands.
func (s *server) setACLUser(t *testing.T, name, password, keys string, commands ...string) {
	t.Helper()
	args := append([]any{"ACL", "SETUSER", name, "on", ">" + password, keys, "resetchannels", "-@all"}, redistest.Values(commands)...)
	if err := s.Client.Do(ctx(t), args...).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestACL runs w8y as an ACL user limited to its prefix's keys and the
// commands docs/recipes.md lists, with the password from W8Y_REDIS_PASSWORD or a
// file, and checks that wrong passwords and missing permissions fail with
// 125 and a line that names the cause and never the password.
func TestACL(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	const password = "Horse-Battery-93f1"
	s.setACLUser(t, "worker", password, "~acl:*", strings.Fields(aclCommands)...)
	s.setACLUser(t, "other", password, "~other:*", "+evalsha", "+eval", "+llen", "+info")
	items := []string{"a", "b", "c", "d"}
	s.seed(t, "acl:list", items...)
	url := "redis://worker@127.0.0.1:" + itoa(s.Port)
	dir := t.TempDir()
	passwordFile := filepath.Join(dir, "password")
	if err := os.WriteFile(passwordFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrongFile := filepath.Join(dir, "wrong")
	if err := os.WriteFile(wrongFile, []byte("Wrong-Staple-11\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := []string{password, "Wrong-Staple-11", "Url-Secret-22"}

	for _, tt := range []struct {
		name string
		env  []string
		args []string
		code int
		line string
		ran  string
	}{
		{name: "password from the environment", env: []string{"W8Y_REDIS_PASSWORD=" + password}, ran: "a"},
		{name: "password from a file", args: []string{"--redis-password-file", passwordFile}, ran: "b"},
		{name: "password file from the environment", env: []string{"W8Y_REDIS_PASSWORD_FILE=" + passwordFile}, ran: "c"},
		{name: "wrong password", env: []string{"W8Y_REDIS_PASSWORD=Wrong-Staple-11"}, code: 125, line: "WRONGPASS"},
		{name: "wrong password from a file", args: []string{"--redis-password-file", wrongFile}, code: 125, line: "WRONGPASS"},
		{name: "wrong password, continuous", env: []string{"W8Y_REDIS_PASSWORD=Wrong-Staple-11"}, args: []string{"-c"}, code: 125, line: "WRONGPASS"},
		{name: "wrong password in the URL", args: []string{"-u", "redis://worker:Url-Secret-22@127.0.0.1:" + itoa(s.Port)}, code: 125, line: "WRONGPASS"},
		{name: "password twice", env: []string{"W8Y_REDIS_PASSWORD=" + password}, args: []string{"-u", "redis://worker:Url-Secret-22@127.0.0.1:" + itoa(s.Port)}, code: 125, line: "given twice"},
		{name: "password file missing", args: []string{"--redis-password-file", filepath.Join(dir, "none")}, code: 125, line: "read --redis-password-file"},
		{name: "keys outside the user's pattern", env: []string{"W8Y_REDIS_PASSWORD=" + password}, args: []string{"-u", "redis://other@127.0.0.1:" + itoa(s.Port)}, code: 125, line: "NOPERM"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := runW8y(t, tt.env, append(append([]string{"-u", url, "-k", "acl"}, tt.args...), "printf", "%s", "{}")...)
			r.wantExit(t, tt.code)
			r.wantStdout(t, tt.ran)
			if tt.line != "" {
				oneLine(t, r.Stderr, tt.line)
			}
			for _, secret := range secrets {
				if strings.Contains(r.Stderr, secret) {
					t.Errorf("stderr shows a password:\n%s", r.Stderr)
				}
			}
		})
	}
	want := []string{"d", "a", "b", "c"}
	if got := s.list(t, "acl:list"); !slices.Equal(got, want) {
		t.Errorf("list %q, want %q: only the three good runs rotate it", got, want)
	}
	checkRecord(t, s.Client, "acl:", "a", "b", "c")
	checkStatus(t, []string{"W8Y_REDIS_PASSWORD=" + password}, []string{"-u", url, "-k", "acl"}, want...)

	// The password reaches neither the child's environment nor w8y's argv.
	r := runW8y(t, []string{"W8Y_REDIS_PASSWORD=" + password}, "-u", url, "-k", "acl", "sh", "-c",
		`echo "env=${W8Y_REDIS_PASSWORD:-unset}"; tr '\0' ' ' < /proc/$PPID/cmdline`)
	r.wantExit(t, 0)
	if !strings.HasPrefix(r.Stdout, "env=unset\n") || strings.Contains(r.Stdout, password) {
		t.Errorf("the child saw the password: %s", r)
	}
	// d ran last: a and b are next.
	checkSchedule(t, s.Client, "acl:", []string{"W8Y_REDIS_PASSWORD=" + password}, []string{"-u", url, "-k", "acl"}, "a", "b")
	checkLook(t, s.Client, []string{"W8Y_REDIS_PASSWORD=" + password}, []string{"-u", url, "-k", "acl"}, "acl:", "a")
	checkCancel(t, s, []string{"W8Y_REDIS_PASSWORD=" + password}, []string{"-u", url, "-k", "acl"}, "c")
}

// checkCancel fails the test unless a one-shot run as the ACL user (env,
// args) notices a cancel request, stops its child and finishes as cancelled
// with the reason, spending the request, and the item's next run drops the
// reason: the rule must let the refresh read the request (HMGET) and the
// finish delete it (HGET, DEL) and the reason (HDEL).
func checkCancel(t *testing.T, s *server, env, args []string, item string) {
	t.Helper()
	prefix := args[len(args)-1] + ":"
	// item is the only one free to run, and due now, as w8yctl run-now
	// makes it: a key deleted by hand alone waits for the fleet's sweep.
	if err := s.Client.Del(ctx(t), prefix+"cooldown:"+item, prefix+"backoff:"+item).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Client.ZAdd(ctx(t), prefix+"due", redis.Z{Score: 0, Member: item}).Err(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := startW8y(t, append(slices.Clone(env), "DIR="+dir), append(slices.Clone(args), "-x", "1.5", "--kill-after", "300ms", "-q",
		"sh", "-c", `echo "$W8Y_ITEM" > "$DIR/item.tmp" && mv "$DIR/item.tmp" "$DIR/item"; exec sleep 1000`)...)
	poll.WaitFor(t, "the child to start", func() bool { return len(lines(t, filepath.Join(dir, "item"))) == 1 })
	if got := lines(t, filepath.Join(dir, "item"))[0]; got != item {
		t.Fatalf("took %q, want %q", got, item)
	}
	if _, err := control.Cancel(ctx(t), s.Client, schema.Keys{Prefix: prefix, Colocated: true}, item, "by the rule", false); err != nil {
		t.Fatal(err)
	}
	p.wait(t).wantExit(t, 123)
	state := s.Client.HGetAll(ctx(t), prefix+"state:"+item).Val()
	if state["last_result"] != "cancelled" || state["last_reason"] != "by the rule" {
		t.Errorf("state of the cancelled %q: %v", item, state)
	}
	if n := s.Client.Exists(ctx(t), prefix+"cancel:"+item).Val(); n != 0 {
		t.Errorf("the finish left the cancel request")
	}
	// The cancelled item may run again at once.
	runW8y(t, env, append(slices.Clone(args), "-q", "true")...).wantExit(t, 0)
	if state := s.Client.HGetAll(ctx(t), prefix+"state:"+item).Val(); state["last_result"] != "success" || state["last_reason"] != "" {
		t.Errorf("state of %q after its next run: %v", item, state)
	}
}

// checkLook fails the test unless an idle continuous worker, run with args
// on the keys under prefix, takes item through the due index once an
// operator makes it due (c reaches the keys): the ACL rule, or the Cluster,
// must let it look (see look.lua). Every item is held, so a step of the
// fleet's sweep makes none due, and the look is the only way the item can
// be taken.
func checkLook(t *testing.T, c redis.Cmdable, env, args []string, prefix, item string) {
	t.Helper()
	runs := filepath.Join(t.TempDir(), "runs")
	p := startW8y(t, env, append(slices.Clone(args), "-c", "-q", "--cooldown", "1h", "--idle-wait", "1h",
		"sh", "-c", `echo "$W8Y_ITEM" >> "$0"`, runs)...)
	// Idle: no entry of the due index has come due (the worker took what
	// had), no item is locked, and no item is left that no worker has
	// tried.
	poll.WaitFor(t, "the worker to go idle", func() bool {
		now := strconv.FormatInt(time.Now().UnixMilli(), 10)
		if c.ZCount(ctx(t), prefix+"due", "-inf", now).Val() != 0 || c.Get(ctx(t), prefix+"untried").Val() != "0" {
			return false
		}
		for _, it := range c.LRange(ctx(t), prefix+"list", 0, -1).Val() {
			if c.Exists(ctx(t), prefix+"lock:"+it).Val() != 0 {
				return false
			}
		}
		return true
	})
	if err := c.Del(ctx(t), prefix+"cooldown:"+item, prefix+"backoff:"+item).Err(); err != nil {
		t.Fatal(err)
	}
	before := len(lines(t, runs))
	if err := c.ZAdd(ctx(t), prefix+"due", redis.Z{Score: 0, Member: item}).Err(); err != nil {
		t.Fatal(err)
	}
	poll.WaitFor(t, item+" taken through the due index", func() bool {
		got := lines(t, runs)
		return len(got) > before && got[len(got)-1] == item
	})
	p.stop(t)
}

// TestACLFleetCaps runs w8y as the recipes' ACL user under
// --fleet-max-running and --fleet-rate, one-shot and continuous: the rule
// must let a take count the running locks and claim a place, a finish free
// it, an idle worker's probe read the places, and a take push its start to
// the rate's log.
func TestACLFleetCaps(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	const password = "Horse-Battery-93f1"
	s.setACLUser(t, "worker", password, "~caps:*", strings.Fields(aclCommands)...)
	s.seed(t, "caps:list", "a", "b")
	env := []string{"W8Y_REDIS_PASSWORD=" + password}
	args := []string{"-u", "redis://worker@127.0.0.1:" + itoa(s.Port), "-k", "caps", "--fleet-max-running", "1", "--fleet-rate", "10/1h"}
	r := runW8y(t, env, append(slices.Clone(args), "printf", "%s ", "{}")...)
	r.wantExit(t, 0)
	r.wantStdout(t, "a ")
	r = runW8y(t, env, append(slices.Clone(args), "-c", "--until-idle", "--cooldown", "1h", "--idle-wait", "50ms", "printf", "%s ", "{}")...)
	r.wantExit(t, 0)
	if r.Stdout != "b a " && r.Stdout != "a b " {
		t.Errorf("the continuous worker ran %q, want each item once", r.Stdout)
	}
	if strings.Contains(r.Stderr, " WRN ") || strings.Contains(r.Stderr, " ERR ") {
		t.Errorf("the worker complained: %s", r)
	}
	if n := s.Client.SCard(ctx(t), "caps:running").Val(); n != 0 {
		t.Errorf("%d places left in use after the runs", n)
	}
	if n := s.Client.LLen(ctx(t), "caps:starts").Val(); n != 3 {
		t.Errorf("the rate's log holds %d starts, want 3", n)
	}
}

// TestACLCluster runs w8y as a limited ACL user on a Cluster without a hash
// tag, where the per-candidate path sends LMOVE and the client reads the
// slot map: docs/recipes.md's rule must cover those too.
func TestACLCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	const password = "Cluster-Horse-41"
	for _, s := range c.Nodes {
		s.setACLUser(t, "worker", password, "~acl:*", append([]string{"+cluster|slots"}, strings.Fields(aclCommands)...)...)
	}
	if err := c.Client.RPush(ctx(t), "acl:list", "a", "b").Err(); err != nil {
		t.Fatal(err)
	}
	url := strings.Replace(c.URL, "redis://", "redis://worker@", 1)
	r := runW8y(t, []string{"W8Y_REDIS_PASSWORD=" + password}, "--redis-cluster", "-u", url, "-k", "acl", "printf", "%s", "{}")
	r.wantExit(t, 0)
	r.wantStdout(t, "a")
	checkRecord(t, c.Client, "acl:", "a")
	checkStatus(t, []string{"W8Y_REDIS_PASSWORD=" + password}, []string{"--redis-cluster", "-u", url, "-k", "acl"}, "b", "a")
	env, args := []string{"W8Y_REDIS_PASSWORD=" + password}, []string{"--redis-cluster", "-u", url, "-k", "acl"}
	checkSchedule(t, c.Client, "acl:", env, args, "b", "a")
	// Both items wait now: the pipelined EXISTS of the per-candidate path
	// must see that as the limited user.
	r = runW8y(t, env, append(args, "--no-work-exit-code", "4", "printf", "ran %s", "{}")...)
	r.wantExit(t, 4) // both items paused: no work
	r.wantStdout(t, "")
}

// TestUnixSocket connects through a unix:// socket.
func TestUnixSocket(t *testing.T) {
	t.Parallel()
	// Socket paths are limited to about 100 bytes, which a test's TempDir
	// can exceed.
	dir, err := os.MkdirTemp("", "w8y-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "redis.sock")
	s := startRedis(t, redistest.Args("--unixsocket", sock, "--unixsocketperm", "700"))
	s.seed(t, "sock:list", "a", "b")
	r := runW8y(t, nil, "-u", "unix://"+sock, "-k", "sock", "printf", "%s", "{}")
	r.wantExit(t, 0)
	r.wantStdout(t, "a")
	r = runW8y(t, nil, "-u", "unix://"+sock, "--redis-cluster", "-k", "sock", "true")
	r.wantExit(t, 125)
	oneLine(t, r.Stderr, "cannot be used with --redis-cluster")
}

// TestDocsACLRule: the recipes' ACL rule grants exactly the commands that
// the ACL tests give their user (and CLUSTER SLOTS, which the Cluster test
// adds), so that a rule copied from the page is one the tests ran.
func TestDocsACLRule(t *testing.T) {
	rule := doctest.Block(t, "docs/recipes.md", "", "ACL SETUSER worker")
	var granted []string
	for _, word := range strings.Fields(rule) {
		if strings.HasPrefix(word, "+") && word != "+cluster|slots" {
			granted = append(granted, word)
		}
	}
	want := strings.Fields(aclCommands)
	slices.Sort(granted)
	slices.Sort(want)
	if !slices.Equal(granted, want) {
		t.Errorf("docs/recipes.md's ACL rule grants %q, the tests %q", granted, want)
	}
}

// TestACLWithoutTheDueIndex: an ACL user whose rule lacks a command that
// the due index needs (ZRANGEBYSCORE for a look, ZMSCORE to give an item
// passed over its entry) ends the worker with 125 and a line that points
// at the recipes' ACL rule, rather than retrying a refusal that no retry
// can mend, or taking items without the index that brings each round.
func TestACLWithoutTheDueIndex(t *testing.T) {
	t.Parallel()
	s := startRedis(t)
	const password = "Stapler-Lamp-71"
	for _, lacking := range []string{"+zrangebyscore", "+zmscore"} {
		user, prefix := "worker"+lacking[2:], "nodue"+lacking[2:]
		commands := slices.DeleteFunc(strings.Fields(aclCommands), func(c string) bool { return c == lacking })
		s.setACLUser(t, user, password, "~"+prefix+":*", commands...)
		s.seed(t, prefix+":list", "a")
		s.coolAll(t, prefix, []string{"a"}, time.Hour)
		r := runW8y(t, []string{"W8Y_REDIS_PASSWORD=" + password}, "-u", "redis://"+user+"@127.0.0.1:"+itoa(s.Port), "-k", prefix, "-c", "true")
		r.wantExit(t, 125)
		if !strings.Contains(r.Stderr, "ACL rule") || strings.Contains(r.Stderr, password) {
			t.Errorf("without %s, stderr does not point at the ACL rule, or shows the password:\n%s", lacking, r.Stderr)
		}
		if got := s.list(t, prefix+":list"); !slices.Equal(got, []string{"a"}) {
			t.Errorf("without %s, list %q, want it as it was", lacking, got)
		}
	}
}
