# w8y's everyday commands. CI runs `make test` through .ci/run.

# Go is installed under /usr/local/go on the project's machines, which is not
# always on PATH for non-login shells.
ifeq ($(shell command -v go 2>/dev/null),)
export PATH := $(PATH):/usr/local/go/bin
endif

VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all build test bench lint demo clean

all: build

# CGO_ENABLED=0 links w8y statically: without the dynamic loader and libc's
# relocations, a one-shot run starts about a millisecond sooner (see
# README's Benchmarks). w8y needs no cgo: Go's own resolver reads
# /etc/resolv.conf and /etc/hosts.
build:
	CGO_ENABLED=0 go build -ldflags "-X main.version=$(VERSION)" -o bin/w8y .

# The integration tests start their own redis-server on a free loopback port,
# so they need redis-server and redis-cli installed, not running.
test:
	bash scripts/ensure-redis.sh
	go test -race -count=1 ./...

# The Go benchmarks measure the hot paths; scripts/bench.sh measures whole runs
# against references in the same session and prints ratios. Neither fails on
# a figure that misses its target, only on a broken run.
bench:
	bash scripts/ensure-redis.sh
	go test -run '^$$' -bench . -benchmem ./...
	bash scripts/bench.sh

lint:
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then echo "gofmt -l: these files need gofmt:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	go run $(STATICCHECK) ./...

demo:
	bash scripts/demo.sh

clean:
	rm -rf bin/ w8y
