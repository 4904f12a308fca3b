module github.com/w8y/w8y

go 1.26.0

require (
	github.com/jessevdk/go-flags v1.6.1
	github.com/mattn/go-isatty v0.0.20
	github.com/redis/go-redis/v9 v9.23.0
	github.com/rs/zerolog v1.35.1
	golang.org/x/sys v0.48.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	go.uber.org/atomic v1.12.0 // indirect
)
