package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/w8y/w8y/internal/control"
	"github.com/w8y/w8y/internal/dashboard"
	"github.com/w8y/w8y/internal/status"
)

// tokenVar holds the dashboard's token, which turns its actions on.
const tokenVar = "W8Y_DASHBOARD_TOKEN"

// serveConns is the Redis pool of w8yctl serve: one connection for each
// event stream that a browser follows (XREAD blocks it), and some for the
// pages and actions.
const serveConns = 16

// shutdownGrace is how long serve waits for requests under way after
// Ctrl-C; event streams end at once.
const shutdownGrace = 5 * time.Second

// checkServe checks serve's options: it needs --addr, and reads the token
// file, which must hold a token.
func (c *command) checkServe() error {
	if c.verb.name != "serve" {
		return nil
	}
	if c.opts.Addr == "" {
		return fmt.Errorf("serve needs --addr HOST:PORT, such as --addr 127.0.0.1:8080 (usage: w8yctl %s)", c.verb.usage)
	}
	if c.opts.TokenFile != "" {
		data, err := os.ReadFile(c.opts.TokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		c.token = strings.TrimSpace(string(data))
		if c.token == "" {
			return fmt.Errorf("--token-file %q is empty: put the token in it, or leave the option out to keep actions off", c.opts.TokenFile)
		}
	}
	return nil
}

// runServe is w8yctl serve: the dashboard, until SIGINT or SIGTERM (ctx).
func runServe(ctx context.Context, c *command, fleet *control.Fleet, out *printer) error {
	ln, err := net.Listen("tcp", c.opts.Addr)
	if err != nil {
		return fmt.Errorf("cannot listen on --addr %s: %w", c.opts.Addr, err)
	}
	warnIfNoList(ctx, fleet, out)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The page's actions record who started the dashboard, as from it.
	fleet.By = c.by + " (dashboard)"
	dash := &dashboard.Server{
		Fleet:  fleet,
		Status: &status.Reader{Client: fleet.Client, Keys: fleet.Keys},
		Token:  c.token,
		Log:    out.log,
		Now:    time.Now,
	}
	srv := &http.Server{
		Handler:           dash.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		// Event streams end with the server's context, not with
		// Shutdown, which does not wait for them.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	actions := "actions off (no token)"
	if c.token != "" {
		actions = "actions on (token set)"
	}
	if _, err := fmt.Fprintf(out.w, "serving the dashboard of %q at http://%s/, %s\n", fleet.Keys.List(), ln.Addr(), actions); err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve the dashboard: %w", err)
	case <-ctx.Done():
	}
	cancel()
	shutdown, stop := context.WithTimeout(context.Background(), shutdownGrace)
	defer stop()
	err = srv.Shutdown(shutdown)
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return err
}
