package model

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/internal/boundedio"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/policy/nn"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/int8net"
)

func newModelInspectCommand() *cobra.Command {
	var keys []string
	var output string
	cmd := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Print an artifact's header, tensors and signature status",
		Long: `inspect prints an artifact's header and tensor table. With --model-keys the
signature is verified; without, a signed artifact is shown as "not verified"
(its content is still checked) and an unsigned one as "unsigned". A model
file (.esm) is refused with the verbs that make an artifact of it (sign,
quantize).`,
		Example: `  edgectl model inspect default-int8.esa --model-keys keys/
  edgectl model inspect default-int8.esa -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cmdutil.CheckOutput(output); err != nil {
				return err
			}
			b, err := boundedio.ReadFile(cmd.Context(), args[0], quant.MaxArtifactBytes)
			if err != nil {
				return fmt.Errorf("read artifact: %w", err)
			}
			if nn.IsModelFile(b) {
				return fmt.Errorf("%s: %w", args[0], notArtifact(args[0]))
			}
			opt, err := cmdutil.DecodeOptions(keys, true)
			if err != nil {
				return err
			}
			status := "verified"
			a, err := quant.Decode(b, opt)
			if err != nil && opt.Keys == nil {
				// No keyring: check the content under a throwaway keyring
				// holding nobody; the signature is reported as unverified.
				a, err = decodeUnverified(b)
				status = "not verified (no --model-keys)"
			}
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			if a.KeyID == "" {
				status = "unsigned"
			}
			v := struct {
				File      string       `json:"file"`
				Bytes     int          `json:"bytes"`
				KeyID     string       `json:"key_id"`
				Signature string       `json:"signature"`
				Header    quant.Header `json:"header"`
			}{args[0], len(b), a.KeyID, status, a.Header}
			return cmdutil.PrintData(cmd.OutOrStdout(), output, v, func(w io.Writer) error {
				h := a.Header
				fmt.Fprintf(w, "file       %s (%d bytes)\n", args[0], len(b))
				fmt.Fprintf(w, "model      %s\n", h.ModelID)
				fmt.Fprintf(w, "dtype      %s\n", h.DType)
				fmt.Fprintf(w, "version    %d (round %d)\n", h.Version, h.Round)
				if h.Parent != "" {
					fmt.Fprintf(w, "parent     %s\n", h.Parent)
				}
				fmt.Fprintf(w, "schema     %s (%s)\n", h.SchemaID, h.SchemaHash[:16])
				fmt.Fprintf(w, "layers     %d -> %d -> %d -> 1 (critic %d), %s\n", h.Layers.F, h.Layers.H1, h.Layers.H2, h.Layers.HC, h.Activation)
				if h.Schema.Lo != nil {
					fmt.Fprintf(w, "bounds     the %d inputs held within their training range (schema.lo, schema.hi)\n", len(h.Schema.Lo))
				}
				if q := h.Quant; q != nil {
					fmt.Fprintf(w, "quant      %s, calibration %s on %d rows\n", q.Scheme, q.Calibration, q.Samples)
					fmt.Fprintf(w, "kernel     %s (the int8 kernel this edgectl build scores with)\n", int8net.Kernel())
				}
				if h.Decision != (policy.Decision{}) {
					fmt.Fprintf(w, "decision   %s\n", describeDecision(h.Decision))
				}
				if g := h.Sage; g != nil {
					fmt.Fprintf(w, "graphsage  %s: %d layers, %d -> %d-wide embeddings, fan-outs %v, decoder %v (dep_affinity reads partners of these weights)\n", g.ID, g.Layers, g.Inputs, g.Dim, g.Fanouts, g.Decoder)
				}
				fmt.Fprintf(w, "created    %s\n", h.Created.Format("2006-01-02 15:04:05 MST"))
				fmt.Fprintf(w, "signature  %s, key %s\n", status, cmp.Or(a.KeyID, "-"))
				if len(h.Metrics) > 0 {
					var parts []string
					for _, k := range sortedKeys(h.Metrics) {
						parts = append(parts, fmt.Sprintf("%s=%.6g", k, h.Metrics[k]))
					}
					fmt.Fprintf(w, "metrics    %s\n", strings.Join(parts, " "))
				}
				fmt.Fprintln(w)
				tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "TENSOR\tDTYPE\tSHAPE\tBYTES")
				layout, err := quant.LayoutOf(&h)
				if err != nil {
					return err
				}
				for _, t := range layout {
					fmt.Fprintf(tw, "%s\t%s\t%v\t%d\n", t.Name, t.DType, t.Shape, t.Bytes)
				}
				return tw.Flush()
			})
		},
	}
	cmdutil.AddModelKeysFlag(cmd.Flags(), &keys, "to verify the signature with")
	cmdutil.AddOutputFlag(cmd, &output)
	return cmd
}

// notArtifact is inspect's answer to a model file (.esm, what train and
// model import write): it reads artifacts (.esa), which sign and quantize
// make from one.
func notArtifact(path string) error {
	return fmt.Errorf("a model file (.esm, as train and model import write), not an artifact (.esa): inspect reads artifacts; "+
		"make one with 'edgectl model sign %[1]s --key KEY --out FILE.esa' (float32) or 'edgectl model quantize %[1]s --key KEY --out FILE.esa' (int8)", path)
}

// decodeUnverified checks an artifact's content without its signature:
// the signature block is zeroed and the key ID dropped, then it is
// decoded as unsigned. Only for display.
func decodeUnverified(b []byte) (*quant.Artifact, error) {
	a, keyID, err := quant.StripSignature(b)
	if err != nil {
		return nil, err
	}
	d, err := quant.Decode(a, quant.DecodeOptions{AllowUnsigned: true})
	if err != nil {
		return nil, err
	}
	d.KeyID = keyID
	return d, nil
}

func sortedKeys(m map[string]float64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// describeDecision says what a model's decision rule does.
func describeDecision(d policy.Decision) string {
	var caps []string
	if d.CPUCap > 0 {
		caps = append(caps, fmt.Sprintf("CPU cap %g (nodes the pod would bring above %.4g%% of their CPU by requests rank last)", d.CPUCap, 100*d.CPUCap))
	}
	if d.BusyCap > 0 {
		where := "last"
		if d.CPUCap > 0 {
			where = "below the others on their side of the CPU cap"
		}
		caps = append(caps, fmt.Sprintf("busy cap %g (nodes measured at %.4g%% CPU or more rank %s)", d.BusyCap, 100*d.BusyCap, where))
	}
	if len(caps) > 0 {
		return strings.Join(caps, "; ")
	}
	s := fmt.Sprintf("band %g logits", d.Band)
	if d.WholeGPUBand > 0 {
		s += fmt.Sprintf(", %g for whole-GPU pods", d.WholeGPUBand)
	}
	var less []string
	if d.PressureWeight > 0 {
		less = append(less, fmt.Sprintf("%g x the GPU model's pressure", d.PressureWeight))
	}
	if d.StrandWeight > 0 {
		less = append(less, fmt.Sprintf("%g x the GPUs it strands", d.StrandWeight))
	}
	if len(less) > 0 {
		return s + fmt.Sprintf(" (FGD less %s orders the candidates within it)", strings.Join(less, " and "))
	}
	return s + " (FGD orders the candidates within it)"
}
