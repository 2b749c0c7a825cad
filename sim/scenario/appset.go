package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/scenario/apps"
)

// AppKind identifies an app document (a service graph in the scenario
// format, see sim/scenario/apps).
const AppKind = "App"

// App is a service graph: replicated services and their calls. Call rates
// are at the app's nominal load (its description says which).
type App struct {
	APIVersion  string `yaml:"apiVersion"`
	Kind        string `yaml:"kind"`
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Source      string `yaml:"source"`
	// BytesPerCall sizes each call (request and reply) for the services'
	// network throughput when their templates give none; 0 means 4096.
	BytesPerCall float64      `yaml:"bytesPerCall"`
	Services     []AppService `yaml:"services"`
	Dependencies []Dependency `yaml:"dependencies"`
	pos          pos
}

// AppService is one service of an app. Tier groups services for an
// instance's tierTemplates ("store" marks databases and caches).
type AppService struct {
	Name     string      `yaml:"name"`
	Replicas int         `yaml:"replicas"`
	Tier     string      `yaml:"tier"`
	Template PodTemplate `yaml:"template"`
	pos      pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (s *AppService) UnmarshalYAML(n *yaml.Node) error {
	type raw AppService
	return strict(n, (*raw)(s), &s.pos)
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (a *App) UnmarshalYAML(n *yaml.Node) error {
	type raw App
	return strict(n, (*raw)(a), &a.pos)
}

// AppInstance places one copy of an app: its services are NAME/SERVICE,
// their pods NAME/SERVICE-i.
type AppInstance struct {
	Name string `yaml:"name"`
	// App names a library app (sim/scenario/apps); Synthetic generates one.
	App       string     `yaml:"app"`
	Synthetic *Synthetic `yaml:"synthetic"`
	// Start is when the services start (default 0).
	Start Duration `yaml:"start"`
	// Replicas, Rates and Requests scale the app's replicas (rounded, at
	// least 1), call rates and CPU and memory requests; 0 means 1.
	Replicas float64 `yaml:"replicas"`
	Rates    float64 `yaml:"rates"`
	Requests float64 `yaml:"requests"`
	// Load scales the services' usage shares (traffic heavier or lighter
	// than the app's nominal load); 0 means 1.
	Load float64 `yaml:"load"`
	// Template keys given here replace those of every service's template
	// (e.g. a profile); a nodeSelector is merged into the service's (e.g.
	// pinning the app to a site). TierTemplates do the same, after
	// Template, for the services of one tier.
	Template      PodTemplate            `yaml:"template"`
	TierTemplates map[string]PodTemplate `yaml:"tierTemplates"`
	pos           pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (a *AppInstance) UnmarshalYAML(n *yaml.Node) error {
	type raw AppInstance
	return strict(n, (*raw)(a), &a.pos)
}

// Synthetic asks for a generated graph (apps.Spec).
type Synthetic struct {
	Shape    string  `yaml:"shape"`
	Services int     `yaml:"services"`
	Seed     uint64  `yaml:"seed"`
	Rate     float64 `yaml:"rate"`
	pos      pos
}

// UnmarshalYAML implements yaml.Unmarshaler with strict keys.
func (s *Synthetic) UnmarshalYAML(n *yaml.Node) error {
	type raw Synthetic
	return strict(n, (*raw)(s), &s.pos)
}

// MaxAppInstances bounds workload.apps.
const MaxAppInstances = 1000

// ParseApp decodes an app document strictly. file names it in errors.
func ParseApp(b []byte, file string) (*App, error) {
	a, err := parseApp(b)
	if err != nil {
		var le *sim.LineError
		if errors.As(err, &le) && le.File == "" {
			le.File = file
		}
		return nil, err
	}
	return a, nil
}

func parseApp(b []byte) (*App, error) {
	if len(b) > MaxFileBytes {
		return nil, &sim.LineError{Err: fmt.Errorf("%w: over %d bytes", ErrTooLarge, MaxFileBytes)}
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil || len(doc.Content) == 0 {
		if err == nil {
			err = fmt.Errorf("%w: empty document", ErrSyntax)
		}
		return nil, yamlErr(err)
	}
	if _, err := expandedSize(doc.Content[0], maxYAMLNodes); err != nil {
		return nil, err
	}
	var a App
	if err := a.UnmarshalYAML(doc.Content[0]); err != nil {
		return nil, err
	}
	switch {
	case a.APIVersion != APIVersion:
		return nil, errAt(a.pos.at("apiVersion"), "apiVersion", ErrSyntax, "%q, want %s", a.APIVersion, APIVersion)
	case a.Kind != AppKind:
		return nil, errAt(a.pos.at("kind"), "kind", ErrSyntax, "%q, want %s", a.Kind, AppKind)
	case a.Name == "":
		return nil, errAt(a.pos.at("name"), "name", sim.ErrInvalid, "an app needs a name")
	case !inRange(a.BytesPerCall, 1e9):
		return nil, errAt(a.pos.at("bytesPerCall"), "bytesPerCall", sim.ErrInvalid, "%v, want [0, 1e9]", a.BytesPerCall)
	case len(a.Services) == 0:
		return nil, errAt(a.pos.line, "services", sim.ErrInvalid, "an app needs services")
	}
	seen := map[string]bool{}
	for i, s := range a.Services {
		f := fmt.Sprintf("services[%d]", i)
		switch {
		case s.Name == "":
			return nil, errAt(s.pos.line, f+".name", sim.ErrInvalid, "missing")
		case seen[s.Name]:
			return nil, errAt(s.pos.at("name"), f+".name", sim.ErrDuplicate, "service %q", s.Name)
		case s.Replicas < 0 || s.Replicas > 10000:
			return nil, errAt(s.pos.at("replicas"), f+".replicas", sim.ErrInvalid, "%d, want 0..10000", s.Replicas)
		}
		seen[s.Name] = true
	}
	for i, d := range a.Dependencies {
		f := fmt.Sprintf("dependencies[%d]", i)
		switch {
		case !seen[d.From]:
			return nil, errAt(d.pos.at("from"), f+".from", ErrUnknownRef, "service %q is not in the app", d.From)
		case !seen[d.To]:
			return nil, errAt(d.pos.at("to"), f+".to", ErrUnknownRef, "service %q is not in the app", d.To)
		case !inRange(d.CallsPerSecond, sim.MaxCallRate):
			return nil, errAt(d.pos.at("callsPerSecond"), f+".callsPerSecond", sim.ErrInvalid, "%v must be finite and in [0, %g]", d.CallsPerSecond, float64(sim.MaxCallRate))
		}
	}
	return &a, nil
}

// loadApp returns the app an instance places.
func loadApp(inst *AppInstance, f string) (*App, error) {
	var src []byte
	var name string
	switch {
	case (inst.App == "") == (inst.Synthetic == nil):
		return nil, errAt(inst.pos.line, f+".app", sim.ErrInvalid, "give app (one of %v) or synthetic, exactly one", apps.Names())
	case inst.Synthetic != nil:
		sy := inst.Synthetic
		spec := apps.Spec{Shape: sy.Shape, Services: sy.Services, Seed: sy.Seed, Rate: sy.Rate}
		b, err := apps.Synthetic(spec)
		if err != nil {
			return nil, errAt(sy.pos.line, f+".synthetic", sim.ErrInvalid, "%v", err)
		}
		src, name = b, spec.Name()
	default:
		b, err := apps.Source(inst.App)
		if err != nil {
			return nil, errAt(inst.pos.at("app"), f+".app", ErrUnknownRef, "%v", err)
		}
		src, name = b, inst.App
	}
	a, err := ParseApp(src, "app:"+name)
	if err != nil {
		return nil, &sim.LineError{Line: inst.pos.at("app"), Field: f + ".app", Err: err}
	}
	return a, nil
}

// overlay copies the keys set in over onto t (a shallow copy of t).
func overlay(t PodTemplate, over *PodTemplate) PodTemplate {
	if len(over.pos.keys) == 0 {
		return t
	}
	orig := t
	tv, ov := reflect.ValueOf(&t).Elem(), reflect.ValueOf(over).Elem()
	for i := range tv.NumField() {
		ft := tv.Type().Field(i)
		name, _, _ := strings.Cut(ft.Tag.Get("yaml"), ",")
		if _, set := over.pos.keys[name]; set && ft.IsExported() {
			tv.Field(i).Set(ov.Field(i))
		}
	}
	if len(over.NodeSelector) > 0 { // merged, the overlay's keys winning
		sel := make(map[string]string, len(t.NodeSelector)+len(over.NodeSelector))
		for k, v := range orig.NodeSelector {
			sel[k] = v
		}
		for k, v := range over.NodeSelector {
			sel[k] = v
		}
		t.NodeSelector = sel
	}
	keys := make(map[string]int, len(t.pos.keys)+len(over.pos.keys))
	for k, l := range t.pos.keys {
		keys[k] = l
	}
	for k, l := range over.pos.keys {
		keys[k] = l
	}
	t.pos.keys = keys
	return t
}

func scale(v float64) float64 {
	if v == 0 {
		return 1
	}
	return v
}

// apps expands workload.apps into services, pods and dependencies.
func (b *builder) apps(add func(sim.PodSpec, int, string) error) error {
	list := b.s.Workload.Apps
	if len(list) > MaxAppInstances {
		return errAt(b.s.Workload.pos.at("apps"), "workload.apps", ErrTooLarge, "%d instances, at most %d", len(list), MaxAppInstances)
	}
	names := map[string]bool{}
	for i := range list {
		inst := &list[i]
		f := fmt.Sprintf("workload.apps[%d]", i)
		switch {
		case inst.Name == "":
			return errAt(inst.pos.line, f+".name", sim.ErrInvalid, "missing (services are NAME/SERVICE)")
		case names[inst.Name]:
			return errAt(inst.pos.at("name"), f+".name", sim.ErrDuplicate, "app instance %q", inst.Name)
		}
		for _, sc := range []struct {
			key string
			v   float64
		}{{"replicas", inst.Replicas}, {"rates", inst.Rates}, {"requests", inst.Requests}, {"load", inst.Load}} {
			if !inRange(sc.v, 1000) {
				return errAt(inst.pos.at(sc.key), f+"."+sc.key, sim.ErrInvalid, "%v, want a scale in [0, 1000] (0: 1)", sc.v)
			}
		}
		names[inst.Name] = true
		a, err := loadApp(inst, f)
		if err != nil {
			return err
		}
		if err := b.placeApp(inst, a, f, add); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) placeApp(inst *AppInstance, a *App, f string, add func(sim.PodSpec, int, string) error) error {
	bytesPerCall := a.BytesPerCall
	if bytesPerCall == 0 {
		bytesPerCall = 4096
	}
	// each service's call traffic (in and out), for its pods' throughput
	traffic := map[string]float64{}
	rates := scale(inst.Rates)
	for _, d := range a.Dependencies {
		r := d.CallsPerSecond * rates
		if !inRange(r, sim.MaxCallRate) { // each app's rate is within it, not the product
			return errAt(inst.pos.at("rates"), f+".rates", sim.ErrInvalid, "dependency %s/%s->%s/%s: %v x %v calls per second is %v calls per second, want at most %g",
				inst.Name, d.From, inst.Name, d.To, rates, d.CallsPerSecond, r, float64(sim.MaxCallRate))
		}
		traffic[d.From] += r
		traffic[d.To] += r
		b.workload.Dependencies = append(b.workload.Dependencies, sim.Dependency{From: inst.Name + "/" + d.From, To: inst.Name + "/" + d.To, CallsPerSecond: r})
	}
	for _, s := range a.Services {
		svc := inst.Name + "/" + s.Name
		if b.services[svc] {
			return errAt(inst.pos.at("name"), f+".name", sim.ErrDuplicate, "service %q already exists", svc)
		}
		b.services[svc] = true
		b.workload.Services = append(b.workload.Services, svc)
		replicas := 0
		if s.Replicas > 0 {
			replicas = max(1, int(math.Round(float64(s.Replicas)*scale(inst.Replicas))))
		}
		t := overlay(s.Template, &inst.Template)
		if s.Tier != "" {
			if tt, ok := inst.TierTemplates[s.Tier]; ok {
				t = overlay(t, &tt)
			}
		}
		req := scale(inst.Requests)
		t.CPUMilli = int64(math.Round(float64(t.CPUMilli) * req))
		t.MemoryMiB = int64(math.Round(float64(t.MemoryMiB) * req))
		if inst.Load != 0 {
			u := t.Usage
			if u == 0 {
				u = sim.DefaultUsage(svc)
			}
			t.Usage = min(64, u*inst.Load)
		}
		if _, set := t.pos.keys["netMbps"]; !set && replicas > 0 {
			t.NetMbps = traffic[s.Name] * bytesPerCall * 8 / 1e6 / float64(replicas)
		}
		for r := range replicas {
			ps, err := b.podSpec(&t, fmt.Sprintf("%s-%d", svc, r), f+".template")
			if err != nil {
				return &sim.LineError{Line: inst.pos.line, Field: f, Err: fmt.Errorf("app %s service %s: %w", a.Name, s.Name, err)}
			}
			b.spread(&ps, t.UsageSpread)
			ps.Service, ps.Create, ps.Delete = svc, inst.Start.Seconds(), sim.NoDeletion
			if err := add(ps, inst.pos.line, f); err != nil {
				return err
			}
		}
	}
	return nil
}
