package edgectl_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/edgesched/edgesched/internal/edgectl"
	"github.com/edgesched/edgesched/internal/edgectl/edgectltest"
)

// explainedPodFile is a pod explained by EdgePolicy itself (edge-plugin's
// TestExplainedPodGolden writes it).
const explainedPodFile = "testdata/explained-pod.json"

// formatCommands are the paths of the commands with -o table|json|yaml,
// found by walking the tree.
func formatCommands(t *testing.T) []string {
	t.Helper()
	var paths []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if f := c.Flags().Lookup("output"); f != nil && f.Shorthand == "o" && isFormatFlag(f) {
			paths = append(paths, strings.TrimPrefix(c.CommandPath(), "edgectl "))
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(edgectl.NewRootCommand(edgectl.Options{}))
	sort.Strings(paths)
	return paths
}

func isFormatFlag(f *pflag.Flag) bool {
	return f.DefValue == "table" && strings.Contains(f.Usage, "table, json or yaml")
}

// notData are the leaf commands that print no data document (they write
// files, manifests or scenario sources, or run a long job with a report
// of their own), with why; every other leaf must have -o.
var notData = map[string]string{
	"auth config":            "prints a NATS server config file",
	"auth init":              "writes the fleet's key directory",
	"auth model-key retire":  "changes the key directory",
	"auth model-key rotate":  "changes the key directory",
	"auth site create":       "writes a site's credentials",
	"auth site revoke":       "changes the registry",
	"auth tls":               "writes certificates",
	"completion bash":        "a shell script",
	"completion fish":        "a shell script",
	"completion powershell":  "a shell script",
	"completion zsh":         "a shell script",
	"demo":                   "runs the system; writes its report files",
	"explain":                "a group",
	"help":                   "help text",
	"model export":           "writes an ONNX file",
	"model import":           "writes an artifact",
	"model keygen":           "writes a key pair",
	"model quantize":         "writes an artifact (--out is the file)",
	"model sign":             "writes an artifact (--out is the file)",
	"model verify":           "a check: exit code and one line",
	"scenario show":          "prints the scenario's YAML source itself",
	"topology configmap":     "prints a ConfigMap manifest",
	"topology from-scenario": "prints the topology file itself (JSON)",
	"trace export":           "writes a trace file",
	"train":                  "writes a model; its report goes to --out",
}

// TestEveryDataCommandHasOutput: each leaf either has -o table|json|yaml
// or is in notData with a reason, so a new data command without -o fails.
func TestEveryDataCommandHasOutput(t *testing.T) {
	has := formatCommands(t)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := strings.TrimPrefix(c.CommandPath(), "edgectl")
		path = strings.TrimSpace(path)
		if c.HasSubCommands() && !c.Runnable() || path == "" {
			for _, s := range c.Commands() {
				walk(s)
			}
			return
		}
		_, skip := notData[path]
		switch {
		case slices.Contains(has, path) && skip:
			t.Errorf("%s has -o but is listed in notData", path)
		case !slices.Contains(has, path) && !skip && !c.HasSubCommands():
			t.Errorf("%s has no -o table|json|yaml and is not in notData", path)
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	root := edgectl.NewRootCommand(edgectl.Options{})
	walk(root)
}

// snakeKey is the JSON convention's key (docs/cli.md).
var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// checkConvention walks a decoded JSON document: every key of an object
// that is a struct is snake_case (maps keyed by data, dataKeyed, are
// skipped), and no time is the zero time.
func checkConvention(t *testing.T, cmd string, v any, path string, dataKeyed map[string]bool) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			p := path + "." + k
			if !dataKeyed[path] && !snakeKey.MatchString(k) {
				t.Errorf("%s: key %s is not snake_case", cmd, p)
			}
			checkConvention(t, cmd, e, p, dataKeyed)
		}
	case []any:
		for _, e := range x {
			checkConvention(t, cmd, e, path+"[]", dataKeyed)
		}
	case string:
		if strings.HasPrefix(x, "0001-01-01") {
			t.Errorf("%s: %s is the zero time %q; the convention omits unset times", cmd, path, x)
		}
	}
}

// shape is v with every value replaced by its kind: two runs of a
// command whose figures vary (timings, counters) have the same shape.
func shape(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = shape(e)
		}
		return out
	case []any:
		if len(x) == 0 {
			return "[]"
		}
		return []any{shape(x[0])}
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// outputCase is one data command run with -o json and -o yaml.
type outputCase struct {
	path      string   // the command, as formatCommands names it
	json      []string // the arguments of the -o json run (after the path)
	yaml      []string // of the -o yaml run; nil: the same as json
	varies    bool     // the figures differ between runs: compare shapes
	dataKeyed []string // JSON paths of maps keyed by data (not field names)
}

func decodeJSON(t *testing.T, what, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%s: -o json does not parse: %v\n%s", what, err, s)
	}
	return v
}

func decodeYAML(t *testing.T, what, s string) any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		t.Fatalf("%s: -o yaml does not parse: %v\n%s", what, err, s)
	}
	return decodeJSON(t, what+" (yaml)", string(j))
}

func (c outputCase) check(t *testing.T) {
	t.Helper()
	args := func(extra []string, format string) []string {
		return append(append(strings.Fields(c.path), extra...), "-o", format)
	}
	jout, _, err := run(t, args(c.json, "json")...)
	if err != nil {
		t.Fatalf("%s -o json: %v", c.path, err)
	}
	yargs := c.yaml
	if yargs == nil {
		yargs = c.json
	}
	yout, _, err := run(t, args(yargs, "yaml")...)
	if err != nil {
		t.Fatalf("%s -o yaml: %v", c.path, err)
	}
	jv, yv := decodeJSON(t, c.path, jout), decodeYAML(t, c.path, yout)
	keyed := map[string]bool{}
	for _, k := range c.dataKeyed {
		keyed[k] = true
	}
	checkConvention(t, c.path, jv, "", keyed)
	if c.varies {
		jv, yv = shape(jv), shape(yv)
	}
	if !reflect.DeepEqual(jv, yv) {
		jb, _ := json.MarshalIndent(jv, "", " ")
		yb, _ := json.MarshalIndent(yv, "", " ")
		t.Fatalf("%s: -o yaml is not -o json's document\njson:\n%s\nyaml:\n%s", c.path, jb, yb)
	}
	if out, _, err := run(t, args(c.json, "table")...); err != nil || strings.TrimSpace(out) == "" {
		t.Fatalf("%s -o table: %v\n%s", c.path, err, out)
	}
}

// TestOutputFormats is the output half of the CLI contract (docs/cli.md)
// over every command with -o: -o json parses, -o yaml parses to the same
// document (the same shape for commands whose figures vary between runs
// or whose second run acts on a later state), keys are snake_case and no
// time is the zero time. The admin verbs run against a real coordinator
// on an embedded NATS server, in the order a round and a rollback take.
func TestOutputFormats(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the simulator, a benchmark and a federated round")
	}
	dir := t.TempDir()
	// files the offline commands read
	keys := edgectltest.KeyDir(t, "coord")
	artifact := filepath.Join(dir, "m.esa")
	if _, _, err := run(t, "model", "sign", "edge", "--key", filepath.Join(keys, "coord.key"), "--out", artifact, "--version", "1"); err != nil {
		t.Fatal(err)
	}
	topo := filepath.Join(dir, "site.json")
	js, _, err := run(t, "topology", "from-scenario", "builtin:retail-fleet")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(topo, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	fleet := filepath.Join(dir, "fleet")
	if _, _, err := run(t, "auth", "init", "--dir", fleet); err != nil {
		t.Fatal(err)
	}
	if _, _, err := run(t, "auth", "site", "create", "store-1", "--dir", fleet); err != nil {
		t.Fatal(err)
	}

	f := edgectltest.StartAdminFleet(t)
	s := "--server=" + f.URL
	cases := []outputCase{
		{path: "version"},
		{path: "scenario list"},
		{path: "scenario validate", json: []string{"builtin:retail-fleet"}},
		{path: "scenario calibrate", json: []string{"--families", "retail-stores", "--scenario-seeds", "1"}},
		{path: "topology check", json: []string{topo}},
		{path: "model inspect", json: []string{artifact, "--model-keys", keys}, dataKeyed: []string{".header.metrics"}},
		{path: "auth site list", json: []string{"--dir", fleet}},
		{path: "explain file", json: []string{explainedPodFile}},
		{path: "sim", json: []string{"--policies", "fgd,best-fit", "--progress", "never", "--target", "0.3"}, varies: true,
			dataKeyed: []string{".runs[].measures", ".summary[].measures", ".summary[].stderr", ".capacity"}},
		{path: "bench", json: []string{"edge", "--scenario", "builtin:factory-vision", "--candidates", "20", "--reps", "1", "--min-time", "1ms"}, varies: true},
		{path: "policy compile", json: []string{"keep payment and orders in the same zone", "晚上避免高碳电网"}},
		{path: "policy explain", json: []string{"../../policydoc/testdata/example.yaml"}},
		{path: "policy dry-run", json: []string{"--scenario", "builtin:retail-fleet", "--text", "prefer low-carbon grids"}, varies: true},
		// a round, then the registry and the fleet
		{path: "round start", json: []string{s}, yaml: []string{s}, varies: true},
	}
	ran := map[string]bool{}
	for _, c := range cases {
		if c.path == "round start" {
			continue // below, in its order
		}
		t.Run(c.path, func(t *testing.T) { c.check(t) })
		ran[c.path] = true
	}

	// round 1 (-o json), its candidate version 2 promoted (-o json), the
	// weights of version 1 rolled back as version 3 (-o json); round 2
	// (-o yaml), its candidate 4 promoted (-o yaml), version 1 rolled back
	// as 5 (-o yaml): each pair answers about the same kind of state.
	docs := map[string][2]string{}
	do := func(i int, format, path string, args ...string) {
		t.Helper()
		out, _, err := run(t, append(append(strings.Fields(path), args...), s, "-o", format)...)
		if err != nil {
			t.Fatalf("%s -o %s: %v", path, format, err)
		}
		d := docs[path]
		d[i] = out
		docs[path] = d
	}
	roundEnds := func(n, result uint64) {
		edgectltest.WaitFor(t, fmt.Sprintf("round %d to end", n), func() bool {
			r, err := f.Coord.RoundRecord(n)
			return err == nil && r.Result == result
		})
	}
	do(0, "json", "round start")
	roundEnds(1, 2)
	do(0, "json", "model promote", "2")
	do(0, "json", "model rollback", "1")
	do(1, "yaml", "round start")
	roundEnds(2, 4)
	do(1, "yaml", "model promote", "4")
	do(1, "yaml", "model rollback", "1")
	for path, d := range docs {
		t.Run(path, func(t *testing.T) {
			jv, yv := decodeJSON(t, path, d[0]), decodeYAML(t, path, d[1])
			checkConvention(t, path, jv, "", nil)
			if !reflect.DeepEqual(shape(jv), shape(yv)) {
				t.Fatalf("%s: -o yaml's document has another shape than -o json's\njson:\n%s\nyaml:\n%s", path, d[0], d[1])
			}
		})
		ran[path] = true
	}
	for _, c := range []outputCase{
		{path: "round status", json: []string{"1", s}, dataKeyed: []string{".rejected", ".stats"}},
		{path: "round list", json: []string{s}, dataKeyed: []string{"[].rejected", "[].stats"}},
		{path: "model list", json: []string{s}},
		{path: "model show", json: []string{"3", s}},
		{path: "sites", json: []string{s}, varies: true, dataKeyed: []string{"[].rejected"}},
		{path: "replicas", json: []string{s}},
		{path: "regions", json: []string{s}}, // (none configured here: test/fl checks its content)
	} {
		t.Run(c.path, func(t *testing.T) { c.check(t) })
		ran[c.path] = true
	}
	// explain pod reads from a cluster: TestExplainPod runs it against an
	// API server; its -o goes through the same cmdutil.PrintData as explain file.
	ran["explain pod"] = true
	// policy apply writes to a cluster: TestPolicyApply and test/e2e run it;
	// its -o goes through cmdutil.PrintData like the others.
	ran["policy apply"] = true
	for _, p := range formatCommands(t) {
		if !ran[p] {
			t.Errorf("%s has -o but no case here", p)
		}
	}
}
