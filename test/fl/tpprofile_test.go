//go:build unix

package fl

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"
)

// tpProfile names a folder for profiles of the throughput benchmark's
// timed part only (-cpuprofile also covers the untimed encoding of every
// site's update, about half of the process's CPU time):
//
//	go test -run '^$' -bench CoordinatorThroughput -benchtime 1x ./test/fl/ -args -tp.profile /tmp/tp
//
// writes cpu-N.pb.gz, block-N.pb.gz and mutex-N.pb.gz for round N.
var tpProfile = flag.String("tp.profile", "", "write CPU, block and mutex profiles of each timed throughput round into this folder")

// tpProfiler profiles one timed round (a no-op without -tp.profile).
type tpProfiler struct {
	tb  testing.TB
	f   *os.File
	dir string
	n   int
}

var tpRounds int // rounds profiled so far (file names)

func startTPProfile(tb testing.TB) *tpProfiler {
	tb.Helper()
	if *tpProfile == "" {
		return &tpProfiler{}
	}
	if err := os.MkdirAll(*tpProfile, 0o755); err != nil {
		tb.Fatal(err)
	}
	tpRounds++
	p := &tpProfiler{tb: tb, dir: *tpProfile, n: tpRounds}
	runtime.SetBlockProfileRate(10_000) // one blocking event per 10 µs blocked
	runtime.SetMutexProfileFraction(5)
	var err error
	if p.f, err = os.Create(filepath.Join(p.dir, fmt.Sprintf("cpu-%d.pb.gz", p.n))); err != nil {
		tb.Fatal(err)
	}
	if err := pprof.StartCPUProfile(p.f); err != nil {
		tb.Fatal(err)
	}
	return p
}

func (p *tpProfiler) stop() {
	if p.f == nil {
		return
	}
	pprof.StopCPUProfile()
	if err := p.f.Close(); err != nil {
		p.tb.Fatal(err)
	}
	p.f = nil
	for _, name := range []string{"block", "mutex"} {
		f, err := os.Create(filepath.Join(p.dir, fmt.Sprintf("%s-%d.pb.gz", name, p.n)))
		if err == nil {
			err = pprof.Lookup(name).WriteTo(f, 0)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			p.tb.Fatal(err)
		}
	}
	runtime.SetBlockProfileRate(0)
	runtime.SetMutexProfileFraction(0)
}
