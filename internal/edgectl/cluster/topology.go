package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/sim"
	"github.com/edgesched/edgesched/sim/scenario"
)

// NewTopologyCommand: the site topology the scheduler plugin reads
// (docs/edge-plugin.md, "Site topology").
func NewTopologyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topology",
		Short: "Check and publish a site topology (carbon zones, RTTs between zones) for edge-scheduler",
		Long: `A site topology tells edge-scheduler's EdgePolicy which electricity grid
each zone draws from, that grid's hourly carbon intensity, and the RTTs
between zones (docs/edge-plugin.md, "Site topology"). The plugin reads it
from the ConfigMap its topologyConfigMap argument names, key topology.json.`,
	}
	var ns, ref, checkOutputFormat string
	cm := &cobra.Command{
		Use:   "configmap FILE",
		Short: "Check a topology file (JSON or YAML, - for stdin) and print it as a ConfigMap manifest for kubectl apply",
		Example: `  edgectl topology configmap site.json | kubectl apply -f -
  edgectl topology from-scenario builtin:retail-fleet | edgectl topology configmap - -n my-namespace`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns, name, err := kubefmt.ParseConfigMapRef(ref, ns)
			if err != nil {
				return cli.Usagef("--topology-configmap: %w", err)
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
				Data:       map[string]string{kubefmt.TopologyConfigMapKey: string(enc)},
			})
			if err != nil {
				return fmt.Errorf("encode ConfigMap: %w", err)
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cm.Flags().StringVarP(&ns, "namespace", "n", kubefmt.DefaultNamespace, "namespace of the ConfigMap when --topology-configmap names none (the Helm chart's and the shipped config's is "+kubefmt.DefaultNamespace+")")
	cm.Flags().StringVar(&ref, "topology-configmap", kubefmt.DefaultTopologyConfigMapName, "the ConfigMap: [NAMESPACE/]NAME, NAME alone in --namespace (the plugin's topologyConfigMap)")
	cli.DeprecatedAlias(cm.Flags(), "name", "topology-configmap")
	check := &cobra.Command{
		Use:     "check FILE",
		Short:   "Check a topology file (JSON or YAML, - for stdin) and summarise it",
		Example: "  edgectl topology check site.json\n  edgectl topology check site.yaml -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cmdutil.CheckOutput(checkOutputFormat); err != nil {
				return err
			}
			tp, err := readTopology(cmd.Context(), cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			s := summariseTopology(args[0], tp)
			return cmdutil.PrintData(cmd.OutOrStdout(), checkOutputFormat, s, s.print)
		},
	}
	cmdutil.AddOutputFlag(check, &checkOutputFormat)
	cmd.AddCommand(check, cm, &cobra.Command{
		Use:   "from-scenario SCENARIO",
		Short: "Print the topology of a simulator scenario (a file or builtin:NAME) as indented JSON, to edit",
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
			tp := &kubefmt.Topology{Version: kubefmt.TopologyVersion}
			for _, z := range l.Cluster.Zones {
				tp.Zones = append(tp.Zones, kubefmt.TopologyZone{Name: z.Name, CarbonZone: z.CarbonZone})
			}
			for _, c := range l.Cluster.CarbonZones {
				tp.CarbonZones = append(tp.CarbonZones, kubefmt.CarbonZone{Name: c.Name, GramsPerKWh: slices.Clone(c.Curve)})
			}
			if nw := l.Cluster.Network; nw != nil {
				tp.Network = &kubefmt.Network{IntraZoneMs: nw.IntraZoneMs, InterZoneMs: nw.InterZoneMs}
				for _, p := range nw.Pairs {
					tp.Network.Pairs = append(tp.Network.Pairs, kubefmt.ZonePair{A: p.A, B: p.B, Ms: p.Ms})
				}
			}
			b, err := tp.Encode()
			if err != nil {
				return fmt.Errorf("scenario %s as a topology: %w", args[0], err)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, b, "", "  "); err != nil {
				return fmt.Errorf("scenario %s as a topology: %w", args[0], err)
			}
			pretty.WriteByte('\n')
			_, err = cmd.OutOrStdout().Write(pretty.Bytes())
			return err
		},
	})
	return cmd
}

// errEmptyTopology: the topology file holds nothing but white space
// (kubefmt would say "EOF").
var errEmptyTopology = errors.New("empty input, want a site topology (JSON or YAML)")

// readTopology reads and validates a topology file ("-": stdin), JSON
// or YAML (converted to JSON first, so the format's checks apply to
// both); errors name the file.
func readTopology(ctx context.Context, stdin io.Reader, path string) (*kubefmt.Topology, error) {
	b, err := cmdutil.ReadFileOrStdin(ctx, stdin, path, kubefmt.MaxTopologyBytes)
	if err != nil {
		return nil, fmt.Errorf("read topology: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%s: %w", path, errEmptyTopology)
	}
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] != '{' {
		if b, err = yaml.YAMLToJSON(b); err != nil {
			return nil, fmt.Errorf("%s: not JSON, and not YAML: %w", path, err)
		}
	}
	tp, err := kubefmt.DecodeTopology(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tp, nil
}

// topologySummary is topology check's -o json|yaml document.
type topologySummary struct {
	File        string               `json:"file"`
	Zones       int                  `json:"zones"`
	CarbonZones []carbonZoneSummary  `json:"carbon_zones"`
	Network     topologyNetworkShape `json:"network"`
}

type carbonZoneSummary struct {
	Name   string   `json:"name"`
	Hours  int      `json:"hours"` // values in the curve (1: flat)
	Min    float64  `json:"min_g_per_kwh"`
	Max    float64  `json:"max_g_per_kwh"`
	Mean   float64  `json:"mean_g_per_kwh"`
	UsedBy []string `json:"zones"`
}

type topologyNetworkShape struct {
	Default     bool    `json:"default"` // the topology sets no network: the plugin's defaults apply
	IntraZoneMs float64 `json:"intra_zone_ms"`
	InterZoneMs float64 `json:"inter_zone_ms"`
	Pairs       int     `json:"pairs"`
}

// summariseTopology sums a topology up per carbon zone.
func summariseTopology(path string, tp *kubefmt.Topology) topologySummary {
	s := topologySummary{File: path, Zones: len(tp.Zones), CarbonZones: []carbonZoneSummary{}}
	uses := map[string][]string{}
	for _, z := range tp.Zones {
		cz := z.CarbonZone
		if cz == "" {
			cz = z.Name
		}
		uses[cz] = append(uses[cz], z.Name)
	}
	for _, c := range tp.CarbonZones {
		var sum float64
		for _, v := range c.GramsPerKWh {
			sum += v
		}
		s.CarbonZones = append(s.CarbonZones, carbonZoneSummary{Name: c.Name, Hours: len(c.GramsPerKWh), Min: slices.Min(c.GramsPerKWh), Max: slices.Max(c.GramsPerKWh),
			Mean: sum / float64(len(c.GramsPerKWh)), UsedBy: append([]string{}, uses[c.Name]...)})
	}
	if nw := tp.Network; nw != nil {
		s.Network = topologyNetworkShape{IntraZoneMs: nw.IntraZoneMs, InterZoneMs: nw.InterZoneMs, Pairs: len(nw.Pairs)}
	} else {
		def := sim.DefaultNetwork() // what the plugin uses without a network
		s.Network = topologyNetworkShape{Default: true, IntraZoneMs: def.IntraZoneMs, InterZoneMs: def.InterZoneMs}
	}
	return s
}

// print writes the summary for people: one line per carbon zone and the
// network.
func (s topologySummary) print(w io.Writer) error {
	fmt.Fprintf(w, "%s: ok: %d zones, %d carbon zones\n", s.File, s.Zones, len(s.CarbonZones))
	for _, c := range s.CarbonZones {
		curve := fmt.Sprintf("flat %g g/kWh", c.Min)
		if c.Hours > 1 {
			curve = fmt.Sprintf("%d hourly values, %g-%g g/kWh, mean %.4g", c.Hours, c.Min, c.Max, c.Mean)
		}
		zones := "no zone"
		if len(c.UsedBy) > 0 {
			zones = "zones " + strings.Join(c.UsedBy, ", ")
		}
		fmt.Fprintf(w, "  carbon zone %s: %s; %s\n", c.Name, curve, zones)
	}
	nw := s.Network
	var err error
	if nw.Default {
		_, err = fmt.Fprintf(w, "  network: the default (%g ms inside a zone, %g ms between zones)\n", nw.IntraZoneMs, nw.InterZoneMs)
	} else {
		_, err = fmt.Fprintf(w, "  network: %g ms inside a zone, %g ms between zones, %d pairs of their own\n", nw.IntraZoneMs, nw.InterZoneMs, nw.Pairs)
	}
	return err
}
