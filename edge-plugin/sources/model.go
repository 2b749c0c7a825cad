package sources

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"

	"github.com/edgesched/edgesched/policy"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/int8net"
	"github.com/edgesched/edgesched/quant/sanity"
)

// Model is one installed int8 policy: immutable after install, shared by
// every scheduling cycle that started while it was current.
type Model struct {
	Header quant.Header
	net    *int8net.Net
	// scorers hands each cycle its own scratch (an int8net.Scorer is not
	// safe for concurrent use; the Net is).
	scorers sync.Pool
	// tel, arch, emission: the network reads a telemetry feature, an
	// architecture share, emission (true when it cannot tell: a scorer
	// installed without its int8 net).
	tel, arch, emission bool
}

// ReadsTelemetry reports whether the model reads a telemetry feature (the
// score cache keys on the nodes' telemetry steps only then).
func (m *Model) ReadsTelemetry() bool { return m.tel }

// ReadsArch reports whether the model reads an architecture share
// (policy.ArchShareFeatures: the score cache keys on their steps only
// then).
func (m *Model) ReadsArch() bool { return m.arch }

// ReadsEmission reports whether the model reads emission (the view's
// extractor computes it only then: policy.Extractor.UseEmission).
func (m *Model) ReadsEmission() bool { return m.emission }

// AffinityEncoder is the ID of the GraphSAGE weights whose partners the
// model's dep_affinity reads: those its artifact carries, else the
// shipped pair (quant.Artifact.AffinityEncoder).
func (m *Model) AffinityEncoder() string {
	if m.Header.Sage != nil {
		return m.Header.Sage.ID
	}
	return policy.AffinityEncoder
}

// netReads reports whether n reads one of the features
// (policy.TelemetryFeatures, policy.ArchShareFeatures), as policy.Learned
// decides for its own cache.
func netReads(n *int8net.Net, features []int) bool {
	for _, i := range features {
		if n.ReadsInput(i) {
			return true
		}
	}
	return false
}

func NewModel(h quant.Header, newScorer func() policy.Scorer) *Model {
	m := &Model{Header: h, tel: true, arch: true, emission: true}
	m.scorers.New = func() any { return newScorer() }
	return m
}

func (m *Model) GetScorer() policy.Scorer  { return m.scorers.Get().(policy.Scorer) }
func (m *Model) PutScorer(s policy.Scorer) { m.scorers.Put(s) }

// ModelStore holds the current model behind an atomic pointer: readers
// never lock and never wait for a load; a load verifies everything before
// one atomic store, so a refused file leaves the last-known-good model in
// place.
type ModelStore struct {
	keys *quant.Keyring
	cur  atomic.Pointer[Model]
	// mu serialises installs (the version check and the store).
	mu sync.Mutex
	// lastRaw and lastStat are the bytes (any source) and the file stamp
	// (LoadFile) last settled: installed, or refused for good. Bytes
	// refused for a reason that may pass (RefusalError.Transient) are not
	// recorded, so the sources offer them again.
	lastRaw  []byte
	lastStat fileStamp
	// trust is the rollback floor and age limit (model_trust.go).
	trust modelTrust
}

type fileStamp struct {
	size int64
	mod  time.Time
}

// NewModelStore returns an empty store trusting keys.
func NewModelStore(keys *quant.Keyring) *ModelStore { return &ModelStore{keys: keys} }

// Current returns the model in use, or nil.
func (s *ModelStore) Current() *Model { return s.cur.Load() }

// Refusal reasons: RefusalError.Reason and the label values of
// model_refusals_total.
const (
	RefuseRead      = "read"
	RefuseSignature = "signature"
	RefuseArtifact  = "artifact"
	RefuseRollback  = "rollback"
	RefuseInt8      = "int8"
)

// Install verifies raw (signature against the keyring, artifact checks,
// int8 dtype, schema), refuses versions that do not increase, and swaps it
// in. It returns whether a new model was installed.
func (s *ModelStore) Install(raw []byte) (bool, error) {
	a, err := quant.Decode(raw, quant.DecodeOptions{Keys: s.keys})
	if err != nil {
		reason := RefuseArtifact
		if errors.Is(err, quant.ErrSignature) || errors.Is(err, quant.ErrUnsigned) || errors.Is(err, quant.ErrUnknownKey) {
			reason = RefuseSignature
		}
		return false, s.refuse(reason, err)
	}
	net, err := int8net.New(a)
	if err != nil {
		return false, s.refuse(RefuseInt8, err)
	}
	if err := sanity.CheckArtifact(a); err != nil { // finite, not all tied (docs/security.md)
		return false, s.refuse("sanity", err)
	}
	return s.installHeader(a.Header, func() policy.Scorer { return net.Scorer() }, net)
}

// installHeader swaps in a verified model.
func (s *ModelStore) installHeader(h quant.Header, newScorer func() policy.Scorer, net *int8net.Net) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.cur.Load()
	if cur != nil {
		if err := quant.CheckNewer(&cur.Header, &h); err != nil {
			return false, s.refuse(RefuseRollback, err)
		}
		if cur.Header.ModelID == h.ModelID && cur.Header.Version == h.Version {
			return false, nil // the same model again
		}
	}
	if err := s.checkTrust(&h); err != nil {
		return false, err
	}
	if err := s.raiseFloor(&h); err != nil {
		return false, err
	}
	m := NewModel(h, newScorer)
	m.net = net
	m.tel = net == nil || netReads(net, policy.TelemetryFeatures)
	m.arch = net == nil || netReads(net, policy.ArchShareFeatures)
	m.emission = net == nil || netReads(net, []int{policy.EmissionFeature})
	// Metrics first: whoever sees the new model also sees them counted.
	metricSwaps.Inc()
	if cur != nil {
		metricModelVersion.DeleteLabelValues(quant.ShortID(cur.Header.ModelID))
	}
	metricModelVersion.WithLabelValues(quant.ShortID(h.ModelID)).Set(float64(h.Version))
	s.cur.Store(m)
	return true, nil
}

func (s *ModelStore) refuse(reason string, err error) error {
	metricRefusals.WithLabelValues(reason).Inc()
	return &RefusalError{Reason: reason, Err: err}
}

// RefusalError is a refused model: Reason is the refusals metric's label
// (read, signature, artifact, rollback, int8, stale, state).
type RefusalError struct {
	Reason string
	Err    error
}

func (e *RefusalError) Error() string {
	return fmt.Sprintf("edgeplugin: model refused (%s): %v", e.Reason, e.Err)
}

func (e *RefusalError) Unwrap() error { return e.Err }

// Transient reports whether the refusal may pass with the same bytes:
// they could not be read, or the rollback floor could not be recorded
// (reason state: the state file locked by another holder for longer than
// its open timeout, a full disk). The sources offer such bytes again (the
// file poller on its next poll, the ConfigMap source after a backoff);
// every other refusal is final for the bytes refused.
func (e *RefusalError) Transient() bool { return e.Reason == RefuseRead || e.Reason == RefuseState }

// transient reports whether err is a transient refusal.
func transient(err error) bool {
	var re *RefusalError
	return errors.As(err, &re) && re.Transient()
}

// installChanged is the verify-and-swap path of every model source (the
// file poller and the ConfigMap watch): raw is installed (Install) unless
// it is the byte string last settled (installed or refused for good), so a
// source that sees the same bytes again neither re-verifies nor re-counts
// a refusal. Bytes refused for a transient reason are not settled: the
// next offer of the same bytes tries again (and counts again).
func (s *ModelStore) installChanged(raw []byte) (bool, error) {
	s.mu.Lock()
	unchanged := s.lastRaw != nil && bytes.Equal(raw, s.lastRaw)
	s.mu.Unlock()
	if unchanged {
		return false, nil
	}
	ok, err := s.Install(raw)
	if !transient(err) {
		s.mu.Lock()
		s.lastRaw = raw
		s.mu.Unlock()
	}
	return ok, err
}

// LoadFile reads path and installs it unless its bytes are the ones last
// settled. A missing or unreadable file is a refusal. The file's stamp
// (size, modification time) is recorded only once its bytes settled, so
// after a transient refusal the next call reads and tries it again.
func (s *ModelStore) LoadFile(path string) (bool, error) {
	st, err := os.Stat(path)
	if err != nil {
		return false, s.refuse(RefuseRead, err)
	}
	stamp := fileStamp{size: st.Size(), mod: st.ModTime()}
	s.mu.Lock()
	same := stamp == s.lastStat
	s.mu.Unlock()
	if same {
		return false, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return false, s.refuse(RefuseRead, err)
	}
	raw, err := io.ReadAll(io.LimitReader(f, quant.MaxArtifactBytes+1))
	f.Close()
	if err != nil {
		return false, s.refuse(RefuseRead, err)
	}
	ok, err := s.installChanged(raw)
	if !transient(err) {
		s.mu.Lock()
		s.lastStat = stamp
		s.mu.Unlock()
	}
	return ok, err
}

// Watch polls path every interval until ctx ends, installing new models
// and logging refusals. A transient refusal (RefusalError.Transient) is
// tried again on every poll and counted each time in
// model_refusals_total; it is logged as an error when it starts (or its
// reason changes) and at verbosity 2 while it lasts. It runs on its own
// goroutine: scheduling never waits for it.
func (s *ModelStore) Watch(ctx context.Context, path string, interval time.Duration) {
	logger := klog.FromContext(ctx).WithValues("plugin", Owner, "model", path)
	t := time.NewTicker(interval)
	defer t.Stop()
	var failing string // the reason of the transient refusal being retried
	attempts := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, err := s.LoadFile(path)
		var re *RefusalError
		switch {
		case err != nil && errors.As(err, &re) && re.Transient():
			attempts++
			if re.Reason == failing {
				logger.V(2).Info("Model still refused; retrying on the next poll", "reason", re.Reason, "attempts", attempts, "err", err)
				continue
			}
			failing, attempts = re.Reason, 1
			logger.Error(err, "Keeping the previous model; retrying on every poll", "reason", re.Reason)
			continue
		case err != nil:
			logger.Error(err, "Keeping the previous model")
		case ok:
			h := s.Current().Header
			logger.Info("Installed model", "version", h.Version, "modelID", quant.ShortID(h.ModelID), "int8Kernel", int8net.Kernel())
		}
		failing, attempts = "", 0
	}
}

// InstallUnverified installs a model whose scorers newScorer makes, with
// header h, as Install does after verifying an artifact: rollback, age and
// floor checks apply, the signature and int8 checks do not (there is no
// artifact). The caller vouches for the model: tests and benchmarks inject
// scorers through it; nothing that reads a file or a ConfigMap calls it.
func (s *ModelStore) InstallUnverified(h quant.Header, newScorer func() policy.Scorer) (bool, error) {
	return s.installHeader(h, newScorer, nil)
}
