package chaos

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/test/internal/boltcheck"
	"github.com/edgesched/edgesched/test/internal/gobuild"
	"github.com/edgesched/edgesched/test/internal/netfault"
)

// Package paths of the programs a run starts.
const (
	coordPkg = "./cmd/edge-coordinator"
	agentPkg = "./test/chaos/cmd/chaos-agent"
	natsPkg  = "github.com/nats-io/nats-server/v2"
)

// tmpfsSize is each agent's data disk: its agent.db (a few models of a
// few KB and the outbox) fits many times over, so only the disk.full
// fault fills it.
const tmpfsSize = 16 << 20

// binaries are the programs of a run.
type binaries struct{ coord, agent, nats string }

// buildBinaries builds the coordinator and the chaos agent (without the
// race detector) and the NATS server go.mod pins; without the latter it
// falls back to a nats-server on PATH, or skips.
func buildBinaries(t *testing.T, dir string) binaries {
	t.Helper()
	began := time.Now()
	paths := gobuild.Build(t, dir, coordPkg, agentPkg)
	b := binaries{coord: paths[0], agent: paths[1]}
	if p, err := gobuild.TryBuild(dir, natsPkg); err == nil {
		b.nats = p[0]
	} else if sys, lerr := exec.LookPath("nats-server"); lerr == nil {
		t.Logf("building %s failed (%v); using %s", natsPkg, err, sys)
		b.nats = sys
	} else {
		t.Skipf("chaos: no NATS server: building %s failed (%v) and none is on PATH", natsPkg, err)
	}
	t.Logf("programs built in %v", time.Since(began).Round(time.Millisecond))
	return b
}

// agentNode is one site: its agent process, proxy, disk and history.
type agentNode struct {
	site    string
	seed    uint64
	dataDir string // agent.db (a tmpfs when mounted)
	tmpfs   bool
	history string
	logPath string
	keyPath string
	proxy   *netfault.Proxy
	proc    *proc
	skew    time.Duration
	filler  string // the file that fills the disk, while disk.full lasts
	busy    bool   // a fault is under way
	down    bool   // killed, restart pending
}

// cluster is one run's processes and files. Its methods are called from
// the test goroutine only (the fault scheduler runs there too).
type cluster struct {
	t        *testing.T
	cfg      config
	dir      string
	bins     binaries
	rng      *rand.Rand
	natsPort int
	natsDir  string
	nats     *proc
	natsDown bool
	coord    *proc
	// coordDown: killed, restart pending.
	coordDown bool
	coordArgs []string
	coordLog  string
	coordDB   string
	modelKey  string // the coordinator's public key file
	siteKeys  map[string]*quant.Signer
	agents    []*agentNode
	nc        *nats.Conn // the harness's own connection (probes, bad input)
	tmpfs     bool       // agent disks are tmpfs mounts
	tmpfsWhy  string     // why not

	// figures
	faults  map[string]int // injected, by kind
	skipped int            // fault slots with no free target
	fired   int            // failpoints the coordinator hit
	// startFailures: coordinator starts that exited because NATS was
	// down (it does not retry its first connection)
	startFailures int
	boltChecks    int // coordinator.db and agent.db checks after kills
	boltFailed    []string
	crashes       []string // unexpected exits and crash marks in logs
	badInput      badInputCounts
	restarts      map[string]int // by role
	natsOutages   time.Duration
	coordOut      time.Duration
}

// newCluster writes keys, the start model and the fleet's directories,
// and mounts the agents' disks.
func newCluster(t *testing.T, cfg config, dir string, bins binaries) *cluster {
	t.Helper()
	c := &cluster{t: t, cfg: cfg, dir: dir, bins: bins, rng: rand.New(rand.NewPCG(cfg.seed, 0xc4a05)),
		siteKeys: map[string]*quant.Signer{}, faults: map[string]int{}, restarts: map[string]int{}}
	keyDir, sitesDir := filepath.Join(dir, "keys"), filepath.Join(dir, "sites")
	for _, d := range []string{keyDir, sitesDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// keys are derived from the seed, like everything else
	keyRand := rand.NewChaCha8([32]byte{byte(cfg.seed), byte(cfg.seed >> 8), byte(cfg.seed >> 16), byte(cfg.seed >> 24), 0xc4})
	coordKey, _, err := quant.GenerateKey(keyRand)
	if err != nil {
		t.Fatal(err)
	}
	coordPriv, coordPub, err := quant.WriteKeyPair(keyDir, "coordinator", coordKey)
	if err != nil {
		t.Fatal(err)
	}
	c.modelKey = coordPub
	start, err := nn.NewNet(policy.NumFeatures, 64, 64, 64, rand.New(rand.NewPCG(cfg.seed, 1)))
	if err != nil {
		t.Fatal(err)
	}
	modelPath := filepath.Join(dir, "start.esm")
	if err := nn.WriteFile(modelPath, &nn.Model{Schema: policy.NewSchema(), Net: start}, "model", nil, nil); err != nil {
		t.Fatal(err)
	}
	c.tmpfs, c.tmpfsWhy = true, ""
	for i := range cfg.agents {
		site := fmt.Sprintf("site-%03d", i)
		s, _, err := quant.GenerateKey(keyRand)
		if err != nil {
			t.Fatal(err)
		}
		c.siteKeys[site] = s
		priv, pub, err := quant.WriteKeyPair(keyDir, site, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(pub, filepath.Join(sitesDir, site+".pub")); err != nil {
			t.Fatal(err)
		}
		a := &agentNode{site: site, seed: cfg.seed ^ uint64(i+1)*0x9e37, keyPath: priv,
			dataDir: filepath.Join(dir, "agents", site, "data"), history: filepath.Join(dir, "agents", site, "history.jsonl"),
			logPath: filepath.Join(dir, "agents", site, "agent.log")}
		if err := os.MkdirAll(a.dataDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if c.tmpfs {
			if err := syscall.Mount("tmpfs", a.dataDir, "tmpfs", 0, "size="+strconv.Itoa(tmpfsSize)); err != nil {
				c.tmpfs, c.tmpfsWhy = false, fmt.Sprintf("mount tmpfs on %s: %v", a.dataDir, err)
			} else {
				a.tmpfs = true
				dd := a.dataDir
				t.Cleanup(func() { _ = syscall.Unmount(dd, syscall.MNT_DETACH) })
			}
		}
		c.agents = append(c.agents, a)
	}
	if !c.tmpfs {
		// an agent mounted before the failure keeps its disk; no disk is filled
		t.Logf("disk.full disabled: %s", c.tmpfsWhy)
		delete(c.cfg.faults, faultDiskFull)
	}
	c.natsDir = filepath.Join(dir, "nats")
	c.natsPort = freePort(t)
	dataDir := filepath.Join(dir, "coordinator")
	c.coordDB = filepath.Join(dataDir, "coordinator.db")
	c.coordLog = filepath.Join(dir, "coordinator.log")
	c.coordArgs = []string{"--server", c.natsURL(), "--data", dataDir, "--key", coordPriv, "--sites", sitesDir, "--model", modelPath,
		"--calibrate", "builtin:factory-vision", "--mode", cfg.mode, "--auto-rounds",
		"--local-iterations", "1", "--local-episodes", "1", "--seed", strconv.FormatUint(cfg.seed, 10), "--log-level", "info",
		// the nats-server binary's storage limit is a share of the disk
		// free at start, which the default 4 GiB stream can exceed
		"--update-max-bytes", strconv.Itoa(256 << 20)}
	if cfg.mode == "async" {
		// one aggregation per ~agents updates: about one a second
		c.coordArgs = append(c.coordArgs, "--buffer", strconv.Itoa(max(2, cfg.agents)))
	} else {
		// sync rounds close at the deadline with the sites that made it
		c.coordArgs = append(c.coordArgs, "--round-duration", "5s", "--min-updates", strconv.Itoa(max(1, cfg.agents/4)))
	}
	return c
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (c *cluster) natsAddr() string { return "127.0.0.1:" + strconv.Itoa(c.natsPort) }
func (c *cluster) natsURL() string  { return "nats://" + c.natsAddr() }

// startNATS starts the NATS server (JetStream, file store) and waits
// until it takes connections.
func (c *cluster) startNATS() {
	t := c.t
	args := []string{"-a", "127.0.0.1", "-p", strconv.Itoa(c.natsPort), "-js", "-sd", c.natsDir, "-n", "chaos-nats"}
	p, err := startProc("nats-server", c.bins.nats, args, nil, filepath.Join(c.dir, "nats.log"))
	if err != nil {
		t.Fatal(err)
	}
	c.nats, c.natsDown = p, false
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", c.natsAddr(), time.Second)
		if err == nil {
			conn.Close()
			return
		}
		if p.exited() {
			t.Fatalf("nats-server exited: %s\n%s", p.outcome(), tail(p.logPath, 2000))
		}
		if time.Now().After(deadline) {
			t.Fatalf("nats-server not listening on %s: %v", c.natsAddr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startCoordinator starts edge-coordinator, with a failpoint armed when
// failpoint is not empty.
func (c *cluster) startCoordinator(failpoint string) {
	var env []string
	if failpoint != "" {
		env = append(env, "EDGESCHED_FAILPOINT="+failpoint)
	}
	p, err := startProc("edge-coordinator", c.bins.coord, c.coordArgs, env, c.coordLog)
	if err != nil {
		c.t.Fatal(err)
	}
	p.failpoint = failpoint
	c.coord, c.coordDown = p, false
}

// startAgent starts (or restarts) an agent's process.
func (c *cluster) startAgent(a *agentNode) {
	args := []string{"--site", a.site, "--site-key", a.keyPath, "--model-keys", c.modelKey, "--server", "nats://" + a.proxy.Addr(),
		"--data", a.dataDir, "--history", a.history, "--seed", strconv.FormatUint(a.seed, 10),
		"--fleet-seed", strconv.FormatUint(c.cfg.seed, 10), "--clock-skew", a.skew.String(), "--quiesce-file", c.quiesceFile(),
		// a huge outbox: nothing is dropped for room, so an update
		// missing at the end is lost, not dropped by policy
		"--outbox-limit", "1000000"}
	p, err := startProc(a.site, c.bins.agent, args, nil, a.logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	a.proc, a.down = p, false
}

// quiesceFile is the file whose existence stops every agent's training
// (the drain at the end of a run).
func (c *cluster) quiesceFile() string { return filepath.Join(c.dir, "quiesce") }

// startFleet starts every agent behind a new proxy.
func (c *cluster) startFleet() {
	for _, a := range c.agents {
		p, err := netfault.New(c.natsAddr())
		if err != nil {
			c.t.Fatal(err)
		}
		a.proxy = p
		c.t.Cleanup(func() { _ = p.Close() })
		c.startAgent(a)
	}
}

// connect opens the harness's own NATS connection (direct, no proxy).
func (c *cluster) connect() {
	nc, err := nats.Connect(c.natsURL(), nats.Name("chaos-harness"), nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(100*time.Millisecond), nats.Timeout(2*time.Second))
	if err != nil {
		c.t.Fatal(err)
	}
	c.nc = nc
	c.t.Cleanup(nc.Close)
}

// waitCoordinator waits until the coordinator answers on its admin API.
func (c *cluster) waitCoordinator(within time.Duration) error {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		if c.coord.exited() {
			return fmt.Errorf("edge-coordinator exited: %s", c.coord.outcome())
		}
		_, err := c.nc.Request(federated.AdminSubjectPrefix+"."+coordinator.EndpointRoundList, []byte("{}"), 500*time.Millisecond)
		if err == nil {
			return nil
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("edge-coordinator not serving within %v: %v", within, last)
}

// checkBolt runs bbolt's check on a file its process left behind.
func (c *cluster) checkBolt(path, when string) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return // killed before it created the file
	}
	c.boltChecks++
	if err := boltcheck.Check(path); err != nil {
		c.boltFailed = append(c.boltFailed, fmt.Sprintf("%s: %v", when, err))
		c.t.Errorf("bbolt check %s: %v", when, err)
	}
}

// stopAll stops agents, the coordinator and NATS with SIGTERM (in that
// order), expecting clean exits.
func (c *cluster) stopAll() {
	errs := make(chan error, len(c.agents))
	for _, a := range c.agents {
		go func() { errs <- a.proc.term(20 * time.Second) }()
	}
	for range c.agents {
		if err := <-errs; err != nil {
			c.crashes = append(c.crashes, err.Error())
		}
	}
	if err := c.coord.term(30 * time.Second); err != nil {
		c.crashes = append(c.crashes, err.Error())
	}
	if err := c.nats.term(30 * time.Second); err != nil {
		c.crashes = append(c.crashes, err.Error())
	}
}
