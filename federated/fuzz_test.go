package federated_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	. "github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/esu"
)

// addSeeds adds each valid message and a few mutations of it.
func addSeeds(f *testing.F, valid ...[]byte) {
	for _, b := range valid {
		f.Add(b)
		f.Add(b[:len(b)/2])
		f.Add(b[:len(b)-1])
		f.Add(append(bytes.Clone(b), '}'))
		f.Add(append(bytes.Clone(b), " 1"...))
	}
	f.Add([]byte{})
	f.Add([]byte("null"))
}

// controlRoundTrip is the property shared by the JSON decoders: a refusal
// wraps ErrMessage and returns nothing; an accepted message re-encodes
// (Marshal) to bytes that decode to an equal value, and encoding that
// value again gives the same bytes.
func controlRoundTrip[T any](t *testing.T, b []byte, decode func([]byte) (*T, error), equal func(a, b T) bool) {
	v, err := decode(b)
	if err != nil {
		if v != nil || !errors.Is(err, ErrMessage) {
			t.Fatalf("refusal %v (value %v) does not wrap ErrMessage or returned a value", err, v)
		}
		return
	}
	if len(b) > MaxControlBytes {
		t.Fatalf("accepted %d bytes, over the %d cap", len(b), MaxControlBytes)
	}
	b2, err := Marshal(v)
	if err != nil {
		t.Fatalf("decoded %+v does not re-encode: %v", *v, err)
	}
	v2, err := decode(b2)
	if err != nil {
		// JSON escaping may grow a message that was near the cap.
		if len(b2) > MaxControlBytes && errors.Is(err, ErrMessage) {
			return
		}
		t.Fatalf("re-encoded %s refused: %v", b2, err)
	}
	if !equal(*v, *v2) {
		t.Fatalf("round trip changed the message:\n first %+v\nsecond %+v", *v, *v2)
	}
	if b3, err := Marshal(v2); err != nil || !bytes.Equal(b2, b3) {
		t.Fatalf("encoding is not a fixed point:\n%s\n%s (%v)", b2, b3, err)
	}
}

func FuzzDecodeAnnouncement(f *testing.F) {
	async := sampleAnnouncement()
	async.Mode, async.Local.ProxMu = Async, 0.5
	addSeeds(f, mustMarshal(f, sampleAnnouncement()), mustMarshal(f, async))
	f.Add(mutateJSON(f, sampleAnnouncement(), set("extra", 1)))
	f.Add(mutateJSON(f, sampleAnnouncement(), set("opened", "2025-03-01T12:00:00.5+05:30")))
	f.Add(mutateJSON(f, sampleAnnouncement(), set("base_object", "<&>\u2028\xff")))
	f.Add(mustMarshal(f, sampleNotice()))
	f.Fuzz(func(t *testing.T, b []byte) {
		controlRoundTrip(t, b, DecodeAnnouncement, announcementsEqual)
	})
}

func FuzzDecodeModelNotice(f *testing.F) {
	addSeeds(f, mustMarshal(f, sampleNotice()))
	f.Add(mutateJSON(f, sampleNotice(), set("published", "0000-01-01T00:00:00-23:59")))
	f.Add(mutateJSON(f, sampleNotice(), set("float_object", "\\u0000\\ud800")))
	f.Add(mustMarshal(f, sampleAck()))
	f.Fuzz(func(t *testing.T, b []byte) {
		controlRoundTrip(t, b, DecodeModelNotice, noticesEqual)
	})
}

func FuzzDecodeAck(f *testing.F) {
	rejected := sampleAck()
	rejected.Status, rejected.Reason = Rejected, ReasonSignature
	addSeeds(f, mustMarshal(f, sampleAck()), mustMarshal(f, rejected))
	f.Add([]byte(`{"V":1,"SITE":"a","Seq":1,"status":"duplicate","v":1}`))
	f.Add(mustMarshal(f, sampleAnnouncement()))
	f.Fuzz(func(t *testing.T, b []byte) {
		controlRoundTrip(t, b, DecodeAck, func(a, b Ack) bool { return a == b })
	})
}

func FuzzDecodeSiteReport(f *testing.F) {
	r := SiteReport{V: ProtocolVersion, Site: "site-a", Seq: 9, Outbox: 2, DroppedFull: 1, ModelVersion: 4,
		Int8Model: strings.Repeat("ab", 32), LastRound: 3, Sent: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)}
	empty := SiteReport{V: ProtocolVersion, Site: "site-b"}
	addSeeds(f, mustMarshal(f, r), mustMarshal(f, empty))
	f.Add(mustMarshal(f, sampleAck()))
	f.Fuzz(func(t *testing.T, b []byte) {
		controlRoundTrip(t, b, DecodeSiteReport, func(a, b SiteReport) bool {
			same := a.Sent.Equal(b.Sent)
			a.Sent, b.Sent = time.Time{}, time.Time{}
			return same && a == b
		})
	})
}

// FuzzDecodeUpdateMsg decodes each input as it is, and again with its
// signature replaced by site-a's signature over the rest, so that fuzzed
// headers and framing reach the checks made after the signature.
func FuzzDecodeUpdateMsg(f *testing.F) {
	fx := newFixture(f)
	signers := map[string]*quant.Signer{fx.a.name: fx.a.signer, fx.b.name: fx.b.signer}
	noMetrics := sampleHeader("site-b")
	noMetrics.Metrics = nil
	seeds := [][]byte{
		mustEncodeUpdate(f, sampleHeader("site-a"), updatePayload(f, 20, esu.Int8), fx.a.signer),
		mustEncodeUpdate(f, noMetrics, updatePayload(f, 3, esu.Float32), fx.b.signer),
		mustEncodeUpdate(f, sampleHeader("site-a"), nil, fx.a.signer),
		mustEncodeUpdate(f, sampleHeader("site-c"), updatePayload(f, 2, esu.Int8), fx.c.signer),
		mustEncodeUpdate(f, sampleHeader("site-a"), []byte("x"), fx.b.signer),
	}
	addSeeds(f, seeds...)
	for _, b := range seeds[:2] {
		x := bytes.Clone(b)
		x[len(x)-1] ^= 1
		f.Add(x)
		f.Add(b[:len(b)-ed25519.SignatureSize])
	}
	f.Add(updatePayload(f, 4, esu.Int8))

	check := func(t *testing.T, b []byte) {
		m, err := DecodeUpdateMsg(b, fx.reg)
		if err != nil {
			if m != nil || !errors.Is(err, ErrMessage) && !errors.Is(err, ErrSiteSignature) {
				t.Fatalf("refusal %v (message %v) wraps no protocol error or returned a message", err, m)
			}
			return
		}
		// Accepted: the signature verified against the registered key.
		pub, ok := fx.reg.SiteKey(m.Header.Site)
		if !ok {
			t.Fatalf("accepted an update from unregistered site %q", m.Header.Site)
		}
		if m.KeyID != quant.KeyID(pub) {
			t.Fatalf("accepted key ID %q for site %q, registered %q", m.KeyID, m.Header.Site, quant.KeyID(pub))
		}
		n := len(b) - ed25519.SignatureSize
		if len(b) > MaxUpdateBytes || !ed25519.Verify(pub, b[:n], b[n:]) {
			t.Fatalf("accepted a message of site %q its key does not verify", m.Header.Site)
		}
		if !bytes.Equal(m.Payload, b[n-len(m.Payload):n]) {
			t.Fatal("payload is not the bytes before the signature")
		}
		if m.Header.V != ProtocolVersion || !ValidSite(m.Header.Site) || m.Header.Seq == 0 || m.Header.Seq > MaxSeq || m.Header.Samples <= 0 || len(m.Header.BaseModel) != 64 {
			t.Fatalf("accepted invalid header %+v", m.Header)
		}
		// Round trip with the site's own key.
		b2, err := EncodeUpdateMsg(m.Header, m.Payload, signers[m.Header.Site])
		if err != nil {
			if hb, _ := json.Marshal(m.Header); len(hb) > MaxControlBytes {
				return // JSON escaping grew a header that was near the cap
			}
			t.Fatalf("accepted header %+v does not re-encode: %v", m.Header, err)
		}
		m2, err := DecodeUpdateMsg(b2, fx.reg)
		if err != nil {
			t.Fatalf("re-encoded update refused: %v", err)
		}
		if !headersEqual(m.Header, m2.Header) || m2.KeyID != m.KeyID || !bytes.Equal(m2.Payload, m.Payload) {
			t.Fatalf("round trip changed the update:\n first %+v\nsecond %+v", m.Header, m2.Header)
		}
		if b3, err := EncodeUpdateMsg(m2.Header, m2.Payload, signers[m2.Header.Site]); err != nil || !bytes.Equal(b2, b3) {
			t.Fatalf("encoding is not a fixed point (%v)", err)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		check(t, b)
		if n := len(b) - ed25519.SignatureSize; n >= 0 && len(b) <= MaxUpdateBytes {
			check(t, signed(b[:n], fx.a.signer))
		}
	})
}

// FuzzParseVersion: no version string a NATS server reports (INFO's
// version, as nats.Conn.ConnectedServerVersion gives it) makes the
// parser or the version check panic; a refusal wraps ErrServerVersion;
// an accepted version prints (String) as major.minor.patch, which parses
// to the same version. Seeded with real server versions.
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{MinServerVersion, "2.15.2", "v2.11.0-RC.3", "2.10.24-beta.2+build.7", " 2.9.0 ", "2.9", "2.9.x", "02.009.0010", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		cerr := CheckServerVersion(s, "nats://fuzz")
		if err != nil {
			if !errors.Is(err, ErrServerVersion) || cerr == nil {
				t.Fatalf("%q: refusal %v does not wrap ErrServerVersion, or the check accepted it (%v)", s, err, cerr)
			}
			return
		}
		min, _ := ParseVersion(MinServerVersion)
		if v.Major < 0 || v.Minor < 0 || v.Patch < 0 || v.Less(min) != errors.Is(cerr, ErrServerVersion) || (cerr != nil && !v.Less(min)) {
			t.Fatalf("%q parsed as %+v; the check says %v", s, v, cerr)
		}
		back, err := ParseVersion(v.String())
		if err != nil || back != v {
			t.Fatalf("%q parsed as %+v, printed %q, read back as %+v (%v)", s, v, v.String(), back, err)
		}
		if !AtLeast(s, v) || (v.Patch < math.MaxInt && AtLeast(s, Version{v.Major, v.Minor, v.Patch + 1})) {
			t.Fatalf("%q (%v) is not at least itself, or is at least its successor", s, v)
		}
	})
}
