package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Interface is the agent's view of the API: one getter per resource it
// uses. *Clients implements it; so does kubeclientset.Wrap of a client-go
// clientset.
type Interface interface {
	Nodes() NodeInterface
	Pods(namespace string) PodInterface
	ConfigMaps(namespace string) ConfigMapInterface
	Leases(namespace string) LeaseInterface
}

// NodeInterface is what the agent does with Nodes: read them, list and
// watch them (the site trace) and patch its own (annotations).
type NodeInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}

// PodInterface lists and watches Pods (the site trace).
type PodInterface interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// ConfigMapInterface reads and writes ConfigMaps (the site ledger and
// handovers, the model ConfigMap).
type ConfigMapInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.ConfigMap, error)
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.ConfigMapList, error)
	Create(ctx context.Context, cm *corev1.ConfigMap, opts metav1.CreateOptions) (*corev1.ConfigMap, error)
	Update(ctx context.Context, cm *corev1.ConfigMap, opts metav1.UpdateOptions) (*corev1.ConfigMap, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// LeaseInterface reads and writes Leases (the site leader election).
type LeaseInterface interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// ErrConfig wraps a rest.Config NewForConfig cannot use.
var ErrConfig = errors.New("kube: bad client config")

// Clients are the agent's API clients: one REST client per API group
// version on a shared HTTP client. Create with NewForConfig.
type Clients struct {
	core, coordination *rest.RESTClient
	params             runtime.ParameterCodec
}

var _ Interface = (*Clients)(nil)

// NewForConfig builds the clients from rc (e.g. rest.InClusterConfig or
// clientcmd's), as client-go's clientset would: one HTTP client for both
// groups and, when rc sets QPS without a RateLimiter, one token-bucket
// limiter shared by both (with QPS 0, each REST client has client-go's
// default limiter). The clients prefer protobuf and fall back to JSON as
// client-go's typed clients do. rc is not modified.
func NewForConfig(rc *rest.Config) (*Clients, error) {
	if rc == nil {
		return nil, fmt.Errorf("%w: nil rest.Config", ErrConfig)
	}
	sch := runtime.NewScheme()
	// the meta types every group version shares (options, Status, WatchEvent)
	metav1.AddToGroupVersion(sch, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, coordinationv1.AddToScheme} {
		if err := add(sch); err != nil {
			return nil, fmt.Errorf("kube scheme: %w", err)
		}
	}
	codecs := serializer.NewCodecFactory(sch)
	c := *rc
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if c.RateLimiter == nil && c.QPS > 0 {
		if c.Burst <= 0 {
			return nil, fmt.Errorf("%w: burst %d must be positive with QPS %v", ErrConfig, c.Burst, c.QPS)
		}
		c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(c.QPS, c.Burst)
	}
	hc, err := rest.HTTPClientFor(&c)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	ns := rest.CodecFactoryForGeneratedClient(sch, codecs).WithoutConversion()
	group := func(gv schema.GroupVersion, apiPath string) (*rest.RESTClient, error) {
		g := c
		g.GroupVersion, g.APIPath, g.NegotiatedSerializer = &gv, apiPath, ns
		rc, err := rest.RESTClientForConfigAndClient(&g, hc)
		if err != nil {
			return nil, fmt.Errorf("%w: %s client: %w", ErrConfig, gv, err)
		}
		return rc, nil
	}
	core, err := group(corev1.SchemeGroupVersion, "/api")
	if err != nil {
		return nil, err
	}
	coordination, err := group(coordinationv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	return &Clients{core: core, coordination: coordination, params: runtime.NewParameterCodec(sch)}, nil
}

// Nodes returns the Node client.
func (c *Clients) Nodes() NodeInterface {
	return &resource[*corev1.Node, *corev1.NodeList]{c.core, c.params, "nodes", "",
		func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} }}
}

// Pods returns the Pod client of namespace ("": all namespaces).
func (c *Clients) Pods(namespace string) PodInterface {
	return &resource[*corev1.Pod, *corev1.PodList]{c.core, c.params, "pods", namespace,
		func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} }}
}

// ConfigMaps returns the ConfigMap client of namespace.
func (c *Clients) ConfigMaps(namespace string) ConfigMapInterface {
	return &resource[*corev1.ConfigMap, *corev1.ConfigMapList]{c.core, c.params, "configmaps", namespace,
		func() *corev1.ConfigMap { return &corev1.ConfigMap{} }, func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} }}
}

// Leases returns the Lease client of namespace.
func (c *Clients) Leases(namespace string) LeaseInterface {
	return &resource[*coordinationv1.Lease, *coordinationv1.LeaseList]{c.coordination, c.params, "leases", namespace,
		func() *coordinationv1.Lease { return &coordinationv1.Lease{} }, func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} }}
}

// object is an API object of a resource.
type object interface {
	runtime.Object
	GetName() string
}

// resource is one resource's client (in one namespace, or cluster-wide
// when namespace is ""): the requests client-go's generated typed clients
// make, preferring protobuf. It is written here rather than taken from
// client-go's gentype package, which imports client-go's testing package
// (and with it server-side apply's OpenAPI machinery) into the binary.
type resource[T object, L runtime.Object] struct {
	client          *rest.RESTClient
	params          runtime.ParameterCodec
	name, namespace string
	newObj          func() T
	newList         func() L
}

func (r *resource[T, L]) req(verb *rest.Request) *rest.Request {
	return verb.UseProtobufAsDefaultIfPreferred(true).NamespaceIfScoped(r.namespace, r.namespace != "").Resource(r.name)
}

func timeout(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

func (r *resource[T, L]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	out := r.newObj()
	err := r.req(r.client.Get()).Name(name).VersionedParams(&opts, r.params).Do(ctx).Into(out)
	return out, err
}

func (r *resource[T, L]) List(ctx context.Context, opts metav1.ListOptions) (L, error) {
	out := r.newList()
	err := r.req(r.client.Get()).VersionedParams(&opts, r.params).Timeout(timeout(opts)).Do(ctx).Into(out)
	return out, err
}

func (r *resource[T, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.req(r.client.Get()).VersionedParams(&opts, r.params).Timeout(timeout(opts)).Watch(ctx)
}

func (r *resource[T, L]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	out := r.newObj()
	err := r.req(r.client.Post()).VersionedParams(&opts, r.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r *resource[T, L]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	out := r.newObj()
	err := r.req(r.client.Put()).Name(obj.GetName()).VersionedParams(&opts, r.params).Body(obj).Do(ctx).Into(out)
	return out, err
}

func (r *resource[T, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.req(r.client.Delete()).Name(name).Body(&opts).Do(ctx).Error()
}

func (r *resource[T, L]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	out := r.newObj()
	err := r.req(r.client.Patch(pt)).Name(name).SubResource(subresources...).VersionedParams(&opts, r.params).Body(data).Do(ctx).Into(out)
	return out, err
}
