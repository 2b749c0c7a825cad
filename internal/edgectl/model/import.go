package model

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/policy/onnx"
)

type importFlags struct {
	out          string
	schemaID     string
	criticHidden int
	seed         uint64
}

func newModelImportCommand() *cobra.Command {
	f := &importFlags{}
	def := onnx.DefaultImportOptions()
	cmd := &cobra.Command{
		Use:   "import FILE.onnx",
		Short: "Read a policy network from an ONNX file into a model file (.esm) for quantize and sign",
		Long: fmt.Sprintf(`import reads an ONNX graph of the supported family, edgesched's scorer
F -> H1 -> H2 -> 1 with Relu or Tanh after each hidden layer, in the layouts
PyTorch's exporter writes (Gemm with or without transB, or MatMul+Add,
weights as initializers, Constant nodes or their Transpose), optionally
with the input's normalisation (x - mean) / std as Sub and Div, a final
Squeeze, and the critic of 'edgectl model export --critic'. It checks the
input width (%d) and the file's metadata against the feature schema and
writes a model file (.esm) that 'edgectl model quantize' and 'edgectl model
sign' take. Anything else is refused with a message naming the operator,
node or shape.

A file made outside edgesched carries no schema: check that its input
columns are the features of %s in order (docs/policy.md) and say so with
--schema-id. A file without a critic gets a new one (--critic-hidden,
--seed): the scheduler never runs it; federated training starts from it.

A Tanh network runs in the float path only ('edgectl sim --policies
learned:FILE.esm'): 'edgectl model quantize' refuses it, since the int8
scheme keeps unsigned 8-bit activations after each ReLU.`, policy.NumFeatures, policy.SchemaID),
		Example: `  edgectl model import default.onnx --out default.esm
  edgectl model import mlp_from_pytorch.onnx --schema-id ` + policy.SchemaID + ` --out mlp.esm
  edgectl model quantize mlp.esm --key keys/coordinator.key --out mlp-int8.esa`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, args[0])
		},
	}
	fl := cmd.Flags()
	cmdutil.AddOutFileFlag(fl, &f.out, "model file (.esm) to write; required")
	fl.StringVar(&f.schemaID, "schema-id", "", "feature schema of a file without edgesched metadata (must be "+policy.SchemaID+")")
	fl.IntVar(&f.criticHidden, "critic-hidden", def.CriticHidden, "hidden width of the new critic of a file without one")
	fl.Uint64Var(&f.seed, "seed", def.Seed, "seed of the new critic's initialisation")
	return cmd
}

func (f *importFlags) run(cmd *cobra.Command, path string) error {
	if f.out == "" {
		return cli.Usagef("--out: required")
	}
	opt := onnx.DefaultImportOptions()
	opt.SchemaID, opt.CriticHidden, opt.Seed = f.schemaID, f.criticHidden, f.seed
	for _, c := range []struct {
		flag string
		set  func(*onnx.ImportOptions)
	}{
		{"--schema-id", func(o *onnx.ImportOptions) { o.SchemaID = f.schemaID }},
		{"--critic-hidden", func(o *onnx.ImportOptions) { o.CriticHidden = f.criticHidden }},
	} {
		one := onnx.DefaultImportOptions()
		c.set(&one)
		if err := one.Validate(); err != nil {
			return cli.Usagef("%s: %w", c.flag, err)
		}
	}
	if err := cmdutil.CheckOutFile("--out", f.out); err != nil {
		return err
	}
	mp, err := onnx.ReadFileContext(cmd.Context(), path)
	if err != nil {
		return err
	}
	imp, err := onnx.Import(mp, opt)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	m := imp.Model
	if !imp.Dated {
		m.Created = time.Now().UTC() // made outside: imported now
	}
	if err := nn.WriteFile(f.out, m, "model", nil, nil); err != nil {
		return err
	}
	n := m.Net
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "wrote %s: model %d -> %d -> %d -> 1 from %s (%s)\n", f.out, n.F, n.H1, n.H2, path, imp.Producer)
	fmt.Fprintf(out, "layers   %s\n", imp.Layout)
	if !n.AllReLU() {
		fmt.Fprintf(out, "note     %v and %v hidden layers: float path only ('edgectl sim --policies learned:%s'); quantize refuses it (the int8 path runs ReLU)\n", n.Act[0], n.Act[1], f.out)
	}
	schema := "from the file's metadata"
	if !imp.Metadata {
		schema = "named by --schema-id"
	}
	fmt.Fprintf(out, "schema   %s (%s), hash %s\n", m.Schema.ID, schema, m.Schema.Hash()[:12])
	if imp.Normalized {
		fmt.Fprintln(out, "normal.  from the graph (Sub, Div)")
	} else {
		fmt.Fprintln(out, "normal.  none in the graph: the network takes raw features (identity statistics)")
	}
	if imp.Critic {
		fmt.Fprintf(out, "critic   from the file, %d -> %d -> 1\n", 2*n.H2, n.HC)
	} else {
		fmt.Fprintf(out, "critic   new, %d -> %d -> 1, seed %d (the file has none)\n", 2*n.H2, n.HC, f.seed)
	}
	decision := "plain argmax"
	if m.Decision != (policy.Decision{}) {
		decision = describeDecision(m.Decision)
	}
	fmt.Fprintf(out, "decision %s\n", decision)
	return nil
}
