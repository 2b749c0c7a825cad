package ppo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/sage"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/openb"
	"github.com/edgesched/edgesched/sim/scenario"
)

// Files a training run writes into its output directory. The training
// curve (training_curve.png) is drawn from Result.History by package
// policy/ppo/curve, which `edgectl train` calls: plotting stays out of
// what the edge agent links.
const (
	ModelFile      = "model.esm"
	CheckpointFile = "checkpoint.esc"
	HistoryFile    = "history.csv"
	ConfigFile     = "config.yaml"
)

// Options are a training run's side inputs. The zero value is valid: it
// trains from scratch and writes nothing.
type Options struct {
	// Out is the output directory (created). Empty: no files are written
	// (Result.Model holds the model); resuming then needs a checkpoint
	// from an earlier run.
	Out string
	// Init, when set, starts from this model (its schema and a copy of its
	// network) instead of behaviour cloning: fine-tuning, and the local
	// rounds of federated training. The optimiser starts fresh.
	Init *nn.Model
	// KeepBounds (with Init) trains on rows held within Init's input
	// bounds (policy.Schema.Lo, Hi) and gives the result Init's bounds,
	// instead of training on the rows as they are and widening the bounds
	// to cover them: a federated round's local training, whose update
	// lands in a version that keeps the bounds of the model the federation
	// started with (coordinator/release), so a site trains on the inputs
	// the version's scorers read. Rows within the bounds train as without
	// it; an Init without bounds trains as without it.
	KeepBounds bool
	// ProxMu adds FedProx's proximal term mu/2 ||w - w_init||^2 to every
	// PPO step's loss (with Init; 0: none), keeping a site's local model
	// near the global one.
	ProxMu float64
	// Resume continues from a checkpoint written by an earlier run with the
	// same configuration (PPO iterations may be raised).
	Resume string
	// Logger receives progress lines; nil discards them.
	Logger *slog.Logger
	// Progress, when set, is called after every phase step.
	Progress func(Progress)
	// env, when set, is the environment of every episode (FineTune), in
	// place of the configuration's env section.
	env *sim.Env
}

// Progress reports where training is.
type Progress struct {
	Phase                 string // "bc" or "ppo"
	Iteration, Iterations int
	Episodes              int
	Row                   Row
}

// Row is one line of the training history.
type Row struct {
	Phase      string  `json:"phase"`
	Iteration  int     `json:"iteration"`
	Episodes   int     `json:"episodes"`
	MeanReturn float64 `json:"mean_return"`
	PolicyLoss float64 `json:"policy_loss"`
	ValueLoss  float64 `json:"value_loss"`
	Entropy    float64 `json:"entropy"`
	KL         float64 `json:"kl"`
	// Eval is the evaluation measure after this step, when EvalSet.
	Eval    float64 `json:"eval"`
	EvalSet bool    `json:"eval_set"`
	Seconds float64 `json:"seconds"`
}

// Result summarises a training run.
type Result struct {
	// Model is the best model by the evaluation measure (the final one
	// without evaluation seeds); ModelPath is where it was written.
	Model      *nn.Model
	ModelPath  string
	Best       float64
	Iterations int
	Episodes   int
	// Decisions is the number of scheduling decisions PPO trained on.
	Decisions int
	Wall      time.Duration
	History   []Row
	// Unread names the inputs the model does not read beyond those the
	// configuration excludes: the ones constant in the normalisation data
	// (excludeConstant), in feature order.
	Unread []string
}

type trainer struct {
	cfg Config
	// sage are the initial model's own GraphSAGE weights (nn.Model.Sage;
	// nil: the shipped ones): the environments' partners come from them,
	// and every model made keeps them (PPO does not train them).
	sage     *policy.SageWeights
	exclude  []bool // inputs the network does not read (NetConfig.Exclude)
	log      *slog.Logger
	base     *sim.Env // the whole cluster or scenario, for evaluation
	nodes    []sim.NodeSpec
	cluster  *sim.Cluster
	workload *sim.Workload
	pcg      *rand.PCG
	rng      *rand.Rand
	schema   policy.Schema // never with bounds: training does not clamp
	// seen is the range of the raw rows the training collected (and of
	// the initial or resumed model's bounds): the output model's bounds
	seen     policy.Range
	net      *nn.Net
	opt      *adam
	iter     int
	episodes int
	history  []Row
	cloned   []*episode // the first cloning stage's episodes
	best     *nn.Net
	bestVal  float64
	haveBest bool
	start    time.Time
	progress func(Progress)
	evalEnvs map[uint64]*sim.Env
	basePods *openb.PodList // the openb pod list mixtures draw from
	memEnv   *sim.Env       // Options.env: every episode's environment
	// FedProx anchor and coefficient
	prox      *nn.Net
	proxMu    float32
	decisions int
}

// checkpoint state beside the network and optimiser sections.
type ckState struct {
	ConfigYAML string  `json:"config"`
	Iter       int     `json:"iteration"`
	Episodes   int     `json:"episodes"`
	RNG        []byte  `json:"rng"`
	AdamStep   int64   `json:"adam_step"`
	History    []Row   `json:"history"`
	HaveBest   bool    `json:"have_best"`
	BestVal    float64 `json:"best_value"`
}

// Train runs behaviour cloning then PPO as configured, writing the best
// model, checkpoints, the history and a training-curve plot into opt.Out.
// It is deterministic for a configuration (same machine architecture and
// Go version), whether or not it is resumed from a checkpoint.
func Train(ctx context.Context, cfg Config, opt Options) (*Result, error) {
	if err := cfg.validate(opt.env == nil); err != nil {
		return nil, err
	}
	if opt.Out != "" {
		if err := os.MkdirAll(opt.Out, 0o755); err != nil {
			return nil, fmt.Errorf("create output dir: %w", err)
		}
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	t := &trainer{cfg: cfg, log: log, start: time.Now(), progress: opt.Progress, memEnv: opt.env}
	if opt.Init != nil {
		t.sage = opt.Init.Sage
	}
	var err error
	if t.exclude, err = policy.ExcludeMask(cfg.Net.Exclude); err != nil {
		return nil, err
	}
	if err := t.loadEnv(); err != nil {
		return nil, err
	}
	t.pcg = rand.NewPCG(cfg.Seed, 0x7a17)
	t.rng = rand.New(t.pcg)
	if opt.Out != "" {
		if err := os.WriteFile(filepath.Join(opt.Out, ConfigFile), cfg.YAML(), 0o644); err != nil {
			return nil, fmt.Errorf("write config: %w", err)
		}
	}
	if opt.Resume != "" {
		if err := t.resume(opt.Resume); err != nil {
			return nil, err
		}
	} else if opt.Init != nil {
		if err := opt.Init.Validate(); err != nil {
			return nil, fmt.Errorf("initial model: %w", err)
		}
		if l := opt.Init.Net; l.H1 != cfg.Net.Hidden1 || l.H2 != cfg.Net.Hidden2 || l.HC != cfg.Net.CriticHidden {
			return nil, fmt.Errorf("%w: initial model is %d/%d/%d, the config's network %d/%d/%d", ErrConfig, l.H1, l.H2, l.HC, cfg.Net.Hidden1, cfg.Net.Hidden2, cfg.Net.CriticHidden)
		}
		t.net, t.schema = opt.Init.Net.Clone(), t.unbounded(opt.Init.Schema)
		if opt.KeepBounds { // the actors clamp (Schema.Clamp), so t.seen stays within them
			t.schema.Lo, t.schema.Hi = opt.Init.Schema.Lo, opt.Init.Schema.Hi
		}
		t.exclude = orMask(t.exclude, opt.Init.UnreadConstants()) // they stay unread
		t.net.MaskInputs(t.exclude)
		t.opt = newAdam(t.net)
		if opt.ProxMu > 0 {
			t.prox, t.proxMu = opt.Init.Net.Clone(), float32(opt.ProxMu)
		}
		if err := t.evaluate(ctx, "init"); err != nil {
			return nil, err
		}
	} else {
		var err error
		if t.net, err = nn.NewNetExcluding(policy.NumFeatures, cfg.Net.Hidden1, cfg.Net.Hidden2, cfg.Net.CriticHidden, t.rng, t.exclude); err != nil {
			return nil, err
		}
		t.schema = policy.NewSchema()
		if err := t.behaviourCloning(ctx, cfg.BC, "bc", true); err != nil {
			return nil, err
		}
		if cfg.Refine != nil {
			if err := t.evaluate(ctx, "bc"); err != nil {
				return nil, err
			}
			if err := t.behaviourCloning(ctx, *cfg.Refine, "refine", false); err != nil {
				return nil, err
			}
		}
		t.opt = newAdam(t.net)
		if err := t.evaluate(ctx, "bc"); err != nil {
			return nil, err
		}
		if err := t.saveCheckpoint(opt.Out); err != nil {
			return nil, err
		}
	}
	for t.iter < cfg.PPO.Iterations {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := t.ppoIteration(ctx); err != nil {
			return nil, err
		}
		if cfg.Eval.Every > 0 && t.iter%cfg.Eval.Every == 0 {
			if err := t.evaluate(ctx, "ppo"); err != nil {
				return nil, err
			}
		}
		if cfg.CheckpointEvery > 0 && t.iter%cfg.CheckpointEvery == 0 {
			if err := t.saveCheckpoint(opt.Out); err != nil {
				return nil, err
			}
		}
	}
	if err := t.saveCheckpoint(opt.Out); err != nil {
		return nil, err
	}
	final := t.net
	if t.haveBest {
		final = t.best
	}
	fm := t.output(final)
	fm.Decision = t.cfg.Decision
	res := &Result{Model: fm, Best: t.bestVal, Iterations: t.iter, Episodes: t.episodes, Decisions: t.decisions, Wall: time.Since(t.start), History: t.history}
	excluded, _ := policy.ExcludeMask(cfg.Net.Exclude) // validated above
	for f, name := range fm.Schema.Names {
		if !fm.Net.ReadsInput(f) && (excluded == nil || !excluded[f]) {
			res.Unread = append(res.Unread, name)
		}
	}
	if opt.Out == "" {
		return res, nil
	}
	res.ModelPath = filepath.Join(opt.Out, ModelFile)
	if err := nn.WriteFile(res.ModelPath, res.Model, "model", nil, nil); err != nil {
		return nil, err
	}
	if err := writeHistory(filepath.Join(opt.Out, HistoryFile), t.history); err != nil {
		return nil, err
	}
	return res, nil
}

// unbounded returns s without its bounds, which t.seen starts from
// (Options.KeepBounds puts them back).
func (t *trainer) unbounded(s policy.Schema) policy.Schema {
	t.seen.Merge(policy.Range{Lo: s.Lo, Hi: s.Hi})
	s.Lo, s.Hi = nil, nil
	return s
}

// observed widens t.seen to the rows of eps.
func (t *trainer) observed(eps []*episode) {
	for _, ep := range eps {
		t.seen.Merge(ep.seen)
	}
}

// output is t.model(net) with the input bounds of everything the
// training collected (policy.Schema.Lo, Hi): the model training writes.
func (t *trainer) output(net *nn.Net) *nn.Model {
	m := t.model(net)
	m.Schema.Lo, m.Schema.Hi = t.seen.Bounds()
	return m
}

// model wraps a network with the schema (without bounds unless
// Options.KeepBounds: what training evaluates) and provenance.
func (t *trainer) model(net *nn.Net) *nn.Model {
	meta := map[string]any{
		"name": t.cfg.Name, "seed": t.cfg.Seed, "config": string(t.cfg.YAML()),
		"ppo_iterations": t.iter, "episodes": t.episodes,
	}
	if t.haveBest {
		meta["eval_measure"] = t.cfg.Eval.Measure
		meta["eval_value"] = t.bestVal
		meta["eval_seeds"] = t.cfg.Eval.Seeds
	}
	m := &nn.Model{Schema: t.schema, Net: net, Meta: meta}
	if t.sage != nil {
		m.Sage = t.sage.Clone()
	}
	return m
}

func (t *trainer) loadEnv() error {
	if t.memEnv != nil {
		t.base = t.memEnv
		return nil
	}
	e := t.cfg.Env
	if sc := e.ScenarioFor(0); sc != "" {
		bl, _ := e.BackgroundLoad.Model() // validated
		l, err := scenario.LoadWith(sc, scenario.Options{Background: bl})
		if err != nil {
			return err
		}
		env, err := sage.NewEnvWith(l.Cluster, l.Workload, t.sage)
		if err != nil {
			return err
		}
		t.base, t.cluster, t.workload = env, l.Cluster, l.Workload
		return nil
	}
	nodes := e.Nodes
	if nodes == "" {
		nodes = "openb:" + openb.AllNodes
	}
	ns, err := openb.LoadNodes(nodes, nil)
	if err != nil {
		return err
	}
	pl, err := openb.LoadPods(e.Pods, nil)
	if err != nil {
		return err
	}
	t.nodes = ns
	t.basePods = pl
	t.cluster = &sim.Cluster{Name: "train", Nodes: ns}
	t.workload = &sim.Workload{Name: "train", Pods: pl.Pods, Untimed: !pl.Timed}
	env, err := sim.NewEnv(t.cluster, t.workload, sim.EnvOptions{})
	if err != nil {
		return err
	}
	t.base = env
	return nil
}

// episodeEnv builds the environment of a training episode with seed s;
// bg, when set, replaces env.backgroundLoad (a cloning episode's
// bc.backgroundLoad).
func (t *trainer) episodeEnv(s uint64, frac float64, bg *scenario.BackgroundLoad) (*sim.Env, error) {
	if t.memEnv != nil {
		return t.memEnv, nil
	}
	e := t.cfg.Env
	if sc := e.ScenarioFor(s); sc != "" {
		if !e.FreshWorkloads && bg == nil {
			return t.base, nil
		}
		if bg == nil {
			bg = e.BackgroundLoad
		}
		bl, _ := bg.Model() // validated
		opts := scenario.Options{Background: bl}
		if e.FreshWorkloads {
			opts.Seed = &s
		}
		l, err := scenario.LoadWith(sc, opts)
		if err != nil {
			return nil, err
		}
		return sage.NewEnvWith(l.Cluster, l.Workload, t.sage)
	}
	if frac == 0 {
		frac = e.NodeFraction
	}
	w := t.workload
	if e.Mixtures != nil {
		var err error
		if w, err = t.mixture(s); err != nil {
			return nil, err
		}
	}
	if frac >= 1 {
		if w == t.workload {
			return t.base, nil
		}
		return sim.NewEnv(t.cluster, w, sim.EnvOptions{})
	}
	k := max(1, int(math.Round(float64(len(t.nodes))*frac)))
	perm := rand.New(rand.NewPCG(s, 0x5e1ec7)).Perm(len(t.nodes))[:k]
	slices.Sort(perm)
	sub := make([]sim.NodeSpec, k)
	for i, j := range perm {
		sub[i] = t.nodes[j]
	}
	return sim.NewEnv(&sim.Cluster{Name: "slice", Nodes: sub}, w, sim.EnvOptions{})
}

// mixture returns the workload of the mixture drawn with generator seed s.
func (t *trainer) mixture(s uint64) (*sim.Workload, error) {
	mx := t.cfg.Env.Mixtures.Draw(t.cfg.Env.Pods, s)
	pl, err := mx.From(t.cfg.Env.Pods, t.basePods)
	if err != nil {
		return nil, fmt.Errorf("mixture %s: %w", mx, err)
	}
	return &sim.Workload{Name: mx.String(), Pods: pl.Pods, Untimed: !pl.Timed}, nil
}

func (t *trainer) runConfig(eval bool) engine.RunConfig {
	mode := engine.Inflate
	if t.cfg.Env.Mode == "replay" {
		mode = engine.Replay
	}
	rc := engine.DefaultRunConfig(mode)
	rc.InflateTarget = t.cfg.Env.InflateTarget
	if eval && t.cfg.Eval.InflateTarget > 0 {
		rc.InflateTarget = t.cfg.Eval.InflateTarget
	}
	if rc.InflateStep > rc.InflateTarget {
		rc.InflateStep = rc.InflateTarget
	}
	rc.Samples = 48
	return rc
}

// collect runs n episodes in parallel on fresh environments and returns
// them in order. Seeds are drawn from the trainer's stream first, so the
// result does not depend on scheduling.
func (t *trainer) collect(ctx context.Context, n int, mode actMode, schema policy.Schema, bc BCConfig) ([]*episode, error) {
	seeds := make([]uint64, n)
	warm := make([]float64, n)
	for i := range seeds {
		seeds[i] = t.rng.Uint64()
		if ws := t.cfg.Env.WarmStart; mode == actSample && len(ws) == 2 {
			warm[i] = ws[0] + (ws[1]-ws[0])*t.rng.Float64()
		}
	}
	eps := make([]*episode, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(t.cfg.Workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			net := t.net.Clone()
			for i := range next {
				if err := ctx.Err(); err != nil { // do not build the episodes still queued
					errs[i] = err
					continue
				}
				frac := 0.0
				var bg *scenario.BackgroundLoad
				if mode == actTeacher {
					frac, bg = bc.NodeFraction, bc.BackgroundLoad
				}
				env, err := t.episodeEnv(seeds[i], frac, bg)
				if err != nil {
					errs[i] = err
					continue
				}
				rc := t.runConfig(false)
				rc.Seed = seeds[i]
				eps[i], errs[i] = runEpisode(ctx, env, net, schema, mode, bc, rc, t.cfg.Reward, seeds[i]^0x9e3779b97f4a7c15, true, warm[i])
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	t.episodes += n
	return eps, nil
}

// behaviourCloning collects teacher rollouts and trains the actor to
// imitate the teacher and the critic to predict the teacher's returns;
// with fit, it first fits the normalisation on the rollouts' raw features.
func (t *trainer) behaviourCloning(ctx context.Context, bc BCConfig, phase string, fit bool) error {
	n := bc.Episodes
	teacherMode := actTeacher
	if n == 0 { // still need statistics: sample from the untrained network
		n, teacherMode = t.cfg.PPO.EpisodesPerIter, actSample
	}
	started := time.Now()
	schema := t.schema
	if fit {
		schema = policy.NewSchema()
	}
	eps, err := t.collect(ctx, n, teacherMode, schema, bc)
	if err != nil {
		return err
	}
	t.observed(eps)
	if !fit {
		// Refinement keeps training on the first stage's data too, so the
		// network does not forget the general ranking it learned there.
		return t.cloneFrom(ctx, append(eps, t.cloned...), bc, phase, started)
	}
	t.cloned = eps
	// Normalisation statistics from (at most 200k) raw feature rows.
	var rows [][]float32
	var total int
	for _, ep := range eps {
		total += len(ep.x) / policy.NumFeatures
	}
	stride := max(1, total/200000)
	var idx int
	for _, ep := range eps {
		for i := 0; i+policy.NumFeatures <= len(ep.x); i += policy.NumFeatures {
			if idx%stride == 0 {
				rows = append(rows, ep.x[i:i+policy.NumFeatures])
			}
			idx++
		}
	}
	t.schema.Fit(rows)
	t.excludeConstant()
	for _, ep := range eps {
		for i := 0; i+policy.NumFeatures <= len(ep.x); i += policy.NumFeatures {
			t.schema.Normalize(ep.x[i : i+policy.NumFeatures])
		}
	}
	if bc.Episodes == 0 {
		return nil
	}
	return t.cloneFrom(ctx, eps, bc, phase, started)
}

// excludeConstant stops the network reading the inputs that did not vary
// in the normalisation data, those whose fitted standard deviation is the
// floor, policy.MinStd (an input constant on every row has it): a QoS
// class, a priority, GPU models or an architecture the training workloads
// never have. Their statistics say nothing of other values, which would
// normalise to hundreds of standard deviations and move every score by
// whatever the untrained first-layer weights of those inputs make of them.
// A constant input normalises to 0 on the training rows, so zeroing its
// weights changes nothing cloning sees; the exclusion mask keeps them at
// zero through cloning, PPO and any later fine-tune or resume
// (nn.Model.UnreadConstants finds them again by the same criterion). An
// input that cloning never varies but PPO's episodes do is not learned
// either: its statistics would not describe it.
func (t *trainer) excludeConstant() {
	constant := make([]bool, policy.NumFeatures)
	var names []string
	for f, sd := range t.schema.Std {
		if sd <= policy.MinStd && (t.exclude == nil || !t.exclude[f]) {
			constant[f] = true
			names = append(names, t.schema.Names[f])
		}
	}
	if len(names) > 0 {
		t.exclude = orMask(t.exclude, constant)
		t.net.MaskInputs(t.exclude)
		t.log.Info("inputs constant in the normalisation data are not read", "features", names)
	}
}

// orMask marks in exclude (allocated if nil and needed) every input marked
// in more, and returns it.
func orMask(exclude, more []bool) []bool {
	for f, x := range more {
		if x {
			if exclude == nil {
				exclude = make([]bool, len(more))
			}
			exclude[f] = true
		}
	}
	return exclude
}

// cloneFrom trains on recorded teacher episodes.
func (t *trainer) cloneFrom(ctx context.Context, eps []*episode, bc BCConfig, phase string, started time.Time) error {
	returnsToGo(eps, t.cfg.PPO.Gamma)
	steps := flatten(eps)
	opt := newAdam(t.net)
	grads := t.net.Clone()
	for epoch := range bc.Epochs {
		if err := ctx.Err(); err != nil {
			return err
		}
		order := t.rng.Perm(len(steps))
		var lossSum, vlossSum float64
		for b := 0; b < len(order); b += t.cfg.PPO.Minibatch {
			if err := ctx.Err(); err != nil {
				return err
			}
			grads.Zero()
			batch := order[b:min(b+t.cfg.PPO.Minibatch, len(order))]
			for _, si := range batch {
				s := steps[si]
				l, vl := bcStep(t.net, grads, s.ep.x[s.off:s.off+s.k*policy.NumFeatures], s, float32(t.cfg.PPO.ValueCoef))
				lossSum += l
				vlossSum += vl
			}
			scale(grads, 1/float32(len(batch)))
			grads.MaskInputs(t.exclude)
			clipNorm(grads, t.cfg.PPO.MaxGradNorm)
			opt.apply(t.net, grads, bc.LR)
		}
		row := Row{Phase: phase, Iteration: epoch + 1, Episodes: t.episodes, MeanReturn: meanReturn(eps), PolicyLoss: lossSum / float64(len(steps)), ValueLoss: vlossSum / float64(len(steps)), Seconds: time.Since(started).Seconds()}
		t.history = append(t.history, row)
		t.log.Info("behaviour cloning", "phase", phase, "epoch", epoch+1, "cross_entropy", row.PolicyLoss, "value_loss", row.ValueLoss)
		if t.progress != nil {
			t.progress(Progress{Phase: phase, Iteration: epoch + 1, Iterations: bc.Epochs, Episodes: t.episodes, Row: row})
		}
	}
	return nil
}

// flatStep locates a step inside its episode.
type flatStep struct {
	*step
	ep *episode
}

func flatten(eps []*episode) []flatStep {
	var out []flatStep
	for _, ep := range eps {
		for i := range ep.steps {
			out = append(out, flatStep{step: &ep.steps[i], ep: ep})
		}
	}
	return out
}

// returnsToGo sets each step's return to the discounted sum of later
// rewards (Monte Carlo targets for the critic during cloning).
func returnsToGo(eps []*episode, gamma float64) {
	for _, ep := range eps {
		var g float64
		for i := len(ep.steps) - 1; i >= 0; i-- {
			g = float64(ep.steps[i].reward) + gamma*g
			ep.steps[i].ret = float32(g)
		}
	}
}

// gae sets advantages and returns by generalised advantage estimation.
func gae(eps []*episode, gamma, lambda float64) {
	for _, ep := range eps {
		var next, adv float64 // value after the last step is 0 (episode ends)
		for i := len(ep.steps) - 1; i >= 0; i-- {
			s := &ep.steps[i]
			delta := float64(s.reward) + gamma*next - float64(s.value)
			adv = delta + gamma*lambda*adv
			s.adv = float32(adv)
			s.ret = float32(adv + float64(s.value))
			next = float64(s.value)
		}
	}
}

func meanReturn(eps []*episode) float64 {
	var s float64
	for _, ep := range eps {
		s += ep.ret
	}
	return s / float64(len(eps))
}

// bcStep accumulates the gradient of cross-entropy to the teacher's action
// (or to its soft targets, when the step has them) plus the value loss; it
// returns both losses.
func bcStep(net, grads *nn.Net, x []float32, s flatStep, vcoef float32) (float64, float64) {
	logits, v, err := net.Forward(x, s.k)
	if err != nil {
		panic(err)
	}
	var buf []float64
	lp := logSoftmax(logits, &buf)
	d := make([]float32, s.k)
	for i := range d {
		d[i] = float32(math.Exp(lp[i]))
	}
	var loss float64
	if s.qoff >= 0 {
		for i, q := range s.ep.q[s.qoff : s.qoff+s.k] {
			d[i] -= q
			loss -= float64(q) * lp[i]
		}
	} else {
		d[s.action]--
		loss = -lp[s.action]
	}
	dv := 2 * vcoef * (v - s.ret)
	net.Backward(d, dv, grads)
	return loss, float64((v - s.ret) * (v - s.ret))
}

// addProx adds the gradient of mu/2 ||w - anchor||^2, mu (w - anchor).
func addProx(grads, w, anchor *nn.Net, mu float32) {
	g, p, a := grads.Params(), w.Params(), anchor.Params()
	for i := range g {
		gd, pd, ad := data(g[i]), data(p[i]), data(a[i])
		for j := range gd {
			gd[j] += mu * (pd[j] - ad[j])
		}
	}
}

// policyGrad writes into d the gradient, with respect to the logits, of
// PPO's clipped surrogate loss plus the entropy bonus for one decision,
//
//	L = -min(r A, clip(r, 1-eps, 1+eps) A) - c_e H,   r = p(a) / p_old(a)
//
// given the log-probabilities lp, and returns the surrogate loss and H.
// The surrogate's gradient flows only through the unclipped branch:
// dL/ds_i = -A r (1[i=a] - p_i); the entropy's is c_e p_i (log p_i + H).
func policyGrad(lp []float64, action int, oldLogp, adv, clip, entCoef float64, d []float32) (float64, float64) {
	ratio := math.Exp(lp[action] - oldLogp)
	surr1 := ratio * adv
	surr2 := math.Max(math.Min(ratio, 1+clip), 1-clip) * adv
	var h float64
	for _, l := range lp {
		h -= math.Exp(l) * l
	}
	g := 0.0
	if surr1 <= surr2 {
		g = -adv * ratio
	}
	for i, l := range lp {
		p := math.Exp(l)
		di := -g * p
		if i == action {
			di += g
		}
		d[i] = float32(di + entCoef*p*(l+h))
	}
	return -math.Min(surr1, surr2), h
}

// fault is a deliberate bug in the PPO update, injected by the learning
// test (TestPPOLearns) to show that a broken update fails it. The zero
// value is the correct update; nothing but that test sets another.
type fault int

const (
	faultNone fault = iota
	// faultGradientSign ascends the loss instead of descending it.
	faultGradientSign
	// faultAdvantageShuffle gives each decision another decision's
	// advantage.
	faultAdvantageShuffle
)

func (f fault) String() string {
	return [...]string{"none", "gradient-sign", "advantage-shuffle"}[f]
}

// faultInjected is the fault in force (tests only).
var faultInjected = faultNone

func (t *trainer) ppoIteration(ctx context.Context) error {
	c := t.cfg.PPO
	started := time.Now()
	eps, err := t.collect(ctx, c.EpisodesPerIter, actSample, t.schema, t.cfg.BC)
	if err != nil {
		return err
	}
	t.observed(eps)
	gae(eps, c.Gamma, c.Lambda)
	steps := flatten(eps)
	t.decisions += len(steps)
	// normalise advantages over the batch
	var mean, sq float64
	for _, s := range steps {
		mean += float64(s.adv)
	}
	mean /= float64(len(steps))
	for _, s := range steps {
		sq += (float64(s.adv) - mean) * (float64(s.adv) - mean)
	}
	std := math.Sqrt(sq/float64(len(steps))) + 1e-8
	for _, s := range steps {
		s.adv = float32((float64(s.adv) - mean) / std)
	}
	if faultInjected == faultAdvantageShuffle {
		perm := t.rng.Perm(len(steps))
		adv := make([]float32, len(steps))
		for i, j := range perm {
			adv[i] = steps[j].adv
		}
		for i := range steps {
			steps[i].adv = adv[i]
		}
	}
	pl, vl, ent, kl, n, err := t.ppoEpochs(ctx, steps)
	if err != nil {
		return err
	}
	t.iter++
	row := Row{Phase: "ppo", Iteration: t.iter, Episodes: t.episodes, MeanReturn: meanReturn(eps), PolicyLoss: pl / float64(n), ValueLoss: vl / float64(n), Entropy: ent / float64(n), KL: kl, Seconds: time.Since(started).Seconds()}
	t.history = append(t.history, row)
	t.log.Info("ppo", "iteration", t.iter, "return", row.MeanReturn, "policy_loss", row.PolicyLoss, "value_loss", row.ValueLoss, "entropy", row.Entropy, "kl", row.KL)
	if t.progress != nil {
		t.progress(Progress{Phase: "ppo", Iteration: t.iter, Iterations: c.Iterations, Episodes: t.episodes, Row: row})
	}
	return nil
}

// ppoEpochs runs an iteration's epochs of clipped PPO updates over its
// steps (advantages normalised), and returns the summed policy loss,
// value loss and entropy over the n samples it learned from, and the
// last epoch's approximate KL divergence.
func (t *trainer) ppoEpochs(ctx context.Context, steps []flatStep) (pl, vl, ent, kl float64, n int, err error) {
	c := t.cfg.PPO
	grads := t.net.Clone()
	var buf []float64
epochs:
	for range c.Epochs {
		// once per epoch too: a batch without decisions has no minibatch
		if err := ctx.Err(); err != nil {
			return 0, 0, 0, 0, 0, err
		}
		order := t.rng.Perm(len(steps))
		var epochKL float64
		for b := 0; b < len(order); b += c.Minibatch {
			if err := ctx.Err(); err != nil {
				return 0, 0, 0, 0, 0, err
			}
			grads.Zero()
			batch := order[b:min(b+c.Minibatch, len(order))]
			for _, si := range batch {
				s := steps[si]
				x := s.ep.x[s.off : s.off+s.k*policy.NumFeatures]
				logits, v, err := t.net.Forward(x, s.k)
				if err != nil {
					return 0, 0, 0, 0, 0, err
				}
				lp := logSoftmax(logits, &buf)
				d := make([]float32, s.k)
				loss, h := policyGrad(lp, s.action, float64(s.logp), float64(s.adv), c.Clip, c.EntropyCoef, d)
				if faultInjected == faultGradientSign {
					for i := range d {
						d[i] = -d[i]
					}
				}
				dv := float32(2 * c.ValueCoef * float64(v-s.ret))
				t.net.Backward(d, dv, grads)
				pl += loss
				vl += float64((v - s.ret) * (v - s.ret))
				ent += h
				epochKL += float64(s.logp) - lp[s.action]
				n++
			}
			scale(grads, 1/float32(len(batch)))
			if t.prox != nil {
				addProx(grads, t.net, t.prox, t.proxMu)
			}
			grads.MaskInputs(t.exclude)
			clipNorm(grads, c.MaxGradNorm)
			t.opt.apply(t.net, grads, c.LR)
		}
		kl = epochKL / float64(len(steps))
		if c.TargetKL > 0 && kl > 1.5*c.TargetKL {
			break epochs
		}
	}
	return pl, vl, ent, kl, n, nil
}

// evaluate runs the greedy policy on the evaluation seeds, records the
// measure on the last history row and keeps the best network.
func (t *trainer) evaluate(ctx context.Context, phase string) error {
	ev := t.cfg.Eval
	if len(ev.Seeds) == 0 {
		return nil
	}
	model := t.model(t.net)
	var sum float64
	for _, seed := range ev.Seeds {
		rc := t.runConfig(true)
		rc.Seed = seed
		env, err := t.evalEnv(seed)
		if err != nil {
			return err
		}
		if ev.Measure == "reward" {
			ep, err := runEpisode(ctx, env, t.net.Clone(), t.schema, actGreedy, t.cfg.BC, rc, t.cfg.Reward, seed, false, 0)
			if err != nil {
				return err
			}
			sum += ep.ret
			continue
		}
		res, err := engine.Run(ctx, env, nn.Factory("learned", model), rc)
		if err != nil {
			return err
		}
		v, ok := res.Measures[ev.Measure]
		if !ok {
			return fmt.Errorf("%w: eval.measure %q is not reported in %s mode", ErrConfig, ev.Measure, rc.Mode)
		}
		sum += v
	}
	val := sum / float64(len(ev.Seeds))
	better := !t.haveBest || (ev.Maximize && val > t.bestVal) || (!ev.Maximize && val < t.bestVal)
	if better {
		t.best, t.bestVal, t.haveBest = t.net.Clone(), val, true
	}
	if len(t.history) > 0 {
		t.history[len(t.history)-1].Eval, t.history[len(t.history)-1].EvalSet = val, true
	}
	t.log.Info("evaluation", "phase", phase, "iteration", t.iter, ev.Measure, val, "best", t.bestVal)
	return nil
}

// evalEnv is the evaluation environment of a seed: the whole cluster or
// scenario, or, for scenarios trained on fresh workloads, the scenario's
// workload generated with that seed (so model selection sees several
// workloads, none of them a training one).
func (t *trainer) evalEnv(seed uint64) (*sim.Env, error) {
	mixed := t.cfg.Env.Mixtures != nil
	if !mixed && (t.cfg.Env.ScenarioFor(0) == "" || !t.cfg.Env.FreshWorkloads) {
		return t.base, nil
	}
	if env, ok := t.evalEnvs[seed]; ok {
		return env, nil
	}
	var env *sim.Env
	if mixed {
		w, err := t.mixture(seed)
		if err != nil {
			return nil, err
		}
		if env, err = sim.NewEnv(t.cluster, w, sim.EnvOptions{}); err != nil {
			return nil, err
		}
	} else {
		bl, _ := t.cfg.Env.BackgroundLoad.Model() // validated
		l, err := scenario.LoadWith(t.cfg.Env.ScenarioFor(seed), scenario.Options{Seed: &seed, Background: bl})
		if err != nil {
			return nil, err
		}
		if env, err = sage.NewEnvWith(l.Cluster, l.Workload, t.sage); err != nil {
			return nil, err
		}
	}
	if t.evalEnvs == nil {
		t.evalEnvs = map[uint64]*sim.Env{}
	}
	t.evalEnvs[seed] = env
	return env, nil
}

func (t *trainer) saveCheckpoint(dir string) error {
	if dir == "" {
		return nil
	}
	rng, err := t.pcg.MarshalBinary()
	if err != nil {
		return err
	}
	st := ckState{ConfigYAML: string(t.cfg.ckKey()), Iter: t.iter, Episodes: t.episodes, RNG: rng, AdamStep: t.opt.step, History: t.history, HaveBest: t.haveBest, BestVal: t.bestVal}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	sections := map[string]*nn.Net{"adam_m": t.opt.m, "adam_v": t.opt.v}
	if t.haveBest {
		sections["best"] = t.best
	}
	return nn.WriteFile(filepath.Join(dir, CheckpointFile), t.output(t.net), "checkpoint", sections, b)
}

func (t *trainer) resume(path string) error {
	d, err := nn.ReadFile(path)
	if err != nil {
		return err
	}
	if d.Header.Kind != "checkpoint" {
		return fmt.Errorf("%w: %s is a %s, not a checkpoint", nn.ErrModel, path, d.Header.Kind)
	}
	var st ckState
	if err := json.Unmarshal(d.Header.State, &st); err != nil {
		return fmt.Errorf("%w: checkpoint state: %v", nn.ErrModel, err)
	}
	if st.ConfigYAML != string(t.cfg.ckKey()) {
		return fmt.Errorf("%w: checkpoint %s was written with a different configuration (only ppo.iterations may change)", ErrConfig, path)
	}
	m, v := d.Sections["adam_m"], d.Sections["adam_v"]
	if m == nil || v == nil {
		return fmt.Errorf("%w: checkpoint lacks the optimiser state", nn.ErrModel)
	}
	if err := checkState(st, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := t.pcg.UnmarshalBinary(st.RNG); err != nil {
		return fmt.Errorf("%w: checkpoint rng: %v", nn.ErrModel, err)
	}
	t.net, t.schema = d.Model.Net, t.unbounded(d.Model.Schema)
	t.exclude = orMask(t.exclude, d.Model.UnreadConstants())
	t.opt = &adam{m: m, v: v, step: st.AdamStep, b1: 0.9, b2: 0.999, eps: 1e-8}
	t.iter, t.episodes, t.history = st.Iter, st.Episodes, st.History
	t.haveBest, t.bestVal = st.HaveBest, st.BestVal
	if st.HaveBest {
		if t.best = d.Sections["best"]; t.best == nil {
			return fmt.Errorf("%w: checkpoint lacks its best network", nn.ErrModel)
		}
	}
	t.log.Info("resumed", "checkpoint", path, "iteration", t.iter, "episodes", t.episodes)
	return nil
}

// checkState refuses a checkpoint's trainer state that training cannot
// have written (nn.Decode has refused non-finite moments already): a
// negative Adam step (step -1 makes the first update's bias correction
// 1 - b^0 = 0, a division by zero), a negative second moment (its square
// root is NaN) or a negative or uncapped counter. Any of them would make
// every weight NaN after one update, or replay iterations.
func checkState(st ckState, v *nn.Net) error {
	switch {
	case st.AdamStep < 0:
		return fmt.Errorf("%w: checkpoint adam_step %d, want >= 0", nn.ErrModel, st.AdamStep)
	case st.Iter < 0 || st.Iter > MaxIterations:
		return fmt.Errorf("%w: checkpoint iteration %d, want 0..%d", nn.ErrModel, st.Iter, MaxIterations)
	case st.Episodes < 0:
		return fmt.Errorf("%w: checkpoint episodes %d, want >= 0", nn.ErrModel, st.Episodes)
	}
	for _, p := range v.Params() {
		for i, x := range p.Values() {
			if x < 0 {
				return fmt.Errorf("%w: checkpoint adam_v: %s[%d] is %v, a second moment is never negative", nn.ErrModel, p.Name, i, x)
			}
		}
	}
	return nil
}

// ckKey is the configuration a checkpoint must match: everything but the
// number of PPO iterations and the decision rule (which training never
// uses).
func (c Config) ckKey() []byte {
	c.PPO.Iterations = 0
	c.Decision = policy.Decision{}
	return c.YAML()
}
