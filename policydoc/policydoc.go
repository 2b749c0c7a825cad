package policydoc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// APIVersion and Kind identify a policy document.
const (
	APIVersion = "edgesched.policy/v1"
	DocKind    = "SchedulingPolicy"
)

// Limits of a document.
const (
	// MaxDocumentBytes caps what Decode reads.
	MaxDocumentBytes = 256 << 10
	// MaxRules caps the rules of one document.
	MaxRules = 256
	// MaxNames caps the names (services, zones, models, architectures) one
	// rule lists.
	MaxNames = 64
	// MaxSourceLen caps a rule's source sentence.
	MaxSourceLen = 1024
	// MaxNodeScore is the kube-scheduler's score range upper bound.
	MaxNodeScore = 100
	// DefaultScoreShare is the share (percent) of the final score that the
	// preferred rules decide when a document leaves ScoreShare at 0.
	DefaultScoreShare = 50
	// DefaultWeight is a preferred rule's weight when the sentence gives
	// no strength ("prefer").
	DefaultWeight = 50
	// MaxCarbon bounds a carbon threshold in gCO2/kWh.
	MaxCarbon = 2000
)

// Errors.
var (
	// ErrInvalid wraps every decoding and validation error.
	ErrInvalid = errors.New("policydoc: invalid policy")
	// ErrTooLarge is returned for a document over MaxDocumentBytes.
	ErrTooLarge = errors.New("policydoc: document too large")
)

// Kind is what a rule constrains.
type Kind string

// Rule kinds.
const (
	// Colocate: every replica of the selected services runs in one zone
	// (Scope zone) or on one node (Scope node): a pod goes to the domain
	// that holds most of the group's running replicas (the first one is
	// free), so once in force from the start the group shares one domain.
	Colocate Kind = "colocate"
	// Separate: the selected services never share a node or zone.
	Separate Kind = "separate"
	// Spread: at most MaxPerDomain replicas of each selected service on one
	// node (or in one zone).
	Spread Kind = "spread"
	// Zone: the selected pods run in Zones (or, with Negate, outside them).
	Zone Kind = "zone"
	// NodeLabel: the selected pods run on nodes with Label (key=value; with
	// Negate, without it).
	NodeLabel Kind = "node-label"
	// Arch: the selected pods run on nodes of one of Arch.
	Arch Kind = "arch"
	// GPUModel: the selected pods run on nodes whose GPU model is one of
	// GPUModels (nodes without GPUs do not qualify).
	GPUModel Kind = "gpu-model"
	// Carbon: the node's grid is at most MaxCarbon gCO2/kWh now; preferred
	// without a threshold, lower carbon intensity scores higher.
	Carbon Kind = "carbon"
	// Hours: the selected pods are scheduled only during During.
	Hours Kind = "hours"
	// CPUCap: the node's requested CPU, the pod included, stays at most
	// MaxCPUPercent of its allocatable CPU.
	CPUCap Kind = "cpu-cap"
)

// Kinds lists every kind in documentation order.
func Kinds() []Kind {
	return []Kind{Colocate, Separate, Spread, Zone, NodeLabel, Arch, GPUModel, Carbon, Hours, CPUCap}
}

// Effect says whether a rule is a hard constraint or a preference.
type Effect string

// Effects.
const (
	Required  Effect = "required"
	Preferred Effect = "preferred"
)

// Scope is the domain of co-location, separation and spreading.
type Scope string

// Scopes.
const (
	ScopeNode Scope = "node"
	ScopeZone Scope = "zone"
)

// Document is a scheduling policy.
type Document struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// ScoreShare is the percent of the final node score the preferred
	// rules decide, in [1, 100]; 0 means DefaultScoreShare.
	ScoreShare int    `json:"scoreShare,omitempty"`
	Rules      []Rule `json:"rules"`
}

// Selector picks the pods a rule applies to. The zero value selects every
// pod; Services selects pods of those services; GPU selects pods that
// request GPUs (with Services: GPU pods of those services).
type Selector struct {
	Services []string `json:"services,omitempty"`
	GPU      bool     `json:"gpu,omitempty"`
}

// HourRange is [From, To) in whole UTC hours; From > To wraps midnight
// (22-6 is 22:00 to 06:00). From == To is refused.
type HourRange struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// Contains reports whether hour h (0-23) is in the range.
func (r HourRange) Contains(h int) bool {
	if r.From < r.To {
		return h >= r.From && h < r.To
	}
	return h >= r.From || h < r.To
}

// Rule is one constraint or preference. Which fields apply depends on
// Kind; a field set for a kind that does not use it is refused.
type Rule struct {
	// Name identifies the rule in explanations; empty names become
	// "rule-N" (1-based) when validated.
	Name   string `json:"name,omitempty"`
	Kind   Kind   `json:"kind"`
	Effect Effect `json:"effect"`
	// Weight is a preferred rule's weight in [1, 100]; 0 on a required rule.
	Weight int      `json:"weight,omitempty"`
	Pods   Selector `json:"pods"`
	// Scope: colocate, separate, spread.
	Scope Scope `json:"scope,omitempty"`
	// MaxPerDomain: spread.
	MaxPerDomain int `json:"maxPerDomain,omitempty"`
	// Negate turns zone, node-label, arch and gpu-model rules into "not".
	Negate bool `json:"negate,omitempty"`
	// Zones: zone.
	Zones []string `json:"zones,omitempty"`
	// Label is key=value: node-label.
	Label string `json:"label,omitempty"`
	// Arch: amd64 or arm64.
	Arch []string `json:"arch,omitempty"`
	// GPUModels: gpu-model.
	GPUModels []string `json:"gpuModels,omitempty"`
	// MaxCarbon gCO2/kWh in (0, MaxCarbon]: carbon (0 on a preferred rule:
	// the lower the better).
	MaxCarbon float64 `json:"maxCarbon,omitempty"`
	// MaxCPUPercent in [1, 100]: cpu-cap.
	MaxCPUPercent int `json:"maxCPUPercent,omitempty"`
	// During limits any rule to hours of the day; required for kind hours.
	During *HourRange `json:"during,omitempty"`
	// Source is the sentence the rule was compiled from, if any.
	Source string `json:"source,omitempty"`
}

// New returns an empty document of the current version.
func New() *Document { return &Document{APIVersion: APIVersion, Kind: DocKind} }

// Decode reads a document in YAML or JSON, strictly: at most
// MaxDocumentBytes, no unknown or duplicate fields, then Validate.
func Decode(b []byte) (*Document, error) {
	if len(b) > MaxDocumentBytes {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrTooLarge, len(b), MaxDocumentBytes)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%w: empty document", ErrInvalid)
	}
	js, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var d Document
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the document", ErrInvalid)
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

// EncodeYAML writes the document as YAML (keys as in JSON).
func (d *Document) EncodeYAML() ([]byte, error) { return yaml.Marshal(d) }

var (
	dnsName = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$`)
	// svcName allows one "/" between an application and its service
	// (the simulator's scenarios name services "app/service").
	svcName  = regexp.MustCompile(`^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?(/[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?)?$`)
	labelKey = regexp.MustCompile(`^([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)
	labelVal = regexp.MustCompile(`^([A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)?$`)
	gpuName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
)

// unwritable reports the characters EncodeYAML cannot write as they are:
// DEL and the C1 controls (the YAML reader refuses them; U+0085, a YAML
// line break, reads back as a space) and the noncharacters U+FFFE, U+FFFF.
func unwritable(c rune) bool {
	return c == 0x7f || (c >= 0x80 && c <= 0x9f) || c == 0xfffe || c == 0xffff
}

// Archs are the architectures a rule may name.
var Archs = []string{"amd64", "arm64"}

// Validate checks the document and names the field of the first error. It
// fills empty rule names with "rule-N".
func (d *Document) Validate() error {
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, a...))
	}
	if d.APIVersion != APIVersion {
		return bad("apiVersion", "%q is not supported (want %s)", d.APIVersion, APIVersion)
	}
	if d.Kind != DocKind {
		return bad("kind", "%q (want %s)", d.Kind, DocKind)
	}
	if d.ScoreShare < 0 || d.ScoreShare > 100 {
		return bad("scoreShare", "%d is outside [0, 100]", d.ScoreShare)
	}
	if len(d.Rules) > MaxRules {
		return bad("rules", "%d rules (limit %d)", len(d.Rules), MaxRules)
	}
	names := map[string]int{}
	for i := range d.Rules {
		r := &d.Rules[i]
		if r.Name == "" {
			r.Name = fmt.Sprintf("rule-%d", i+1)
		}
		f := fmt.Sprintf("rules[%d]", i)
		if !dnsName.MatchString(r.Name) {
			return bad(f+".name", "%q is not a lowercase DNS name", r.Name)
		}
		if j, dup := names[r.Name]; dup {
			return bad(f+".name", "%q is also rules[%d]'s name", r.Name, j)
		}
		names[r.Name] = i
		if err := r.validate(); err != nil {
			return fmt.Errorf("%w: %s.%v", ErrInvalid, f, err)
		}
	}
	return nil
}

// fieldErr is a validation error naming a field relative to the rule.
type fieldErr struct{ field, msg string }

func (e fieldErr) Error() string { return e.field + ": " + e.msg }

func ferr(field, format string, a ...any) error { return fieldErr{field, fmt.Sprintf(format, a...)} }

// uses lists the optional fields each kind uses.
var uses = map[Kind][]string{
	Colocate:  {"scope"},
	Separate:  {"scope"},
	Spread:    {"scope", "maxPerDomain"},
	Zone:      {"zones", "negate"},
	NodeLabel: {"label", "negate"},
	Arch:      {"arch", "negate"},
	GPUModel:  {"gpuModels", "negate"},
	Carbon:    {"maxCarbon"},
	Hours:     {},
	CPUCap:    {"maxCPUPercent"},
}

func (r *Rule) setFields() []string {
	var s []string
	add := func(ok bool, name string) {
		if ok {
			s = append(s, name)
		}
	}
	add(r.Scope != "", "scope")
	add(r.MaxPerDomain != 0, "maxPerDomain")
	add(r.Negate, "negate")
	add(len(r.Zones) > 0, "zones")
	add(r.Label != "", "label")
	add(len(r.Arch) > 0, "arch")
	add(len(r.GPUModels) > 0, "gpuModels")
	add(r.MaxCarbon != 0, "maxCarbon")
	add(r.MaxCPUPercent != 0, "maxCPUPercent")
	return s
}

func checkNames(field string, list []string, re *regexp.Regexp, what string) error {
	if len(list) > MaxNames {
		return ferr(field, "%d names (limit %d)", len(list), MaxNames)
	}
	seen := map[string]bool{}
	for i, n := range list {
		if !re.MatchString(n) {
			return ferr(fmt.Sprintf("%s[%d]", field, i), "%q is not a valid %s", n, what)
		}
		if seen[n] {
			return ferr(fmt.Sprintf("%s[%d]", field, i), "%q is listed twice", n)
		}
		seen[n] = true
	}
	return nil
}

func (r *Rule) validate() error {
	used, ok := uses[r.Kind]
	if !ok {
		return ferr("kind", "%q is not a rule kind (want one of %s)", r.Kind, kindList())
	}
	switch r.Effect {
	case Required:
		if r.Weight != 0 {
			return ferr("weight", "a required rule has no weight (got %d)", r.Weight)
		}
	case Preferred:
		if r.Weight < 1 || r.Weight > 100 {
			return ferr("weight", "%d is outside [1, 100]", r.Weight)
		}
	default:
		return ferr("effect", "%q (want required or preferred)", r.Effect)
	}
	for _, f := range r.setFields() {
		if !slices.Contains(used, f) {
			return ferr(f, "not used by kind %s", r.Kind)
		}
	}
	if err := checkNames("pods.services", r.Pods.Services, svcName, "service name"); err != nil {
		return err
	}
	if len(r.Source) > MaxSourceLen {
		return ferr("source", "%d bytes (limit %d)", len(r.Source), MaxSourceLen)
	}
	if i := strings.IndexFunc(r.Source, unwritable); i >= 0 {
		c, _ := utf8.DecodeRuneInString(r.Source[i:])
		return ferr("source", "character %U at byte %d: a YAML document cannot carry it", c, i)
	}
	if r.During != nil {
		if r.During.From < 0 || r.During.From > 23 || r.During.To < 0 || r.During.To > 23 {
			return ferr("during", "hours must be in [0, 23] (got %d-%d)", r.During.From, r.During.To)
		}
		if r.During.From == r.During.To {
			return ferr("during", "empty range %d-%d", r.During.From, r.During.To)
		}
	}
	switch r.Kind {
	case Colocate, Separate:
		if len(r.Pods.Services) < 2 {
			return ferr("pods.services", "%s needs at least two services (got %d)", r.Kind, len(r.Pods.Services))
		}
		if r.Pods.GPU {
			return ferr("pods.gpu", "not used by kind %s", r.Kind)
		}
		if err := checkScope(r.Scope); err != nil {
			return err
		}
	case Spread:
		if len(r.Pods.Services) == 0 {
			return ferr("pods.services", "spread needs at least one service")
		}
		if err := checkScope(r.Scope); err != nil {
			return err
		}
		if r.MaxPerDomain < 1 || r.MaxPerDomain > 1000 {
			return ferr("maxPerDomain", "%d is outside [1, 1000]", r.MaxPerDomain)
		}
	case Zone:
		if len(r.Zones) == 0 {
			return ferr("zones", "zone rule needs at least one zone")
		}
		return checkNames("zones", r.Zones, dnsName, "zone name")
	case NodeLabel:
		k, v, ok := strings.Cut(r.Label, "=")
		if !ok || !labelKey.MatchString(k) || !labelVal.MatchString(v) {
			return ferr("label", "%q is not key=value with a Kubernetes label key and value", r.Label)
		}
	case Arch:
		if len(r.Arch) == 0 {
			return ferr("arch", "arch rule needs amd64 or arm64")
		}
		for i, a := range r.Arch {
			if !slices.Contains(Archs, a) {
				return ferr(fmt.Sprintf("arch[%d]", i), "%q (want amd64 or arm64)", a)
			}
		}
		return checkNames("arch", r.Arch, dnsName, "architecture")
	case GPUModel:
		if len(r.GPUModels) == 0 {
			return ferr("gpuModels", "gpu-model rule needs at least one model")
		}
		return checkNames("gpuModels", r.GPUModels, gpuName, "GPU model")
	case Carbon:
		if r.MaxCarbon < 0 || r.MaxCarbon > MaxCarbon || r.MaxCarbon != r.MaxCarbon {
			return ferr("maxCarbon", "%v is outside (0, %d] gCO2/kWh", r.MaxCarbon, MaxCarbon)
		}
		if r.MaxCarbon == 0 && r.Effect == Required {
			return ferr("maxCarbon", "a required carbon rule needs a threshold in gCO2/kWh")
		}
	case Hours:
		if r.During == nil {
			return ferr("during", "an hours rule needs a range of hours")
		}
		if r.Effect != Required {
			return ferr("effect", "an hours rule can only be required (a preference on time cannot choose between nodes)")
		}
	case CPUCap:
		if r.MaxCPUPercent < 1 || r.MaxCPUPercent > 100 {
			return ferr("maxCPUPercent", "%d is outside [1, 100]", r.MaxCPUPercent)
		}
	}
	return nil
}

func checkScope(s Scope) error {
	if s != ScopeNode && s != ScopeZone {
		return ferr("scope", "%q (want node or zone)", s)
	}
	return nil
}

func kindList() string {
	var s []string
	for _, k := range Kinds() {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

// The ConfigMap the scheduler plugin and the extender watch.
const (
	// ConfigMapKey is the key of the document in the ConfigMap.
	ConfigMapKey = "policy.yaml"
	// DefaultConfigMap is the NAMESPACE/NAME edgectl policy apply writes.
	DefaultConfigMap = "edgesched-system/edgesched-policy"
)
