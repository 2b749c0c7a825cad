package scenario

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/edgesched/edgesched/internal/boundedio"
	"github.com/edgesched/edgesched/sim"
)

// Errors of the scenario loader. Problems in a file come as a
// *sim.LineError wrapping one of these or a sim error.
var (
	ErrSyntax     = errors.New("scenario: syntax")
	ErrUnknownRef = errors.New("scenario: unknown reference")
	ErrTooLarge   = errors.New("scenario: too large")
)

// APIVersion and Kind identify a scenario document.
const (
	APIVersion = "edgesched.io/v1alpha1"
	Kind       = "Scenario"
)

// Limits that keep a hostile or mistaken file from exhausting memory.
const (
	MaxFileBytes = 8 << 20
	MaxNodes     = 100_000
	MaxPods      = 1_000_000
)

// Scenario is the YAML document (see docs/scenario.md for every field).
type Scenario struct {
	APIVersion   string       `yaml:"apiVersion"`
	Kind         string       `yaml:"kind"`
	Name         string       `yaml:"name"`
	Description  string       `yaml:"description"`
	Seed         uint64       `yaml:"seed"`
	Zones        []Zone       `yaml:"zones"`
	CarbonZones  []CarbonZone `yaml:"carbonZones"`
	Network      *Network     `yaml:"network"`
	GPUModels    []GPUModel   `yaml:"gpuModels"`
	NodePools    []NodePool   `yaml:"nodePools"`
	Workload     Workload     `yaml:"workload"`
	Dependencies []Dependency `yaml:"dependencies"`
	// LoadProfiles are the usage profiles pods may follow (template key
	// profile); Disruptions enables node failures in replay.
	LoadProfiles []LoadProfile `yaml:"loadProfiles"`
	Disruptions  *Disruptions  `yaml:"disruptions"`
	// BackgroundLoad puts work outside Kubernetes on a random share of
	// the nodes (sim.BackgroundLoad), drawn from the scenario's seed.
	BackgroundLoad *BackgroundLoad `yaml:"backgroundLoad"`
	pos            pos
}

// BackgroundLoad is sim.BackgroundLoad: the share of the nodes busy
// outside Kubernetes, and the range [min, max] of CPU share they are.
type BackgroundLoad struct {
	Share float64   `yaml:"share"`
	CPU   []float64 `yaml:"cpu"`
	pos   pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (b *BackgroundLoad) UnmarshalYAML(n *yaml.Node) error {
	type raw BackgroundLoad
	return strict(n, (*raw)(b), &b.pos)
}

// Model returns b as the simulator's, validated (sim.BackgroundLoad;
// b nil: nil). Training configurations share the key (policy/ppo).
func (b *BackgroundLoad) Model() (*sim.BackgroundLoad, error) {
	if b == nil {
		return nil, nil
	}
	if len(b.CPU) != 2 {
		return nil, fmt.Errorf("%w: background load cpu %v, want [min, max]", sim.ErrInvalid, b.CPU)
	}
	bl := &sim.BackgroundLoad{Share: b.Share, Min: b.CPU[0], Max: b.CPU[1]}
	if err := bl.Validate(); err != nil {
		return nil, err
	}
	return bl, nil
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (s *Scenario) UnmarshalYAML(n *yaml.Node) error {
	type raw Scenario
	return strict(n, (*raw)(s), &s.pos)
}

// Zone declares a zone.
type Zone struct {
	Name       string  `yaml:"name"`
	CarbonZone string  `yaml:"carbonZone"`
	Uplink     *Uplink `yaml:"uplink"`
	pos        pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (z *Zone) UnmarshalYAML(n *yaml.Node) error {
	type raw Zone
	return strict(n, (*raw)(z), &z.pos)
}

// CarbonZone declares a grid region's hourly intensity curve (gCO2/kWh):
// a curve, or a window of a real grid (sim/carbon).
type CarbonZone struct {
	Name  string    `yaml:"name"`
	Curve []float64 `yaml:"curve"`
	// Grid names an embedded grid (BPAT, CISO, ...); Start is the local
	// date and time of hour 0 ("2022-06-01" or "2022-06-01T06:00"), at UTC
	// offset UTCOffsetHours; Hours is the window's length (default: the
	// trace's span in whole days).
	Grid           string `yaml:"grid"`
	Start          string `yaml:"start"`
	UTCOffsetHours int    `yaml:"utcOffsetHours"`
	Hours          int    `yaml:"hours"`
	pos            pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (c *CarbonZone) UnmarshalYAML(n *yaml.Node) error {
	type raw CarbonZone
	return strict(n, (*raw)(c), &c.pos)
}

// Network declares round-trip times in milliseconds.
type Network struct {
	IntraZoneMs float64    `yaml:"intraZoneMs"`
	InterZoneMs float64    `yaml:"interZoneMs"`
	Pairs       []ZonePair `yaml:"pairs"`
	pos         pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (nw *Network) UnmarshalYAML(n *yaml.Node) error {
	type raw Network
	return strict(n, (*raw)(nw), &nw.pos)
}

// ZonePair is a measured RTT between two zones.
type ZonePair struct {
	A   string  `yaml:"a"`
	B   string  `yaml:"b"`
	Ms  float64 `yaml:"ms"`
	pos pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (z *ZonePair) UnmarshalYAML(n *yaml.Node) error {
	type raw ZonePair
	return strict(n, (*raw)(z), &z.pos)
}

// GPUModel declares a GPU type.
type GPUModel struct {
	Name      string  `yaml:"name"`
	MemoryMiB int64   `yaml:"memoryMiB"`
	Watts     float64 `yaml:"watts"`
	pos       pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (g *GPUModel) UnmarshalYAML(n *yaml.Node) error {
	type raw GPUModel
	return strict(n, (*raw)(g), &g.pos)
}

// Taint is a node taint.
type Taint struct {
	Key    string `yaml:"key"`
	Value  string `yaml:"value"`
	Effect string `yaml:"effect"`
	pos    pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (t *Taint) UnmarshalYAML(n *yaml.Node) error {
	type raw Taint
	return strict(n, (*raw)(t), &t.pos)
}

// Toleration is a pod toleration (operator Equal or Exists).
type Toleration struct {
	Key      string `yaml:"key"`
	Operator string `yaml:"operator"`
	Value    string `yaml:"value"`
	Effect   string `yaml:"effect"`
	pos      pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (t *Toleration) UnmarshalYAML(n *yaml.Node) error {
	type raw Toleration
	return strict(n, (*raw)(t), &t.pos)
}

// Power is a node power model.
type Power struct {
	IdleWatts    float64 `yaml:"idleWatts"`
	WattsPerCore float64 `yaml:"wattsPerCore"`
	WattsPerGPU  float64 `yaml:"wattsPerGPU"`
	pos          pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (p *Power) UnmarshalYAML(n *yaml.Node) error {
	type raw Power
	return strict(n, (*raw)(p), &p.pos)
}

// NodePool declares count identical nodes, or imports an openb node list.
type NodePool struct {
	Name string `yaml:"name"`
	// OpenB imports nodes from an openb node list (a path relative to the
	// scenario file, or openb:all_node); capacity fields must then be unset.
	OpenB string `yaml:"openb"`
	// Limit keeps the first Limit nodes of an openb list (0: all).
	Limit int `yaml:"limit"`
	// Stride keeps every Stride-th node of an openb list (0 or 1: all), for
	// a representative slice of a large cluster.
	Stride int `yaml:"stride"`
	Count  int `yaml:"count"`
	// Zones spreads the pool's nodes round-robin; Zone is a single zone.
	Zones       []string          `yaml:"zones"`
	Zone        string            `yaml:"zone"`
	Arch        string            `yaml:"arch"`
	CPUMilli    int64             `yaml:"cpuMilli"`
	MemoryMiB   int64             `yaml:"memoryMiB"`
	GPUs        int               `yaml:"gpus"`
	GPUModel    string            `yaml:"gpuModel"`
	Labels      map[string]string `yaml:"labels"`
	Taints      []Taint           `yaml:"taints"`
	FailureRate float64           `yaml:"failureRate"`
	CarbonZone  string            `yaml:"carbonZone"`
	Power       *Power            `yaml:"power"`
	NICMbps     float64           `yaml:"nicMbps"`
	// BackgroundCPU is the share of each node's CPU busy outside
	// Kubernetes (sim.NodeSpec.Background); absent: none.
	BackgroundCPU float64 `yaml:"backgroundCPU,omitempty"`
	pos           pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (p *NodePool) UnmarshalYAML(n *yaml.Node) error {
	type raw NodePool
	return strict(n, (*raw)(p), &p.pos)
}

// PodTemplate is the shape of a pod: requests and constraints.
type PodTemplate struct {
	CPUMilli      int64             `yaml:"cpuMilli"`
	MemoryMiB     int64             `yaml:"memoryMiB"`
	GPUs          int               `yaml:"gpus"`
	GPUMilli      int64             `yaml:"gpuMilli"`
	GPUSpec       []string          `yaml:"gpuSpec"`
	QoS           string            `yaml:"qos"`
	Priority      int32             `yaml:"priority"`
	Arch          string            `yaml:"arch"`
	NodeSelector  map[string]string `yaml:"nodeSelector"`
	Tolerations   []Toleration      `yaml:"tolerations"`
	Usage         float64           `yaml:"usage"`
	CPULimitMilli int64             `yaml:"cpuLimitMilli"`
	// UsageSpread draws each pod's usage around Usage (lognormal, mean
	// Usage, this sigma), from the scenario seed and the pod's name.
	UsageSpread  float64 `yaml:"usageSpread"`
	MemUsage     float64 `yaml:"memUsage"`
	Profile      string  `yaml:"profile"`
	Interference float64 `yaml:"interference"`
	NetMbps      float64 `yaml:"netMbps"`
	pos          pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (t *PodTemplate) UnmarshalYAML(n *yaml.Node) error {
	type raw PodTemplate
	return strict(n, (*raw)(t), &t.pos)
}

// Pod is one explicit pod.
type Pod struct {
	Name    string    `yaml:"name"`
	Service string    `yaml:"service"`
	Create  Duration  `yaml:"create"`
	Delete  *Duration `yaml:"delete"`
	// Template fields, inline.
	PodTemplate `yaml:",inline"`
	pos         pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (p *Pod) UnmarshalYAML(n *yaml.Node) error {
	type raw struct {
		Name    string    `yaml:"name"`
		Service string    `yaml:"service"`
		Create  Duration  `yaml:"create"`
		Delete  *Duration `yaml:"delete"`
	}
	if n.Kind != yaml.MappingNode {
		return strict(n, &raw{}, &p.pos)
	}
	// Split the mapping: pod keys here, the rest is the template.
	own := &yaml.Node{Kind: yaml.MappingNode, Line: n.Line, Column: n.Column}
	tpl := &yaml.Node{Kind: yaml.MappingNode, Line: n.Line, Column: n.Column}
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch n.Content[i].Value {
		case "name", "service", "create", "delete":
			own.Content = append(own.Content, n.Content[i], n.Content[i+1])
		default:
			tpl.Content = append(tpl.Content, n.Content[i], n.Content[i+1])
		}
	}
	var r raw
	if err := strict(own, &r, &p.pos); err != nil {
		return err
	}
	if err := p.PodTemplate.UnmarshalYAML(tpl); err != nil {
		return err
	}
	for k, l := range p.PodTemplate.pos.keys {
		p.pos.keys[k] = l
	}
	p.Name, p.Service, p.Create, p.Delete = r.Name, r.Service, r.Create, r.Delete
	return nil
}

// Service is a long-running, replicated service (a Deployment).
type Service struct {
	Name     string      `yaml:"name"`
	Replicas int         `yaml:"replicas"`
	Start    Duration    `yaml:"start"`
	Template PodTemplate `yaml:"template"`
	pos      pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (s *Service) UnmarshalYAML(n *yaml.Node) error {
	type raw Service
	return strict(n, (*raw)(s), &s.pos)
}

// Workload declares the pods: imported, explicit, replicated services and
// generated arrivals, all combined.
type Workload struct {
	// OpenB imports an openb pod list (path relative to the scenario file,
	// or openb:default and the like).
	OpenB     string     `yaml:"openb"`
	Limit     int        `yaml:"limit"`
	Pods      []Pod      `yaml:"pods"`
	Services  []Service  `yaml:"services"`
	Generator *Generator `yaml:"generator"`
	// Apps places instances of library or synthetic service graphs.
	Apps []AppInstance `yaml:"apps"`
	pos  pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (w *Workload) UnmarshalYAML(n *yaml.Node) error {
	type raw Workload
	return strict(n, (*raw)(w), &w.pos)
}

// Dependency is a call edge between services.
type Dependency struct {
	From           string  `yaml:"from"`
	To             string  `yaml:"to"`
	CallsPerSecond float64 `yaml:"callsPerSecond"`
	pos            pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (d *Dependency) UnmarshalYAML(n *yaml.Node) error {
	type raw Dependency
	return strict(n, (*raw)(d), &d.pos)
}

// Loaded is a scenario turned into a cluster and a workload.
type Loaded struct {
	Name        string
	Description string
	// Seed is the generator seed the scenario used (stored for the record).
	Seed     uint64
	Cluster  *sim.Cluster
	Workload *sim.Workload
	// Generated reports that (part of) the workload comes from the
	// generator, so another seed gives another workload.
	Generated bool
}

// Options change how a scenario is built. The zero value builds it as
// written.
type Options struct {
	// Seed, when set, replaces the scenario's generator seed (trainers draw
	// fresh workloads from one scenario this way).
	Seed *uint64
	// Background, when set, replaces the scenario's backgroundLoad
	// (trainers stress a family this way; validated).
	Background *sim.BackgroundLoad
}

// Load reads a scenario file, or a built-in one named "builtin:NAME".
func Load(path string) (*Loaded, error) { return LoadWith(path, Options{}) }

// LoadWith is Load with options.
func LoadWith(path string, opt Options) (*Loaded, error) {
	if name, ok := strings.CutPrefix(path, "builtin:"); ok {
		// a family's seed draws the fleet and the apps too, and the
		// generated document carries it as its generator seed
		b, err := builtinBytes(name, opt.Seed)
		if err != nil {
			return nil, err
		}
		return ParseWith(b, path, "", opt)
	}
	b, err := boundedio.ReadFile(context.Background(), path, MaxFileBytes)
	if errors.Is(err, boundedio.ErrTooLarge) {
		return nil, &sim.LineError{File: path, Err: fmt.Errorf("%w: over %d bytes", ErrTooLarge, MaxFileBytes)}
	}
	if err != nil {
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	return ParseWith(b, path, filepath.Dir(path), opt)
}

// Parse decodes and builds a scenario. file names it in errors; dir is
// where relative trace paths are resolved ("" for built-ins, which may only
// use embedded openb traces).
func Parse(b []byte, file, dir string) (*Loaded, error) { return ParseWith(b, file, dir, Options{}) }

// ParseWith is Parse with options.
func ParseWith(b []byte, file, dir string, opt Options) (*Loaded, error) {
	out, err := parse(b, dir, opt)
	if err != nil {
		var le *sim.LineError
		if errors.As(err, &le) && le.File == "" {
			le.File = file
		}
		return nil, err
	}
	return out, nil
}

func parse(b []byte, dir string, opt Options) (*Loaded, error) {
	if len(b) > MaxFileBytes {
		return nil, &sim.LineError{Err: fmt.Errorf("%w: over %d bytes", ErrTooLarge, MaxFileBytes)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, &sim.LineError{Err: fmt.Errorf("%w: empty document", ErrSyntax)}
		}
		return nil, yamlErr(err)
	}
	if len(doc.Content) == 0 {
		return nil, &sim.LineError{Err: fmt.Errorf("%w: empty document", ErrSyntax)}
	}
	if _, err := expandedSize(doc.Content[0], maxYAMLNodes); err != nil {
		return nil, err
	}
	var s Scenario
	if err := s.UnmarshalYAML(doc.Content[0]); err != nil {
		return nil, err
	}
	if opt.Seed != nil {
		s.Seed = *opt.Seed
	}
	b2 := &builder{s: &s, dir: dir, background: opt.Background}
	return b2.build()
}
