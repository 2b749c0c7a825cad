package model

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/onnx"
)

type exportFlags struct {
	format        string
	out           string
	critic        bool
	keys          []string
	allowUnsigned bool
}

func newModelExportCommand() *cobra.Command {
	f := &exportFlags{}
	cmd := &cobra.Command{
		Use:   "export MODEL",
		Short: "Write a float model as a standard ONNX graph (for PyTorch, ONNX Runtime, notebooks)",
		Long: fmt.Sprintf(`export writes the float policy of MODEL (a shipped model name, a training
output .esm, or a float32 artifact .esa, verified with --model-keys) in an exchange
format. The only format is onnx: ONNX IR version %d, opset %d, standard
operators only, in the layout PyTorch's exporter gives nn.Linear and nn.ReLU
or nn.Tanh (Gemm with transB=1, then Relu or Tanh as the model's hidden
layers have; initializers named scorer.0.weight, ...), taking raw
feature rows %q (N x %d, the schema's normalisation is in the graph) and
giving %q (N x 1); with --critic also the critic's %q (1 x 1). The feature
schema and the decision rule are in the model's metadata.

'edgectl model import' reads the file back (bit-identical weights);
docs/quant.md "To PyTorch and back" shows the way through PyTorch.`, onnx.IRVersion, onnx.Opset, onnx.InputName, policy.NumFeatures, onnx.ScoreName, onnx.ValueName),
		Example: `  edgectl model export default --format onnx --out default.onnx
  edgectl model export out/train/edge/model.esm --format onnx --critic --out edge.onnx`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, args[0])
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.format, "format", "onnx", "exchange format: onnx")
	cmdutil.AddOutFileFlag(fl, &f.out, "file to write; required")
	fl.BoolVar(&f.critic, "critic", false, "also export the critic (a second output, "+onnx.ValueName+")")
	cmdutil.AddModelKeysFlag(fl, &f.keys, "to verify an input artifact")
	fl.BoolVar(&f.allowUnsigned, "allow-unsigned", false, "accept an unsigned input artifact")
	return cmd
}

func (f *exportFlags) run(cmd *cobra.Command, ref string) error {
	if f.format != "onnx" {
		return cli.Usagef("--format: %q (the only format is onnx)", f.format)
	}
	if f.out == "" {
		return cli.Usagef("--out: required")
	}
	if err := cmdutil.CheckOutFile("--out", f.out); err != nil {
		return err
	}
	opt, err := cmdutil.DecodeOptions(f.keys, f.allowUnsigned)
	if err != nil {
		return err
	}
	m, _, err := loadFloatModel(ref, opt)
	if err != nil {
		return err
	}
	if err := onnx.WriteFile(f.out, m, onnx.ExportOptions{Critic: f.critic, ProducerVersion: cli.Info().Version}); err != nil {
		return err
	}
	st, err := os.Stat(f.out)
	if err != nil {
		return err
	}
	n := m.Net
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "wrote %s: ONNX IR %d, opset %d, %d bytes\n", f.out, onnx.IRVersion, onnx.Opset, st.Size())
	fmt.Fprintf(out, "input    %s [N, %d] float32, raw features of %s (normalised in the graph)\n", onnx.InputName, n.F, m.Schema.ID)
	fmt.Fprintf(out, "output   %s [N, 1] float32: scorer %d -> %d -> %d -> 1 (Gemm+%s, Gemm+%s, Gemm)\n", onnx.ScoreName, n.F, n.H1, n.H2, onnx.ActivationOp(n.Act[0]), onnx.ActivationOp(n.Act[1]))
	if f.critic {
		fmt.Fprintf(out, "output   %s [1, 1] float32: critic over the rows' mean and max, %d -> %d -> 1\n", onnx.ValueName, 2*n.H2, n.HC)
	}
	fmt.Fprintf(out, "metadata %s, %s, %s, %s\n", onnx.MetaSchemaID, onnx.MetaFeatureNames, onnx.MetaSchemaHash, onnx.MetaDecision)
	return nil
}
