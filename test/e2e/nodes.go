package e2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/edgesched/edgesched/sim"
)

// Names the harness gives node resources and labels.
const (
	// GPUMilliResource is a node's GPU share in milli-GPUs, 1000 per device
	// (an extended resource: pods request it with equal request and limit).
	GPUMilliResource corev1.ResourceName = "edgesched.io/gpu-milli"
	// GPUResource is the whole-device count, as the NVIDIA device plugin
	// names it.
	GPUResource corev1.ResourceName = "nvidia.com/gpu"
	// GPUModelLabel carries the GPU model (e.g. "V100M16") on GPU nodes.
	GPUModelLabel = "edgesched.io/gpu-model"
	// NotReadyTaint is the taint the apiserver puts on new Nodes.
	NotReadyTaint = "node.kubernetes.io/not-ready"
	// DefaultMaxPods is the "pods" capacity of a registered node (kubelet's default).
	DefaultMaxPods = 110
)

// NodeObject converts a simulator node into a Node with capacity and
// allocatable equal: cpu (milli), memory (MiB), pods (DefaultMaxPods),
// and on GPU nodes GPUResource (devices) and GPUMilliResource (1000 per
// device). Labels: kubernetes.io/hostname, kubernetes.io/os=linux,
// kubernetes.io/arch (amd64 unless the node is arm64; ArchAny, as in the
// openb trace, is amd64), GPUModelLabel, topology.kubernetes.io/zone when
// the node has a zone, and the node's own labels. The node's taints are
// copied; status has no conditions yet (see MarkNodeReady).
func NodeObject(n sim.NodeSpec) *corev1.Node {
	arch := "amd64"
	if n.Arch == sim.ArchARM64 {
		arch = "arm64"
	}
	labels := map[string]string{
		"kubernetes.io/hostname": n.Name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     arch,
	}
	if n.Zone != "" {
		labels["topology.kubernetes.io/zone"] = n.Zone
	}
	if n.GPUs > 0 && n.GPUModel != "" {
		labels[GPUModelLabel] = n.GPUModel
	}
	for k, v := range n.Labels {
		labels[k] = v
	}
	res := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(n.CPU, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(n.Memory<<20, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(DefaultMaxPods, resource.DecimalSI),
	}
	if n.GPUs > 0 {
		res[GPUResource] = *resource.NewQuantity(int64(n.GPUs), resource.DecimalSI)
		res[GPUMilliResource] = *resource.NewQuantity(int64(n.GPUs)*1000, resource.DecimalSI)
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels},
		Status: corev1.NodeStatus{
			Capacity:    res,
			Allocatable: res.DeepCopy(),
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:    arch,
				OperatingSystem: "linux",
				KubeletVersion:  "v1.37.2-e2e",
			},
		},
	}
	for _, tn := range n.Taints {
		node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: tn.Key, Value: tn.Value, Effect: corev1.TaintEffect(tn.Effect.String())})
	}
	return node
}

// SelectNodes picks n nodes from specs, covering as many distinct shapes
// (cpu, memory, GPU count, GPU model) as possible: it takes one node of
// each shape in turn, shapes ordered by how often they occur, until it has
// n. The choice is deterministic. n <= 0 or n >= len(specs) returns specs.
func SelectNodes(specs []sim.NodeSpec, n int) []sim.NodeSpec {
	if n <= 0 || n >= len(specs) {
		return specs
	}
	type shape struct {
		cpu, mem int64
		gpus     int
		model    string
	}
	groups := map[shape][]sim.NodeSpec{}
	var order []shape
	for _, s := range specs {
		k := shape{s.CPU, s.Memory, s.GPUs, s.GPUModel}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], s)
	}
	slices.SortStableFunc(order, func(a, b shape) int { return cmp.Compare(len(groups[b]), len(groups[a])) })
	out := make([]sim.NodeSpec, 0, n)
	for round := 0; len(out) < n; round++ {
		for _, k := range order {
			if g := groups[k]; round < len(g) && len(out) < n {
				out = append(out, g[round])
			}
		}
	}
	return out
}

// RegisterNodes creates Node objects for SelectNodes(specs, n) (n <= 0:
// all of specs) and makes each schedulable with MarkNodeReady, as a
// kubelet would. It returns the nodes as stored. Nodes are registered
// with a few requests in flight at a time.
func RegisterNodes(ctx context.Context, client kubernetes.Interface, specs []sim.NodeSpec, n int) ([]*corev1.Node, error) {
	picked := SelectNodes(specs, n)
	out := make([]*corev1.Node, len(picked))
	errs := make([]error, len(picked))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, spec := range picked {
		if err := spec.Validate(); err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			if _, err := client.CoreV1().Nodes().Create(ctx, NodeObject(spec), metav1.CreateOptions{}); err != nil {
				errs[i] = fmt.Errorf("create node %s: %w", spec.Name, err)
				return
			}
			out[i], errs[i] = MarkNodeReady(ctx, client, spec.Name)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// MarkNodeReady does what a kubelet's status loop and the node lifecycle
// controller would: it sets the Ready condition (and the pressure
// conditions to False) with a fresh heartbeat, then removes the
// NotReadyTaint the apiserver added at creation. Call it again to renew
// the heartbeat.
func MarkNodeReady(ctx context.Context, client kubernetes.Interface, name string) (*corev1.Node, error) {
	nodes := client.CoreV1().Nodes()
	var node *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NewTime(time.Now())
		cond := func(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) corev1.NodeCondition {
			return corev1.NodeCondition{Type: t, Status: s, Reason: reason, Message: "set by the edgesched e2e harness", LastHeartbeatTime: now, LastTransitionTime: now}
		}
		cur.Status.Conditions = []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
		}
		node, err = nodes.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("node %s: set Ready: %w", name, err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == NotReadyTaint }) {
			return nil
		}
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == NotReadyTaint })
		updated, err := nodes.Update(ctx, node, metav1.UpdateOptions{})
		if err == nil {
			node = updated
			return nil
		}
		if cur, gerr := nodes.Get(ctx, name, metav1.GetOptions{}); gerr == nil {
			node = cur
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("node %s: remove %s taint: %w", name, NotReadyTaint, err)
	}
	return node, nil
}

// PodRequests is the effective request of a pod as the scheduler counts
// it: the sum over containers, raised to any init container's request,
// plus the pod overhead.
func PodRequests(p *corev1.Pod) corev1.ResourceList {
	sum := corev1.ResourceList{}
	for _, c := range p.Spec.Containers {
		for name, q := range c.Resources.Requests {
			v := sum[name]
			v.Add(q)
			sum[name] = v
		}
	}
	for _, c := range p.Spec.InitContainers {
		for name, q := range c.Resources.Requests {
			if v, ok := sum[name]; !ok || q.Cmp(v) > 0 {
				sum[name] = q.DeepCopy()
			}
		}
	}
	for name, q := range p.Spec.Overhead {
		v := sum[name]
		v.Add(q)
		sum[name] = v
	}
	return sum
}

// CheckFits verifies that on every node the pods bound to it fit: for each
// resource any of them requests, the sum of requests is at most the node's
// allocatable (a resource the node lacks has allocatable 0), and the pod
// count is at most the "pods" allocatable. Unbound pods are ignored; a pod
// bound to a node not in nodes is an error.
func CheckFits(nodes []corev1.Node, pods []corev1.Pod) error {
	byName := map[string]*corev1.Node{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	used := map[string]corev1.ResourceList{}
	count := map[string]int64{}
	var errs []error
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" {
			continue
		}
		if _, ok := byName[p.Spec.NodeName]; !ok {
			errs = append(errs, fmt.Errorf("pod %s/%s is bound to unknown node %q", p.Namespace, p.Name, p.Spec.NodeName))
			continue
		}
		u := used[p.Spec.NodeName]
		if u == nil {
			u = corev1.ResourceList{}
			used[p.Spec.NodeName] = u
		}
		for name, q := range PodRequests(p) {
			v := u[name]
			v.Add(q)
			u[name] = v
		}
		count[p.Spec.NodeName]++
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range used {
			if !yield(k) {
				return
			}
		}
	})
	for _, nodeName := range names {
		alloc := byName[nodeName].Status.Allocatable
		for name, q := range used[nodeName] {
			a := alloc[name]
			if q.Cmp(a) > 0 {
				errs = append(errs, fmt.Errorf("node %s: %s requested %s > allocatable %s", nodeName, name, q.String(), a.String()))
			}
		}
		if pods, ok := alloc[corev1.ResourcePods]; ok && count[nodeName] > pods.Value() {
			errs = append(errs, fmt.Errorf("node %s: %d pods > allocatable %s", nodeName, count[nodeName], pods.String()))
		}
	}
	return errors.Join(errs...)
}

// WaitForPodsBound polls the pods of namespace matching selector (a label
// selector, "" for all) every interval until want of them are bound to a
// node (spec.nodeName set), ctx ends, or a pod fails. It returns the last
// list seen; on timeout the error names the unbound pods and their
// PodScheduled condition. interval <= 0 means 200 ms.
func WaitForPodsBound(ctx context.Context, client kubernetes.Interface, namespace, selector string, want int, interval time.Duration) ([]corev1.Pod, error) {
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	var last []corev1.Pod
	err := wait.PollUntilContextCancel(ctx, interval, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, nil // transient; the deadline decides
		}
		last = list.Items
		bound := 0
		for _, p := range last {
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound >= want, nil
	})
	if err != nil {
		msg := ""
		bound := 0
		for _, p := range last {
			if p.Spec.NodeName != "" {
				bound++
				continue
			}
			reason := "no PodScheduled condition"
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled {
					reason = string(c.Status) + " " + c.Reason + ": " + c.Message
				}
			}
			msg += "\n  " + p.Name + ": " + reason
		}
		return last, fmt.Errorf("%d of %d pods bound in %s (want %d): %w%s", bound, len(last), namespace, want, err, msg)
	}
	return last, nil
}
