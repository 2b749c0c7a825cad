package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Environment variables that size and steer a run (docs/chaos.md).
const (
	envAgents   = "EDGESCHED_CHAOS_AGENTS"   // agents (default 8)
	envDuration = "EDGESCHED_CHAOS_DURATION" // time faults are injected (default 45s)
	envSeed     = "EDGESCHED_CHAOS_SEED"     // the fault scheduler's seed (default: from the clock, printed)
	envMode     = "EDGESCHED_CHAOS_MODE"     // async (default) or sync rounds
	envFaults   = "EDGESCHED_CHAOS_FAULTS"   // comma-separated fault kinds (default all)
	envOut      = "EDGESCHED_CHAOS_OUT"      // directory of summaries and kept runs
	envKeep     = "EDGESCHED_CHAOS_KEEP"     // 1: keep the run's directory even when it passes
)

// Fault kinds.
const (
	faultDelay     = "link.delay"
	faultDrop      = "link.drop"
	faultCut       = "link.cut"
	faultReset     = "link.reset"
	faultAgentKill = "agent.kill"
	faultDiskFull  = "disk.full"
	faultClock     = "clock.skew"
	faultBadInput  = "bad.input"
	faultCoordKill = "coordinator.kill"
	faultCoordFail = "coordinator.failpoint"
	faultNATSKill  = "nats.kill"
)

// agentFaults and infraFaults with their relative weights: agent faults
// hit one agent each (about one per agent every agentFaultEvery), infra
// faults the shared processes (one every infraFaultEvery on average).
var (
	agentFaults = []weighted{
		{faultDelay, 20}, {faultDrop, 15}, {faultCut, 15}, {faultReset, 10},
		{faultAgentKill, 15}, {faultDiskFull, 10}, {faultClock, 8}, {faultBadInput, 7},
	}
	infraFaults = []weighted{{faultCoordKill, 40}, {faultCoordFail, 30}, {faultNATSKill, 30}}
)

const (
	agentFaultEvery = 8 * time.Second
	infraFaultEvery = 10 * time.Second
)

type weighted struct {
	kind   string
	weight int
}

// config is one run's shape.
type config struct {
	agents   int
	duration time.Duration
	seed     uint64
	mode     string
	faults   map[string]bool
	out      string
	keep     bool
}

func (c config) String() string {
	var kinds []string
	for k := range c.faults {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	return fmt.Sprintf("%d agents, %v of faults, %s rounds, seed %d, faults %s", c.agents, c.duration, c.mode, c.seed, strings.Join(kinds, ","))
}

// loadConfig reads the environment; bad values are errors naming the
// variable.
func loadConfig() (config, error) {
	c := config{agents: 8, duration: 45 * time.Second, seed: uint64(time.Now().UnixNano()), mode: "async", faults: map[string]bool{}}
	if v := os.Getenv(envAgents); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 || n > 500 {
			return c, fmt.Errorf("%s=%q: want an integer in [2, 500]", envAgents, v)
		}
		c.agents = n
	}
	if v := os.Getenv(envDuration); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 5*time.Second {
			return c, fmt.Errorf("%s=%q: want a duration of at least 5s", envDuration, v)
		}
		c.duration = d
	}
	if v := os.Getenv(envSeed); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return c, fmt.Errorf("%s=%q: %v", envSeed, v, err)
		}
		c.seed = s
	}
	if v := os.Getenv(envMode); v != "" {
		if v != "async" && v != "sync" {
			return c, fmt.Errorf("%s=%q: want async or sync", envMode, v)
		}
		c.mode = v
	}
	all := map[string]bool{}
	for _, w := range append(slices.Clone(agentFaults), infraFaults...) {
		all[w.kind] = true
	}
	if v := os.Getenv(envFaults); v != "" {
		for _, k := range strings.Split(v, ",") {
			k = strings.TrimSpace(k)
			if !all[k] {
				return c, fmt.Errorf("%s: unknown fault kind %q", envFaults, k)
			}
			c.faults[k] = true
		}
	} else {
		c.faults = all
	}
	c.out = os.Getenv(envOut)
	if c.out == "" {
		c.out = filepath.Join(os.TempDir(), "edgesched-chaos")
	}
	c.keep = os.Getenv(envKeep) == "1"
	return c, nil
}
