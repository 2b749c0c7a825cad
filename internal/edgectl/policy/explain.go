package policy

import (
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/policydoc/nlp"
)

// explainedPolicy is explain's -o json|yaml document.
type explainedPolicy struct {
	APIVersion string     `json:"api_version"`
	ScoreShare int        `json:"score_share_percent"`
	Rules      []ruleView `json:"rules"`
}

func newPolicyExplainCommand() *cobra.Command {
	var output string
	var names glossaryFlags
	cmd := &cobra.Command{
		Use:   "explain FILE",
		Short: "Check a policy document and show its rules as English and Chinese sentences",
		Long: `explain reads a policy document (YAML or JSON, - for stdin), validates it
strictly (unknown fields, out-of-range values and fields a rule's kind does
not use are refused, naming the field) and prints every rule as a canonical
English and Chinese sentence, with its effect and weight, and the share of
the node score the preferred rules decide. Each sentence is one that
'policy compile', with the same --scenario, --services and --zones, reads
back into the rule; a rule no sentence carries (a GPU model the names do
not hold, hold as a service or a zone, or spell otherwise: --scenario adds
a scenario's GPU models) is printed plainly, with a note naming the clash.`,
		Example: `  edgectl policy explain policy.yaml
  kubectl get cm -n edgesched-system edgesched-policy -o jsonpath='{.data.policy\.yaml}' | edgectl policy explain -`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cmdutil.CheckOutput(output); err != nil {
				return err
			}
			doc, err := readPolicy(cmd.Context(), cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			gl, err := names.glossary()
			if err != nil {
				return err
			}
			out := explainedPolicy{APIVersion: doc.APIVersion, ScoreShare: int(doc.Share()*100 + 0.5), Rules: []ruleView{}}
			for i := range doc.Rules {
				rd, err := nlp.RenderRule(&doc.Rules[i], gl)
				v := newRuleView(&doc.Rules[i], doc.Rules[i].Source, rd.English, rd.Chinese)
				if err != nil {
					v.Note = err.Error()
				}
				out.Rules = append(out.Rules, v)
			}
			return cmdutil.PrintData(cmd.OutOrStdout(), output, out, func(w io.Writer) error {
				if err := printRules(w, out.Rules); err != nil {
					return err
				}
				_, err := io.WriteString(w, "\npreferred rules decide "+itoa(out.ScoreShare)+"% of a node's score; required rules filter nodes\n")
				return err
			})
		},
	}
	names.register(cmd)
	cmdutil.AddOutputFlag(cmd, &output)
	return cmd
}

func itoa(i int) string {
	return strconv.Itoa(i)
}
