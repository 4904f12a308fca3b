package status

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"
	"github.com/w8y/w8y/internal/registry"
)

// writeLive writes the line under the table that says how many workers
// are live (see internal/registry). A count that cannot be read is left
// out, with a warning: the table is what --status is for.
func writeLive(ctx context.Context, w io.Writer, reader *Reader, log zerolog.Logger) {
	n, err := registry.Live(ctx, reader.Client, reader.Keys, time.Now())
	if err != nil {
		log.Warn().Err(err).Msg("could not count the live workers")
		return
	}
	fmt.Fprintf(w, "%s live (w8yctl workers lists them)\n", workersCount(n))
}

// workersCount is "1 worker" or "n workers".
func workersCount(n int64) string {
	if n == 1 {
		return "1 worker"
	}
	return fmt.Sprintf("%d workers", n)
}
