// Package cmdutil holds what edgectl's verb packages share: Options (the
// process's logger), the -o table|json|yaml output (AddOutputFlag,
// PrintData) and the other common flags (--model-keys, --out), the
// simulator's inputs (LoadInput: openb lists or a scenario;
// ResolvePolicies: --policies; ParseSeeds), bounded reads of a file or
// stdin (ReadFileOrStdin), progress bars (WantProgress, NewBar), the
// checks of shared flags made before any work (CheckParallel, CheckOutFile,
// CheckOutDir, CheckKubeconfig) and the builders of shell completions
// (Complete, CompleteList, FirstArg).
//
// It imports no verb package and no verb package's state: the verb
// packages and the root package edgectl import it. The flag helpers bind
// to variables the caller owns, for the life of its command. NewBar's
// progress callback draws on first use and is not safe for concurrent
// calls: one run's goroutine calls it.
package cmdutil
