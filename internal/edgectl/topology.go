package edgectl

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/edgesched/edgesched/edge-plugin/conventions"
	"github.com/edgesched/edgesched/sim/scenario"
)

// newTopologyCommand: the site topology the scheduler plugin reads
// (docs/edge-plugin.md, "Site topology").
func newTopologyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topology",
		Short: "Check and publish a site topology (carbon zones, RTTs between zones) for edge-scheduler",
		Long: `A site topology tells edge-scheduler's EdgePolicy which electricity grid
each zone draws from, that grid's hourly carbon intensity, and the RTTs
between zones (docs/edge-plugin.md, "Site topology"). The plugin reads it
from the ConfigMap its topologyConfigMap argument names, key topology.json.`,
	}
	var ns, name string
	cm := &cobra.Command{
		Use:   "configmap FILE",
		Short: "Check a topology file (JSON, or - for stdin) and print it as a ConfigMap manifest for kubectl apply",
		Example: `  edgectl topology configmap site.json --namespace kube-system | kubectl apply -f -
  edgectl topology from-scenario builtin:retail-fleet | edgectl topology configmap - -n edgesched-system`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return fmt.Errorf("--namespace %q: %s", ns, strings.Join(errs, "; "))
			}
			if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
				return fmt.Errorf("--name %q: %s", name, strings.Join(errs, "; "))
			}
			tp, err := readTopology(cmd.Context(), cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			enc, err := tp.Encode()
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			out, err := yaml.Marshal(&corev1.ConfigMap{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app.kubernetes.io/part-of": "edgesched"}},
				Data:       map[string]string{conventions.TopologyConfigMapKey: string(enc)},
			})
			if err != nil {
				return fmt.Errorf("encode ConfigMap: %w", err)
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cm.Flags().StringVarP(&ns, "namespace", "n", "kube-system", "namespace of the ConfigMap (the plugin's topologyConfigMap NAMESPACE)")
	cm.Flags().StringVar(&name, "name", conventions.DefaultTopologyConfigMapName, "name of the ConfigMap (the plugin's topologyConfigMap NAME)")
	cmd.AddCommand(&cobra.Command{
		Use:   "check FILE",
		Short: "Check a topology file (JSON, or - for stdin) and summarise it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tp, err := readTopology(cmd.Context(), cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			return summariseTopology(cmd.OutOrStdout(), args[0], tp)
		},
	}, cm, &cobra.Command{
		Use:   "from-scenario SCENARIO",
		Short: "Print the topology of a simulator scenario (a file or builtin:NAME) as JSON",
		Long: `Print the zones, carbon curves and network of a simulator scenario as a
site topology, so the cluster is scheduled with the picture a policy was
trained on. A scenario's curves start at its hour 0; the plugin reads hour
(Unix time / 3600) mod the curve's length, so a 24-value curve is the
hours of the day in UTC.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := scenario.Load(args[0])
			if err != nil {
				return err
			}
			tp := &conventions.Topology{Version: conventions.TopologyVersion}
			for _, z := range l.Cluster.Zones {
				tp.Zones = append(tp.Zones, conventions.TopologyZone{Name: z.Name, CarbonZone: z.CarbonZone})
			}
			for _, c := range l.Cluster.CarbonZones {
				tp.CarbonZones = append(tp.CarbonZones, conventions.CarbonZone{Name: c.Name, GramsPerKWh: slices.Clone(c.Curve)})
			}
			if nw := l.Cluster.Network; nw != nil {
				tp.Network = &conventions.Network{IntraZoneMs: nw.IntraZoneMs, InterZoneMs: nw.InterZoneMs}
				for _, p := range nw.Pairs {
					tp.Network.Pairs = append(tp.Network.Pairs, conventions.ZonePair{A: p.A, B: p.B, Ms: p.Ms})
				}
			}
			b, err := tp.Encode()
			if err != nil {
				return fmt.Errorf("scenario %s as a topology: %w", args[0], err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
			return err
		},
	})
	return cmd
}

// readTopology reads and validates a topology file ("-": stdin); errors
// name the file.
func readTopology(ctx context.Context, stdin io.Reader, path string) (*conventions.Topology, error) {
	b, err := readFileOrStdin(ctx, stdin, path, conventions.MaxTopologyBytes)
	if err != nil {
		return nil, fmt.Errorf("read topology: %w", err)
	}
	tp, err := conventions.DecodeTopology(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tp, nil
}

// summariseTopology prints one line per carbon zone and the network.
func summariseTopology(w io.Writer, path string, tp *conventions.Topology) error {
	fmt.Fprintf(w, "%s: ok: %d zones, %d carbon zones\n", path, len(tp.Zones), len(tp.CarbonZones))
	uses := map[string][]string{}
	for _, z := range tp.Zones {
		cz := z.CarbonZone
		if cz == "" {
			cz = z.Name
		}
		uses[cz] = append(uses[cz], z.Name)
	}
	for _, c := range tp.CarbonZones {
		lo, hi := slices.Min(c.GramsPerKWh), slices.Max(c.GramsPerKWh)
		var sum float64
		for _, v := range c.GramsPerKWh {
			sum += v
		}
		curve := fmt.Sprintf("flat %g g/kWh", lo)
		if len(c.GramsPerKWh) > 1 {
			curve = fmt.Sprintf("%d hourly values, %g-%g g/kWh, mean %.4g", len(c.GramsPerKWh), lo, hi, sum/float64(len(c.GramsPerKWh)))
		}
		zones := "no zone"
		if z := uses[c.Name]; len(z) > 0 {
			zones = "zones " + strings.Join(z, ", ")
		}
		fmt.Fprintf(w, "  carbon zone %s: %s; %s\n", c.Name, curve, zones)
	}
	if nw := tp.Network; nw != nil {
		fmt.Fprintf(w, "  network: %g ms inside a zone, %g ms between zones, %d pairs of their own\n", nw.IntraZoneMs, nw.InterZoneMs, len(nw.Pairs))
	} else {
		fmt.Fprintln(w, "  network: the default (0.5 ms inside a zone, 30 ms between zones)")
	}
	return nil
}
