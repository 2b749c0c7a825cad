package model

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/models"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
)

// NewCommand returns edgectl model: the artifact verbs and the registry
// verbs on a running coordinator.
func NewCommand(opts cmdutil.Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "model",
		Short: "Make, sign, inspect and verify model artifacts (float32 and int8)",
		Long: `model works with the system's model artifacts (.esa): a versioned header,
float32 or int8 tensors and an ed25519 signature (docs/quant.md).

  keygen    make a signing key pair
  sign      package a trained model (.esm, or a shipped name) as a signed float32 artifact
  quantize  calibrate and quantize a model to a signed int8 artifact, and report its fidelity
  inspect   print an artifact's header, tensors and signature status
  verify    check an artifact's signature, schema and version against a keyring
  export    write a float model as a standard ONNX graph (PyTorch, ONNX Runtime)
  import    read a policy network from an ONNX file into a model file (.esm)

With a running coordinator (over NATS, --server, $NATS_URL or a nats --context):

  list      the model registry, newest first
  show      one registry entry
  promote   publish a candidate model
  rollback  republish an older model's weights as a new version`,
	}
	cmd.AddCommand(newModelKeygenCommand(), newModelSignCommand(), newModelQuantizeCommand(opts), newModelInspectCommand(), newModelVerifyCommand(),
		newModelExportCommand(), newModelImportCommand(),
		newModelListCommand(), newModelShowCommand(), newModelPromoteCommand(), newModelRollbackCommand())
	return cmd
}

// artifactFlags are the provenance flags of sign and quantize.
type artifactFlags struct {
	key           string
	out           string
	version       uint64
	round         uint64
	parent        string
	keys          []string
	allowUnsigned bool
}

func (f *artifactFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.key, "key", "", "private key file to sign with (from 'edgectl model keygen'); required")
	cmdutil.AddOutFileFlag(fl, &f.out, "artifact file to write; required")
	fl.Uint64Var(&f.version, "version", 1, "model version (loaders refuse versions that do not increase)")
	fl.Uint64Var(&f.round, "round", 0, "federated round that produced the model")
	fl.StringVar(&f.parent, "parent", "", "model ID of the parent model (default: the input's own ID)")
	cmdutil.AddModelKeysFlag(fl, &f.keys, "to verify an input artifact")
	fl.BoolVar(&f.allowUnsigned, "allow-unsigned", false, "accept an unsigned input artifact")
}

func (f *artifactFlags) signer() (*quant.Signer, error) {
	if f.key == "" {
		return nil, cli.Usagef("--key: required (make one with 'edgectl model keygen')")
	}
	if f.out == "" {
		return nil, cli.Usagef("--out: required")
	}
	if err := cmdutil.CheckOutFile("--out", f.out); err != nil {
		return nil, err
	}
	return quant.ReadSigner(f.key)
}

// loadFloatModel resolves a model reference: a shipped model name, a
// training output (.esm) or a float32 artifact (.esa). id is the input's
// model ID when it is an artifact.
func loadFloatModel(ref string, opt quant.DecodeOptions) (m *nn.Model, id string, err error) {
	switch {
	case strings.HasSuffix(ref, ".esa"):
		a, err := quant.ReadFile(ref, opt)
		if err != nil {
			return nil, "", err
		}
		m, err := nn.FromArtifact(a)
		return m, a.Header.ModelID, err
	case strings.ContainsRune(ref, '/') || strings.HasSuffix(ref, ".esm"):
		d, err := nn.ReadFile(ref)
		if err != nil {
			return nil, "", err
		}
		return d.Model, "", nil
	}
	m, err = models.Load(ref)
	return m, "", err
}

// metricsOf keeps a model's numeric provenance as artifact metrics.
func metricsOf(m *nn.Model) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m.Meta {
		if f, ok := v.(float64); ok {
			out[k] = f
		}
	}
	return out
}
