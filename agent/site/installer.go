package site

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"

	"github.com/edgesched/edgesched/agent/flclient"
	"github.com/edgesched/edgesched/internal/backoff"
	"github.com/edgesched/edgesched/internal/kube"
	"github.com/edgesched/edgesched/kubefmt"
	"github.com/edgesched/edgesched/quant"
)

// Annotations the installer sets on the model ConfigMap (for people; the
// plugin reads the artifact itself).
const (
	AnnotationModelVersion = "edgesched.io/model-version"
	AnnotationModelID      = "edgesched.io/model-id"
	AnnotationInstalledBy  = "edgesched.io/installed-by"
)

// Installer errors.
var (
	// ErrUntrusted: the artifact does not verify against the trusted
	// keys (unsigned, unknown key, bad signature, malformed) or is not
	// an int8 model.
	ErrUntrusted = errors.New("site: model refused")
	// ErrOlder: the ConfigMap already holds a verified model of a higher
	// version (or another model of the same version): it is kept.
	ErrOlder = errors.New("site: the ConfigMap holds a newer model")
)

// ModelSource is where the installer takes verified models from
// (flclient.Client's install path). InstalledInt8Bytes returns an error
// wrapping flclient.ErrNoModel before the first install; any other error
// is a failure (logged, counted, retried).
type ModelSource interface {
	InstalledInt8Bytes() (*flclient.Installed, []byte, error)
}

var _ ModelSource = (*flclient.Client)(nil)

// InstallerConfig configures an Installer. Start from
// DefaultInstallerConfig.
type InstallerConfig struct {
	// Client writes the ConfigMap (get/create/update on it):
	// kube.NewForConfig's clients, or a clientset adapted by
	// kube/kubeclientset. Required.
	Client kube.Interface
	// Namespace, Name and Key locate the artifact: what EdgePolicy's args
	// modelConfigMap (namespace/name) and modelConfigMapKey say (defaults
	// edgesched-system, edgesched-model, model.esa).
	Namespace, Name, Key string
	// Keys are the trusted model-signing keys; nothing else is written.
	Keys *quant.Keyring
	// Source gives the FL client's installed model.
	Source ModelSource
	// Resync is how often the installed model is checked against the
	// ConfigMap besides Notify (default 1m); failed writes retry with a
	// backoff from BackoffMin to BackoffMax (defaults 1s, 30s).
	Resync                 time.Duration
	BackoffMin, BackoffMax time.Duration
	// Identity names the writer in an annotation (the node name).
	Identity string
	// Registerer receives edgesched_site_model_installs_total{result}
	// (nil: not registered).
	Registerer prometheus.Registerer
	Seed       uint64
	Logger     *slog.Logger
}

// DefaultInstallerConfig returns the defaults.
func DefaultInstallerConfig() InstallerConfig {
	return InstallerConfig{Namespace: kubefmt.DefaultModelConfigMapNamespace, Name: kubefmt.DefaultModelConfigMapName,
		Key: kubefmt.DefaultModelConfigMapKey, Resync: time.Minute, BackoffMin: time.Second, BackoffMax: 30 * time.Second}
}

// Validate names the first bad field.
func (c *InstallerConfig) Validate() error {
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: installer Client required", ErrConfig)
	case len(validation.IsDNS1123Label(c.Namespace)) > 0:
		return fmt.Errorf("%w: installer Namespace %q", ErrConfig, c.Namespace)
	case len(validation.IsDNS1123Subdomain(c.Name)) > 0:
		return fmt.Errorf("%w: installer Name %q", ErrConfig, c.Name)
	case len(validation.IsConfigMapKey(c.Key)) > 0:
		return fmt.Errorf("%w: installer Key %q", ErrConfig, c.Key)
	case c.Keys == nil || len(c.Keys.IDs()) == 0:
		return fmt.Errorf("%w: installer Keys required (the trusted model-signing keys)", ErrConfig)
	case c.Source == nil:
		return fmt.Errorf("%w: installer Source required", ErrConfig)
	case c.Resync <= 0 || c.BackoffMin <= 0 || c.BackoffMax < c.BackoffMin:
		return fmt.Errorf("%w: installer Resync and backoff must be positive", ErrConfig)
	}
	return nil
}

// Installer is the leader-only component that writes the FL client's
// verified model into the ConfigMap EdgePolicy watches. It verifies the
// artifact again against its own trusted keys, never replaces a verified
// model of a higher version, and writes with optimistic concurrency
// (resourceVersion), so two writers cannot interleave. Notify is safe for
// concurrent use; Run once per term.
type Installer struct {
	cfg      InstallerConfig
	log      *slog.Logger
	notify   chan struct{}
	installs *prometheus.CounterVec
}

var _ Component = (*Installer)(nil)

// NewInstaller checks cfg and registers the metric.
func NewInstaller(cfg InstallerConfig) (*Installer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	i := &Installer{cfg: cfg, log: log.With("configmap", cfg.Namespace+"/"+cfg.Name, "key", cfg.Key), notify: make(chan struct{}, 1),
		installs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "edgesched", Subsystem: "site", Name: "model_installs_total",
			Help: "Model installs into the scheduler's ConfigMap by result (created, updated, unchanged, older, refused, failed; source_error: the FL client's installed model could not be read)."}, []string{"result"})}
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(i.installs); err != nil {
			return nil, fmt.Errorf("register installer metrics: %w", err)
		}
	}
	return i, nil
}

// Notify asks the installer to check the installed model now (register
// it with flclient.Client.OnModel).
func (i *Installer) Notify() {
	select {
	case i.notify <- struct{}{}:
	default:
	}
}

// Run installs the source's model now, on every Notify and every Resync,
// until ctx ends.
func (i *Installer) Run(ctx context.Context) error {
	b := backoff.New(i.cfg.BackoffMin, i.cfg.BackoffMax, i.cfg.Seed^0x1257)
	t := time.NewTicker(i.cfg.Resync)
	defer t.Stop()
	for {
		err := i.sync(ctx)
		wait := (<-chan time.Time)(nil)
		if err != nil && ctx.Err() == nil {
			i.log.Warn("model not written to the ConfigMap; retrying", "err", err)
			wait = time.After(b.Next())
		} else {
			b.Reset()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-i.notify:
		case <-t.C:
		case <-wait:
		}
	}
}

// sync installs the source's model; a model the ConfigMap already has in
// a newer version is not an error, nor is no model yet
// (flclient.ErrNoModel). Any other failure to read the source's model is
// counted (source_error, or refused when the record was read but its
// artifact does not verify) and returned, so Run logs it and retries with
// backoff.
func (i *Installer) sync(ctx context.Context) error {
	inst, raw, err := i.cfg.Source.InstalledInt8Bytes()
	switch {
	case errors.Is(err, flclient.ErrNoModel):
		i.log.Debug("no model installed yet")
		return nil
	case err != nil && inst == nil:
		i.installs.WithLabelValues(resultSourceError).Inc()
		return fmt.Errorf("read the installed model: %w", err)
	case err != nil:
		i.installs.WithLabelValues("refused").Inc()
		return fmt.Errorf("installed model version %d: %w", inst.Version, err)
	}
	res, err := i.Install(ctx, raw)
	switch {
	case errors.Is(err, ErrOlder):
		i.log.Debug("the ConfigMap holds a newer model", "ours", inst.Version, "err", err)
		return nil
	case err != nil:
		return err
	case res.Action != ActionUnchanged:
		i.log.Info("model written to the ConfigMap", "version", res.Version, "model", quant.ShortID(res.ModelID), "action", res.Action)
	}
	return nil
}

// resultSourceError labels installs_total when the source's installed
// model could not be read.
const resultSourceError = "source_error"

// Install actions.
const (
	ActionCreated   = "created"
	ActionUpdated   = "updated"
	ActionUnchanged = "unchanged"
)

// InstallResult says what Install did.
type InstallResult struct {
	Version uint64
	ModelID string
	Action  string
}

// Install verifies raw (a signed int8 artifact, against Keys) and writes
// it into the ConfigMap (binaryData Key), creating it when absent. It
// refuses (ErrOlder) when the ConfigMap holds a verified model of a
// higher version, or another model of the same version; an artifact
// there that does not verify is replaced (the plugin would refuse it
// anyway) and logged. Conflicting writes are retried from a fresh read.
func (i *Installer) Install(ctx context.Context, raw []byte) (InstallResult, error) {
	a, err := quant.Decode(raw, quant.DecodeOptions{Keys: i.cfg.Keys})
	if err == nil && a.Header.DType != quant.Int8 {
		err = fmt.Errorf("a %s artifact, the scheduler runs int8", a.Header.DType)
	}
	if err != nil {
		i.installs.WithLabelValues("refused").Inc()
		return InstallResult{}, fmt.Errorf("%w: %w", ErrUntrusted, err)
	}
	res := InstallResult{Version: a.Header.Version, ModelID: a.Header.ModelID}
	cms := i.cfg.Client.ConfigMaps(i.cfg.Namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, i.cfg.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: i.cfg.Name, Namespace: i.cfg.Namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "edge-agent"}}}
			i.stamp(cm, raw, &a.Header)
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(v1.Resource("configmaps"), i.cfg.Name, err)
			}
			res.Action = ActionCreated
			return err
		}
		if err != nil {
			return err
		}
		cur, ok := cm.BinaryData[i.cfg.Key]
		if !ok {
			if d, ok2 := cm.Data[i.cfg.Key]; ok2 {
				cur, ok = []byte(d), true
			}
		}
		if ok {
			old, derr := quant.Decode(cur, quant.DecodeOptions{Keys: i.cfg.Keys})
			switch {
			case derr != nil:
				i.log.Warn("the ConfigMap's model does not verify: replacing it", "err", derr)
			case old.Header.ModelID == a.Header.ModelID && old.Header.Version == a.Header.Version:
				res.Action = ActionUnchanged
				return nil
			default:
				if err := quant.CheckNewer(&old.Header, &a.Header); err != nil {
					return fmt.Errorf("%w: %w", ErrOlder, err)
				}
			}
		}
		cm = cm.DeepCopy()
		i.stamp(cm, raw, &a.Header)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		res.Action = ActionUpdated
		return err
	})
	switch {
	case errors.Is(err, ErrOlder):
		i.installs.WithLabelValues("older").Inc()
		return res, err
	case err != nil:
		i.installs.WithLabelValues("failed").Inc()
		return res, fmt.Errorf("write %s/%s: %w", i.cfg.Namespace, i.cfg.Name, err)
	}
	i.installs.WithLabelValues(res.Action).Inc()
	return res, nil
}

// stamp puts the artifact and its annotations on cm.
func (i *Installer) stamp(cm *v1.ConfigMap, raw []byte, h *quant.Header) {
	if cm.BinaryData == nil {
		cm.BinaryData = map[string][]byte{}
	}
	cm.BinaryData[i.cfg.Key] = raw
	delete(cm.Data, i.cfg.Key) // one copy: the plugin reads binaryData first
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[AnnotationModelVersion] = strconv.FormatUint(h.Version, 10)
	cm.Annotations[AnnotationModelID] = h.ModelID
	if i.cfg.Identity != "" {
		cm.Annotations[AnnotationInstalledBy] = i.cfg.Identity
	}
}
