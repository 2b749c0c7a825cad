package cmdutil

import (
	"io"
	"log/slog"
)

// Options carry what a command needs from its process: the logger.
// The zero value logs nothing.
type Options struct {
	Logger *slog.Logger
}

// Log returns the logger, one that discards everything when none is set.
func (o Options) Log() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
