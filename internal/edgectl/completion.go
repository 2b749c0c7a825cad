package edgectl

import (
	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/sim/engine"
	"github.com/edgesched/edgesched/sim/scenario"
	"github.com/edgesched/edgesched/sim/scenario/apps"
	"github.com/edgesched/edgesched/sim/scenario/family"
)

// Shell completion of values (cobra's __complete, behind `edgectl
// completion bash|zsh|fish|powershell`): every flag whose values form a
// known set completes them, comma-separated lists element by element, and
// the arguments that name a scenario or a model complete those names
// (files too, where a file is also accepted).

// scenarioNames are the built-in scenarios and families (builtin:NAME).
func scenarioNames() []string {
	var out []string
	for _, n := range append(scenario.Builtins(), scenario.Families()...) {
		out = append(out, "builtin:"+n)
	}
	return out
}

// appNames are the library's apps (app:NAME), for scenario show.
func appNames() []string {
	var out []string
	for _, n := range apps.Names() {
		out = append(out, "app:"+n)
	}
	return out
}

// policyCompletions are --policies' values with the shipped models
// spelled out (learned:NAME).
func policyCompletions() []string {
	var out []string
	for _, n := range cmdutil.PolicyNames() {
		if n == "learned:NAME" || n == "learned:FILE" {
			continue
		}
		out = append(out, n)
	}
	for _, m := range models.Names() {
		out = append(out, "learned:"+m, "learned:"+m+cmdutil.NetOnlySuffix)
	}
	return out
}

func measureNames() []string {
	var out []string
	for _, m := range engine.Measures() {
		out = append(out, m.Name)
	}
	return out
}

// flagCompletions are the value completions by flag name, the same on
// every command that has the flag (one flag name per concept).
var flagCompletions = map[string]cobra.CompletionFunc{
	"policies":  cmdutil.CompleteList(policyCompletions),
	"columns":   cmdutil.CompleteList(measureNames),
	"families":  cmdutil.CompleteList(family.Names),
	"scenario":  cmdutil.Complete(scenarioNames, true),
	"progress":  cmdutil.Complete(cmdutil.Fixed("auto", "always", "never"), false),
	"mode":      cmdutil.Complete(cmdutil.Fixed("inflate", "replay"), false),
	"tie-break": cmdutil.Complete(cmdutil.Fixed("random", "first"), false),
}

// argCompletions complete positional arguments, by command path.
var argCompletions = map[string]cobra.CompletionFunc{
	"edgectl scenario show":          cmdutil.FirstArg(cmdutil.Complete(func() []string { return append(scenarioNames(), appNames()...) }, false)),
	"edgectl scenario validate":      cmdutil.FirstArg(cmdutil.Complete(scenarioNames, true)),
	"edgectl topology from-scenario": cmdutil.FirstArg(cmdutil.Complete(scenarioNames, true)),
	"edgectl model quantize":         cmdutil.FirstArg(cmdutil.Complete(models.Names, true)),
	"edgectl model sign":             cmdutil.FirstArg(cmdutil.Complete(models.Names, true)),
	"edgectl model export":           cmdutil.FirstArg(cmdutil.Complete(models.Names, true)),
	"edgectl bench":                  cmdutil.FirstArg(cmdutil.Complete(models.Names, true)),
}

// registerCompletions registers the completions on the tree under root.
func registerCompletions(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for name, f := range flagCompletions {
			if c.Flags().Lookup(name) != nil {
				_ = c.RegisterFlagCompletionFunc(name, f)
			}
		}
		if f, ok := argCompletions[c.CommandPath()]; ok {
			c.ValidArgsFunction = f
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}
