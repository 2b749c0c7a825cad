package edgeplugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// The bind verb (bindVerb). kube-scheduler hands an extender that binds
// the binding of every pod the extender is interested in (with
// managedResources: the pods that request one of them, here the GPU
// pods); the extender then plays the plugin's Reserve and Bind: it picks
// the pod's devices on the chosen node with the policy
// (AnnotationGPUDevices, FGD's device for a share) and binds with one
// pods/binding request that carries them, so the pod is bound and
// annotated in one write. The pod is then "assumed" on the node until the
// informer delivers it (or AssumeTTL passes), so the next decisions see
// its devices taken.

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
// that node when the pod needs GPUs and has none recorded. Failures come
// back in the result's Error.
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
	pod, err := e.client.CoreV1().Pods(args.PodNamespace).Get(ctx, args.PodName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("%w: get pod %s/%s: %w", ErrBind, args.PodNamespace, args.PodName, err)
	}
	if pod.UID != args.PodUID {
		return fmt.Errorf("%w: pod %s/%s is %s now, not %s (recreated)", ErrBind, args.PodNamespace, args.PodName, pod.UID, args.PodUID)
	}
	var ann map[string]string
	if _, recorded := pod.Annotations[AnnotationGPUDevices]; !recorded {
		req, err := podGPURequest(pod)
		if err != nil {
			return fmt.Errorf("%w: pod %s/%s: %w", ErrBind, pod.Namespace, pod.Name, err)
		}
		if req.GPUs > 0 {
			dev, err := e.pickDevices(pod, args.Node)
			if err != nil {
				return fmt.Errorf("%w: choosing GPU devices for %s/%s on %s: %w", ErrBind, pod.Namespace, pod.Name, args.Node, err)
			}
			ann = map[string]string{AnnotationGPUDevices: formatDevices(dev)}
		}
	}
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Annotations: ann},
		Target:     v1.ObjectReference{Kind: "Node", Name: args.Node},
	}
	if err := e.client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("%w: %s/%s to %s: %w", ErrBind, pod.Namespace, pod.Name, args.Node, err)
	}
	bound := pod.DeepCopy()
	bound.Spec.NodeName = args.Node
	if ann != nil {
		if bound.Annotations == nil {
			bound.Annotations = map[string]string{}
		}
		bound.Annotations[AnnotationGPUDevices] = ann[AnnotationGPUDevices]
	}
	e.mu.Lock()
	e.assumed[pod.UID] = assumedPod{pod: bound, at: e.now()}
	e.mu.Unlock()
	klog.FromContext(ctx).V(3).Info("Bound pod", "pod", klog.KObj(pod), "node", args.Node, "devices", ann[AnnotationGPUDevices])
	return nil
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
			metricPanics.Inc()
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
	sp, err := simPod(pod)
	if err != nil {
		return nil, err
	}
	v, err := e.p.conv.fresh(e.infos([]*v1.Node{n}, pod.UID))
	if err != nil {
		return nil, err
	}
	i, ok := v.index[nodeName]
	if !ok {
		return nil, fmt.Errorf("node %s not modelled", nodeName)
	}
	if !v.st.Feasible(i, &sp) {
		return nil, errors.New("the pod does not fit the node's devices")
	}
	d := v.ext.PickGPUs(v.st, &sp, i, nil)
	if int32(len(d)) != sp.GPUs {
		return nil, errors.New("no device choice")
	}
	return append([]int(nil), d...), nil
}

// podsOnNode is the source's pods of the node plus the pods the extender
// bound there that the source does not show yet; assumed pods the source
// shows (anywhere) or older than AssumeTTL are forgotten. Call with e.mu
// held.
func (e *Extender) podsOnNode(name string) []*v1.Pod {
	pods := e.src.PodsOnNode(name)
	if len(e.assumed) == 0 {
		return pods
	}
	seen := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		seen[p.UID] = true
	}
	now := e.now()
	for uid, a := range e.assumed {
		switch {
		case seen[uid] || now.Sub(a.at) > AssumeTTL:
			delete(e.assumed, uid)
		case a.pod.Spec.NodeName == name:
			pods = append(pods, a.pod)
		}
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
