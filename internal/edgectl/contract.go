package edgectl

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/edgesched/edgesched/internal/cli"
)

// Execute runs edgectl with args (without the program name) and returns
// the process exit code (package cli: 0 success, 1 failure, 2 usage
// error). Errors go to stderr as "edgectl: ERROR", usage errors followed by
// where to find the command's help.
func Execute(ctx context.Context, opts Options, args []string, stdout, stderr io.Writer) int {
	root := NewRootCommand(opts)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "edgectl:", strings.TrimRight(err.Error(), "\n"))
		if cli.IsUsage(err) && cmd != nil {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
	}
	return cli.ExitCode(err)
}

// enforceContract makes the command tree under root keep the CLI
// contract (docs/cli.md): a group (a command with subcommands and no work
// of its own) prints its help when called alone and refuses an unknown
// subcommand with suggestions; every argument-count error and every flag
// error (unknown flag, with the close flag names; a value that does not
// parse) is a usage error. Call it after every command is added.
func enforceContract(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	root.SetFlagErrorFunc(flagError)
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			c.RunE = helpTopic // cobra's Run prints the root's help and exits 0 for an unknown topic
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		switch {
		case c.HasSubCommands() && !c.Runnable():
			c.Args = unknownSubcommand
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		case c.Args != nil:
			check := c.Args
			c.Args = func(cmd *cobra.Command, args []string) error {
				err := check(cmd, args)
				if err != nil && cmd.HasSubCommands() && len(args) > 0 {
					// a command that works alone and has subcommands
					// (explain): a mistyped subcommand lands here
					err = fmt.Errorf("%w%s", err, didYouMean(cmd, args[0]))
				}
				return cli.Usage(err)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// helpTopic runs `edgectl help PATH...`: the help of the command PATH
// names, or a usage error with suggestions when PATH names none.
func helpTopic(help *cobra.Command, args []string) error {
	target, rest, err := help.Root().Find(args)
	if err != nil {
		return cli.Usage(err)
	}
	if len(rest) > 0 {
		if !target.HasAvailableSubCommands() {
			return cli.Usagef("help: %q has no subcommand %q", target.CommandPath(), rest[0])
		}
		return cli.Usagef("unknown help topic %q for %q%s", rest[0], target.CommandPath(), didYouMean(target, rest[0]))
	}
	target.InitDefaultHelpFlag()
	return target.Help()
}

// unknownSubcommand is the Args of a group: no arguments, or the name of
// one of its subcommands (which cobra has already dispatched to).
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return cli.Usagef("unknown command %q for %q%s", args[0], cmd.CommandPath(), didYouMean(cmd, args[0]))
}

// didYouMean is cobra's suggestion text for a mistyped subcommand of cmd
// (its names, aliases and SuggestFor), "" when none is close.
func didYouMean(cmd *cobra.Command, typed string) string {
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, set lazily by cobra itself
	}
	s := cmd.SuggestionsFor(typed)
	if len(s) == 0 {
		return ""
	}
	return "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
}

// flagError makes a flag parsing error a usage error, naming the close
// flags for an unknown one.
func flagError(cmd *cobra.Command, err error) error {
	const prefix = "unknown flag: --"
	if msg := err.Error(); strings.HasPrefix(msg, prefix) {
		var names []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
			}
		})
		if s := cli.Suggest(strings.TrimPrefix(msg, prefix), names); len(s) > 0 {
			return cli.Usagef("%w (did you mean --%s?)", err, strings.Join(s, " or --"))
		}
	}
	return cli.Usage(err)
}
