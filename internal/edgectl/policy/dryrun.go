package policy

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/policydoc"
	"github.com/edgesched/edgesched/sim/baseline"
	"github.com/edgesched/edgesched/sim/constraint"
	"github.com/edgesched/edgesched/sim/engine"
)

type policyDryRunFlags struct {
	policyFile string
	text       []string
	scenario   string
	baseline   string
	seed       uint64
	mode       string
	samples    int
	output     string
}

// dryRunOutput is dry-run's -o json|yaml document.
type dryRunOutput struct {
	*constraint.Report
	// Unknown lists the names the document uses that the input lacks.
	Unknown []string `json:"unknown_names,omitempty"`
}

func newPolicyDryRunCommand(opts cmdutil.Options) *cobra.Command {
	f := &policyDryRunFlags{}
	cmd := &cobra.Command{
		Use:   "dry-run",
		Short: "Replay a scenario with and without a policy and print the difference",
		Long: `dry-run replays a scenario in the simulator twice with the same seed and the
same scheduling policy (--baseline, or a learned model): once alone, once with
the policy document's required rules filtering nodes and its preferred rules
mixed into the scores, as the scheduler plugin does. It prints how many pods
were placed elsewhere, the measures before and after (failures, pending pods,
cross-zone traffic, p95 latency proxy, gCO2), the cross-zone share of every
co-located pair, how many bindings of the run without the policy break each
required rule, and how many decisions each rule blocked (constraints that
could not be met).`,
		Example: `  edgectl policy dry-run --policy policy.yaml --scenario builtin:retail-stores
  edgectl policy dry-run --text "prefer low-carbon grids with weight 100" --scenario builtin:retail-stores -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cmdutil.CheckOutput(f.output); err != nil {
				return err
			}
			mode, err := engine.ParseMode(f.mode)
			if err != nil {
				return cli.Usagef("--mode: %w", err)
			}
			cfg := engine.DefaultRunConfig(mode)
			cfg.Seed, cfg.Samples = f.seed, f.samples
			if err := cfg.Validate(); err != nil {
				return cli.Usagef("--samples: %w", err) // the only other flag of cfg
			}
			ctx := cmd.Context()
			var doc *policydoc.Document
			switch {
			case (f.policyFile == "") == (len(f.text) == 0):
				return cli.Usagef("give --policy FILE or --text SENTENCE (one of them)")
			case f.policyFile != "":
				doc, err = readPolicy(ctx, cmd.InOrStdin(), f.policyFile)
			default:
				doc, _, err = compileText(joinLines(f.text), &glossaryFlags{scenario: f.scenario})
			}
			if err != nil {
				return err
			}
			in, err := cmdutil.LoadInput(ctx, "", "", f.scenario, nil)
			if err != nil {
				return err
			}
			dopt, err := cmdutil.DecodeOptions(nil, false)
			if err != nil {
				return err
			}
			fs, err := cmdutil.ResolvePoliciesFlag("--baseline", f.baseline, dopt)
			if err != nil {
				return err
			}
			if len(fs) != 1 {
				return cli.Usagef("--baseline: one policy, got %d", len(fs))
			}
			rep, err := constraint.DryRun(ctx, in.Env, fs[0], doc, cfg)
			if err != nil {
				return err
			}
			rep.Input = in.Name
			out := dryRunOutput{Report: rep, Unknown: constraint.UnknownNames(in.Env, doc)}
			return cmdutil.PrintData(cmd.OutOrStdout(), f.output, out, func(w io.Writer) error { return printDryRun(w, out) })
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.policyFile, "policy", "", "policy document (YAML or JSON; - for stdin)")
	fl.StringSliceVar(&f.text, "text", nil, "policy sentences instead of a document (repeatable)")
	fl.StringVar(&f.scenario, "scenario", "builtin:retail-stores", "scenario YAML file, or builtin:NAME (see 'edgectl scenario list')")
	fl.StringVar(&f.baseline, "baseline", baseline.K8sDefault, "the scheduling policy both runs use (a baseline, or learned[:NAME|FILE])")
	fl.Uint64Var(&f.seed, "seed", 1, "seed of both runs")
	fl.StringVar(&f.mode, "mode", string(engine.Replay), "replay or inflate")
	fl.IntVar(&f.samples, "samples", 240, "replay: evenly spaced time samples for the measures")
	cmdutil.AddOutputFlag(cmd, &f.output)
	return cmd
}

func joinLines(s []string) string {
	out := ""
	for i, l := range s {
		if i > 0 {
			out += "\n"
		}
		out += l
	}
	return out
}

func printDryRun(w io.Writer, o dryRunOutput) error {
	fmt.Fprintf(w, "%s, %s, %s mode, seed %d: %d of %d placed pods moved, %d pods blocked at least once\n\n",
		o.Input, o.Policy, o.Mode, o.Seed, o.Moved, o.Pods, o.BlockedPods)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "MEASURE\tWITHOUT\tWITH\tCHANGE\t")
	for _, m := range o.Measures {
		fmt.Fprintf(tw, "%s\t%.4g\t%.4g\t%+.4g\t\n", m.Name, m.Before, m.After, m.Change)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(o.Pairs) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CO-LOCATED PAIR\tRULE\tCROSS-ZONE WITHOUT\tWITH")
		for _, p := range o.Pairs {
			fmt.Fprintf(tw, "%s + %s\t%s\t%.3f\t%.3f\n", p.A, p.B, p.Rule, p.Before, p.After)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tEFFECT\tBROKEN WITHOUT\tBROKEN WITH\tBLOCKED (UNMET)\tSENTENCE")
	for _, r := range o.Rules {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%s\n", r.Name, r.Effect, r.BrokenBefore, r.BrokenAfter, r.BlockedAfter, r.English)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, u := range o.Unknown {
		fmt.Fprintf(w, "warning: %s is not in %s: the rule has nothing to act on\n", u, o.Input)
	}
	return nil
}
