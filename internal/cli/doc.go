// Package cli is the command-line contract every edgesched binary keeps
// (edgectl, edge-agent, edge-coordinator, edge-scheduler and its
// extender; docs/cli.md):
//
//   - exit codes: ExitOK (0) on success, ExitFailure (1) when the work
//     failed, ExitUsage (2) for a bad command line (unknown command,
//     subcommand or flag, a missing or bad flag value). ExitCode maps an
//     error to its code; Usage and Usagef mark an error as a usage error.
//
//   - suggestions: Suggest and DidYouMean name the closest valid words
//     (Levenshtein distance at most 2, or a prefix: cobra's rule), and
//     UnknownValue builds the error for a flag value that is not one of a
//     known set, listing the valid ones.
//
//   - the version: Version, Commit and Date are stamped at build time with
//     -ldflags -X (the Makefile does); a plain `go build` still reports the
//     commit and its time from the Go build information (vcs.revision,
//     vcs.time, vcs.modified). Info reads them; BuildInfo.Line prints the
//     one line every binary's --version flag and version verb print.
//
//   - the command tree: Execute runs a cobra tree with the exit codes and
//     the error lines; EnforceContract makes a tree keep the contract
//     (usage errors, suggestions, help and completion verbs, deprecation
//     warnings on stderr); AddVersion gives a daemon --version and version.
//
//   - one flag name per concept: FlagTable, the names every binary uses
//     (docs/cli.md's table is FlagTableMarkdown), and DeprecatedAlias and
//     DeprecatedShorthand, the old names kept as hidden aliases that warn.
//
// The package has no state besides the three stamped variables, which are
// only written by the linker (and by tests before they start binaries'
// command lines), and FlagTable, which is read only; everything else is
// safe for concurrent use. It depends on cobra and pflag, which every
// binary is built on, and on nothing of edgesched's.
package cli
