package main

import (
	"errors"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/w8y/w8y/internal/duration"
	"github.com/w8y/w8y/internal/finish"
	"github.com/w8y/w8y/internal/schema"
)

func TestParseOptions(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(t *testing.T, o *Options)
		wantErr string
	}{
		{
			name: "defaults",
			args: []string{"echo", "{}"},
			check: func(t *testing.T, o *Options) {
				if o.URL != "redis://localhost:6379" || o.KeyPrefix != "" || time.Duration(o.KeyExpiry) != 5*time.Second {
					t.Errorf("defaults: url %q prefix %q expiry %s", o.URL, o.KeyPrefix, time.Duration(o.KeyExpiry))
				}
				if !slices.Equal(o.ExitCodes, []int{0}) || o.NoWorkExitCode != 0 || time.Duration(o.IdleWait) != time.Second {
					t.Errorf("defaults: exit codes %v, no-work %d, idle %s", o.ExitCodes, o.NoWorkExitCode, time.Duration(o.IdleWait))
				}
				// 10s does not fit in the default 5s expiry: a third of it does.
				if o.LogFormat != "console" || time.Duration(o.KillAfter.Flag) != 5*time.Second/3 || o.Timeout != 0 || o.Subreaper {
					t.Errorf("defaults: log format %q kill-after %s timeout %s subreaper %v", o.LogFormat, time.Duration(o.KillAfter.Flag), time.Duration(o.Timeout), o.Subreaper)
				}
			},
		},
		{
			name: "parsing stops at the executable",
			args: []string{"-k", "work", "ls", "-l", "-k", "{}"},
			check: func(t *testing.T, o *Options) {
				if !slices.Equal(o.Command, []string{"ls", "-l", "-k", "{}"}) {
					t.Errorf("command %q", o.Command)
				}
			},
		},
		{
			name: "double dash",
			args: []string{"-c", "--", "-weird-name", "--flag"},
			check: func(t *testing.T, o *Options) {
				if !o.Continuous || !slices.Equal(o.Command, []string{"-weird-name", "--flag"}) {
					t.Errorf("continuous %v command %q", o.Continuous, o.Command)
				}
			},
		},
		{
			name: "prefix forced to end in a colon",
			args: []string{"-k", "work", "true"},
			check: func(t *testing.T, o *Options) {
				if o.KeyPrefix != "work:" {
					t.Errorf("prefix %q", o.KeyPrefix)
				}
			},
		},
		{
			name: "prefix with colon kept",
			args: []string{"--key-prefix=a:b:", "true"},
			check: func(t *testing.T, o *Options) {
				if o.KeyPrefix != "a:b:" {
					t.Errorf("prefix %q", o.KeyPrefix)
				}
			},
		},
		{name: "expiry in seconds", args: []string{"-x", "30", "true"}, check: expiryIs(30 * time.Second)},
		{name: "expiry in fractional seconds", args: []string{"-x", "0.5", "true"}, check: expiryIs(500 * time.Millisecond)},
		{name: "expiry as a Go duration", args: []string{"--key-expiry", "1500ms", "true"}, check: expiryIs(1500 * time.Millisecond)},
		{
			name: "repeated exit codes replace the default",
			args: []string{"-i", "3", "-i", "4", "true"},
			check: func(t *testing.T, o *Options) {
				if !slices.Equal(o.ExitCodes, []int{3, 4}) {
					t.Errorf("exit codes %v", o.ExitCodes)
				}
			},
		},
		{
			name: "exit codes apart by commas, with spaces, in the variable and on the command line",
			args: []string{"-i", "5, 6", "true"},
			env:  map[string]string{"W8Y_EXIT_CODES": "0, 3"},
			check: func(t *testing.T, o *Options) {
				if !slices.Equal(o.ExitCodes, []int{5, 6}) {
					t.Errorf("exit codes %v", o.ExitCodes)
				}
			},
		},
		{
			name: "exit codes with spaces in the variable",
			args: []string{"true"},
			env:  map[string]string{"W8Y_EXIT_CODES": " 0 , 3 "},
			check: func(t *testing.T, o *Options) {
				if !slices.Equal(o.ExitCodes, []int{0, 3}) {
					t.Errorf("exit codes %v", o.ExitCodes)
				}
			},
		},
		{
			name: "a one-dash word after the executable is the executable's",
			args: []string{"-k", "w", "ls", "-continuous"},
			check: func(t *testing.T, o *Options) {
				if !slices.Equal(o.Command, []string{"ls", "-continuous"}) {
					t.Errorf("command %q", o.Command)
				}
			},
		},
		{
			name: "options from the environment",
			args: []string{"true"},
			env: map[string]string{
				"W8Y_REDIS_URL": "redis://example.invalid:1", "W8Y_KEY_PREFIX": "jobs", "W8Y_CONTINUOUS": "true",
				"W8Y_EXIT_CODES": "0,3", "W8Y_KEY_EXPIRY": "2s", "W8Y_ENV_VAR": "ITEM", "W8Y_LOG_FORMAT": "json",
				"W8Y_QUIET": "true", "W8Y_IDLE_WAIT": "250ms", "W8Y_NO_WORK_EXIT_CODE": "3",
			},
			check: func(t *testing.T, o *Options) {
				if o.URL != "redis://example.invalid:1" || o.KeyPrefix != "jobs:" || !o.Continuous || !o.Quiet {
					t.Errorf("url %q prefix %q continuous %v quiet %v", o.URL, o.KeyPrefix, o.Continuous, o.Quiet)
				}
				if !slices.Equal(o.ExitCodes, []int{0, 3}) || time.Duration(o.KeyExpiry) != 2*time.Second || o.EnvVar != "ITEM" {
					t.Errorf("exit codes %v expiry %s env var %q", o.ExitCodes, time.Duration(o.KeyExpiry), o.EnvVar)
				}
				if o.LogFormat != "json" || time.Duration(o.IdleWait) != 250*time.Millisecond || o.NoWorkExitCode != 3 {
					t.Errorf("log format %q idle %s no-work %d", o.LogFormat, time.Duration(o.IdleWait), o.NoWorkExitCode)
				}
			},
		},
		{
			name: "kill-after defaults to 10s when the expiry allows it",
			args: []string{"-x", "60", "true"},
			check: func(t *testing.T, o *Options) {
				if time.Duration(o.KillAfter.Flag) != 10*time.Second {
					t.Errorf("kill-after %s", time.Duration(o.KillAfter.Flag))
				}
			},
		},
		{
			name: "kill-after of a third of the expiry fits",
			args: []string{"-x", "3", "--kill-after", "1s", "--timeout", "1m", "--subreaper", "true"},
			check: func(t *testing.T, o *Options) {
				if time.Duration(o.KillAfter.Flag) != time.Second || time.Duration(o.Timeout) != time.Minute || !o.Subreaper {
					t.Errorf("kill-after %s timeout %s subreaper %v", time.Duration(o.KillAfter.Flag), time.Duration(o.Timeout), o.Subreaper)
				}
			},
		},
		{
			name: "zero kill-after is an immediate SIGKILL",
			args: []string{"--kill-after", "0", "true"},
			check: func(t *testing.T, o *Options) {
				if o.KillAfter.Flag != 0 {
					t.Errorf("kill-after %s", time.Duration(o.KillAfter.Flag))
				}
			},
		},
		{
			name: "timeout and kill-after from the environment",
			args: []string{"true"},
			env:  map[string]string{"W8Y_TIMEOUT": "90", "W8Y_KILL_AFTER": "500ms", "W8Y_SUBREAPER": "true"},
			check: func(t *testing.T, o *Options) {
				if time.Duration(o.Timeout) != 90*time.Second || time.Duration(o.KillAfter.Flag) != 500*time.Millisecond || !o.Subreaper {
					t.Errorf("timeout %s kill-after %s subreaper %v", time.Duration(o.Timeout), time.Duration(o.KillAfter.Flag), o.Subreaper)
				}
			},
		},
		{
			name: "a flag beats the environment",
			args: []string{"-k", "flag", "true"},
			env:  map[string]string{"W8Y_KEY_PREFIX": "env"},
			check: func(t *testing.T, o *Options) {
				if o.KeyPrefix != "flag:" {
					t.Errorf("prefix %q", o.KeyPrefix)
				}
			},
		},
		{
			name: "record defaults",
			args: []string{"true"},
			check: func(t *testing.T, o *Options) {
				if time.Duration(o.StateTTL) != 7*24*time.Hour || o.NoEvents || o.EventsMaxLen != 10000 || o.MetricsAddr != "" {
					t.Errorf("state TTL %s, no events %v, max len %d, metrics %q", time.Duration(o.StateTTL), o.NoEvents, o.EventsMaxLen, o.MetricsAddr)
				}
			},
		},
		{
			name: "scheduling off by default",
			args: []string{"true"},
			check: func(t *testing.T, o *Options) {
				if o.Cooldown != 0 || o.FailureBackoff != (finish.Backoff{}) || o.Parallel != 1 || o.MaxItems != 0 || o.MaxRuntime != 0 {
					t.Errorf("cooldown %s backoff %+v parallel %d max items %d max runtime %s", time.Duration(o.Cooldown), o.FailureBackoff, o.Parallel, o.MaxItems, time.Duration(o.MaxRuntime))
				}
				if !o.stopsOnFailure() {
					t.Error("without --failure-backoff, a failure must stop a continuous worker as before")
				}
			},
		},
		{
			name: "deployment options",
			args: []string{"--redis-cluster", "--tls-ca-cert", "ca.pem", "--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-server-name", "r", "--redis-password-file", "pw", "true"},
			check: func(t *testing.T, o *Options) {
				if !o.Cluster || o.TLSCACert != "ca.pem" || o.TLSCert != "c.pem" || o.TLSKey != "k.pem" || o.TLSServerName != "r" || o.PasswordFile != "pw" {
					t.Errorf("options %+v", o)
				}
			},
		},
		{
			name: "record options from the environment",
			args: []string{"true"},
			env:  map[string]string{"W8Y_STATE_TTL": "1h", "W8Y_NO_EVENTS": "true", "W8Y_EVENTS_MAX_LEN": "50", "W8Y_METRICS_ADDR": ":9100"},
			check: func(t *testing.T, o *Options) {
				if time.Duration(o.StateTTL) != time.Hour || !o.NoEvents || o.EventsMaxLen != 50 || o.MetricsAddr != ":9100" {
					t.Errorf("state TTL %s, no events %v, max len %d, metrics %q", time.Duration(o.StateTTL), o.NoEvents, o.EventsMaxLen, o.MetricsAddr)
				}
			},
		},
		{
			name: "status needs no executable",
			args: []string{"--status", "-k", "work"},
			check: func(t *testing.T, o *Options) {
				if !o.Status || o.JSON || o.Watch != 0 || o.KeyPrefix != "work:" {
					t.Errorf("status %v json %v watch %s prefix %q", o.Status, o.JSON, time.Duration(o.Watch), o.KeyPrefix)
				}
			},
		},
		{
			name: "status watch defaults to 2s",
			args: []string{"--status", "--json", "--watch"},
			check: func(t *testing.T, o *Options) {
				if !o.JSON || time.Duration(o.Watch) != 2*time.Second {
					t.Errorf("json %v watch %s", o.JSON, time.Duration(o.Watch))
				}
			},
		},
		{
			name: "status watch interval",
			args: []string{"--status", "--watch=500ms"},
			check: func(t *testing.T, o *Options) {
				if time.Duration(o.Watch) != 500*time.Millisecond {
					t.Errorf("watch %s", time.Duration(o.Watch))
				}
			},
		},
		{name: "status with an executable", args: []string{"--status", "true"}, wantErr: "--status takes no executable"},
		{name: "json without status", args: []string{"--json", "true"}, wantErr: "go with --status"},
		{name: "watch without status", args: []string{"--watch", "1s", "true"}, wantErr: "go with --status"},
		{name: "watch too fast", args: []string{"--status", "--watch=1ms"}, wantErr: "--watch must be at least"},
		{name: "state TTL too short", args: []string{"--state-ttl", "5s", "true"}, wantErr: "--state-ttl must be at least"},
		{name: "events cap of zero", args: []string{"--events-max-len", "0", "true"}, wantErr: "--events-max-len must be at least 1"},
		{
			name: "failure backoff with MIN only: MAX is ten times MIN, and failures go on",
			args: []string{"--failure-backoff", "30s", "--cooldown", "10m", "true"},
			check: func(t *testing.T, o *Options) {
				if o.FailureBackoff != (finish.Backoff{Min: 30 * time.Second, Max: 300 * time.Second}) || time.Duration(o.Cooldown) != 10*time.Minute {
					t.Errorf("backoff %+v cooldown %s", o.FailureBackoff, time.Duration(o.Cooldown))
				}
				if o.stopsOnFailure() {
					t.Error("with --failure-backoff, a failure must not stop a continuous worker unless asked")
				}
			},
		},
		{
			name: "failure backoff with MIN and MAX, stopping on failure anyway",
			args: []string{"--failure-backoff=1.5, 2m", "--stop-on-failure", "true"},
			check: func(t *testing.T, o *Options) {
				if o.FailureBackoff != (finish.Backoff{Min: 1500 * time.Millisecond, Max: 2 * time.Minute}) || !o.stopsOnFailure() {
					t.Errorf("backoff %+v stops on failure %v", o.FailureBackoff, o.stopsOnFailure())
				}
			},
		},
		{
			name: "scheduling from the environment",
			args: []string{"true"},
			env: map[string]string{
				"W8Y_COOLDOWN": "90", "W8Y_FAILURE_BACKOFF": "1s,5s", "W8Y_PARALLEL": "4", "W8Y_CONTINUOUS": "1",
				"W8Y_MAX_ITEMS": "100", "W8Y_MAX_RUNTIME": "1h", "W8Y_STOP_ON_FAILURE": "true",
			},
			check: func(t *testing.T, o *Options) {
				if time.Duration(o.Cooldown) != 90*time.Second || o.FailureBackoff != (finish.Backoff{Min: time.Second, Max: 5 * time.Second}) || o.Parallel != 4 {
					t.Errorf("cooldown %s backoff %+v parallel %d", time.Duration(o.Cooldown), o.FailureBackoff, o.Parallel)
				}
				if o.MaxItems != 100 || time.Duration(o.MaxRuntime) != time.Hour || !o.StopOnFailure {
					t.Errorf("max items %d max runtime %s stop on failure %v", o.MaxItems, time.Duration(o.MaxRuntime), o.StopOnFailure)
				}
			},
		},
		{
			name: "schedule in a zone with jitter",
			args: []string{"--schedule", "0 2 * * *", "--schedule-timezone", "Europe/Paris", "--jitter", "10m", "true"},
			check: func(t *testing.T, o *Options) {
				if !o.cron.Set() || o.cron.Zone.String() != "Europe/Paris" || o.cron.Jitter != 10*time.Minute {
					t.Errorf("cron %+v", o.cron)
				}
			},
		},
		{
			name: "schedule from the environment, seconds first",
			args: []string{"true"},
			env:  map[string]string{"W8Y_SCHEDULE": "*/2 * * * * *", "W8Y_JITTER": "1s"},
			check: func(t *testing.T, o *Options) {
				if !o.cron.Set() || o.cron.Zone.String() != "UTC" || o.cron.Jitter != time.Second {
					t.Errorf("cron %+v", o.cron)
				}
			},
		},
		{name: "schedule and cooldown", args: []string{"--schedule", "@hourly", "--cooldown", "1h", "true"}, wantErr: "--schedule and --cooldown are alternatives: give one"},
		{name: "schedule garbage", args: []string{"--schedule", "every day", "true"}, wantErr: `--schedule "every day" is not a cron expression`},
		{name: "schedule with four fields", args: []string{"--schedule", "0 2 * *", "true"}, wantErr: "give five fields"},
		{name: "schedule out of range", args: []string{"--schedule", "0 25 * * *", "true"}, wantErr: "is not a cron expression"},
		{name: "schedule of two words", args: []string{"--schedule", "every day", "true"}, wantErr: `--schedule "every day" is not a cron expression (it has 2 fields)`},
		{name: "schedule with a word for an hour", args: []string{"--schedule", "0 two * * *", "true"}, wantErr: `--schedule "0 two * * *" is not a cron expression ("two" is not a number)`},
		{name: "schedule that never comes", args: []string{"--schedule", "0 0 30 2 *", "true"}, wantErr: "has no slot in the next five years"},
		{name: "schedule as a delay", args: []string{"--schedule", "@every 5m", "true"}, wantErr: `--schedule "@every 5m" is a delay, not slots of the clock: for at most one run per delay, give --cooldown instead`},
		{name: "schedule with its zone inside", args: []string{"--schedule", "CRON_TZ=Europe/Paris 0 2 * * *", "true"}, wantErr: "give the time zone with --schedule-timezone"},
		{name: "schedule zone unknown", args: []string{"--schedule", "@daily", "--schedule-timezone", "Mars/Olympus", "true"}, wantErr: `--schedule-timezone "Mars/Olympus" is not a time zone`},
		{name: "schedule zone Local", args: []string{"--schedule", "@daily", "--schedule-timezone", "Local", "true"}, wantErr: "is not a time zone"},
		{name: "jitter without schedule", args: []string{"--jitter", "1m", "true"}, wantErr: "--jitter goes with --schedule"},
		{name: "negative jitter", args: []string{"--schedule", "@daily", "--jitter", "-1m", "true"}, wantErr: "--jitter must not be negative"},
		{name: "negative cooldown", args: []string{"--cooldown", "-1s", "true"}, wantErr: "--cooldown must not be negative"},
		{name: "cooldown below a millisecond", args: []string{"--cooldown", "10us", "true"}, wantErr: "--cooldown must be 0 or at least 1ms"},
		{name: "backoff MIN too short", args: []string{"--failure-backoff", "1ms", "true"}, wantErr: "--failure-backoff MIN must be at least 10ms"},
		{name: "backoff MAX below MIN", args: []string{"--failure-backoff", "10s,5s", "true"}, wantErr: "MAX 5s is less than MIN 10s"},
		{name: "backoff garbage", args: []string{"--failure-backoff", "soon", "true"}, wantErr: "neither seconds"},
		{name: "backoff garbage MAX", args: []string{"--failure-backoff", "1s,later", "true"}, wantErr: "neither seconds"},
		{
			name: "fleet cap", args: []string{"true"}, env: map[string]string{"W8Y_FLEET_MAX_RUNNING": "5"},
			check: func(t *testing.T, o *Options) {
				if o.FleetMaxRunning != 5 {
					t.Errorf("FleetMaxRunning %d, want 5", o.FleetMaxRunning)
				}
			},
		},
		// A cap of 0 would run nothing: refused, not read as no cap.
		{name: "fleet cap zero", args: []string{"--fleet-max-running", "0", "true"}, wantErr: `--fleet-max-running "0": "0" is not a number of places: give a whole number of at least 1 (leave the option out for no cap)`},
		{name: "fleet cap word", args: []string{"--fleet-max-running", "many", "true"}, wantErr: `--fleet-max-running "many": "many" is not a number of places`},
		{name: "fleet cap fraction", args: []string{"--fleet-max-running", "2.5", "true"}, wantErr: `"2.5" is not a number of places`},
		{
			name: "fleet rate", args: []string{"true"}, env: map[string]string{"W8Y_FLEET_RATE": "100/1h"},
			check: func(t *testing.T, o *Options) {
				if o.FleetRate != (schema.Rate{Starts: 100, Per: time.Hour}) {
					t.Errorf("FleetRate %+v, want 100/1h", o.FleetRate)
				}
			},
		},
		{name: "fleet rate without a window", args: []string{"--fleet-rate", "5", "true"}, wantErr: `--fleet-rate "5": "5" is not a rate: give N/DURATION, at most N starts in any DURATION, such as 100/1h or 5/2s`},
		{name: "fleet rate zero", args: []string{"--fleet-rate", "0/1s", "true"}, wantErr: `--fleet-rate "0/1s": "0/1s" is not a rate: N must be a whole number of starts from 1 to 1000000, as in 100/1h (leave the option out for no rate)`},
		{name: "fleet rate zero window", args: []string{"--fleet-rate", "5/0s", "true"}, wantErr: `--fleet-rate "5/0s": "5/0s" is not a rate: the DURATION after the slash must be at least 1ms and not inf, as in 100/1h`},
		{name: "fleet rate word", args: []string{"--fleet-rate", "x/1s", "true"}, wantErr: `--fleet-rate "x/1s": "x/1s" is not a rate: N must be a whole number`},
		{name: "fleet rate variable", args: []string{"true"}, env: map[string]string{"W8Y_FLEET_RATE": "fast"}, wantErr: `"fast" is not a rate`},
		{name: "zero parallel", args: []string{"--parallel", "0", "true"}, wantErr: "--parallel must be at least 1"},
		{name: "negative keep-output", args: []string{"--keep-output", "-1", "true"}, wantErr: "--keep-output must be from 0 to 1048576 bytes (1 MiB), got -1"},
		{name: "keep-output past its bound", args: []string{"--keep-output", "1048577", "true"}, wantErr: "--keep-output must be from 0 to 1048576 bytes (1 MiB), got 1048577"},
		{name: "negative max items", args: []string{"-c", "--max-items", "-1", "true"}, wantErr: "--max-items must not be negative"},
		{name: "negative max runtime", args: []string{"-c", "--max-runtime", "-1s", "true"}, wantErr: "--max-runtime must not be negative"},
		{name: "max items without --continuous", args: []string{"--max-items", "3", "true"}, wantErr: "bound a --continuous worker"},
		{name: "max runtime without --continuous", args: []string{"--max-runtime", "1m", "true"}, wantErr: "bound a --continuous worker"},
		{name: "until-idle without --continuous", args: []string{"--until-idle", "true"}, wantErr: "bound a --continuous worker"},
		{name: "backoff MAX beyond the state TTL", args: []string{"--failure-backoff", "1m,2h", "--state-ttl", "1h", "true"}, wantErr: "longer than --state-ttl 1h0m0s"},
		{
			name: "secrets only from the environment",
			args: []string{"--sentinel-master", "m", "--replica-acks", "1", "true"},
			env:  map[string]string{"W8Y_REDIS_PASSWORD": "p1", "W8Y_SENTINEL_PASSWORD": "p2", "W8Y_TLS_INSECURE_SKIP_VERIFY": "true"},
			check: func(t *testing.T, o *Options) {
				if o.Password != "p1" || o.SentinelPassword != "p2" || o.SentinelMaster != "m" || o.ReplicaAcks != 1 || !o.TLSInsecureSkipVerify {
					t.Errorf("password %q sentinel password %q master %q acks %d skip %v", o.Password, o.SentinelPassword, o.SentinelMaster, o.ReplicaAcks, o.TLSInsecureSkipVerify)
				}
			},
		},
		{name: "no flag for the password", args: []string{"--redis-password", "x", "true"}, wantErr: "unknown flag 'redis-password'"},
		{name: "cluster and sentinel", args: []string{"--redis-cluster", "--sentinel-master", "m", "true"}, wantErr: "exclude each other"},
		{name: "cert without key", args: []string{"--tls-cert", "c.pem", "true"}, wantErr: "go together"},
		{name: "key without cert", args: []string{"--tls-key", "k.pem", "true"}, wantErr: "go together"},
		{name: "password twice", args: []string{"--redis-password-file", "pw", "true"}, env: map[string]string{"W8Y_REDIS_PASSWORD": "x"}, wantErr: "given twice"},
		{name: "negative replica acks", args: []string{"--replica-acks", "-1", "true"}, wantErr: "--replica-acks must not be negative"},
		{name: "replica acks on a cluster", args: []string{"--replica-acks", "1", "--redis-cluster", "true"}, wantErr: "does not work with --redis-cluster"},
		{name: "unknown flag", args: []string{"--bogus", "true"}, wantErr: "unknown flag 'bogus'"},
		{name: "missing executable", args: []string{"-k", "work"}, wantErr: "missing executable"},
		{name: "empty executable", args: []string{""}, wantErr: "executable name is empty"},
		{name: "zero expiry", args: []string{"-x", "0", "true"}, wantErr: "--key-expiry must be at least"},
		{name: "negative expiry", args: []string{"-x", "-5", "true"}, wantErr: "--key-expiry must be at least"},
		{name: "garbage expiry", args: []string{"-x", "soon", "true"}, wantErr: "neither seconds nor a duration"},
		{name: "negative kill-after", args: []string{"--kill-after", "-1s", "true"}, wantErr: "--kill-after"},
		{name: "kill-after longer than the expiry allows", args: []string{"-x", "5", "--kill-after", "10s", "true"}, wantErr: "--kill-after 10s cannot fit in --key-expiry 5s"},
		{name: "kill-after from the environment too long", args: []string{"-x", "3", "true"}, env: map[string]string{"W8Y_KILL_AFTER": "1001ms"}, wantErr: "raise --key-expiry to 3.003s"},
		{name: "negative timeout", args: []string{"--timeout", "-1s", "true"}, wantErr: "--timeout must not be negative"},
		// Duration edges (see internal/duration): a value too long to count
		// is forever, never a wrapped-round negative; a tiny positive one is
		// a nanosecond, never the zero that means none; nan is refused.
		{name: "infinite timeout", args: []string{"--timeout", "inf", "true"}, check: wantDurations(map[string]time.Duration{"timeout": duration.Forever})},
		{name: "timeout beyond 292 years", args: []string{"--timeout", "1e300", "true"}, check: wantDurations(map[string]time.Duration{"timeout": duration.Forever})},
		{name: "tiny timeout still times out", args: []string{"--timeout", "1e-10", "true"}, check: wantDurations(map[string]time.Duration{"timeout": time.Nanosecond})},
		{name: "days", args: []string{"--cooldown", "30d", "--state-ttl", "1.5d", "true"}, check: wantDurations(map[string]time.Duration{"cooldown": 30 * 24 * time.Hour, "state-ttl": 36 * time.Hour})},
		{name: "huge key expiry", args: []string{"-x", "99999999999999999999", "true"}, check: wantDurations(map[string]time.Duration{"key-expiry": duration.Forever, "kill-after": 10 * time.Second})},
		{name: "infinite backoff MIN", args: []string{"--failure-backoff", "inf", "--state-ttl", "inf", "true"}, check: func(t *testing.T, o *Options) {
			if o.FailureBackoff.Min != duration.Forever || o.FailureBackoff.Max != duration.Forever {
				t.Errorf("backoff %+v", o.FailureBackoff)
			}
		}},
		{name: "nan timeout", args: []string{"--timeout", "nan", "true"}, wantErr: `"nan" is not a length of time`},
		{name: "negative infinite timeout", args: []string{"--timeout=-inf", "true"}, wantErr: "--timeout must not be negative, got -inf"},
		{name: "kill-after of 1e10 seconds", args: []string{"--kill-after", "1e10", "true"}, wantErr: "--kill-after inf cannot fit in --key-expiry 5s"},
		{name: "infinite kill-after", args: []string{"--kill-after", "inf", "true"}, wantErr: "at most a third of --key-expiry (1.666666666s); lower --kill-after"},
		{name: "nan kill-after", args: []string{"--kill-after", "nan", "true"}, wantErr: `"nan" is not a length of time`},
		{name: "infinite kill-after from the environment", args: []string{"-x", "3", "true"}, env: map[string]string{"W8Y_KILL_AFTER": "Infinity"}, wantErr: "--kill-after inf cannot fit"},
		{name: "huge kill-after in days", args: []string{"--kill-after", "106752d", "true"}, wantErr: "--kill-after inf cannot fit"},
		{name: "kill-after of days beyond the expiry", args: []string{"-x", "3", "--kill-after", "30d", "true"}, wantErr: "raise --key-expiry to 2160h0m0s or more"},
		{name: "idle wait that would spin", args: []string{"--idle-wait", "0", "true"}, wantErr: "--idle-wait"},
		{name: "exit code out of range", args: []string{"-i", "256", "true"}, wantErr: `-i "256": "256" is not an exit code: give numbers from 0 to 255`},
		{name: "exit code list with a word", args: []string{"--exit-codes=0,x", "true"}, env: map[string]string{"W8Y_EXIT_CODES": "1"}, wantErr: `--exit-codes "0,x": "x" is not an exit code`},
		{name: "garbage expiry names the flag as written", args: []string{"--key-expiry=soon", "true"}, wantErr: `--key-expiry "soon": "soon" is neither seconds nor a duration`},
		{name: "bad boolean variable", args: []string{"true"}, env: map[string]string{"W8Y_CONTINUOUS": "yes"}, wantErr: `W8Y_CONTINUOUS="yes": not true or false (nor 1 or 0)`},
		{name: "bad choice from a variable", args: []string{"true"}, env: map[string]string{"W8Y_LOG_FORMAT": "xml"}, wantErr: `W8Y_LOG_FORMAT="xml": not one of console, json`},
		{name: "bad number", args: []string{"--parallel", "two", "true"}, wantErr: `--parallel "two": not a whole number`},
		{name: "a value for a switch", args: []string{"--continuous=yes", "true"}, wantErr: "--continuous takes no value"},
		{name: "long option with one dash", args: []string{"-continuous", "true"}, wantErr: "-continuous: long options take two dashes: did you mean --continuous?"},
		{name: "long option with one dash that -k would swallow", args: []string{"-key-prefix", "w", "true"}, wantErr: "did you mean --key-prefix?"},
		{name: "a flag that overrides a bad variable wins", args: []string{"-x", "soon", "true"}, env: map[string]string{"W8Y_KEY_EXPIRY": "later"}, wantErr: `-x "soon"`},
		{name: "a URL from a variable, its password hidden", args: []string{"true"}, env: map[string]string{"W8Y_REDIS_URL": "redis://u:hunter2@host/-3"}, wantErr: `the database "-3" is not a number from 0 up (from W8Y_REDIS_URL="redis://u:xxxxx@host/-3")`},
		{name: "validation names the variable that set the option", args: []string{"true"}, env: map[string]string{"W8Y_PARALLEL": "0"}, wantErr: `--parallel must be at least 1, got 0 (from W8Y_PARALLEL="0")`},
		{name: "no-work exit code out of range", args: []string{"--no-work-exit-code", "-1", "true"}, wantErr: "--no-work-exit-code"},
		{name: "bad log format", args: []string{"--log-format", "xml", "true"}, wantErr: "xml"},
		{name: "bad env var name", args: []string{"-e", "A=B", "true"}, wantErr: "not a valid environment variable"},
		{name: "bad environment value", args: []string{"true"}, env: map[string]string{"W8Y_KEY_EXPIRY": "later"}, wantErr: "neither seconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("W8Y_REDIS_PASSWORD", "")
			t.Setenv("W8Y_SENTINEL_PASSWORD", "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			o, err := parseOptions(tt.args, io.Discard)
			if tt.wantErr != "" {
				if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want a usage error containing %q", err, tt.wantErr)
				}
				// A user writes options and values, not Go's types.
				if goSpeak.MatchString(err.Error()) {
					t.Errorf("error %q speaks Go", err)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error spans lines: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			tt.check(t, o)
		})
	}
}

// goSpeak finds what go-flags and strconv say in Go's words: type names
// and function names, which mean nothing to a user.
var goSpeak = regexp.MustCompile(`expected [a-z]+\.|strconv\.|main\.|duration\.Flag|runs\.Backoff|\[\]int|invalid syntax|: \[`)

// expiryIs is a check of TestParseOptions: the lock's expiry came out as
// want.
func expiryIs(want time.Duration) func(*testing.T, *Options) {
	return func(t *testing.T, o *Options) {
		t.Helper()
		if got := time.Duration(o.KeyExpiry); got != want {
			t.Errorf("expiry %s, want %s", got, want)
		}
	}
}

// wantDurations checks the duration options named by their long names.
func wantDurations(want map[string]time.Duration) func(t *testing.T, o *Options) {
	return func(t *testing.T, o *Options) {
		t.Helper()
		got := map[string]time.Duration{
			"timeout": time.Duration(o.Timeout), "cooldown": time.Duration(o.Cooldown), "state-ttl": time.Duration(o.StateTTL),
			"key-expiry": time.Duration(o.KeyExpiry), "kill-after": time.Duration(o.KillAfter.Flag),
		}
		for name, d := range want {
			if got[name] != d {
				t.Errorf("--%s %s, want %s", name, got[name], d)
			}
		}
	}
}
