package coordinator

import (
	"context"
	"errors"
	"testing"

	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/quant"
)

// TestSubjectBinding: an update is judged against the subject it arrived
// on. site-a relaying site-b's genuine update on its own subject is
// refused (wrong_subject) without an ack and without touching site-b's
// record, so site-b's own copy on its subject is then accepted.
func TestSubjectBinding(t *testing.T) {
	ctx := context.Background()
	u := newUnit(t, 2)
	r, err := u.c.StartRound(ctx)
	if err != nil {
		t.Fatal(err)
	}
	genuine := u.update(t, "site-b", 1, r)
	ack, err := u.c.ProcessFrom(ctx, federated.UpdateSubjectPrefix+"site-a", genuine)
	if err != nil || ack != nil {
		t.Fatalf("relayed update: ack %+v, err %v; want no ack", ack, err)
	}
	rej, _ := u.c.Rejects()
	if rej[federated.ReasonSubject] != 1 {
		t.Fatalf("rejections %v, want one %s", rej, federated.ReasonSubject)
	}
	sites, _ := u.c.Sites()
	for _, s := range sites {
		if s.HWM != 0 || s.Accepted != 0 {
			t.Fatalf("a site record moved: %+v", s.Site)
		}
	}
	ack, err = u.c.ProcessFrom(ctx, federated.UpdateSubjectPrefix+"site-b", genuine)
	if err != nil || ack.Status != federated.Accepted {
		t.Fatalf("site-b's own copy: %+v %v", ack, err)
	}
}

// TestSigningKeyRotation: a coordinator restarted with a new signing key
// still reads the models its previous key signed when that key is in
// ModelKeys (so the current base model can be re-signed), refuses to
// start with its own key retired, and cannot read them once the previous
// key is retired there.
func TestSigningKeyRotation(t *testing.T) {
	ctx := context.Background()
	u := newUnit(t, 1)
	cfg := u.c.cfg
	oldKey := cfg.Signer
	u.c.Close()
	newKey := testKey(t, 77)
	overlap := &quant.Keyring{}
	for _, k := range []*quant.Signer{oldKey, newKey} {
		if _, err := overlap.Add(k.Public()); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Signer, cfg.ModelKeys = newKey, nil
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.FloatModel(1); !errors.Is(err, ErrStore) {
		t.Fatalf("version 1 without the old key: %v, want ErrStore", err)
	}
	c.Close()
	cfg.ModelKeys = overlap
	if c, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FloatModel(1); err != nil {
		t.Fatalf("version 1 during the overlap: %v", err)
	}
	// re-signs version 1's weights as version 2 with the new key (stored;
	// publishing it needs the bus, which this unit has not)
	rec, err := c.Rollback(ctx, 1)
	if rec == nil || rec.Version != 2 || (err != nil && err.Error() != "coordinator: not connected") {
		t.Fatalf("re-sign: %+v %v", rec, err)
	}
	c.Close()
	retired := &quant.Keyring{}
	if _, err := retired.Add(newKey.Public()); err != nil {
		t.Fatal(err)
	}
	if _, err := retired.Retire(oldKey.Public()); err != nil {
		t.Fatal(err)
	}
	cfg.ModelKeys = retired
	if c, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.FloatModel(2); err != nil {
		t.Fatalf("the re-signed version 2: %v", err)
	}
	if _, err := c.FloatModel(1); !errors.Is(err, ErrStore) {
		t.Fatalf("version 1 after retiring its key: %v, want ErrStore", err)
	}
	bad := cfg
	bad.ModelKeys = &quant.Keyring{}
	if _, err := bad.ModelKeys.Retire(newKey.Public()); err != nil {
		t.Fatal(err)
	}
	if err := bad.Validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("own key retired: %v, want ErrConfig", err)
	}
}
