package replica_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgesched/edgesched/coordinator/replica"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/internal/testutil/fltest"
)

// recordingObj records the deadline of the context an object is read
// with.
type recordingObj struct {
	jetstream.ObjectStore
	deadline time.Time
	set      bool
}

func (o *recordingObj) Get(ctx context.Context, name string, opts ...jetstream.GetObjectOpt) (jetstream.ObjectResult, error) {
	o.deadline, o.set = ctx.Deadline()
	return o.ObjectStore.Get(ctx, name, opts...)
}

// claim writes the pointer raw and returns a new active of epoch 9 that
// claimed it.
func claim(t *testing.T, js jetstream.JetStream, b *replica.Buckets, raw string) *replica.Active {
	t.Helper()
	ctx := context.Background()
	if _, err := b.HA.Put(ctx, replica.CheckpointKey, []byte(raw)); err != nil {
		t.Fatal(err)
	}
	a := replica.NewActive("b", 9, b, func() {}, slog.New(slog.DiscardHandler))
	if _, err := a.Fence(ctx, js, false); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestRestoreDeadline: a restore reads the checkpoint under a deadline of
// its own, scaled to the pointer's size: without one the client's default
// request timeout (5 s) cut the whole streamed read, so every standby
// failed on a checkpoint that takes longer. Here the client's default
// timeout is a nanosecond.
func TestRestoreDeadline(t *testing.T) {
	js, b, _ := setup(t)
	ctx := context.Background()
	data := make([]byte, 3<<20)
	if _, err := b.Obj.PutBytes(ctx, "e1-g1.db", data); err != nil {
		t.Fatal(err)
	}
	raw := `{"epoch":1,"replica":"a","object":"e1-g1.db","floor":0,"bytes":3145728,"taken":"2026-12-02T14:00:00Z"}`

	// the deadline given to the read
	rec := &recordingObj{ObjectStore: b.Obj}
	rb := *b
	rb.Obj = rec
	start := time.Now()
	got, err := restored(t, claim(t, js, &rb, raw))
	if err != nil || len(got) != len(data) {
		t.Fatalf("restore: %d bytes, %v", len(got), err)
	}
	if want := start.Add(replica.RestoreTimeout(int64(len(data)))); !rec.set || rec.deadline.Before(want) {
		t.Fatalf("object read with deadline %v (set %v), want one at least %v (RestoreTimeout)", rec.deadline, rec.set, want)
	}

	// a client whose default timeout would end the read at once
	nc := fltest.Connect(t, js.Conn().ConnectedUrl(), "impatient")
	impatient, err := jetstream.New(nc, jetstream.WithDefaultTimeout(time.Nanosecond))
	if err != nil {
		t.Fatal(err)
	}
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ib := *b
	if ib.Obj, err = impatient.ObjectStore(octx, federated.CheckpointBucket); err != nil {
		t.Fatal(err)
	}
	if got, err := restored(t, claim(t, js, &ib, raw)); err != nil || len(got) != len(data) {
		t.Fatalf("restore through a client whose default timeout is 1 ns: %d bytes, %v", len(got), err)
	}
}

// TestRestoreChecks: a restore checks the object against the pointer, its
// size and (a pointer that has one) its digest, and leaves the store file
// as it was when they differ; a pointer of the format before the nonce
// and the digest restores as before.
func TestRestoreChecks(t *testing.T) {
	js, b, _ := setup(t)
	ctx := context.Background()
	info, err := b.Obj.PutBytes(ctx, "e1-g3.db", []byte("checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.Obj.PutBytes(ctx, "other", []byte("checkpoinT"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		raw  string
		ok   bool
	}{
		{"pointer of the format before", `{"epoch":1,"replica":"a","object":"e1-g3.db","floor":4,"bytes":10,"taken":"2026-12-02T14:00:00Z"}`, true},
		{"with its digest", `{"epoch":1,"replica":"a","object":"e1-g3.db","floor":4,"bytes":10,"digest":"` + info.Digest + `","taken":"2026-12-02T14:00:00Z"}`, true},
		{"shorter than the pointer says", `{"epoch":1,"replica":"a","object":"e1-g3.db","floor":4,"bytes":11,"taken":"2026-12-02T14:00:00Z"}`, false},
		{"longer than the pointer says", `{"epoch":1,"replica":"a","object":"e1-g3.db","floor":4,"bytes":9,"taken":"2026-12-02T14:00:00Z"}`, false},
		{"another digest", `{"epoch":1,"replica":"a","object":"e1-g3.db","floor":4,"bytes":10,"digest":"` + other.Digest + `","taken":"2026-12-02T14:00:00Z"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := claim(t, js, b, tc.raw)
			path := filepath.Join(t.TempDir(), "coordinator.db")
			if err := os.WriteFile(path, []byte("local"), 0o600); err != nil {
				t.Fatal(err)
			}
			err := a.RestoreTo(ctx, path)
			got, _ := os.ReadFile(path)
			switch {
			case tc.ok && (err != nil || string(got) != "checkpoint"):
				t.Fatalf("restore: %v, file %q", err, got)
			case !tc.ok && (!errors.Is(err, replica.ErrCheckpointObject) || string(got) != "local"):
				t.Fatalf("restore: %v, file %q; want ErrCheckpointObject and the file left", err, got)
			}
		})
	}
}
