package fldemo

import (
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/policy/ppo"
)

// Config configures a demo run. Start from DefaultConfig.
type Config struct {
	// Out is the output directory (required): site scenarios, the NATS
	// store, the coordinator's and sites' databases, results and plots.
	Out string
	// Sites are the simulated sites (at least two).
	Sites []Site
	// Rounds of federated training (sync FedAvg, every site in every
	// round); the local-only comparison trains each site alone for as
	// many rounds of the same size.
	Rounds int
	// Local is each round's training at a site.
	Local federated.LocalTraining
	// ServerLR scales the aggregated delta before it is applied
	// (coordinator.Config.ServerLR; plain FedAvg is 1). The default is 2:
	// averaging four sites' heterogeneous PPO steps shortens the step the
	// global model takes per round, and a server step size above 1 (as in
	// FedOpt-style server optimisers) gives it back.
	ServerLR float64
	// HeldOut are the scenario generator seeds of the evaluation
	// workloads; training draws its workloads from other seeds.
	HeldOut []uint64
	// Baselines are baseline schedulers compared on the same workloads.
	Baselines []string
	// Train is the PPO configuration every site trains with (its env's
	// scenario is set per site); Hidden sizes the network.
	Train  ppo.Config
	Hidden int
	// Seed drives keys, the initial network and training; it is printed.
	Seed uint64
	// Progress receives one line per event (nil: none).
	Progress io.Writer
	Logger   *slog.Logger
}

// trainYAML is the sites' PPO configuration: the shipped edge model's
// reward and hyper-parameters (configs/train-edge.yaml), trained on fresh
// workloads of the site's scenario.
const trainYAML = `apiVersion: edgesched.io/v1alpha1
kind: TrainConfig
name: federated-site
seed: 1
env: {scenario: builtin:retail-fleet, mode: replay, nodeFraction: 1, freshWorkloads: true}
network: {hidden1: 32, hidden2: 32, criticHidden: 32}
bc: {episodes: 0}
ppo: {iterations: 1, episodesPerIteration: 1, epochs: 4, minibatch: 512, clip: 0.2, gamma: 0.99, lambda: 0.95,
      lr: 0.001, valueCoef: 0.5, entropyCoef: 0.003, maxGradNorm: 0.5, targetKL: 0.03}
reward: {failureCount: 2, crossZone: 5, latency: 0.1, utilization: 2}
eval: {seeds: [], measure: reward, maximize: true}
workers: 1
`

// DefaultConfig returns a run that fits `make demo`'s five minutes on two
// cores: four sites, 8 rounds of 3 PPO iterations x 2 episodes, server
// learning rate 2.
func DefaultConfig() Config {
	cfg, err := ppo.ParseConfig([]byte(trainYAML), "fldemo")
	if err != nil {
		panic(fmt.Sprintf("fldemo: built-in training config: %v", err)) // a constant
	}
	return Config{
		Sites: DefaultSites(), Rounds: 8,
		Local: federated.LocalTraining{Iterations: 3, Episodes: 2, LR: 1e-3}, ServerLR: 2,
		HeldOut:   []uint64{101, 102, 103},
		Baselines: []string{"k8s-default", "best-fit"},
		Train:     cfg, Hidden: 32, Seed: 1,
	}
}

// ErrConfig wraps configuration refusals.
var ErrConfig = errors.New("fldemo: bad config")

// Validate names the first bad field.
func (c *Config) Validate() error {
	switch {
	case c.Out == "":
		return fmt.Errorf("%w: Out required", ErrConfig)
	case len(c.Sites) < 2:
		return fmt.Errorf("%w: %d sites (at least 2: the comparison evaluates each site's policy on the others)", ErrConfig, len(c.Sites))
	case c.Rounds < 1:
		return fmt.Errorf("%w: Rounds %d", ErrConfig, c.Rounds)
	case c.Local.Iterations < 1 || c.Local.Episodes < 1 || !(c.Local.LR > 0 && c.Local.LR < 1):
		return fmt.Errorf("%w: Local %+v", ErrConfig, c.Local)
	case !(c.ServerLR > 0 && c.ServerLR <= 10):
		return fmt.Errorf("%w: ServerLR %v (want (0, 10])", ErrConfig, c.ServerLR)
	case len(c.HeldOut) == 0:
		return fmt.Errorf("%w: no HeldOut seeds", ErrConfig)
	case c.Hidden < 1 || c.Hidden > 256:
		return fmt.Errorf("%w: Hidden %d", ErrConfig, c.Hidden)
	}
	seen := map[string]bool{}
	for _, s := range c.Sites {
		if !federated.ValidSite(s.Name) || seen[s.Name] {
			return fmt.Errorf("%w: site name %q (a unique DNS label)", ErrConfig, s.Name)
		}
		seen[s.Name] = true
	}
	return nil
}
