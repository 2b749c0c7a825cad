package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// FlagName is one concept's one flag across the four binaries: the name
// every command that takes the concept uses, and the old names it
// replaced, still accepted for one release as hidden aliases that warn
// (DeprecatedAlias). FlagTable lists them; docs/cli.md's table is
// generated from it (FlagTableMarkdown) and the contract test checks
// every binary's commands against it.
type FlagName struct {
	// Concept is what the flag names, in a few words.
	Concept string
	// Name is the long flag name without dashes; Shorthand its one
	// letter ("" for none).
	Name, Shorthand string
	// Value is the value's syntax, for the table.
	Value string
	// Commands are the command paths that take the flag
	// ("edge-agent", "edgectl model inspect", "edge-scheduler extender").
	Commands []string
	// Deprecated are the old names, each on the command that still
	// accepts it.
	Deprecated []OldName
	// PluginArg is EdgePolicy's plugin argument for the same concept
	// (the scheduler configuration), "" when there is none.
	PluginArg string
}

// OldName is a deprecated name of a flag on one command.
type OldName struct {
	// Command is the command path that accepts it.
	Command string
	// Name is the old long name, or with Shorthand the old one-letter
	// shorthand of the flag's long name.
	Name      string
	Shorthand bool
}

// Flag spellings, for the table's Value column.
const (
	valueKeys      = "FILE|DIR[,...] (repeatable)"
	valueConfigMap = "[NAMESPACE/]NAME"
)

// the edgectl commands that verify signed model artifacts
var modelKeyCommands = []string{"edgectl model inspect", "edgectl model verify", "edgectl model sign", "edgectl model quantize", "edgectl model export", "edgectl sim", "edgectl bench"}

// the edgectl commands whose file output had -o
var outFileCommands = []string{"edgectl model sign", "edgectl model quantize", "edgectl model export", "edgectl model import"}

// FlagTable is the one name of each concept the binaries share
// (docs/cli.md, "One name per concept").
var FlagTable = []FlagName{
	{
		Concept: "trusted model-signing public keys (`*.pub` trusted, `*.retired` refused)", Name: "model-keys", Value: valueKeys,
		Commands:   append([]string{"edge-agent", "edge-coordinator", "edge-coordinator check", "edge-coordinator restore", "edge-scheduler extender"}, modelKeyCommands...),
		Deprecated: append([]OldName{{Command: "edge-agent", Name: "trusted-keys"}, {Command: "edge-scheduler extender", Name: "keys"}}, oldNames(modelKeyCommands, "keys", false)...),
		PluginArg:  "modelKeys",
	},
	{
		Concept: "staleness bound of the nodes' telemetry annotation", Name: "telemetry-max-age", Value: "DURATION",
		Commands:   []string{"edge-agent", "edge-scheduler extender"},
		Deprecated: []OldName{{Command: "edge-agent", Name: "stale-after"}},
		PluginArg:  "telemetryMaxAge",
	},
	{
		Concept: "oldest signed model accepted (freeze protection)", Name: "model-max-age", Value: "DURATION",
		Commands:   []string{"edge-agent"},
		Deprecated: []OldName{{Command: "edge-agent", Name: "max-model-age"}},
		PluginArg:  "modelMaxAge",
	},
	{
		Concept: "NATS server URL", Name: "server", Shorthand: "s", Value: "URL[,URL...]",
		Commands: []string{"edge-agent", "edge-coordinator", "edge-coordinator region", "edgectl round start", "edgectl sites"},
		Deprecated: []OldName{{Command: "edge-agent", Name: "nats"}, {Command: "edge-coordinator", Name: "nats"},
			{Command: "edge-coordinator region", Name: "nats"}},
	},
	{
		Concept: "CA that verifies the NATS server", Name: "tlsca", Value: "FILE",
		Commands: []string{"edge-agent", "edge-coordinator", "edgectl sites"},
		Deprecated: []OldName{{Command: "edge-agent", Name: "tls-ca"}, {Command: "edge-coordinator", Name: "tls-ca"},
			{Command: "edgectl sites", Name: "tls-ca"}},
	},
	{
		Concept: "local state directory", Name: "data", Value: "DIR",
		Commands:   []string{"edge-agent", "edge-coordinator", "edge-coordinator backup", "edge-coordinator check", "edge-coordinator restore", "edge-coordinator region"},
		Deprecated: []OldName{{Command: "edge-agent", Name: "data-dir"}},
	},
	{
		Concept: "namespace of a ConfigMap named without one", Name: "namespace", Value: "NAMESPACE",
		Commands:   []string{"edge-agent", "edge-scheduler extender", "edgectl policy apply", "edgectl topology configmap"},
		Deprecated: nil,
	},
	{
		Concept: "model ConfigMap", Name: "model-configmap", Value: valueConfigMap,
		Commands: []string{"edge-agent"}, PluginArg: "modelConfigMap",
	},
	{
		Concept: "service dependency graph ConfigMap", Name: "dependencies-configmap", Value: valueConfigMap,
		Commands: []string{"edge-agent", "edge-scheduler extender"}, PluginArg: "dependenciesConfigMap",
	},
	{
		Concept: "scheduling policy ConfigMap", Name: "policy-configmap", Value: valueConfigMap,
		Commands:   []string{"edge-scheduler extender", "edgectl policy apply"},
		Deprecated: []OldName{{Command: "edgectl policy apply", Name: "configmap"}},
		PluginArg:  "policyConfigMap",
	},
	{
		Concept: "site topology ConfigMap", Name: "topology-configmap", Value: valueConfigMap,
		Commands:   []string{"edge-scheduler extender", "edgectl topology configmap"},
		Deprecated: []OldName{{Command: "edgectl topology configmap", Name: "name"}},
		PluginArg:  "topologyConfigMap",
	},
	{
		Concept: "output format (data on stdout)", Name: "output", Shorthand: "o", Value: "table|json|yaml",
		Commands: []string{"edgectl version", "edgectl sim", "edgectl model inspect", "edgectl sites"},
	},
	{
		Concept: "file or directory written", Name: "out", Value: "PATH",
		Commands:   append([]string{"edge-coordinator backup", "edgectl sim", "edgectl demo", "edgectl policy compile", "edgectl trace export"}, outFileCommands...),
		Deprecated: oldNames(outFileCommands, "o", true),
	},
	{
		Concept: "kubeconfig file (empty: in-cluster, or edgectl's default)", Name: "kubeconfig", Value: "FILE",
		Commands: []string{"edge-agent", "edge-scheduler", "edge-scheduler extender", "edgectl explain pod", "edgectl policy apply"},
	},
	{
		Concept: "the version line", Name: "version", Value: "",
		Commands: []string{"edgectl", "edge-agent", "edge-coordinator", "edge-scheduler", "edge-scheduler extender"},
	},
}

// oldNames is the deprecated name on each of commands.
func oldNames(commands []string, name string, shorthand bool) []OldName {
	out := make([]OldName, len(commands))
	for i, c := range commands {
		out[i] = OldName{Command: c, Name: name, Shorthand: shorthand}
	}
	return out
}

// aliasValue is a deprecated flag's value: the value of the flag that
// replaced it, so that either name sets it.
type aliasValue struct {
	pflag.Value
	name string // the replacement's name
}

// DeprecatedAlias defines old on fs as a deprecated alias of the flag
// name (which must be defined): hidden from the help, it sets name's
// value and prints "Flag --old has been deprecated, use --name instead"
// on the flag set's output (stderr under EnforceContract) when used.
// AliasConflict refuses a command line that gives both.
func DeprecatedAlias(fs *pflag.FlagSet, old, name string) {
	f := fs.Lookup(name)
	if f == nil {
		panic(fmt.Sprintf("cli: deprecated alias --%s of --%s, which is not defined", old, name))
	}
	a := fs.VarPF(aliasValue{Value: f.Value, name: name}, old, "", "deprecated: use --"+name)
	a.NoOptDefVal = f.NoOptDefVal
	_ = fs.MarkDeprecated(old, "use --"+name+" instead")
}

// DeprecatedShorthand deprecates the shorthand of the flag name: hidden
// from the help, still accepted with a warning.
func DeprecatedShorthand(fs *pflag.FlagSet, name string) {
	_ = fs.MarkShorthandDeprecated(name, "use --"+name+" instead")
}

// Changed reports whether the flag name was given, by its name or by a
// deprecated alias.
func Changed(fs *pflag.FlagSet, name string) bool {
	changed := false
	fs.VisitAll(func(f *pflag.Flag) {
		if a, ok := f.Value.(aliasValue); f.Changed && (f.Name == name || ok && a.name == name) {
			changed = true
		}
	})
	return changed
}

// AliasConflict is the usage error for a command line that gives a flag
// both by its name and by a deprecated alias (nil otherwise).
func AliasConflict(fs *pflag.FlagSet) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		a, ok := f.Value.(aliasValue)
		if ok && f.Changed && fs.Changed(a.name) && err == nil {
			err = Usagef("--%s and --%s are the same flag (--%s is its deprecated name): give only --%s", f.Name, a.name, f.Name, a.name)
		}
	})
	return err
}

// FlagTableMarkdown is FlagTable as docs/cli.md shows it.
func FlagTableMarkdown() string {
	var b strings.Builder
	b.WriteString("| concept | flag | value | taken by | deprecated names (hidden, warn) | plugin arg |\n|---|---|---|---|---|---|\n")
	code := func(s string) string {
		if s == "" {
			return ""
		}
		return "`" + strings.ReplaceAll(s, "|", `\|`) + "`" // a | inside a table cell
	}
	for _, f := range FlagTable {
		flag := "`--" + f.Name + "`"
		if f.Shorthand != "" {
			flag = "`-" + f.Shorthand + "`, " + flag
		}
		// the old names grouped by spelling, each with its commands
		var olds []string
		byName := map[string][]string{}
		for _, o := range f.Deprecated {
			n := "--" + o.Name
			if o.Shorthand {
				n = "-" + o.Name
			}
			if byName[n] == nil {
				olds = append(olds, n)
			}
			byName[n] = append(byName[n], o.Command)
		}
		var dep []string
		for _, n := range olds {
			dep = append(dep, fmt.Sprintf("`%s` (%s)", n, strings.Join(byName[n], ", ")))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", f.Concept, flag, code(f.Value), strings.Join(f.Commands, ", "), strings.Join(dep, "; "), code(f.PluginArg))
	}
	return b.String()
}
