package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Execute runs the command tree under root with args (without the
// program name) and returns the process exit code: 0 success (and -h,
// --version), 1 failure, 2 usage error. An error goes to stderr as
// "NAME: ERROR", a usage error followed by where the command's help is.
// The tree must have been through EnforceContract.
func Execute(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil {
		fmt.Fprintln(stderr, root.Name()+":", strings.TrimRight(err.Error(), "\n"))
		if IsUsage(err) && cmd != nil {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
	}
	return ExitCode(err)
}

// EnforceContract makes the command tree under root keep the CLI
// contract (docs/cli.md): a group (a command with subcommands and no work
// of its own) prints its help when called alone, and a group or a
// runnable command with subcommands refuses an unknown subcommand with
// suggestions; every argument-count error and every flag error (unknown
// flag, with the close flag names; a value that does not parse) is a
// usage error, and so is a flag given both by its name and by a
// deprecated alias (AliasConflict); deprecation warnings of flags go to
// stderr, never into the data on stdout. It adds the help and completion commands (bash,
// zsh, fish, powershell) and the -h of every command. Call it after
// every command and flag is added.
func EnforceContract(root *cobra.Command) {
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	root.SetFlagErrorFunc(FlagError)
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help":
			c.RunE = helpTopic // cobra's Run prints the root's help and exits 0 for an unknown topic
		case "completion":
			for _, sh := range c.Commands() {
				sh.RunE = completionScript(sh.Name())
			}
		}
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		// pflag prints "Flag --x has been deprecated" to the flag set's
		// output, which cobra would copy to stdout
		c.Flags().SetOutput(stderrOf{c})
		if run := c.RunE; run != nil {
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if err := AliasConflict(cmd.Flags()); err != nil {
					return err
				}
				return run(cmd, args)
			}
		}
		switch {
		case c.HasSubCommands() && !c.Runnable():
			c.Args = unknownSubcommand
			c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		case c.HasSubCommands() && c.Args == nil:
			// a daemon's root: it runs alone and has verbs
			c.Args = unknownSubcommand
		case c.Args != nil:
			check := c.Args
			c.Args = func(cmd *cobra.Command, args []string) error {
				err := check(cmd, args)
				if err != nil && cmd.HasSubCommands() && len(args) > 0 {
					// a command that works alone and has subcommands
					// (edgectl explain): a mistyped subcommand lands here
					err = fmt.Errorf("%w%s", err, didYouMean(cmd, args[0]))
				}
				return Usage(err)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// completionScript writes shell's completion script of the tree to the
// command's stdout as it is when run (cobra's own completion commands
// write to the stdout the root had when they were added).
func completionScript(shell string) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		desc := true
		if f := cmd.Flags().Lookup("no-descriptions"); f != nil && f.Value.String() == "true" {
			desc = false
		}
		root, out := cmd.Root(), cmd.OutOrStdout()
		switch {
		case shell == "bash":
			return root.GenBashCompletionV2(out, desc)
		case shell == "zsh" && desc:
			return root.GenZshCompletion(out)
		case shell == "zsh":
			return root.GenZshCompletionNoDesc(out)
		case shell == "fish":
			return root.GenFishCompletion(out, desc)
		case shell == "powershell" && desc:
			return root.GenPowerShellCompletionWithDesc(out)
		case shell == "powershell":
			return root.GenPowerShellCompletion(out)
		}
		return fmt.Errorf("completion: no script for shell %q", shell)
	}
}

// stderrOf writes to the command's stderr as it is when written to (the
// program sets it after building the tree).
type stderrOf struct{ c *cobra.Command }

func (w stderrOf) Write(p []byte) (int, error) { return w.c.ErrOrStderr().Write(p) }

// helpTopic runs `NAME help PATH...`: the help of the command PATH
// names, or a usage error with suggestions when PATH names none.
func helpTopic(help *cobra.Command, args []string) error {
	target, rest, err := help.Root().Find(args)
	if err != nil {
		return Usage(err)
	}
	if len(rest) > 0 {
		if !target.HasAvailableSubCommands() {
			return Usagef("help: %q has no subcommand %q", target.CommandPath(), rest[0])
		}
		return Usagef("unknown help topic %q for %q%s", rest[0], target.CommandPath(), didYouMean(target, rest[0]))
	}
	target.InitDefaultHelpFlag()
	return target.Help()
}

// unknownSubcommand is the Args of a command with subcommands: no
// arguments, or the name of one of its subcommands (which cobra has
// already dispatched to).
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return Usagef("unknown command %q for %q%s", args[0], cmd.CommandPath(), didYouMean(cmd, args[0]))
}

// didYouMean is cobra's suggestion text for a mistyped subcommand of cmd
// (its names, aliases and SuggestFor), "" when none is close.
func didYouMean(cmd *cobra.Command, typed string) string {
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = maxDistance // cobra's default, set lazily by cobra itself
	}
	s := cmd.SuggestionsFor(typed)
	if len(s) == 0 {
		return ""
	}
	return "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
}

// FlagError makes a flag parsing error a usage error, naming the close
// visible flags for an unknown one (cobra's SetFlagErrorFunc). A negative
// number where an argument goes (`edgectl round status -1`) reads as a
// cluster of shorthand flags; its error says so.
func FlagError(cmd *cobra.Command, err error) error {
	const prefix = "unknown flag: --"
	msg := err.Error()
	if i := strings.LastIndex(msg, " in -"); strings.HasPrefix(msg, "unknown shorthand flag: ") && i >= 0 {
		if arg := msg[i+len(" in "):]; isNumber(arg) {
			return Usagef("%w (%s is read as flags: an argument cannot start with a dash unless it follows --)", err, arg)
		}
	}
	if strings.HasPrefix(msg, prefix) {
		var names []string
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
			}
		})
		if s := Suggest(strings.TrimPrefix(msg, prefix), names); len(s) > 0 {
			return Usagef("%w (did you mean --%s?)", err, strings.Join(s, " or --"))
		}
	}
	return Usage(err)
}

// isNumber reports whether s is a number as strconv reads one (-1, -0.5).
func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// AddVersion gives a daemon's root its --version flag (no shorthand: -v
// is klog's verbosity where there is one) and its version verb; both
// print Info().Line(name) on stdout. Call it after setting root.RunE: the
// flag is answered at the start of RunE. It deliberately leaves
// root.Version unset: cobra prints a set Version through a text/template
// (SetVersionTemplate), and linking text/template's execution turns off
// the linker's dead-code elimination of methods, which made edge-agent
// 5.4 MB larger (docs/agent.md, "Binary size").
func AddVersion(root *cobra.Command, name string) {
	line := Info().Line(name)
	root.Flags().Bool("version", false, "print the version, commit and build date and exit")
	run := root.RunE
	if run == nil && root.Run != nil {
		plain := root.Run
		run = func(cmd *cobra.Command, args []string) error { plain(cmd, args); return nil }
		root.Run = nil
	}
	root.RunE = func(cmd *cobra.Command, args []string) error {
		if v, _ := cmd.Flags().GetBool("version"); v {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), line)
			return err
		}
		if run == nil {
			return cmd.Help()
		}
		return run(cmd, args)
	}
	root.AddCommand(NewVersionCommand(line))
}

// NewVersionCommand is the version verb: it prints line on stdout.
func NewVersionCommand(line string) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and build date",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return Usagef("version takes no arguments, got %q", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), line)
			return err
		},
	}
}
