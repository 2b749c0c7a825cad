package extender

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/edgesched/edgesched/edge-plugin/serving"
	"github.com/edgesched/edgesched/kubefmt"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
)

// The bind verb (bindVerb). kube-scheduler hands an extender that binds
// the binding of every pod the extender is interested in (with
// managedResources: the pods that request one of them, here the GPU
// pods); the extender then plays the plugin's Reserve and Bind: it picks
// the pod's devices on the chosen node with the policy
// (kubefmt.AnnotationGPUDevices, FGD's device for a share; like the plugin, it
// replaces devices a pod arrives with) and binds with one pods/binding
// request that carries them, so the pod is bound and annotated in one
// write. The pod is "assumed" on the node from the moment its devices are
// chosen until the informer delivers it (or AssumeTTL passes), so
// concurrent and later decisions see its devices taken.
//
// With a scheduling policy the bind verb is also where its required rules
// are committed (policyBind). The scheduler calls filter for the next pod
// while the previous one is still being bound, and the extender learns of
// bindings it did not make only through its informer, so two replicas
// filtered at once can each pass "at most 1 replica per node" on the same
// node. Every pod the extender binds is therefore assumed (GPU or not),
// and the rules are checked again on the chosen node, one binding at a
// time with the pods bound before counted: a broken rule refuses the
// binding, naming the rule, and the scheduler retries the pod, whose
// filter then sees the earlier binding. Configure the extender as the
// binder of every pod for this (deploy/edge-scheduler/k3s-extender-policy.yaml).

// AssumeTTL bounds how long a pod the extender bound counts on its node
// without the informer showing it there.
const AssumeTTL = 30 * time.Second

// ErrBind wraps bind verb failures (the scheduler sees the message in the
// result's Error and retries the pod).
var ErrBind = errors.New("edgesched extender: bind")

// BindPath is the bind verb's URL path.
func (e *Extender) BindPath() string { return e.prefix + "/bind" }

type assumedPod struct {
	pod *v1.Pod
	at  time.Time
}

// Bind binds the pod to args.Node, with the devices the policy picks on
// that node when the pod needs GPUs. A pod already bound to args.Node (a
// retry) is a success. Failures come back in the result's Error.
func (e *Extender) Bind(ctx context.Context, args *extenderv1.ExtenderBindingArgs) *extenderv1.ExtenderBindingResult {
	if err := e.bind(ctx, args); err != nil {
		return &extenderv1.ExtenderBindingResult{Error: err.Error()}
	}
	return &extenderv1.ExtenderBindingResult{}
}

func (e *Extender) bind(ctx context.Context, args *extenderv1.ExtenderBindingArgs) error {
	if e.client == nil {
		return fmt.Errorf("%w: no API client (run with a kubeconfig or in a cluster)", ErrBind)
	}
	e.binds.Store(true)
	defer e.inflight.done(args.PodUID) // also when the binding fails before its reservation
	pod, err := e.client.CoreV1().Pods(args.PodNamespace).Get(ctx, args.PodName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("%w: get pod %s/%s: %w", ErrBind, args.PodNamespace, args.PodName, err)
	}
	if pod.UID != args.PodUID {
		return fmt.Errorf("%w: pod %s/%s is %s now, not %s (recreated)", ErrBind, args.PodNamespace, args.PodName, pod.UID, args.PodUID)
	}
	if pod.Spec.NodeName != "" {
		if pod.Spec.NodeName == args.Node {
			return nil // a retry of a binding that went through
		}
		return fmt.Errorf("%w: pod %s/%s is bound to %s already, not %s", ErrBind, pod.Namespace, pod.Name, pod.Spec.NodeName, args.Node)
	}
	req, err := kubefmt.PodGPURequest(pod)
	if err != nil {
		return fmt.Errorf("%w: pod %s/%s: %w", ErrBind, pod.Namespace, pod.Name, err)
	}
	// Check the policy's required rules, choose the devices and count the
	// pod on the node in one step, so concurrent binds (the scheduler
	// binds in a goroutine per pod) never pick the same free device nor
	// break a rule together; the entry is taken back if the binding fails.
	e.bindMu.Lock()
	ann, err := e.reserve(pod, req, args.Node)
	e.bindMu.Unlock()
	e.inflight.done(pod.UID) // assumed (or refused): filter calls waiting for it go on
	if err != nil {
		return err
	}
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Annotations: ann},
		Target:     v1.ObjectReference{Kind: "Node", Name: args.Node},
	}
	// Retries transient errors as the scheduler's DefaultBinder does; the
	// scheduler's httpTimeout ending the request does not cut a binding
	// short (a retry then finds the pod bound and answers success).
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bindTimeout)
	defer cancel()
	if err := schedutil.BindPod(bctx, e.client, binding); err != nil {
		e.mu.Lock()
		delete(e.assumed, pod.UID)
		e.mu.Unlock()
		return fmt.Errorf("%w: %s/%s to %s: %w", ErrBind, pod.Namespace, pod.Name, args.Node, err)
	}
	klog.FromContext(ctx).V(3).Info("Bound pod", "pod", klog.KObj(pod), "node", args.Node, "devices", ann[kubefmt.AnnotationGPUDevices])
	return nil
}

// reserve is the bind verb's commit point (call with bindMu held): the
// policy's required rules are checked on node with every pod the extender
// knows of counted, the pods it bound itself included (policyBind), the
// devices of a GPU pod are chosen, and the pod is assumed on the node. It
// returns the binding's annotations: the devices, and the rules that
// applied (kubefmt.AnnotationPolicy), as the plugin's Bind writes them.
func (e *Extender) reserve(pod *v1.Pod, req kubefmt.GPURequest, node string) (map[string]string, error) {
	refusal, explain := e.policyBind(pod, node)
	if refusal != "" {
		return nil, fmt.Errorf("%w: %s/%s on %s: %s", ErrBind, pod.Namespace, pod.Name, node, refusal)
	}
	var ann map[string]string
	if req.GPUs > 0 {
		dev, err := e.pickDevices(pod, node)
		if err != nil {
			return nil, fmt.Errorf("%w: choosing GPU devices for %s/%s on %s: %w", ErrBind, pod.Namespace, pod.Name, node, err)
		}
		ann = map[string]string{kubefmt.AnnotationGPUDevices: kubefmt.FormatDevices(dev)}
	}
	if explain != "" {
		if ann == nil {
			ann = map[string]string{}
		}
		ann[kubefmt.AnnotationPolicy] = explain
	}
	e.assume(pod, node, ann)
	return ann, nil
}

// bindTimeout bounds one binding's API calls (with retries).
const bindTimeout = 30 * time.Second

// assume counts pod on node (with the annotations its binding carries)
// until the source shows it or AssumeTTL passes.
func (e *Extender) assume(pod *v1.Pod, node string, ann map[string]string) {
	bound := pod.DeepCopy()
	bound.Spec.NodeName = node
	if bound.Annotations == nil {
		bound.Annotations = map[string]string{}
	}
	for k, v := range ann {
		bound.Annotations[k] = v
	}
	e.mu.Lock()
	if _, again := e.assumed[pod.UID]; !again || !slices.Contains(e.assumedOn[node], pod.UID) {
		e.assumedOn[node] = append(e.assumedOn[node], pod.UID)
	}
	e.assumed[pod.UID] = assumedPod{pod: bound, at: e.now()}
	e.mu.Unlock()
}

// serveBind decodes the binding arguments, binds, and answers the
// ExtenderBindingResult (200 with Error set on failure, as the scheduler
// expects; 400 for arguments it cannot read). A panic is contained and
// answered as an error result.
func (e *Extender) serveBind(w http.ResponseWriter, r *http.Request) (result string) {
	raw, err := e.readBody(w, r)
	var args *extenderv1.ExtenderBindingArgs
	if err == nil {
		args, err = decodeBindingArgs(raw)
	}
	if err != nil {
		http.Error(w, "edgesched extender: bind: "+err.Error(), http.StatusBadRequest)
		return extBadRequest
	}
	defer func() {
		if rec := recover(); rec != nil {
			serving.CountPanic()
			klog.FromContext(r.Context()).Error(nil, "Extender panic contained", "verb", "bind", "pod", klog.KRef(args.PodNamespace, args.PodName), "panic", rec)
			writeJSON(w, &extenderv1.ExtenderBindingResult{Error: fmt.Sprintf("edgesched extender: internal error (panic): %v", rec)})
			result = extPanic
		}
	}()
	res := e.Bind(r.Context(), args)
	writeJSON(w, res)
	if res.Error != "" {
		klog.FromContext(r.Context()).Error(nil, "Extender bind failed", "pod", klog.KRef(args.PodNamespace, args.PodName), "node", args.Node, "err", res.Error)
		return extError
	}
	return extOK
}

// pickDevices is the plugin's device choice on one node (the choice
// depends only on the node and the target workload), on the node as the
// extender sees it (assumed pods included).
func (e *Extender) pickDevices(pod *v1.Pod, nodeName string) ([]int, error) {
	n, ok := e.src.GetNode(nodeName)
	if !ok {
		return nil, fmt.Errorf("node %s unknown", nodeName)
	}
	v, err := e.p.Core().Fresh(e.nodeInfos([]*v1.Node{n}, pod.UID, false))
	if err != nil {
		return nil, err
	}
	return v.DevicesFor(pod, nodeName)
}

// podsOnNode is the source's pods of the node plus the pods the extender
// bound there that the source does not show yet; assumed pods the source
// shows there or older than AssumeTTL are forgotten. Only the node's own
// assumed pods are looked at (assumedOn): a request asks for every node,
// and a pass over every assumed pod per node cost 100 ms a request at
// 5,000 nodes and 200 bindings in flight. Call with e.mu held.
func (e *Extender) podsOnNode(name string) []*v1.Pod {
	pods := e.src.PodsOnNode(name)
	uids := e.assumedOn[name]
	if len(uids) == 0 { // most nodes: one map lookup, not a pass over every assumed pod
		return pods
	}
	now := e.now()
	kept := uids[:0]
	for _, uid := range uids {
		a, ok := e.assumed[uid]
		switch {
		case !ok || a.pod.Spec.NodeName != name: // forgotten (a failed binding)
		case now.Sub(a.at) > AssumeTTL || slices.ContainsFunc(pods, func(p *v1.Pod) bool { return p.UID == uid }):
			delete(e.assumed, uid)
		default:
			pods = append(pods, a.pod)
			kept = append(kept, uid)
		}
	}
	if len(kept) == 0 {
		delete(e.assumedOn, name)
	} else {
		e.assumedOn[name] = kept
	}
	return pods
}

// decodeBindingArgs reads ExtenderBindingArgs strictly: one JSON object
// with known fields, a pod name and namespace, a node.
func decodeBindingArgs(raw []byte) (*extenderv1.ExtenderBindingArgs, error) {
	var args extenderv1.ExtenderBindingArgs
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil {
		return nil, fmt.Errorf("binding arguments: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("binding arguments: more than one JSON value")
	}
	switch {
	case args.PodName == "" || args.PodNamespace == "":
		return nil, errors.New("binding arguments: PodName and PodNamespace are required")
	case args.Node == "":
		return nil, errors.New("binding arguments: Node is required")
	}
	return &args, nil
}
