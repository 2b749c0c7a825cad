package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/edgesched/edgesched/internal/boundedio"
	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/sage"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/int8net"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/openb"
	"github.com/edgesched/edgesched/sim/scenario"
	"github.com/edgesched/edgesched/sim/scenario/family"
)

// Defaults for the openb inputs.
const (
	defaultNodes = "openb:" + openb.AllNodes
	defaultPods  = "openb:" + openb.Default
)

// Input is a compiled cluster and workload with a display name.
type Input struct {
	Name string
	Env  *sim.Env
	// ScenarioSeed is the generator seed of a scenario (0 for openb).
	ScenarioSeed uint64
	// Timed reports whether replay is possible.
	Timed        bool
	FromScenario bool
	// Generated reports a scenario whose workload comes from a generator
	// (so another seed gives another workload).
	Generated bool
}

// scenarioName is the name reports give a scenario: a family's with the
// calibration version that ran (NAME@vN, a bare NAME being the latest),
// else the document's own.
func scenarioName(ref, name string) string {
	if f, ok := strings.CutPrefix(ref, "builtin:"); ok {
		if info, err := family.Lookup(f); err == nil {
			return fmt.Sprintf("%s@v%d", info.Name, info.Version)
		}
	}
	return name
}

// LoadInput reads either a scenario or an openb node and pod list;
// workloadSeed, when set, replaces a scenario's generator seed. The openb
// files are read within openb's caps, honouring ctx.
func LoadInput(ctx context.Context, nodes, pods, scen string, workloadSeed *uint64) (*Input, error) {
	if scen != "" {
		if nodes != "" || pods != "" {
			return nil, fmt.Errorf("give --scenario or --nodes/--pods, not both")
		}
		l, err := scenario.LoadWith(scen, scenario.Options{Seed: workloadSeed})
		if err != nil {
			return nil, err
		}
		env, err := sage.NewEnv(l.Cluster, l.Workload)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", scen, err)
		}
		return &Input{Name: scenarioName(scen, l.Name), Env: env, ScenarioSeed: l.Seed, Timed: env.HasTimes, FromScenario: true, Generated: l.Generated}, nil
	}
	if nodes == "" {
		nodes = defaultNodes
	}
	if pods == "" {
		pods = defaultPods
	}
	ns, err := openb.LoadNodesContext(ctx, nodes, nil)
	if err != nil {
		return nil, err
	}
	pl, err := openb.LoadPodsContext(ctx, pods, nil)
	if err != nil {
		return nil, err
	}
	name := shortRef(nodes) + " + " + shortRef(pods)
	env, err := sim.NewEnv(&sim.Cluster{Name: shortRef(nodes), Nodes: ns}, &sim.Workload{Name: shortRef(pods), Pods: pl.Pods, Untimed: !pl.Timed}, sim.EnvOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &Input{Name: name, Env: env, Timed: pl.Timed}, nil
}

func shortRef(ref string) string {
	if i := strings.LastIndexAny(ref, "/\\"); i >= 0 {
		ref = ref[i+1:]
	}
	return strings.TrimSuffix(ref, ".csv")
}

// ResolvePolicies turns a comma-separated list into factories; "all" (or
// "baselines", or an empty list) stands for every baseline, and may be
// combined with others ("all,learned").
// Artifacts (learned:FILE.esa) are verified with opt.
func ResolvePolicies(list string, opt quant.DecodeOptions) ([]sim.Factory, error) {
	return ResolvePoliciesFlag("--policies", list, opt)
}

// ResolvePoliciesFlag is ResolvePolicies for a list given with flag (its
// name with the dashes), which its errors name.
func ResolvePoliciesFlag(flag, list string, opt quant.DecodeOptions) ([]sim.Factory, error) {
	list = strings.TrimSpace(list)
	if list == "" {
		list = "all"
	}
	var out []sim.Factory
	seen := map[string]bool{}
	add := func(f sim.Factory) {
		if !seen[f.Name] {
			seen[f.Name] = true
			out = append(out, f)
		}
	}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
		case name == "all" || name == "baselines":
			for _, f := range baseline.All() {
				add(f)
			}
		case name == sage.AffinityLoad || strings.HasPrefix(name, sage.AffinityLoad+":"):
			f, err := affinityFactory(name)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", flag, err)
			}
			add(f)
		case strings.HasPrefix(name, "learned"):
			f, err := learnedFactory(name, opt)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", flag, err)
			}
			add(f)
		default:
			f, err := baseline.Lookup(name)
			if errors.Is(err, baseline.ErrUnknownPolicy) {
				return nil, cli.UnknownValue(flag, name, PolicyNames())
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", flag, err)
			}
			add(f)
		}
	}
	if len(out) == 0 {
		return nil, cli.Usagef("%s: no policy named", flag)
	}
	return out, nil
}

// affinityFactory resolves "sage-load" (experimental: dep-load plus the
// GraphSAGE embeddings' zone affinity, sage.AffinityFactory, with the
// encoder pre-trained on the training apps) and "sage-load:W" (affinity
// weight W in (0, 10]).
func affinityFactory(name string) (sim.Factory, error) {
	w := float64(sage.AffinityWeight)
	if v, ok := strings.CutPrefix(name, sage.AffinityLoad+":"); ok {
		var err error
		if w, err = strconv.ParseFloat(v, 64); err != nil || !(w > 0 && w <= 10) {
			return sim.Factory{}, fmt.Errorf("%q: want %s:W with a weight W in (0, 10]", name, sage.AffinityLoad)
		}
	}
	p, err := sage.Default()
	if err != nil {
		return sim.Factory{}, fmt.Errorf("pre-train the GraphSAGE encoder: %w", err)
	}
	return sage.AffinityFactory(name, p, w), nil
}

// NetOnlySuffix after a learned policy's name runs its network alone,
// without the model's decision rule.
const NetOnlySuffix = "@net"

// learnedFactory resolves "learned" (the shipped default model),
// "learned:NAME" (a shipped model, see models.Names), "learned:FILE.esa"
// (a float32 or int8 artifact, verified with opt) or "learned:FILE" (a
// training output; any path containing a slash or ending in .esm).
//
// The suffix "@net" (learned@net, learned:NAME@net, ...) runs the network
// alone: the model's decision rule is dropped (band 0, plain argmax of
// the network's scores), to report it beside the rule.
func learnedFactory(name string, opt quant.DecodeOptions) (sim.Factory, error) {
	spec, netOnly := strings.CutSuffix(name, NetOnlySuffix)
	ref, ok := strings.CutPrefix(spec, "learned:")
	if !ok {
		if spec != "learned" {
			return sim.Factory{}, fmt.Errorf("%q: want learned, learned:NAME or learned:FILE (each optionally with %s)", name, NetOnlySuffix)
		}
		ref = "default"
	}
	model := func(m *nn.Model) sim.Factory {
		if netOnly {
			c := *m
			c.Decision = policy.Decision{}
			m = &c
		}
		return ownPartners(nn.Factory(name, m), m.Sage)
	}
	if strings.HasSuffix(ref, ".esa") {
		a, err := quant.ReadFile(ref, opt)
		if err != nil {
			if errors.Is(err, quant.ErrUnknownKey) || errors.Is(err, quant.ErrUnsigned) {
				return sim.Factory{}, fmt.Errorf("%w (give its public key with --model-keys, or --allow-unsigned)", err)
			}
			return sim.Factory{}, err
		}
		if a.Header.DType == quant.Int8 {
			if netOnly {
				a.Header.Decision = policy.Decision{}
			}
			n, err := int8net.New(a)
			if err != nil {
				return sim.Factory{}, err
			}
			return ownPartners(int8net.Factory(name, n), a.Sage()), nil
		}
		m, err := nn.FromArtifact(a)
		if err != nil {
			return sim.Factory{}, err
		}
		return model(m), nil
	}
	if !strings.ContainsRune(ref, '/') && !strings.HasSuffix(ref, ".esm") {
		m, err := models.Load(ref)
		if err != nil {
			return sim.Factory{}, err
		}
		return model(m), nil
	}
	d, err := nn.ReadFile(ref)
	if err != nil {
		return sim.Factory{}, err
	}
	return model(d.Model), nil
}

// ownPartners runs f on a copy of each environment whose partners come
// from w, the model's own GraphSAGE weights (a federated round trained
// them), when they are not the shipped pair the input was annotated with
// (LoadInput: sage.NewEnv); the copy shares everything else.
func ownPartners(f sim.Factory, w *policy.SageWeights) sim.Factory {
	if w == nil || w.ID() == policy.AffinityEncoder {
		return f
	}
	return sim.Factory{Name: f.Name, New: func(env *sim.Env) (sim.Policy, error) {
		own := *env
		if err := PartnersFor(&own, w); err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		return f.New(&own)
	}}
}

// PartnersFor annotates env (the caller's own) with the partners of w, a
// model's GraphSAGE weights, unless they are the ones env has (LoadInput
// gives the shipped pair's) or env has no calls.
func PartnersFor(env *sim.Env, w *policy.SageWeights) error {
	if w == nil || len(env.Edges) == 0 || w.ID() == env.PartnersEncoder {
		return nil
	}
	if err := sage.AnnotateWith(env, w); err != nil {
		return fmt.Errorf("partners of the model's GraphSAGE weights: %w", err)
	}
	return nil
}

// ParseSeeds reads "7", "1,2,3" or "1-5" (at most 1000 seeds). Every
// caller parses a flag's value, so its errors are usage errors (exit 2).
func ParseSeeds(s string) ([]uint64, error) {
	seeds, err := parseSeeds(s)
	return seeds, cli.Usage(err)
}

func parseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.ParseUint(strings.TrimSpace(lo), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a seed (want N, N,M or N-M)", part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseUint(strings.TrimSpace(hi), 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("%q is not a range (want N-M with N <= M)", part)
			}
		}
		if b-a >= 1000 || len(out)+int(b-a+1) > 1000 {
			return nil, fmt.Errorf("at most 1000 seeds")
		}
		for i := uint64(0); i <= b-a; i++ { // by count: a+i cannot wrap
			out = append(out, a+i)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty")
	}
	return out, nil
}

// ReadFileOrStdin reads the regular file at path, or stdin for "-", at
// most limit bytes (internal/boundedio: more is refused, naming the
// limit; a FIFO or device path is refused; a read blocked on stdin ends
// with ctx). Errors name the path.
func ReadFileOrStdin(ctx context.Context, stdin io.Reader, path string, limit int64) ([]byte, error) {
	if path == "-" {
		return boundedio.ReadAll(ctx, stdin, "stdin", limit)
	}
	return boundedio.ReadFile(ctx, path, limit)
}

// PolicyNames are the values --policies takes: the baselines by their
// canonical names, the extras, the groups and the learned forms.
func PolicyNames() []string {
	names := []string{"all", "baselines"}
	names = append(names, baseline.Names()...)
	for _, f := range baseline.Extras() {
		if !slices.Contains(names, f.Name) {
			names = append(names, f.Name)
		}
	}
	return append(names, sage.AffinityLoad, sage.AffinityLoad+":W", "learned", "learned:NAME", "learned:FILE")
}

// DecodeOptions are the options to verify artifacts with: the keyring of
// the trusted model-signing public keys (files or directories of *.pub,
// --model-keys), and whether an unsigned artifact is accepted.
func DecodeOptions(keys []string, allowUnsigned bool) (quant.DecodeOptions, error) {
	opt := quant.DecodeOptions{AllowUnsigned: allowUnsigned}
	if len(keys) > 0 {
		k, err := quant.LoadKeyring(keys...)
		if err != nil {
			return opt, err
		}
		opt.Keys = k
	}
	return opt, nil
}
