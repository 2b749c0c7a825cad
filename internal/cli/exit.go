package cli

import (
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/xrash/smetrics"
)

// Exit codes of every edgesched binary.
const (
	ExitOK      = 0 // success, -h/--help, --version
	ExitFailure = 1 // the work failed
	ExitUsage   = 2 // a bad command line: unknown command or flag, bad or missing value
)

// ErrUsage is the sentinel every usage error matches (errors.Is).
var ErrUsage = errors.New("usage error")

// usageError marks err as a bad command line.
type usageError struct{ err error }

func (e usageError) Error() string        { return e.err.Error() }
func (e usageError) Unwrap() error        { return e.err }
func (e usageError) Is(target error) bool { return target == ErrUsage }

// Usage marks err as a usage error (exit 2); nil stays nil.
func Usage(err error) error {
	if err == nil || errors.Is(err, ErrUsage) {
		return err
	}
	return usageError{err}
}

// Usagef is Usage(fmt.Errorf(format, args...)).
func Usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// IsUsage reports whether err is a usage error.
func IsUsage(err error) bool { return errors.Is(err, ErrUsage) }

// ExitCode is the exit code for the error a command line returned: 0 for
// nil and for flag.ErrHelp (-h), 2 for usage errors, 1 otherwise.
func ExitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case IsUsage(err):
		return ExitUsage
	}
	return ExitFailure
}

// maxDistance is the largest edit distance Suggest accepts (cobra's
// default SuggestionsMinimumDistance).
const maxDistance = 2

// Suggest returns the candidates close to typed, in the order given: an
// edit distance (case-insensitive) of at most 2, or typed a prefix of the
// candidate. typed itself and empty candidates are never suggested.
func Suggest(typed string, candidates []string) []string {
	t := strings.ToLower(typed)
	if t == "" {
		return nil
	}
	var out []string
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if c == "" || lc == t || slices.Contains(out, c) {
			continue
		}
		if smetrics.WagnerFischer(t, lc, 1, 1, 1) <= maxDistance || strings.HasPrefix(lc, t) {
			out = append(out, c)
		}
	}
	return out
}

// DidYouMean formats Suggest's answer as cobra does for commands
// ("\n\nDid you mean this?\n\tNAME\n"), or "" when nothing is close.
func DidYouMean(typed string, candidates []string) string {
	s := Suggest(typed, candidates)
	if len(s) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n\nDid you mean this?\n")
	for _, c := range s {
		fmt.Fprintf(&b, "\t%s\n", c)
	}
	return b.String()
}

// UnknownCommand is the usage error for an unknown (sub)command of path,
// worded as cobra words it, with the close names among known.
func UnknownCommand(path, typed string, known []string) error {
	return Usagef("unknown command %q for %q%s", typed, path, DidYouMean(typed, known))
}

// UnknownValue is the usage error for a value of flag (its name with the
// dashes, e.g. "--columns") that is not one of valid: it names the
// closest valid values first and then lists them all.
func UnknownValue(flag, value string, valid []string) error {
	msg := fmt.Sprintf("%s: unknown value %q", flag, value)
	if s := Suggest(value, valid); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	}
	return Usagef("%s; valid values: %s", msg, strings.Join(valid, ", "))
}
