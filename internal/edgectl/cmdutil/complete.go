package cmdutil

import (
	"strings"

	"github.com/spf13/cobra"
)

// Complete offers the values starting with what was typed; with files,
// the shell also completes file names.
func Complete(values func() []string, files bool) cobra.CompletionFunc {
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

// CompleteList completes the last element of a comma-separated list,
// keeping the elements already typed.
func CompleteList(values func() []string) cobra.CompletionFunc {
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

// FirstArg completes the first positional argument only.
func FirstArg(f cobra.CompletionFunc) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, typed string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return f(cmd, args, typed)
	}
}

// Fixed returns the values, for Complete and CompleteList.
func Fixed(values ...string) func() []string { return func() []string { return values } }
