package edgectl

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/sim"
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
	for _, n := range policyNames() {
		if n == "learned:NAME" || n == "learned:FILE" {
			continue
		}
		out = append(out, n)
	}
	for _, m := range models.Names() {
		out = append(out, "learned:"+m, "learned:"+m+NetOnlySuffix)
	}
	return out
}

func measureNames() []string {
	var out []string
	for _, m := range sim.Measures() {
		out = append(out, m.Name)
	}
	return out
}

// complete offers the values starting with what was typed; with files,
// the shell also completes file names.
func complete(values func() []string, files bool) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, typed string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, v := range values() {
			if strings.HasPrefix(v, typed) {
				out = append(out, v)
			}
		}
		if files {
			return out, cobra.ShellCompDirectiveDefault
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeList completes the last element of a comma-separated list,
// keeping the elements already typed.
func completeList(values func() []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, typed string) ([]cobra.Completion, cobra.ShellCompDirective) {
		done, last := "", typed
		if i := strings.LastIndex(typed, ","); i >= 0 {
			done, last = typed[:i+1], typed[i+1:]
		}
		var out []cobra.Completion
		for _, v := range values() {
			if strings.HasPrefix(v, last) && !strings.Contains(","+done, ","+v+",") {
				out = append(out, done+v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

// firstArg completes the first positional argument only.
func firstArg(f cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, typed string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return f(cmd, args, typed)
	}
}

func fixed(values ...string) func() []string { return func() []string { return values } }

// flagCompletions are the value completions by flag name, the same on
// every command that has the flag (one flag name per concept).
var flagCompletions = map[string]cobra.CompletionFunc{
	"policies":  completeList(policyCompletions),
	"columns":   completeList(measureNames),
	"families":  completeList(family.Names),
	"scenario":  complete(scenarioNames, true),
	"progress":  complete(fixed("auto", "always", "never"), false),
	"mode":      complete(fixed("inflate", "replay"), false),
	"tie-break": complete(fixed("random", "first"), false),
}

// argCompletions complete positional arguments, by command path.
var argCompletions = map[string]cobra.CompletionFunc{
	"edgectl scenario show":          firstArg(complete(func() []string { return append(scenarioNames(), appNames()...) }, false)),
	"edgectl scenario validate":      firstArg(complete(scenarioNames, true)),
	"edgectl topology from-scenario": firstArg(complete(scenarioNames, true)),
	"edgectl model quantize":         firstArg(complete(models.Names, true)),
	"edgectl model sign":             firstArg(complete(models.Names, true)),
	"edgectl model export":           firstArg(complete(models.Names, true)),
	"edgectl bench":                  firstArg(complete(models.Names, true)),
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
