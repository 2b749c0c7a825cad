//go:build unix

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/edgesched/edgesched/test/internal/gobuild"
)

// This file checks the chart's Grafana dashboards (deploy/helm/edgesched/
// dashboards, rendered as ConfigMaps with grafana.dashboards.enabled):
// every metric a panel queries is defined by a package the component the
// dashboard names (its tags: edge-scheduler, edge-agent, edge-coordinator)
// links, found by reading the Go source of those packages (go list -deps
// with the component's release tags): the Namespace, Subsystem and Name of
// every prometheus or component-base metric options literal, and the name
// of every prometheus.NewDesc. Histogram series (_bucket, _sum, _count)
// count for their histogram. kube-scheduler's own scheduler_* metrics come
// from k8s.io/kubernetes/pkg/scheduler/metrics, read the same way.

// dashboardComponents maps a dashboard's component tag to its main package.
var dashboardComponents = map[string]string{
	"edge-scheduler":   "./cmd/edge-scheduler",
	"edge-agent":       "./cmd/edge-agent",
	"edge-coordinator": "./cmd/edge-coordinator",
}

// metricDef is a metric a component's code defines.
type metricDef struct {
	histogram bool // histogram or summary (or a NewDesc of unknown type): its series have suffixes
	pkg       string
}

// metricRE finds metric names in a PromQL expression: ours and
// kube-scheduler's (label names and functions never start so).
var metricRE = regexp.MustCompile(`\b(?:edgesched|scheduler)_[a-zA-Z0-9_]+\b`)

func TestDashboardMetrics(t *testing.T) {
	h := findHelm(t)
	out, err := h.run("template", chartRelease, "deploy/helm/edgesched", "--namespace", chartNamespace,
		"--set", "grafana.dashboards.enabled=true", "--set", "cloud.enabled=true")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := parseObjects(out)
	if err != nil {
		t.Fatal(err)
	}
	root, err := gobuild.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	m := &module{root: root}
	defs := map[string]map[string]metricDef{}
	dashboards := 0
	for _, o := range objs {
		if o.GetKind() != "ConfigMap" || o.GetLabels()["grafana_dashboard"] != "1" {
			continue
		}
		data, _, _ := unstructuredStringMap(o.Object, "data")
		for file, text := range data {
			dashboards++
			var d struct {
				Title  string   `json:"title"`
				Tags   []string `json:"tags"`
				Panels []struct {
					Title   string `json:"title"`
					Targets []struct {
						Expr string `json:"expr"`
					} `json:"targets"`
				} `json:"panels"`
			}
			if err := json.Unmarshal([]byte(text), &d); err != nil {
				t.Errorf("%s in ConfigMap %s: %v", file, o.GetName(), err)
				continue
			}
			var comp string
			for _, tag := range d.Tags {
				if _, ok := dashboardComponents[tag]; ok {
					comp = tag
				}
			}
			if comp == "" {
				t.Errorf("%s: no tag names a component (%v)", file, d.Tags)
				continue
			}
			if defs[comp] == nil {
				defs[comp] = componentMetrics(t, m, comp)
			}
			queried := 0
			for _, p := range d.Panels {
				if len(p.Targets) == 0 {
					t.Errorf("%s: panel %q queries nothing", file, p.Title)
				}
				for _, tg := range p.Targets {
					names := metricRE.FindAllString(tg.Expr, -1)
					if len(names) == 0 {
						t.Errorf("%s: panel %q: no metric in %q", file, p.Title, tg.Expr)
					}
					for _, n := range names {
						queried++
						if !defined(defs[comp], n) {
							t.Errorf("%s: panel %q queries %s, which %s does not define", file, p.Title, n, comp)
						}
					}
				}
			}
			t.Logf("%s (%s): %d panels, %d metric references, all defined by %s's packages (%d metrics)", file, d.Title, len(d.Panels), queried, comp, len(defs[comp]))
		}
	}
	if dashboards != 3 {
		t.Errorf("%d dashboards rendered, want 3 (scheduler, agent, coordinator)", dashboards)
	}
	// The check can fail: a name from another component, or none at all.
	for comp, name := range map[string]string{
		"edge-scheduler":   "edgesched_coordinator_round",
		"edge-agent":       "edgesched_plugin_model_version",
		"edge-coordinator": "edgesched_agent_samples_total",
	} {
		if s := defs[comp]; s != nil && defined(s, name) {
			t.Errorf("%s defines %s: the source scan is not per component", comp, name)
		}
	}
}

// defined reports whether the series name belongs to a defined metric.
func defined(defs map[string]metricDef, name string) bool {
	if _, ok := defs[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if d, ok := defs[base]; ok && d.histogram {
				return true
			}
		}
	}
	return false
}

func unstructuredStringMap(obj map[string]any, field string) (map[string]string, bool, error) {
	raw, ok := obj[field].(map[string]any)
	if !ok {
		return nil, false, nil
	}
	out := map[string]string{}
	for k, v := range raw {
		s, ok := v.(string)
		if !ok {
			return nil, true, fmt.Errorf("%s.%s is not a string", field, k)
		}
		out[k] = s
	}
	return out, true, nil
}

// componentMetrics reads the metrics defined by the packages comp links.
func componentMetrics(t *testing.T, m *module, comp string) map[string]metricDef {
	t.Helper()
	mod, err := modulePath(filepath.Join(m.root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m.path = mod
	pkg := dashboardComponents[comp]
	tags, err := m.releaseTags(mod + strings.TrimPrefix(pkg, "."))
	if err != nil {
		t.Fatal(err)
	}
	goBin, err := gobuild.GoTool()
	if err != nil {
		t.Skip(err)
	}
	args := []string{"list", "-deps", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}"}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command(goBin, append(args, pkg)...)
	cmd.Dir = m.root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkg, err, stderr.String())
	}
	defs := map[string]metricDef{}
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(f) != 3 || f[2] == "" {
			continue
		}
		if f[0] != mod && !strings.HasPrefix(f[0], mod+"/") && f[0] != "k8s.io/kubernetes/pkg/scheduler/metrics" {
			continue
		}
		scanMetrics(t, f[0], f[1], strings.Fields(f[2]), defs)
	}
	return defs
}

// scanMetrics adds the metrics one package's files define.
func scanMetrics(t *testing.T, pkg, dir string, files []string, defs map[string]metricDef) {
	fset := token.NewFileSet()
	var parsed []*ast.File
	consts := map[string]string{}
	for _, name := range files {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		parsed = append(parsed, f)
	}
	// package-level string constants (two passes: one may use another)
	for range 2 {
		for _, f := range parsed {
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if s, ok := stringValue(vs.Values[i], consts); ok {
								consts[n.Name] = s
							}
						}
					}
				}
			}
		}
	}
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CompositeLit:
				sel, ok := x.Type.(*ast.SelectorExpr)
				if !ok || !slices.Contains([]string{"CounterOpts", "GaugeOpts", "HistogramOpts", "SummaryOpts"}, sel.Sel.Name) {
					return true
				}
				parts := map[string]string{}
				for _, el := range x.Elts {
					kv, ok := el.(*ast.KeyValueExpr)
					if !ok {
						continue
					}
					key, _ := kv.Key.(*ast.Ident)
					if key == nil || (key.Name != "Namespace" && key.Name != "Subsystem" && key.Name != "Name") {
						continue
					}
					if s, ok := stringValue(kv.Value, consts); ok {
						parts[key.Name] = s
					}
				}
				if parts["Name"] == "" {
					return true
				}
				var name []string
				for _, k := range []string{"Namespace", "Subsystem", "Name"} {
					if parts[k] != "" {
						name = append(name, parts[k])
					}
				}
				defs[strings.Join(name, "_")] = metricDef{histogram: sel.Sel.Name == "HistogramOpts" || sel.Sel.Name == "SummaryOpts", pkg: pkg}
			case *ast.CallExpr:
				sel, ok := x.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "NewDesc" || len(x.Args) == 0 {
					return true
				}
				if s, ok := stringValue(x.Args[0], consts); ok {
					defs[s] = metricDef{histogram: true, pkg: pkg}
				}
			}
			return true
		})
	}
}

// stringValue evaluates a constant string expression: literals, the
// package's constants and their concatenation.
func stringValue(e ast.Expr, consts map[string]string) (string, bool) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(x.Value)
		return s, err == nil
	case *ast.Ident:
		s, ok := consts[x.Name]
		return s, ok
	case *ast.ParenExpr:
		return stringValue(x.X, consts)
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			return "", false
		}
		a, ok1 := stringValue(x.X, consts)
		b, ok2 := stringValue(x.Y, consts)
		return a + b, ok1 && ok2
	}
	return "", false
}
