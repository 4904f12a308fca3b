# w8y's everyday commands. CI runs `make test` through .ci/run.

# Go is installed under /usr/local/go on the project's machines, which is not
# always on PATH for non-login shells.
ifeq ($(shell command -v go 2>/dev/null),)
export PATH := $(PATH):/usr/local/go/bin
endif

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
LDFLAGS = -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# Where make build and make man write: bin/ unless told otherwise.
BIN ?= bin
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

# The image that make image builds, and what goes into it besides make
# build's w8y and w8y-metrics (see Containerfile).
IMAGE ?= localhost/w8y:dev
BUSYBOX ?= /bin/busybox
CA_CERTIFICATES ?= /etc/ssl/certs/ca-certificates.crt

.PHONY: all build man image test test-valkey fuzz soak bench lint demo clean

all: build

# CGO_ENABLED=0 links w8y statically: without the dynamic loader and libc's
# relocations, a one-shot run starts about a millisecond sooner (see
# docs/benchmarks.md). w8y needs no cgo: Go's own resolver reads
# /etc/resolv.conf and /etc/hosts.
#
# Two builds of the same code: bin/w8y leaves out the Prometheus client
# (-tags w8y_lean), whose start-up cost every one-shot run would pay, and
# bin/w8y-metrics has it; bin/w8y hands a run with --metrics-addr over to
# bin/w8y-metrics next to it (see metrics_off.go). Install both, and
# bin/w8yctl, the operators' command (cmd/w8yctl).
build:
	CGO_ENABLED=0 go build -tags w8y_lean -ldflags "$(LDFLAGS)" -o $(BIN)/w8y .
	CGO_ENABLED=0 go build -ldflags "$(LDFLAGS)" -o $(BIN)/w8y-metrics .
	CGO_ENABLED=0 go build -ldflags "$(LDFLAGS)" -o $(BIN)/w8yctl ./cmd/w8yctl

# The man page, generated from the options so that it cannot drift from
# them; dated by the last commit, so that the same source gives the same page.
man: build
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || date +%s) $(BIN)/w8y --man-page >$(BIN)/w8y.1
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || date +%s) $(BIN)/w8yctl --man-page >$(BIN)/w8yctl.1

# The container image, FROM scratch, from a context of its own in
# $(BIN)/image: make build's static builds, a static busybox and the
# system's CAs (an empty bundle where there are none). podman runs as
# scripts/podman.sh sets it up.
image: build
	bash scripts/ensure-podman.sh
	mkdir -p $(BIN)/image
	cp $(BIN)/w8y $(BIN)/w8y-metrics $(BUSYBOX) $(BIN)/image/
	if [ -r $(CA_CERTIFICATES) ]; then cp $(CA_CERTIFICATES) $(BIN)/image/ca-certificates.crt; else : >$(BIN)/image/ca-certificates.crt; fi
	bash scripts/podman.sh build --quiet -t $(IMAGE) -f Containerfile $(BIN)/image

# The integration tests start their own redis-server on a free loopback port,
# so they need redis-server and redis-cli installed, not running; the
# dashboard's browser test needs Debian's chromium.
# The chaos test runs on its own, with -v so that its figures (runs, faults
# of each kind, overlaps found) are printed, and without the other tests
# competing for the CPU.
#
# The alert rules that ship (examples/monitoring/) are checked and their unit
# tests run with promtool, from Debian's prometheus package.
# Then the tests that talk to a server run again on Valkey
# (W8Y_TEST_SERVER=valkey, see internal/redistest): the integration suite
# with its chaos test, and redisconn's test of the servers' own error
# replies. The unit tests do not depend on the server and run once.
test:
	bash scripts/ensure-redis.sh
	bash scripts/ensure-valkey.sh
	bash scripts/ensure-podman.sh
	bash scripts/ensure-chromium.sh
	bash scripts/ensure-promtool.sh
	promtool check rules examples/monitoring/w8y-alerts.yml
	promtool test rules examples/monitoring/w8y-alerts.test.yml
	go test -race -count=1 -skip '^TestChaos$$' ./...
	go test -race -count=1 -run '^TestChaos$$' -v ./integration_test/
	$(MAKE) test-valkey

test-valkey:
	bash scripts/ensure-valkey.sh
	W8Y_TEST_SERVER=valkey go test -race -count=1 -skip '^TestChaos$$' ./internal/redistest/ ./internal/redisconn/ ./integration_test/
	W8Y_TEST_SERVER=valkey go test -race -count=1 -run '^TestChaos$$' -v ./integration_test/

# Each fuzz target for FUZZTIME: what users type (durations, options, Redis
# URLs) and what Redis hands back (items of any bytes through the key
# schema and the status). Their seed corpora, with every crasher found so far
# under testdata/fuzz, run as plain tests in make test. go test fuzzes one
# target of one package at a time.
FUZZTIME ?= 30s
FUZZ_TARGETS = FuzzParse:./internal/duration/ FuzzOptions:. FuzzURL:./internal/redisconn/ \
	FuzzKeys:./internal/schema/ FuzzDecode:./internal/status/
fuzz:
	set -e; for t in $(FUZZ_TARGETS); do \
		go test -run '^$$' -fuzz "^$${t%%:*}$$" -fuzztime $(FUZZTIME) "$${t#*:}"; \
	done

# The chaos test for longer, with more workers and items: 10 minutes by default.
SOAK_SECONDS ?= 600
soak:
	bash scripts/ensure-redis.sh
	W8Y_CHAOS_SECONDS=$(SOAK_SECONDS) W8Y_CHAOS_WORKERS=8 W8Y_CHAOS_ITEMS=20 \
		go test -race -count=1 -timeout 0 -run '^TestChaos$$' -v ./integration_test/

# The Go benchmarks measure the hot paths; scripts/bench.sh measures whole runs
# against references in the same session and prints ratios, and
# scripts/bench-fleet.sh the Redis CPU of idle and busy fleets and how soon
# idle workers take what comes due, scripts/bench-take.sh what a take costs
# Redis over a long list (one-shot runs, starts, busy workers), and
# scripts/bench-lean.sh the summary without the list, a whole --status, an
# item's bytes and a busy item's commands and Redis CPU against a bare
# EVALSHA. None fails on a figure that misses its target, only on a broken
# run.
bench:
	bash scripts/ensure-redis.sh
	go test -run '^$$' -bench . -benchmem ./...
	bash scripts/bench.sh
	bash scripts/bench-fleet.sh
	bash scripts/bench-take.sh
	bash scripts/bench-lean.sh

lint:
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then echo "gofmt -l: these files need gofmt:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	go run $(STATICCHECK) ./...
	go vet -tags w8y_lean .
	go run $(STATICCHECK) -tags w8y_lean .

demo:
	bash scripts/demo.sh

clean:
	rm -rf bin/ w8y
