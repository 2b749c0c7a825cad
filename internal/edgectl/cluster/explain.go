package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/kubefmt"
)

// The annotation's format is package kubefmt's, which links no
// kube-scheduler (edgectl must not link it).
const annotationExplanation = kubefmt.AnnotationExplanation

type (
	podExplanation   = kubefmt.Explanation
	groupAttribution = kubefmt.GroupAttribution
)

// explainedPod is the -o json|yaml output: the annotation's content
// under edgectl's JSON convention (snake_case keys, unset values omitted;
// the annotation itself keeps Kubernetes' camelCase).
type explainedPod struct {
	Pod             string           `json:"pod"`
	Node            string           `json:"node"`
	ScheduledNode   string           `json:"scheduled_node,omitempty"` // the pod's spec.nodeName when it differs from node
	Format          int              `json:"format"`
	Method          string           `json:"method,omitempty"`
	ModelID         string           `json:"model_id"`
	ModelVersion    uint64           `json:"model_version"`
	Score           float64          `json:"score"`
	Baseline        float64          `json:"baseline"`
	NormalizedScore int64            `json:"normalized_score"`
	Candidates      int              `json:"candidates"`
	BaselineNodes   int              `json:"baseline_nodes,omitempty"`
	Groups          []explainedGroup `json:"groups"`
	Rest            float64          `json:"rest"`
	ComputedAt      *time.Time       `json:"computed_at,omitempty"`
}

type explainedGroup struct {
	Group       string  `json:"group"`
	Attribution float64 `json:"attribution"`
}

func newExplainedPod(ref string, pod *v1.Pod, e *podExplanation) explainedPod {
	out := explainedPod{Pod: ref, Node: e.Node, Format: e.Format, Method: e.Method, ModelID: e.ModelID, ModelVersion: e.ModelVersion,
		Score: e.Score, Baseline: e.Baseline, NormalizedScore: e.NormalizedScore, Candidates: e.Candidates, BaselineNodes: e.BaselineNodes,
		Groups: []explainedGroup{}, Rest: e.Rest}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != e.Node {
		out.ScheduledNode = pod.Spec.NodeName
	}
	for _, g := range e.Groups {
		out.Groups = append(out.Groups, explainedGroup(g))
	}
	if !e.ComputedAt.IsZero() {
		t := e.ComputedAt
		out.ComputedAt = &t
	}
	return out
}

type explainFlags struct {
	output     string
	kubeconfig string
	context    string
	timeout    time.Duration
}

// NewExplainCommand returns edgectl explain and its verbs.
func NewExplainCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Show why EdgePolicy placed a pod where it did",
		Long: `explain prints the explanation EdgePolicy (the kube-scheduler plugin) wrote
on a pod it placed, in the annotation ` + annotationExplanation + `: the model
version, the node, the int8 model's score there against the score of the
mean candidate node, and the exact Shapley value of each feature group
(what moved the score from the baseline to the node's score; the groups
shown plus "rest" add up to the difference). See docs/edge-plugin.md,
"Explanations".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newExplainPodCommand(), newExplainFileCommand())
	return cmd
}

func (f *explainFlags) registerOutput(cmd *cobra.Command) {
	cmdutil.AddOutputFlag(cmd, &f.output)
}

func (f *explainFlags) validate() error {
	if err := cmdutil.CheckOutput(f.output); err != nil {
		return err
	}
	return nil
}

func newExplainPodCommand() *cobra.Command {
	var f explainFlags
	cmd := &cobra.Command{
		Use:   "pod NAMESPACE/NAME",
		Short: "Explain a pod's placement, reading the pod from the cluster",
		Example: `  edgectl explain pod default/web-0
  edgectl explain pod vision/inference-7f9c --kubeconfig /etc/rancher/k3s/k3s.yaml -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			ns, name, err := splitPodRef(args[0])
			if err != nil {
				return cli.Usage(err)
			}
			if f.timeout <= 0 {
				return cli.Usagef("--timeout %v: must be positive", f.timeout)
			}
			pod, err := f.getPod(cmd.Context(), ns, name)
			if err != nil {
				return err
			}
			return f.print(cmd.OutOrStdout(), pod)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, else ~/.kube/config)")
	fl.StringVar(&f.context, "context", "", "kubeconfig context (default the current context)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the API server")
	f.registerOutput(cmd)
	return cmd
}

func newExplainFileCommand() *cobra.Command {
	var f explainFlags
	cmd := &cobra.Command{
		Use:   "file PATH",
		Short: "Explain a pod's placement from a pod manifest (YAML or JSON; - reads stdin)",
		Example: `  kubectl get pod -n vision inference-7f9c -o yaml | edgectl explain file -
  edgectl explain file pod.json -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			b, err := cmdutil.ReadFileOrStdin(cmd.Context(), cmd.InOrStdin(), args[0], 16<<20)
			if err != nil {
				return err
			}
			if len(bytes.TrimSpace(b)) == 0 {
				return fmt.Errorf("%s: not a pod manifest: %w", args[0], errEmptyManifest)
			}
			var pod v1.Pod
			if err := yaml.Unmarshal(b, &pod); err != nil {
				return fmt.Errorf("%s: not a pod manifest: %w", args[0], err)
			}
			if pod.Kind != "" && pod.Kind != "Pod" {
				return fmt.Errorf("%s: kind %s, want Pod", args[0], pod.Kind)
			}
			return f.print(cmd.OutOrStdout(), &pod)
		},
	}
	f.registerOutput(cmd)
	return cmd
}

// errEmptyManifest: explain file read nothing but white space.
var errEmptyManifest = errors.New("empty input")

// splitPodRef parses NAMESPACE/NAME.
func splitPodRef(s string) (string, string, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("pod %q: want NAMESPACE/NAME", s)
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return "", "", fmt.Errorf("pod %q: namespace %q: %s", s, ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", "", fmt.Errorf("pod %q: name %q: %s", s, name, strings.Join(errs, "; "))
	}
	return ns, name, nil
}

// getPod reads a pod with the kubeconfig's credentials.
func (f *explainFlags) getPod(ctx context.Context, ns, name string) (*v1.Pod, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules() // $KUBECONFIG, then ~/.kube/config
	if f.kubeconfig != "" {
		rules.ExplicitPath = f.kubeconfig
	}
	if err := cmdutil.CheckKubeconfig(rules); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: f.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.Timeout = f.timeout
	cfg.UserAgent = "edgectl/" + cli.Info().Version
	client, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	pod, err := client.Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get pod %s/%s: %w", ns, name, err)
	}
	return pod, nil
}

// parseExplanation reads the pod's explanation annotation.
func parseExplanation(pod *v1.Pod) (*podExplanation, error) {
	ref := pod.Namespace + "/" + pod.Name
	s, ok := pod.Annotations[annotationExplanation]
	if !ok {
		return nil, fmt.Errorf("pod %s has no %s annotation: EdgePolicy did not score it (another scheduler, only one feasible node, no model loaded, or scheduled before explanations existed)", ref, annotationExplanation)
	}
	e, err := kubefmt.ParseExplanation(s)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %w", ref, err)
	}
	return e, nil
}

func (f *explainFlags) print(w io.Writer, pod *v1.Pod) error {
	e, err := parseExplanation(pod)
	if err != nil {
		return err
	}
	ref := pod.Namespace + "/" + pod.Name
	if f.output != "table" {
		return cmdutil.PrintData(w, f.output, newExplainedPod(ref, pod, e), nil)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("Pod:", ref)
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != e.Node {
		row("Node:", fmt.Sprintf("%s (explained: %s)", pod.Spec.NodeName, e.Node))
	} else {
		row("Node:", e.Node)
	}
	row("Model:", fmt.Sprintf("version %d (%s)", e.ModelVersion, cmdutil.ShortOrDash(e.ModelID)))
	row("Score:", fmt.Sprintf("%.3f (normalized %d/100)", e.Score, e.NormalizedScore))
	if e.BaselineNodes > 0 && e.BaselineNodes < e.Candidates {
		row("Baseline:", fmt.Sprintf("%.3f (score of the mean of %d of the %d candidate nodes' features)", e.Baseline, e.BaselineNodes, e.Candidates))
	} else {
		row("Baseline:", fmt.Sprintf("%.3f (score of the mean of %d candidate nodes' features)", e.Baseline, e.Candidates))
	}
	if e.Method != "" {
		row("Method:", "exact Shapley values over feature groups ("+e.Method+")")
	}
	if !e.ComputedAt.IsZero() {
		row("Computed:", e.ComputedAt.Format(time.RFC3339))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Why the score differs from the baseline (+ favours the node):")
	bars := append([]groupAttribution(nil), e.Groups...)
	if e.Rest != 0 {
		bars = append(bars, groupAttribution{Group: "(rest)", Attribution: e.Rest})
	}
	var scale float64
	for _, g := range bars {
		scale = max(scale, math.Abs(g.Attribution))
	}
	const width = 24
	nameW := len("score - baseline")
	for _, g := range bars {
		nameW = max(nameW, len(g.Group))
	}
	for _, g := range bars {
		n := 0
		if scale > 0 && !math.IsNaN(g.Attribution) {
			// the ratio (at most 1) first: width times an attribution
			// near the largest float64 overflowed to +Inf, a negative n
			n = int(math.Round(width * (math.Abs(g.Attribution) / scale)))
		}
		left, right := strings.Repeat(" ", width), ""
		if g.Attribution < 0 {
			left = strings.Repeat(" ", width-n) + strings.Repeat("█", n)
		} else {
			right = strings.Repeat("█", n)
		}
		fmt.Fprintf(w, "  %-*s %+10.3f  %s|%s\n", nameW, g.Group, g.Attribution, left, right)
	}
	if len(bars) == 0 {
		fmt.Fprintln(w, "  (no group moved the score: the node equals the mean candidate)")
	}
	fmt.Fprintf(w, "  %-*s %+10.3f\n", nameW, "score - baseline", e.Score-e.Baseline)
	return nil
}
