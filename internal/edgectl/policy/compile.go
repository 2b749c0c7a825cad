package policy

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
)

type policyCompileFlags struct {
	file   string
	out    string
	output string
	names  glossaryFlags
}

// compiledPolicy is compile's -o json|yaml document.
type compiledPolicy struct {
	Rules []ruleView `json:"rules"`
	// Written is the file the document went to (--out).
	Written string `json:"written,omitempty"`
}

func newPolicyCompileCommand() *cobra.Command {
	f := &policyCompileFlags{}
	cmd := &cobra.Command{
		Use:   "compile [SENTENCE...]",
		Short: "Compile English or Chinese sentences into a policy document",
		Long: `compile reads sentences (the arguments, or -f FILE, - for stdin; one or more
per line) and turns every clause into a rule, or refuses: each refusal quotes
the clause, the words it could not place (or that make it ambiguous) and what
was expected. Nothing is guessed. Every rule is printed back as a canonical
English and Chinese sentence to confirm; --out writes the document.

Names: common service names (and their Chinese names) and GPU models are
known; --scenario, --services and --zones add more; an unknown name reads as
a service when followed by "service" (服务) and as a zone after "zone" (区域).`,
		Example: `  edgectl policy compile "keep payment and orders in the same zone" "GPU jobs only on A10 boards"
  edgectl policy compile "把支付服务和订单服务放在同一个区域，但不要在同一节点上放两个结账副本" --out policy.yaml
  edgectl policy compile -f rules.txt --scenario builtin:retail-stores -o json`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cmdutil.CheckOutput(f.output); err != nil {
				return err
			}
			if f.out != "" {
				if err := cmdutil.CheckOutFile("--out", f.out); err != nil {
					return err
				}
			}
			var text string
			switch {
			case f.file != "" && len(args) > 0:
				return cli.Usagef("give sentences or -f FILE, not both")
			case f.file != "":
				b, err := cmdutil.ReadFileOrStdin(cmd.Context(), cmd.InOrStdin(), f.file, policyInputLimit)
				if err != nil {
					return err
				}
				text = string(b)
				if strings.TrimSpace(text) == "" {
					return fmt.Errorf("-f %s: no sentences: the file is empty", f.file)
				}
			case len(args) > 0:
				text = strings.Join(args, "\n")
			default:
				return cli.Usagef("no sentences: give them as arguments or with -f FILE")
			}
			doc, compiled, err := compileText(text, &f.names)
			if err != nil {
				return fmt.Errorf("policy not compiled:\n%w", err)
			}
			out := compiledPolicy{Rules: []ruleView{}}
			for i := range doc.Rules {
				out.Rules = append(out.Rules, newRuleView(&doc.Rules[i], compiled[i].Clause, compiled[i].English, compiled[i].Chinese))
			}
			if f.out != "" {
				if err := writeDocument(doc, f.out); err != nil {
					return err
				}
				out.Written = f.out
			}
			return cmdutil.PrintData(cmd.OutOrStdout(), f.output, out, func(w io.Writer) error {
				if err := printRules(w, out.Rules); err != nil {
					return err
				}
				if out.Written != "" {
					_, err := fmt.Fprintf(w, "\nwrote %s (%d rules)\n", out.Written, len(out.Rules))
					return err
				}
				return nil
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.file, "file", "f", "", "read sentences from FILE (- for stdin)")
	fl.StringVar(&f.out, "out", "", "write the compiled document (YAML) to this file")
	f.names.register(cmd)
	cmdutil.AddOutputFlag(cmd, &f.output)
	return cmd
}
