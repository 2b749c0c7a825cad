package flclient

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/quant"
)

// damageObject rewrites an object's metadata in the model store (the
// last message on its meta subject, rolled up as the object store does)
// with edit applied to its JSON fields.
func damageObject(t *testing.T, f *feed, name string, edit func(map[string]any)) {
	t.Helper()
	ctx := context.Background()
	js := mustJS(t, f)
	st, err := js.Stream(ctx, "OBJ_"+federated.ModelBucket)
	if err != nil {
		t.Fatal(err)
	}
	subj := fmt.Sprintf("$O.%s.M.%s", federated.ModelBucket, base64.URLEncoding.EncodeToString([]byte(name)))
	m, err := st.GetLastMsgForSubject(ctx, subj)
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]any
	if err := json.Unmarshal(m.Data, &meta); err != nil {
		t.Fatal(err)
	}
	edit(meta)
	msg := nats.NewMsg(subj)
	msg.Header.Set("Nats-Rollup", "sub")
	if msg.Data, err = json.Marshal(meta); err != nil {
		t.Fatal(err)
	}
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedObjectRefusedNotRefetched: a model notice names an int8
// object whose store entry is damaged (its content does not hash to its
// digest) or oversized (its metadata claims more than
// quant.MaxArtifactBytes). That is not a fetch that may pass: the model
// is refused once as a bad artifact (reason "artifact", with the cause in
// the error) and not fetched again; a later good model installs. Before,
// both were refused as "fetch" and fetched again at every backoff (up to
// 16 MiB every few seconds over the WAN) until a newer notice came.
func TestDamagedObjectRefusedNotRefetched(t *testing.T) {
	key, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{2}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(map[string]any)
	}{
		{"digest mismatch", func(m map[string]any) {
			m["digest"] = objectDigest(make([]byte, 32))
		}},
		{"oversized", func(m map[string]any) { m["size"] = quant.MaxArtifactBytes + 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFeed(t)
			cfg := testConfig(t)
			cfg.ModelKeys = trusting(t, key)
			cfg.StatePoll, cfg.PublishTimeout = 50*time.Millisecond, time.Second
			cfg.BackoffMin, cfg.BackoffMax, cfg.ReportInterval = 10*time.Millisecond, 50*time.Millisecond, 0
			r := startClient(t, f, cfg)

			fa, qa := f.artifacts(5, 2, time.Now())
			fb, qb := encodeBoth(t, fa, qa, key)
			ctx := context.Background()
			if _, err := f.obj.PutBytes(ctx, "bad.float32.esa", fb); err != nil {
				t.Fatal(err)
			}
			if _, err := f.obj.PutBytes(ctx, "bad.int8.esa", qb); err != nil {
				t.Fatal(err)
			}
			damageObject(t, f, "bad.int8.esa", tc.edit)
			raw, _ := federated.Marshal(federated.ModelNotice{V: federated.ProtocolVersion, Version: 2, Round: 1,
				FloatModel: fa.Header.ModelID, FloatObject: "bad.float32.esa", Int8Model: qa.Header.ModelID, Int8Object: "bad.int8.esa", Published: time.Now().UTC()})
			if _, err := f.kv.Put(ctx, federated.KeyModel, raw); err != nil {
				t.Fatal(err)
			}
			waitFor(t, r.c, "the damaged model refused", func(s Status) bool { return s.Counters.RefusedModels > 0 })
			// a good version 3: once it is installed, the work loop is
			// done with version 2 (and would have set it to be retried)
			f.publish(offer{seed: 6, version: 3, created: time.Now(), signer: key})
			s := waitFor(t, r.c, "version 3 installed", func(s Status) bool { return s.Installed != nil && s.Installed.Version == 3 })
			if n := s.Counters.RefusedModelReasons[RefuseArtifact]; n != 1 || s.Counters.RefusedModels != 1 {
				t.Errorf("refusals %v (%d in all), want one %q refusal", s.Counters.RefusedModelReasons, s.Counters.RefusedModels, RefuseArtifact)
			}
			if n := r.c.retries.Load(); n != 0 {
				t.Errorf("the damaged model was set to be fetched again %d times, want never", n)
			}
		})
	}
}

// TestDamagedNoticeCounted: a model notice that does not decode (not
// JSON, or larger than federated.MaxControlBytes) is refused with the
// decoder's error and counted (reason "notice", the error as the last
// refusal), once per revision; a good notice after it installs. Before,
// it was only logged: the site's counters showed nothing wrong with its
// model feed.
func TestDamagedNoticeCounted(t *testing.T) {
	key, _, err := quant.GenerateKey(rand.NewChaCha8([32]byte{2}))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		notice []byte
		want   string // in the last refusal
	}{
		{"not JSON", []byte("\x00\x01 not a notice"), "model notice"},
		{"oversized", append([]byte(`{"v":1,"pad":"`), make([]byte, federated.MaxControlBytes)...), "exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFeed(t)
			cfg := testConfig(t)
			cfg.ModelKeys = trusting(t, key)
			cfg.StatePoll, cfg.ReportInterval = 50*time.Millisecond, 0
			r := startClient(t, f, cfg)
			if _, err := f.kv.Put(context.Background(), federated.KeyModel, tc.notice); err != nil {
				t.Fatal(err)
			}
			s := waitFor(t, r.c, "the damaged notice counted", func(s Status) bool { return s.Counters.RefusedModels > 0 })
			if s.Counters.RefusedModelReasons[RefuseNotice] != 1 || !strings.Contains(s.Counters.LastRefusal, tc.want) {
				t.Fatalf("refusals %v, last %q; want one %q refusal saying %q", s.Counters.RefusedModelReasons, s.Counters.LastRefusal, RefuseNotice, tc.want)
			}
			f.publish(offer{seed: 6, version: 3, created: time.Now(), signer: key})
			s = waitFor(t, r.c, "version 3 installed", func(s Status) bool { return s.Installed != nil && s.Installed.Version == 3 })
			// polled every 50 ms meanwhile: still counted once
			if s.Counters.RefusedModels != 1 {
				t.Fatalf("%d refusals (%v), want the damaged notice counted once", s.Counters.RefusedModels, s.Counters.RefusedModelReasons)
			}
		})
	}
}
