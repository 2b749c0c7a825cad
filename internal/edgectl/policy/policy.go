package policy

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/policydoc"
	"github.com/edgesched/edgesched/policydoc/nlp"
	"github.com/edgesched/edgesched/sim/scenario"
)

// NewCommand returns edgectl policy and its verbs.
func NewCommand(opts cmdutil.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Write scheduling policy in English or Chinese, check it, dry-run it, apply it",
		Long: `policy works with scheduling-policy documents (apiVersion ` + policydoc.APIVersion + `,
docs/policy-language.md): hard constraints the scheduler's Filter enforces and
soft preferences with bounded weights, over services, zones, node labels,
architecture, GPU model, carbon intensity, hours of the day and CPU caps.

  compile   turn English or Chinese sentences into a document (or refuse, naming the words)
  explain   show a document's rules as canonical English and Chinese sentences
  dry-run   replay a scenario with and without a document and print the difference
  apply     write a document into the ConfigMap the scheduler watches`,
	}
	cmd.AddCommand(newPolicyCompileCommand(), newPolicyExplainCommand(), newPolicyDryRunCommand(opts), newPolicyApplyCommand())
	return cmd
}

// ruleView is a rule under edgectl's JSON convention (snake_case), with
// its canonical sentences.
type ruleView struct {
	Name          string   `json:"name"`
	Clause        string   `json:"clause,omitempty"`
	Kind          string   `json:"kind"`
	Effect        string   `json:"effect"`
	Weight        int      `json:"weight,omitempty"`
	Services      []string `json:"services,omitempty"`
	GPUPods       bool     `json:"gpu_pods,omitempty"`
	Scope         string   `json:"scope,omitempty"`
	MaxPerDomain  int      `json:"max_per_domain,omitempty"`
	Negate        bool     `json:"negate,omitempty"`
	Zones         []string `json:"zones,omitempty"`
	Label         string   `json:"label,omitempty"`
	Arch          []string `json:"arch,omitempty"`
	GPUModels     []string `json:"gpu_models,omitempty"`
	MaxCarbon     float64  `json:"max_carbon_g_per_kwh,omitempty"`
	MaxCPUPercent int      `json:"max_cpu_percent,omitempty"`
	Hours         string   `json:"hours_utc,omitempty"`
	English       string   `json:"english"`
	Chinese       string   `json:"chinese"`
	// Note says why no sentence reads back as the rule (explain: the
	// sentences are then its plain ones)
	Note string `json:"note,omitempty"`
}

// newRuleView shows r, compiled from clause (or written so), with its
// sentences english and chinese ("": r's own, names written plain).
func newRuleView(r *policydoc.Rule, clause, english, chinese string) ruleView {
	if english == "" || chinese == "" {
		english, chinese = r.English(), r.Chinese()
	}
	v := ruleView{Name: r.Name, Clause: clause, Kind: string(r.Kind), Effect: string(r.Effect), Weight: r.Weight,
		Services: r.Pods.Services, GPUPods: r.Pods.GPU, Scope: string(r.Scope), MaxPerDomain: r.MaxPerDomain, Negate: r.Negate,
		Zones: r.Zones, Label: r.Label, Arch: r.Arch, GPUModels: r.GPUModels, MaxCarbon: r.MaxCarbon, MaxCPUPercent: r.MaxCPUPercent,
		English: english, Chinese: chinese}
	if r.During != nil {
		v.Hours = fmt.Sprintf("%02d:00-%02d:00", r.During.From, r.During.To)
	}
	return v
}

// printRules is the table of compile and explain.
func printRules(w io.Writer, rules []ruleView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tKIND\tEFFECT\tWEIGHT\tRULE")
	for _, r := range rules {
		wt := "-"
		if r.Weight > 0 {
			wt = fmt.Sprint(r.Weight)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Kind, r.Effect, wt, r.English)
		fmt.Fprintf(tw, "\t\t\t\t%s\n", r.Chinese)
		if r.Note != "" {
			fmt.Fprintf(tw, "\t\t\t\t(%s)\n", r.Note)
		}
	}
	return tw.Flush()
}

// policyInputLimit caps a document or a sentence file edgectl reads.
const policyInputLimit = policydoc.MaxDocumentBytes

// readPolicy reads a document file (- for stdin).
func readPolicy(ctx context.Context, stdin io.Reader, path string) (*policydoc.Document, error) {
	b, err := cmdutil.ReadFileOrStdin(ctx, stdin, path, policyInputLimit)
	if err != nil {
		return nil, err
	}
	d, err := policydoc.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// glossaryFlags add names to the compiler's default glossary.
type glossaryFlags struct {
	scenario string
	services []string
	zones    []string
}

func (g *glossaryFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&g.scenario, "scenario", "", "also know the services, zones and GPU models of this scenario (FILE or builtin:NAME)")
	fl.StringSliceVar(&g.services, "services", nil, "also know these service names")
	fl.StringSliceVar(&g.zones, "zones", nil, "also know these zone names")
}

func (g *glossaryFlags) glossary() (*nlp.Glossary, error) {
	add := &nlp.Glossary{Services: map[string][]string{}, Zones: g.zones}
	for _, s := range g.services {
		add.Services[strings.TrimSpace(s)] = nil
	}
	if g.scenario != "" {
		l, err := scenario.LoadWith(g.scenario, scenario.Options{})
		if err != nil {
			return nil, err
		}
		for _, n := range l.Cluster.Nodes {
			if n.Zone != "" {
				add.Zones = append(add.Zones, n.Zone)
			}
			if n.GPUModel != "" {
				add.GPUModels = append(add.GPUModels, n.GPUModel)
			}
		}
		for _, p := range l.Workload.Pods {
			if p.Service != "" {
				add.Services[p.Service] = nil
			}
		}
	}
	return nlp.DefaultGlossary().Add(add), nil
}

// compileText compiles sentences into a document.
func compileText(text string, g *glossaryFlags) (*policydoc.Document, []nlp.Compiled, error) {
	gl, err := g.glossary()
	if err != nil {
		return nil, nil, err
	}
	return nlp.CompileDocument(text, gl)
}

// writeDocument writes d as YAML to path.
func writeDocument(d *policydoc.Document, path string) error {
	b, err := d.EncodeYAML()
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
