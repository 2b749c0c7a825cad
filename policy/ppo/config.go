package ppo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/edgesched/edgesched/internal/boundedio"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/sim/openb"
	"github.com/edgesched/edgesched/sim/scenario"
	"github.com/edgesched/edgesched/sim/scenario/family"
	"go.yaml.in/yaml/v3"
)

// ErrConfig wraps every refusal of a training configuration.
var ErrConfig = errors.New("ppo: bad config")

// Config is a training configuration (YAML, kind TrainConfig). Start from
// DefaultConfig; docs/training.md documents every field.
type Config struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Name       string `yaml:"name"`
	// Seed drives everything random in training: slices, sampled pods,
	// actions, minibatches.
	Seed uint64    `yaml:"seed"`
	Env  EnvConfig `yaml:"env"`
	Net  NetConfig `yaml:"network"`
	BC   BCConfig  `yaml:"bc"`
	// Refine is an optional second cloning stage (typically a planning
	// teacher on the whole cluster, recording the top candidates of the
	// decisions that matter) run after BC and before PPO.
	Refine  *BCConfig `yaml:"refine"`
	PPO     PPOConfig `yaml:"ppo"`
	Reward  Reward    `yaml:"reward"`
	Eval    Eval      `yaml:"eval"`
	Workers int       `yaml:"workers"`
	// CheckpointEvery writes a checkpoint every N PPO iterations (0: only
	// at the end).
	CheckpointEvery int `yaml:"checkpointEvery"`
	// Decision is the decision rule written into the final model
	// (policy.Decision). Training and the selection of the kept network
	// use plain argmax; the rule is chosen afterwards, on selection
	// workloads, with the network fixed (docs/training.md). Zero: none.
	Decision policy.Decision `yaml:"decision,omitempty"`
}

// EnvConfig says what the policy is trained on.
type EnvConfig struct {
	// Nodes and Pods are openb lists (files or openb:NAME); Scenario is a
	// scenario file or builtin:NAME. Give one or the other.
	Nodes    string `yaml:"nodes"`
	Pods     string `yaml:"pods"`
	Scenario string `yaml:"scenario"`
	// Scenarios trains on several scenarios instead of Scenario (with
	// FreshWorkloads): the episode or evaluation seed s replays scenario
	// s mod len(Scenarios) generated with seed s.
	Scenarios []string `yaml:"scenarios,omitempty"`
	// Mode is inflate or replay.
	Mode string `yaml:"mode"`
	// InflateTarget ends training episodes (share of capacity).
	InflateTarget float64 `yaml:"inflateTarget"`
	// NodeFraction trains on random slices of the cluster holding this
	// share of its nodes (1: the whole cluster every episode).
	NodeFraction float64 `yaml:"nodeFraction"`
	// FreshWorkloads draws a new scenario generator seed for every
	// training episode; evaluation then runs on the workloads generated
	// with the eval seeds.
	FreshWorkloads bool `yaml:"freshWorkloads"`
	// WarmStart [lo, hi] (inflate): the teacher places pods until the
	// allocated share of capacity reaches a level drawn uniformly from
	// [lo, hi]; PPO learns from there on, where placements decide failures.
	// Empty: the learner acts from the first pod.
	WarmStart []float64 `yaml:"warmStart"`
	// Mixtures (openb inputs): every training episode draws its workload
	// from this distribution of mixtures of the pod list (openb.Mix), so
	// the policy sees the proportions it will meet, not one trace's;
	// evaluation runs on mixtures drawn with the eval seeds (none of them a
	// training one). Nil: the pod list itself.
	Mixtures *Mixtures `yaml:"mixtures,omitempty"`
	// BackgroundLoad (scenarios) puts work outside Kubernetes on a random
	// share of every episode's and evaluation's nodes, drawn from its
	// seed (sim.BackgroundLoad; it replaces a scenario's own). Nil: the
	// scenarios as they are.
	BackgroundLoad *scenario.BackgroundLoad `yaml:"backgroundLoad,omitempty"`
}

// Mixtures is a distribution of openb.Mix: each share is drawn uniformly
// from its [lo, hi] range; with probability 1 - SpecProbability the
// mixture has no pods naming GPU models.
type Mixtures struct {
	CPU             []float64 `yaml:"cpu"`
	Share           []float64 `yaml:"share"`
	Multi           []float64 `yaml:"multi"`
	Spec            []float64 `yaml:"spec"`
	SpecProbability float64   `yaml:"specProbability"`
	SpecSets        []int     `yaml:"specSets"`
}

func (m *Mixtures) validate() error {
	for _, r := range []struct {
		name string
		v    []float64
	}{{"cpu", m.CPU}, {"share", m.Share}, {"multi", m.Multi}, {"spec", m.Spec}} {
		if len(r.v) != 2 || !(r.v[0] >= 0 && r.v[0] <= r.v[1] && r.v[1] <= 1) {
			return fmt.Errorf("%s: want [lo, hi] with 0 <= lo <= hi <= 1, got %v", r.name, r.v)
		}
	}
	switch {
	case m.Share[1]+m.Multi[1] > 1:
		return fmt.Errorf("share and multi may add up to more than 1 (%v + %v)", m.Share[1], m.Multi[1])
	case !(m.SpecProbability >= 0 && m.SpecProbability <= 1):
		return fmt.Errorf("specProbability %v, want [0, 1]", m.SpecProbability)
	case len(m.SpecSets) != 2 || m.SpecSets[0] < 1 || m.SpecSets[0] > m.SpecSets[1] || m.SpecSets[1] > 64:
		return fmt.Errorf("specSets: want [lo, hi] with 1 <= lo <= hi <= 64, got %v", m.SpecSets)
	}
	return nil
}

// Draw returns the mixture of generator seed s over base.
func (m *Mixtures) Draw(base string, s uint64) openb.Mix {
	rng := rand.New(rand.NewPCG(s, 0x3a1e))
	u := func(r []float64) float64 { return r[0] + rng.Float64()*(r[1]-r[0]) }
	mx := openb.Mix{Base: base, CPU: u(m.CPU), Share: u(m.Share), Multi: u(m.Multi), Seed: s}
	spec := u(m.Spec)
	if rng.Float64() < m.SpecProbability {
		mx.Spec = spec
	}
	mx.SpecSets = m.SpecSets[0] + rng.IntN(m.SpecSets[1]-m.SpecSets[0]+1)
	return mx
}

// NetConfig sizes the network.
type NetConfig struct {
	Hidden1      int `yaml:"hidden1"`
	Hidden2      int `yaml:"hidden2"`
	CriticHidden int `yaml:"criticHidden"`
	// Exclude names features or feature groups (policy.FeatureGroups:
	// telemetry, dependencies, carbon) the network does not read: their
	// first-layer weights start and stay at zero (ablations; models of
	// workloads without them). Empty: every feature.
	Exclude []string `yaml:"exclude,omitempty"`
}

// BCConfig is the behaviour-cloning warm start: the actor imitates a
// teacher baseline on the teacher's own rollouts, and the critic learns
// the teacher's returns. Episodes 0 skips it.
type BCConfig struct {
	// Teacher is a deterministic baseline name, or "fgd-lookahead" for the
	// planning teacher configured by Lookahead.
	Teacher   string    `yaml:"teacher"`
	Lookahead Lookahead `yaml:"lookahead"`
	// SoftTargets, when > 0, clones the teacher's ranking instead of its
	// choice alone: the target of each decision is softmax(SoftTargets x
	// the teacher's scores) over the recorded candidates, so near-equal
	// nodes get near-equal targets (an inverse temperature, per score
	// unit; FGD's score has one unit per fragmentation level). 0: the
	// teacher's choice.
	SoftTargets float64 `yaml:"softTargets,omitempty"`
	// PressureWeight is the weight of the fgd-pressure teacher
	// (baseline.FGDPressurePolicy; 0: its default).
	PressureWeight float64 `yaml:"pressureWeight,omitempty"`
	// StrandWeight is the strand weight of the fgd-strand teacher
	// (baseline.FGDStrandPolicy, whose pressure weight is PressureWeight;
	// 0: its default).
	StrandWeight float64 `yaml:"strandWeight,omitempty"`
	Episodes     int     `yaml:"episodes"`
	Epochs       int     `yaml:"epochs"`
	LR           float64 `yaml:"lr"`
	// RecordFrom records the teacher's decisions only once the allocated
	// share of the primary resource reaches it (0: all decisions).
	RecordFrom float64 `yaml:"recordFrom"`
	// RecordTopK keeps only the teacher's TopK best candidates of each
	// decision (0: all), so planning teachers on large clusters stay cheap
	// to learn from.
	RecordTopK int `yaml:"recordTopK"`
	// NodeFraction overrides env.nodeFraction for the cloning episodes
	// (0: same).
	NodeFraction float64 `yaml:"nodeFraction"`
	// BackgroundLoad (scenarios) puts work outside Kubernetes on the
	// cloning episodes' nodes only (as env.backgroundLoad does on every
	// episode, which it replaces here): the teacher shows its answer to
	// measured load that the policy's own episodes may rarely reach. Nil:
	// env.backgroundLoad.
	BackgroundLoad *scenario.BackgroundLoad `yaml:"backgroundLoad,omitempty"`
}

// PPOConfig holds the PPO hyper-parameters.
type PPOConfig struct {
	Iterations      int     `yaml:"iterations"`
	EpisodesPerIter int     `yaml:"episodesPerIteration"`
	Epochs          int     `yaml:"epochs"`
	Minibatch       int     `yaml:"minibatch"`
	Clip            float64 `yaml:"clip"`
	Gamma           float64 `yaml:"gamma"`
	Lambda          float64 `yaml:"lambda"`
	LR              float64 `yaml:"lr"`
	ValueCoef       float64 `yaml:"valueCoef"`
	EntropyCoef     float64 `yaml:"entropyCoef"`
	MaxGradNorm     float64 `yaml:"maxGradNorm"`
	// TargetKL stops an iteration's epochs early once the approximate KL
	// divergence from the rollout policy exceeds 1.5 x this (0: never).
	TargetKL float64 `yaml:"targetKL"`
}

// Reward weights the per-decision reward, after the project's founding
// formula Reward = w1 (1 - fragmentation) + w2 (application performance)
// - w3 (decision latency), with penalties for failed placements,
// cross-zone dependency traffic and carbon. Every term is a change caused
// by the decision, so the episode's return sums to the end state's value.
type Reward struct {
	// Fragmentation (w1): minus the change of the cluster's fragmented
	// share (GPU when the typical pod needs one, CPU otherwise).
	Fragmentation float64 `yaml:"fragmentation"`
	// Latency (w2): minus the placed pod's latency proxy / 100 ms.
	Latency float64 `yaml:"latency"`
	// LatencyProxy: minus the placed pod's latency proxy as the
	// simulator's latency measures compute it (sim.State.LatencyProxy:
	// the node's telemetry — bursts, interference, memory pressure, NIC —
	// and the RTT to its callees now) / 100 ms, after the placement.
	// Omitted when zero, so models trained before it keep their bytes.
	LatencyProxy float64 `yaml:"latencyProxy,omitempty"`
	// DecisionLatency (w3): minus the candidates scored / 1000 (a
	// deterministic stand-in for scoring time).
	DecisionLatency float64 `yaml:"decisionLatency"`
	// Failure: minus the demand share of a pod that fitted nowhere (GPU
	// demand / GPU capacity when the typical pod needs a GPU, CPU
	// otherwise), plus minus FailureCount per such pod.
	Failure      float64 `yaml:"failure"`
	FailureCount float64 `yaml:"failureCount"`
	// CrossZone: minus the change of the cross-zone share of dependency
	// traffic.
	CrossZone float64 `yaml:"crossZone"`
	// CrossZonePod: minus the share of the placed service pod's own
	// dependency call rate (to its callees' and from its callers' running
	// replicas) that crosses zones (sim.State.PodCrossZoneShare), charged
	// at every service-pod placement like the latency terms, so that
	// co-location weighs per pod rather than once per episode as
	// CrossZone's changes sum to. Omitted when zero, so models trained
	// before it keep their bytes.
	CrossZonePod float64 `yaml:"crossZonePod,omitempty"`
	// Carbon: minus the placed pod's emission rate / 100 gCO2/h.
	Carbon float64 `yaml:"carbon"`
	// Utilization: plus the change of the used-CPU share of the nodes that
	// run pods.
	Utilization float64 `yaml:"utilization"`
}

// Eval picks the best model: the greedy policy is run on the full cluster
// or scenario every Every iterations over Seeds, and Measure ("reward" for
// the greedy episodes' return, or a simulator measure name) decides.
type Eval struct {
	Seeds    []uint64 `yaml:"seeds"`
	Every    int      `yaml:"every"`
	Measure  string   `yaml:"measure"`
	Maximize bool     `yaml:"maximize"`
	// InflateTarget of the evaluation runs (inflate mode).
	InflateTarget float64 `yaml:"inflateTarget"`
}

// DefaultConfig is a training on the openb default trace.
func DefaultConfig() Config {
	return Config{
		APIVersion: "edgesched.io/v1alpha1", Kind: "TrainConfig", Name: "default", Seed: 42,
		Env:     EnvConfig{Nodes: "openb:all_node", Pods: "openb:default", Mode: "inflate", InflateTarget: 1.05, NodeFraction: 0.125},
		Net:     NetConfig{Hidden1: 32, Hidden2: 32, CriticHidden: 32},
		BC:      BCConfig{Teacher: "fgd", Episodes: 16, Epochs: 3, LR: 3e-3},
		PPO:     PPOConfig{Iterations: 40, EpisodesPerIter: 4, Epochs: 3, Minibatch: 256, Clip: 0.2, Gamma: 1, Lambda: 0.95, LR: 3e-4, ValueCoef: 0.5, EntropyCoef: 0.001, MaxGradNorm: 0.5, TargetKL: 0.02},
		Reward:  Reward{Fragmentation: 1, Failure: 1},
		Eval:    Eval{Seeds: []uint64{1001, 1002}, Every: 5, Measure: "unallocated_gpu_share_at_100", InflateTarget: 1.05},
		Workers: 2, CheckpointEvery: 5,
	}
}

// Caps of the training's counts (docs/training.md, "Configuration"). Training
// sizes slices by them up front and holds every episode of a stage in
// memory, so a count beyond its cap is refused rather than run: 1e15
// episodes failed in makeslice, 1e10 asked for 80 GB before the first
// episode. The shipped configurations use at most 32 episodes, 12
// epochs, 80 iterations and minibatches of 512; a federated round at
// most 1000 episodes and 10,000 iterations (federated.LocalTraining).
const (
	// MaxEpisodes caps bc.episodes, refine.episodes and
	// ppo.episodesPerIteration.
	MaxEpisodes = 10_000
	// MaxEpochs caps bc.epochs, refine.epochs and ppo.epochs.
	MaxEpochs = 1_000_000
	// MaxIterations caps ppo.iterations (and a checkpoint's iteration).
	MaxIterations = 1_000_000
	// MaxMinibatch caps ppo.minibatch.
	MaxMinibatch = 1_000_000
)

// Validate checks the configuration and names the first bad field.
func (c *Config) Validate() error { return c.validate(true) }

// heldOutFamily returns the first scenario of env that names a held-out
// family (builtin:NAME or builtin:NAME@vN), or "".
func heldOutFamily(env EnvConfig) string {
	for _, ref := range append([]string{env.Scenario}, env.Scenarios...) {
		name, ok := strings.CutPrefix(ref, "builtin:")
		if !ok {
			continue
		}
		if info, err := family.Lookup(name); err == nil && info.Role == family.HeldOut {
			return ref
		}
	}
	return ""
}

// validate is Validate; without env, the environment's source (scenario,
// scenarios or openb lists) is not checked: FineTune's is in memory.
func (c *Config) validate(env bool) error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, field, fmt.Sprintf(format, args...))
	}
	pos := func(v float64) bool { return v > 0 && !math.IsInf(v, 0) }
	nonneg := func(v float64) bool { return v >= 0 && !math.IsInf(v, 0) }
	switch {
	case c.APIVersion != "edgesched.io/v1alpha1":
		return bad("apiVersion", "%q, want edgesched.io/v1alpha1", c.APIVersion)
	case c.Kind != "TrainConfig":
		return bad("kind", "%q, want TrainConfig", c.Kind)
	case c.Name == "":
		return bad("name", "missing")
	case env && (c.Env.Scenario == "" && len(c.Env.Scenarios) == 0) == (c.Env.Pods == ""):
		return bad("env", "give scenario (or scenarios), or nodes and pods")
	case c.Env.Scenario != "" && len(c.Env.Scenarios) > 0:
		return bad("env.scenarios", "give scenario or scenarios, not both")
	case heldOutFamily(c.Env) != "":
		return bad("env.scenarios", "%s is a held-out family, for evaluation only (docs/scenario.md, \"Families\"); train on the training families", heldOutFamily(c.Env))
	case len(c.Env.Scenarios) > 0 && !c.Env.FreshWorkloads:
		return bad("env.scenarios", "several scenarios need freshWorkloads (each seed picks one)")
	case c.Env.Mode != "inflate" && c.Env.Mode != "replay":
		return bad("env.mode", "%q, want inflate or replay", c.Env.Mode)
	case c.Env.Mode == "inflate" && !(c.Env.InflateTarget > 0 && c.Env.InflateTarget <= 3):
		return bad("env.inflateTarget", "%v, want (0, 3]", c.Env.InflateTarget)
	case !(c.Env.NodeFraction > 0 && c.Env.NodeFraction <= 1):
		return bad("env.nodeFraction", "%v, want (0, 1]", c.Env.NodeFraction)
	case len(c.Env.WarmStart) != 0 && (len(c.Env.WarmStart) != 2 || !(c.Env.WarmStart[0] >= 0 && c.Env.WarmStart[0] <= c.Env.WarmStart[1] && c.Env.WarmStart[1] < 3) || c.BC.Teacher == ""):
		return bad("env.warmStart", "want [lo, hi] with 0 <= lo <= hi < 3 and a bc.teacher")
	case c.Net.Hidden1 < 1 || c.Net.Hidden1 > 512 || c.Net.Hidden2 < 1 || c.Net.Hidden2 > 512 || c.Net.CriticHidden < 1 || c.Net.CriticHidden > 512:
		return bad("network", "layer sizes must be in [1, 512]")
	case excludeErr(c.Net.Exclude) != nil:
		return bad("network.exclude", "%v", excludeErr(c.Net.Exclude))
	case c.BC.Episodes > MaxEpisodes:
		return bad("bc.episodes", "%d, want at most %d", c.BC.Episodes, MaxEpisodes)
	case c.BC.Epochs > MaxEpochs:
		return bad("bc.epochs", "%d, want at most %d", c.BC.Epochs, MaxEpochs)
	case c.BC.Episodes < 0 || c.BC.Epochs < 0 || (c.BC.Episodes > 0 && (c.BC.Teacher == "" || !pos(c.BC.LR) || c.BC.Epochs == 0)):
		return bad("bc", "episodes and epochs >= 0; with episodes, a teacher, epochs >= 1 and lr > 0")
	case c.BC.validate() != nil:
		return bad("bc", "%v", c.BC.validate())
	case c.Decision.Validate() != nil:
		return bad("decision", "band %v, wholeGPUBand %v, pressureWeight %v, strandWeight %v, cpuCap %v, busyCap %v: %v", c.Decision.Band, c.Decision.WholeGPUBand, c.Decision.PressureWeight, c.Decision.StrandWeight, c.Decision.CPUCap, c.Decision.BusyCap, c.Decision.Validate())
	case c.Refine != nil && c.Refine.Episodes > MaxEpisodes:
		return bad("refine.episodes", "%d, want at most %d", c.Refine.Episodes, MaxEpisodes)
	case c.Refine != nil && c.Refine.Epochs > MaxEpochs:
		return bad("refine.epochs", "%d, want at most %d", c.Refine.Epochs, MaxEpochs)
	case c.Refine != nil && (c.Refine.Episodes < 1 || c.Refine.validate() != nil):
		return bad("refine", "episodes >= 1; %v", c.Refine.validate())
	case c.PPO.Iterations < 0 || c.PPO.EpisodesPerIter < 1 || c.PPO.Epochs < 1 || c.PPO.Minibatch < 1:
		return bad("ppo", "iterations >= 0, episodesPerIteration, epochs and minibatch >= 1")
	case c.PPO.Iterations > MaxIterations:
		return bad("ppo.iterations", "%d, want at most %d", c.PPO.Iterations, MaxIterations)
	case c.PPO.EpisodesPerIter > MaxEpisodes:
		return bad("ppo.episodesPerIteration", "%d, want at most %d", c.PPO.EpisodesPerIter, MaxEpisodes)
	case c.PPO.Epochs > MaxEpochs:
		return bad("ppo.epochs", "%d, want at most %d", c.PPO.Epochs, MaxEpochs)
	case c.PPO.Minibatch > MaxMinibatch:
		return bad("ppo.minibatch", "%d, want at most %d", c.PPO.Minibatch, MaxMinibatch)
	case !(c.PPO.Clip > 0 && c.PPO.Clip < 1):
		return bad("ppo.clip", "%v, want (0, 1)", c.PPO.Clip)
	case !(c.PPO.Gamma > 0 && c.PPO.Gamma <= 1) || !(c.PPO.Lambda >= 0 && c.PPO.Lambda <= 1):
		return bad("ppo.gamma/lambda", "want gamma in (0, 1], lambda in [0, 1]")
	case !pos(c.PPO.LR) || !nonneg(c.PPO.ValueCoef) || !nonneg(c.PPO.EntropyCoef) || !pos(c.PPO.MaxGradNorm) || !nonneg(c.PPO.TargetKL):
		return bad("ppo", "lr and maxGradNorm > 0; valueCoef, entropyCoef, targetKL >= 0")
	case !nonneg(c.Reward.Fragmentation) || !nonneg(c.Reward.Latency) || !nonneg(c.Reward.LatencyProxy) || !nonneg(c.Reward.DecisionLatency) || !nonneg(c.Reward.Failure) || !nonneg(c.Reward.FailureCount) || !nonneg(c.Reward.CrossZone) || !nonneg(c.Reward.CrossZonePod) || !nonneg(c.Reward.Carbon) || !nonneg(c.Reward.Utilization):
		return bad("reward", "weights must be finite and >= 0")
	case c.Eval.Every < 0 || len(c.Eval.Seeds) > 100 || c.Eval.Measure == "":
		return bad("eval", "every >= 0, at most 100 seeds, a measure")
	case c.Env.Mode == "inflate" && len(c.Eval.Seeds) > 0 && !(c.Eval.InflateTarget > 0 && c.Eval.InflateTarget <= 3):
		return bad("eval.inflateTarget", "%v, want (0, 3]", c.Eval.InflateTarget)
	case c.Env.Mixtures != nil && (c.Env.Scenario != "" || len(c.Env.Scenarios) > 0):
		return bad("env.mixtures", "mixtures draw from an openb pod list, not a scenario")
	case c.Env.Mixtures != nil && c.Env.Mixtures.validate() != nil:
		return bad("env.mixtures", "%v", c.Env.Mixtures.validate())
	case c.BC.BackgroundLoad != nil && c.BC.Episodes == 0:
		return bad("bc.backgroundLoad", "set, but bc.episodes is 0: no cloning episode to stress")
	case c.Workers < 1 || c.Workers > 64:
		return bad("workers", "%d, want 1..64", c.Workers)
	case c.CheckpointEvery < 0:
		return bad("checkpointEvery", "%d, want >= 0", c.CheckpointEvery)
	}
	// background load, wherever it is set, stresses a scenario's fleet
	type stress struct {
		key string
		b   *scenario.BackgroundLoad
	}
	stresses := []stress{{"env.backgroundLoad", c.Env.BackgroundLoad}, {"bc.backgroundLoad", c.BC.BackgroundLoad}}
	if c.Refine != nil {
		stresses = append(stresses, stress{"refine.backgroundLoad", c.Refine.BackgroundLoad})
	}
	for _, s := range stresses {
		if s.b == nil {
			continue
		}
		if c.Env.Scenario == "" && len(c.Env.Scenarios) == 0 {
			return bad(s.key, "background load stresses a scenario's fleet, not an openb cluster")
		}
		if _, err := s.b.Model(); err != nil {
			return bad(s.key, "%v", err)
		}
	}
	return nil
}

func (b *BCConfig) validate() error {
	switch {
	case b.Teacher == "fgd-lookahead" && (b.Lookahead.TopK < 2 || b.Lookahead.TopK > 64 || b.Lookahead.Horizon < 1 || b.Lookahead.Horizon > 10000 || b.Lookahead.Samples < 1 || b.Lookahead.Samples > 64 || !(b.Lookahead.Start >= 0)):
		return errors.New("lookahead: topK 2..64, horizon 1..10000, samples 1..64, start >= 0")
	case b.Teacher == "fgd-lookahead" && b.Lookahead.TopK*b.Lookahead.Samples*b.Lookahead.Horizon > MaxLookaheadPlays:
		return fmt.Errorf("lookahead: topK x samples x horizon is %d pods a decision, above %d", b.Lookahead.TopK*b.Lookahead.Samples*b.Lookahead.Horizon, MaxLookaheadPlays)
	case !(b.RecordFrom >= 0 && b.RecordFrom < 3) || b.RecordTopK < 0 || b.RecordTopK > 4096:
		return errors.New("recordFrom in [0, 3), recordTopK in [0, 4096]")
	case !(b.NodeFraction >= 0 && b.NodeFraction <= 1):
		return errors.New("nodeFraction in [0, 1]")
	case !(b.PressureWeight >= 0 && b.PressureWeight <= 1e6) || !(b.StrandWeight >= 0 && b.StrandWeight <= 1e6):
		return errors.New("pressureWeight and strandWeight in [0, 1e6]")
	case !(b.SoftTargets >= 0 && b.SoftTargets <= 1000):
		return errors.New("softTargets in [0, 1000]")
	case b.Episodes > 0 && (b.Teacher == "" || b.Epochs < 1 || !(b.LR > 0) || math.IsInf(b.LR, 0)):
		return errors.New("with episodes: a teacher, epochs >= 1 and lr > 0")
	}
	return nil
}

// MaxConfigBytes caps a configuration file; a larger one is refused
// (never cut short).
const MaxConfigBytes = 1 << 20

// ErrEmptyConfig: a configuration file with no settings at all (empty,
// or only comments): it would train with the defaults without saying so.
var ErrEmptyConfig = fmt.Errorf("%w: empty", ErrConfig)

// LoadConfig reads a YAML configuration: fields not given keep
// DefaultConfig's values; unknown fields are refused with their line. A
// file over MaxConfigBytes, not a regular file, or without a single
// setting (ErrEmptyConfig) is refused.
func LoadConfig(path string) (Config, error) {
	return LoadConfigContext(context.Background(), path)
}

// LoadConfigContext is LoadConfig honouring ctx while it reads.
func LoadConfigContext(ctx context.Context, path string) (Config, error) {
	b, err := boundedio.ReadFile(ctx, path, MaxConfigBytes)
	if err != nil {
		return Config{}, fmt.Errorf("%w: open config: %w", ErrConfig, err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err == nil && (len(doc.Content) == 0 || (doc.Content[0].Kind == yaml.MappingNode && len(doc.Content[0].Content) == 0)) {
		return Config{}, fmt.Errorf("%w: %s has no settings (leave out the configuration to train with the defaults, or give at least one setting)", ErrEmptyConfig, path)
	}
	return ParseConfig(b, path)
}

// ParseConfig is LoadConfig on bytes; name labels errors.
func ParseConfig(b []byte, name string) (Config, error) {
	c := DefaultConfig()
	// A scenario replaces the default openb trace rather than clashing
	// with it: peek at env.scenario before decoding onto the defaults.
	var peek struct {
		Env struct {
			Scenario  string   `yaml:"scenario"`
			Scenarios []string `yaml:"scenarios"`
		} `yaml:"env"`
	}
	if yaml.Unmarshal(b, &peek) == nil && (peek.Env.Scenario != "" || len(peek.Env.Scenarios) > 0) {
		c.Env.Nodes, c.Env.Pods = "", ""
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && err != io.EOF {
		return Config{}, fmt.Errorf("%w: %s: %v", ErrConfig, name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// YAML renders the configuration (recorded beside trained models).
func (c Config) YAML() []byte {
	b, _ := yaml.Marshal(c)
	return b
}

func excludeErr(names []string) error {
	_, err := policy.ExcludeMask(names)
	return err
}

// ScenarioFor is the scenario that seed s replays ("" for openb
// training): Scenario, or Scenarios[s mod len(Scenarios)].
func (e EnvConfig) ScenarioFor(s uint64) string {
	if len(e.Scenarios) > 0 {
		return e.Scenarios[s%uint64(len(e.Scenarios))]
	}
	return e.Scenario
}
