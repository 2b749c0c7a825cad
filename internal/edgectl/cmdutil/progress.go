package cmdutil

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/edgesched/edgesched/internal/cli"
)

// WantProgress reports whether to draw progress bars on w; mode (the
// --progress flag) is auto (a bar when w is a terminal), always or never;
// another value is a usage error.
func WantProgress(mode string, w io.Writer) (bool, error) {
	switch mode {
	case "never":
		return false, nil
	case "always":
		return true, nil
	case "auto", "":
		f, ok := w.(*os.File)
		return ok && term.IsTerminal(int(f.Fd())), nil
	}
	return false, cli.Usagef("--progress: %q (want auto, always or never)", mode)
}

// NewBar returns a progress callback drawing a bar on w, and a finish
// function; with show false both do nothing.
func NewBar(w io.Writer, show bool, desc string) (func(done, total int64), func()) {
	if !show {
		return nil, func() {}
	}
	var bar *progressbar.ProgressBar
	update := func(done, total int64) {
		if bar == nil {
			bar = progressbar.NewOptions64(total,
				progressbar.OptionSetWriter(w),
				progressbar.OptionSetDescription(desc),
				progressbar.OptionSetWidth(30),
				progressbar.OptionShowElapsedTimeOnFinish(),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
			)
		}
		_ = bar.Set64(done)
	}
	finish := func() {
		if bar != nil {
			_ = bar.Finish()
		}
	}
	return update, finish
}
