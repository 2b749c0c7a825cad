package policy

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/policydoc"
)

type policyApplyFlags struct {
	configMap       string // [NAMESPACE/]NAME
	namespace       string // of a configMap without one
	resourceVersion string
	kubeconfig      string
	context         string
	timeout         time.Duration
	output          string
}

// appliedPolicy is apply's -o json|yaml document.
type appliedPolicy struct {
	ConfigMap string `json:"configmap"`
	Key       string `json:"key"`
	Action    string `json:"action"` // created, updated, unchanged
	// ResourceVersion is the ConfigMap's version after the write; Previous
	// the one the write was conditioned on ("" when created).
	ResourceVersion string `json:"resource_version"`
	Previous        string `json:"previous_resource_version,omitempty"`
	Rules           int    `json:"rules"`
}

func newPolicyApplyCommand() *cobra.Command {
	f := &policyApplyFlags{}
	cmd := &cobra.Command{
		Use:   "apply FILE",
		Short: "Write a policy document into the ConfigMap the scheduler watches",
		Long: `apply validates a policy document (YAML or JSON, - for stdin) and writes it
under the key ` + policydoc.ConfigMapKey + ` of the ConfigMap (--policy-configmap, default
` + policydoc.DefaultConfigMap + `) that the edgesched plugin and extender watch.

The write is optimistic: an existing ConfigMap is updated with the
resourceVersion it was read at, so a concurrent change makes apply fail with
a conflict instead of overwriting it; --resource-version makes the write
conditional on a version you read yourself. A document the scheduler refuses
never replaces the one in use (the last good one keeps working).`,
		Example: `  edgectl policy apply policy.yaml
  edgectl policy compile "prefer low-carbon grids" --out p.yaml && edgectl policy apply p.yaml --kubeconfig /etc/rancher/k3s/k3s.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cmdutil.CheckOutput(f.output); err != nil {
				return err
			}
			ns, name, err := kubefmt.ParseConfigMapRef(f.configMap, f.namespace)
			if err != nil {
				return cli.Usagef("--policy-configmap: %w", err)
			}
			if f.timeout <= 0 {
				return cli.Usagef("--timeout %v: must be positive", f.timeout)
			}
			b, err := cmdutil.ReadFileOrStdin(cmd.Context(), cmd.InOrStdin(), args[0], policyInputLimit)
			if err != nil {
				return err
			}
			doc, err := policydoc.Decode(b)
			if err != nil {
				return fmt.Errorf("%s: %w", args[0], err)
			}
			client, err := kubeClient(f.kubeconfig, f.context, f.timeout)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
			defer cancel()
			res, err := applyPolicy(ctx, client, ns, name, string(b), f.resourceVersion)
			if err != nil {
				return err
			}
			res.Rules = len(doc.Rules)
			return cmdutil.PrintData(cmd.OutOrStdout(), f.output, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "%s %s (key %s, %d rules): resourceVersion %s\n", res.ConfigMap, res.Action, res.Key, res.Rules, res.ResourceVersion)
				return err
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.configMap, "policy-configmap", policydoc.DefaultConfigMap, "the policy ConfigMap: [NAMESPACE/]NAME, NAME alone in --namespace")
	fl.StringVar(&f.namespace, "namespace", kubefmt.DefaultNamespace, "namespace of a --policy-configmap named without one")
	cli.DeprecatedAlias(fl, "configmap", "policy-configmap")
	fl.StringVar(&f.resourceVersion, "resource-version", "", "write only if the ConfigMap is at this resourceVersion (optimistic concurrency)")
	fl.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file (default $KUBECONFIG, else ~/.kube/config)")
	fl.StringVar(&f.context, "context", "", "kubeconfig context (default the current context)")
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the API server")
	cmdutil.AddOutputFlag(cmd, &f.output)
	return cmd
}

// applyPolicy creates or updates the ConfigMap's policy key, conditioned on
// the resourceVersion it read (or on want, when given).
func applyPolicy(ctx context.Context, client kubernetes.Interface, ns, name, doc, want string) (*appliedPolicy, error) {
	res := &appliedPolicy{ConfigMap: ns + "/" + name, Key: policydoc.ConfigMapKey}
	cms := client.CoreV1().ConfigMaps(ns)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if want != "" {
			return nil, fmt.Errorf("configmap %s: not found, but --resource-version %s was required", res.ConfigMap, want)
		}
		cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{policydoc.ConfigMapKey: doc}}
		created, err := cms.Create(ctx, cm, metav1.CreateOptions{FieldManager: "edgectl"})
		if err != nil {
			return nil, fmt.Errorf("create configmap %s: %w", res.ConfigMap, err)
		}
		res.Action, res.ResourceVersion = "created", created.ResourceVersion
		return res, nil
	case err != nil:
		return nil, fmt.Errorf("get configmap %s: %w", res.ConfigMap, err)
	}
	res.Previous = cm.ResourceVersion
	if want != "" && want != cm.ResourceVersion {
		return nil, fmt.Errorf("configmap %s: conflict: it is at resourceVersion %s, not %s (someone changed it; read it again)", res.ConfigMap, cm.ResourceVersion, want)
	}
	if cm.Data[policydoc.ConfigMapKey] == doc {
		res.Action, res.ResourceVersion = "unchanged", cm.ResourceVersion
		return res, nil
	}
	cm = cm.DeepCopy()
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[policydoc.ConfigMapKey] = doc
	updated, err := cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "edgectl"}) // carries cm.ResourceVersion
	if apierrors.IsConflict(err) {
		return nil, fmt.Errorf("configmap %s: conflict: it changed after it was read at resourceVersion %s; nothing was written: %w", res.ConfigMap, res.Previous, err)
	}
	if err != nil {
		return nil, fmt.Errorf("update configmap %s: %w", res.ConfigMap, err)
	}
	res.Action, res.ResourceVersion = "updated", updated.ResourceVersion
	return res, nil
}

// kubeClient builds a client from a kubeconfig.
func kubeClient(kubeconfig, kubeContext string, timeout time.Duration) (kubernetes.Interface, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	if err := cmdutil.CheckKubeconfig(rules); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.Timeout = timeout
	return kubernetes.NewForConfig(cfg)
}
