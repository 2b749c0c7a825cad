package federated_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/quant/esu"
)

// ---- fixtures -------------------------------------------------------------

func hexID(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

var (
	baseModel  = hexID("base-model")
	floatModel = hexID("float-model")
	int8Model  = hexID("int8-model")
	t0         = time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.UTC)
)

// siteKey is a site's deterministic test key pair.
type siteKey struct {
	name   string
	signer *quant.Signer
	pub    ed25519.PublicKey
}

func newSiteKey(tb testing.TB, name string, seed byte) siteKey {
	tb.Helper()
	var s [32]byte
	s[0], s[31] = seed, 0x5e
	signer, pub, err := quant.GenerateKey(rand.NewChaCha8(s))
	if err != nil {
		tb.Fatalf("GenerateKey(seed %d): %v", seed, err)
	}
	return siteKey{name: name, signer: signer, pub: pub}
}

// fixture: site-a and site-b are registered, site-c is not.
type fixture struct {
	reg     *Registry
	a, b, c siteKey
}

func newFixture(tb testing.TB) *fixture {
	tb.Helper()
	f := &fixture{
		reg: &Registry{},
		a:   newSiteKey(tb, "site-a", 1),
		b:   newSiteKey(tb, "site-b", 2),
		c:   newSiteKey(tb, "site-c", 3),
	}
	for _, k := range []siteKey{f.a, f.b} {
		if err := f.reg.Add(k.name, k.pub); err != nil {
			tb.Fatalf("Registry.Add(%s): %v", k.name, err)
		}
	}
	return f
}

// anyKey answers every site (valid name or not) with one key, so that
// messages reach the header checks made after the signature.
type anyKey ed25519.PublicKey

func (k anyKey) SiteKey(string) (ed25519.PublicKey, bool) { return ed25519.PublicKey(k), true }

func updatePayload(tb testing.TB, n int, enc esu.Encoding) []byte {
	tb.Helper()
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(i%7-3) * 0.01
	}
	opt := esu.DefaultOptions(42)
	opt.Encoding = enc
	b, err := esu.Encode(&esu.Update{Base: baseModel, Values: vals}, opt)
	if err != nil {
		tb.Fatalf("esu.Encode: %v", err)
	}
	return b
}

func sampleHeader(site string) UpdateHeader {
	return UpdateHeader{
		V: ProtocolVersion, Site: site, Seq: 7, Round: 3,
		BaseModel: baseModel, BaseVersion: 2, Samples: 1200, Created: t0,
		Metrics: map[string]float64{"reward": 0.75, "loss": -1.5e-3},
	}
}

func sampleAnnouncement() RoundAnnouncement {
	return RoundAnnouncement{
		V: ProtocolVersion, Round: 3, Mode: Sync,
		BaseModel: baseModel, BaseObject: "models/" + baseModel[:12] + ".float", BaseVersion: 2,
		Opened: t0, Deadline: t0.Add(10 * time.Minute), MinUpdates: 2,
		Local: LocalTraining{Iterations: 20, Episodes: 8, LR: 3e-4},
	}
}

func sampleNotice() ModelNotice {
	return ModelNotice{
		V: ProtocolVersion, Version: 4, Round: 3,
		FloatModel: floatModel, FloatObject: "models/float-4",
		Int8Model: int8Model, Int8Object: "models/int8-4",
		Published: t0.Add(11 * time.Minute),
	}
}

func sampleAck() Ack {
	return Ack{V: ProtocolVersion, Site: "site-a", Seq: 7, Round: 3, Status: Accepted}
}

func mustMarshal(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := Marshal(v)
	if err != nil {
		tb.Fatalf("Marshal(%T): %v", v, err)
	}
	return b
}

func mustEncodeUpdate(tb testing.TB, h UpdateHeader, payload []byte, s *quant.Signer) []byte {
	tb.Helper()
	b, err := EncodeUpdateMsg(h, payload, s)
	if err != nil {
		tb.Fatalf("EncodeUpdateMsg: %v", err)
	}
	return b
}

// mutateJSON marshals v, lets fn edit the generic object, marshals again.
func mutateJSON(tb testing.TB, v any, fn func(m map[string]any)) []byte {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(mustMarshal(tb, v)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		tb.Fatal(err)
	}
	fn(m)
	b, err := json.Marshal(m)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func set(k string, v any) func(map[string]any) { return func(m map[string]any) { m[k] = v } }
func del(k string) func(map[string]any)        { return func(m map[string]any) { delete(m, k) } }
func setLocal(k string, v any) func(map[string]any) {
	return func(m map[string]any) { m["local"].(map[string]any)[k] = v }
}

// envelope builds an update message byte by byte (version, key ID,
// header, payload), unsigned; lengths are the true ones.
func envelope(version byte, keyID string, header, payload []byte) []byte {
	var b []byte
	b = append(b, "ESUP"...)
	b = append(b, version, byte(len(keyID)))
	b = append(b, keyID...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(header)))
	b = append(b, header...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

func signed(body []byte, s *quant.Signer) []byte {
	return append(bytes.Clone(body), s.Sign(body)...)
}

func sameInstant(a, b time.Time) bool {
	_, oa := a.Zone()
	_, ob := b.Zone()
	return a.Equal(b) && oa == ob
}

func announcementsEqual(a, b RoundAnnouncement) bool {
	if !sameInstant(a.Opened, b.Opened) || !sameInstant(a.Deadline, b.Deadline) {
		return false
	}
	a.Opened, a.Deadline, b.Opened, b.Deadline = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return a == b
}

func noticesEqual(a, b ModelNotice) bool {
	if !sameInstant(a.Published, b.Published) {
		return false
	}
	a.Published, b.Published = time.Time{}, time.Time{}
	return a == b
}

// headersEqual: nil and empty Metrics are the same (omitempty).
func headersEqual(a, b UpdateHeader) bool {
	return a.V == b.V && a.Site == b.Site && a.Seq == b.Seq && a.Round == b.Round &&
		a.BaseModel == b.BaseModel && a.BaseVersion == b.BaseVersion && a.Samples == b.Samples &&
		sameInstant(a.Created, b.Created) && maps.Equal(a.Metrics, b.Metrics)
}

// refusal checks a decoder's error: it wraps want, its message names the
// reason, and no value came back.
func refusal(t *testing.T, err error, gotNil bool, want error, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want a refusal naming %q", reason)
	}
	if !gotNil {
		t.Errorf("refusal %v returned a value too", err)
	}
	if !errors.Is(err, want) {
		t.Errorf("error %q does not wrap %q", err, want)
	}
	if want == ErrMessage && errors.Is(err, ErrSiteSignature) || want != ErrMessage && errors.Is(err, ErrMessage) {
		t.Errorf("error %q wraps both ErrMessage and ErrSiteSignature", err)
	}
	if !strings.Contains(err.Error(), reason) {
		t.Errorf("error %q does not name %q", err, reason)
	}
}

// ---- keys, names, IDs -----------------------------------------------------

func TestTestKeysDeterministic(t *testing.T) {
	a1, a2, b := newSiteKey(t, "x", 1), newSiteKey(t, "x", 1), newSiteKey(t, "x", 2)
	if !a1.pub.Equal(a2.pub) || a1.signer.ID != a2.signer.ID {
		t.Fatalf("same seed gave keys %s and %s", a1.signer.ID, a2.signer.ID)
	}
	if a1.pub.Equal(b.pub) || a1.signer.ID == b.signer.ID {
		t.Fatalf("seeds 1 and 2 gave the same key %s", a1.signer.ID)
	}
	if a1.signer.ID != quant.KeyID(a1.pub) {
		t.Fatalf("signer ID %s, KeyID of its public key %s", a1.signer.ID, quant.KeyID(a1.pub))
	}
}

func TestValidSite(t *testing.T) {
	for _, tc := range []struct {
		name, site string
		want       bool
	}{
		{"one letter", "a", true},
		{"one digit", "0", true},
		{"hyphenated", "site-a", true},
		{"inner double hyphen", "edge--1", true},
		{"63 chars", strings.Repeat("a", 63), true},
		{"empty", "", false},
		{"64 chars", strings.Repeat("a", 64), false},
		{"leading hyphen", "-site", false},
		{"trailing hyphen", "site-", false},
		{"upper case", "Site-A", false},
		{"underscore", "site_a", false},
		{"dot (NATS token separator)", "site.a", false},
		{"NATS wildcard", "site*", false},
		{"NATS full wildcard", ">", false},
		{"space", "site a", false},
		{"trailing newline", "site\n", false},
		{"colon (MsgID separator)", "site:1", false},
		{"non-ASCII", "sité", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ValidSite(tc.site); got != tc.want {
				t.Fatalf("ValidSite(%q) = %v, want %v", tc.site, got, tc.want)
			}
		})
	}
}

func TestMsgID(t *testing.T) {
	for _, tc := range []struct {
		name string
		site string
		seq  uint64
		want string
	}{
		{"first update", "site-a", 1, "site-a:1"},
		{"large seq", "edge-7", 1234567890, "edge-7:1234567890"},
		{"max seq", "x", math.MaxUint64, "x:18446744073709551615"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := MsgID(tc.site, tc.seq)
			if got != tc.want {
				t.Fatalf("MsgID(%q, %d) = %q, want %q", tc.site, tc.seq, got, tc.want)
			}
			site, seq, ok := strings.Cut(got, ":")
			n, err := strconv.ParseUint(seq, 10, 64)
			if !ok || site != tc.site || err != nil || n != tc.seq {
				t.Fatalf("MsgID %q does not split back into (%q, %d)", got, tc.site, tc.seq)
			}
		})
	}
	t.Run("distinct for distinct (site, seq)", func(t *testing.T) {
		seen := map[string]string{}
		for _, site := range []string{"a", "a1", "a-1", "1", "11", "site-a"} {
			for _, seq := range []uint64{1, 2, 11, 111} {
				id := MsgID(site, seq)
				key := site + "/" + strconv.FormatUint(seq, 10)
				if prev, dup := seen[id]; dup {
					t.Fatalf("MsgID %q for both %s and %s", id, prev, key)
				}
				seen[id] = key
			}
		}
	})
}

func TestRegistry(t *testing.T) {
	f := newFixture(t)
	if got := f.reg.Sites(); len(got) != 2 || got[0] != "site-a" || got[1] != "site-b" {
		t.Fatalf("Sites() = %v, want [site-a site-b]", got)
	}
	if pub, ok := f.reg.SiteKey("site-a"); !ok || !pub.Equal(f.a.pub) {
		t.Fatalf("SiteKey(site-a) = %x, %v", pub, ok)
	}
	if _, ok := f.reg.SiteKey("site-c"); ok {
		t.Fatal("SiteKey(site-c) found an unregistered site")
	}
	if err := f.reg.Add("Bad_Site", f.c.pub); !errors.Is(err, ErrMessage) {
		t.Fatalf("Add(invalid name) = %v, want ErrMessage", err)
	}
	if err := f.reg.Add("site-c", f.c.pub[:31]); !errors.Is(err, quant.ErrKey) {
		t.Fatalf("Add(31-byte key) = %v, want quant.ErrKey", err)
	}
	var zero Registry
	if _, ok := zero.SiteKey("site-a"); ok || len(zero.Sites()) != 0 {
		t.Fatal("zero Registry is not empty")
	}
}

// ---- control messages -----------------------------------------------------

func TestControlRoundTrip(t *testing.T) {
	async := sampleAnnouncement()
	async.Mode, async.Local.ProxMu, async.MinUpdates = Async, 0.01, 1
	zoned := sampleAnnouncement()
	zoned.Opened = time.Date(2025, 3, 1, 13, 0, 0, 5, time.FixedZone("", 3600))
	zoned.Deadline = time.Date(2025, 3, 1, 5, 30, 0, 0, time.FixedZone("", -7*3600))
	bounds := sampleAnnouncement()
	bounds.Local = LocalTraining{Iterations: 10000, Episodes: 1000, LR: math.Nextafter(1, 0), ProxMu: math.Nextafter(1e6, 0)}
	minimal := sampleAnnouncement()
	minimal.Local = LocalTraining{Iterations: 1, Episodes: 1, LR: math.SmallestNonzeroFloat64}
	minimal.Opened, minimal.Deadline, minimal.BaseVersion = time.Time{}, time.Time{}, 0
	rejected := sampleAck()
	rejected.Status, rejected.Reason = Rejected, ReasonStaleRound
	dup := sampleAck()
	dup.Status, dup.Round = Duplicate, 0
	replay := sampleAck()
	replay.Status, replay.Reason, replay.HWM = Duplicate, ReasonReplay, MaxSeq
	notice := sampleNotice()
	noticeNoRound := sampleNotice()
	noticeNoRound.Round = 0
	noticeMax := sampleNotice()
	noticeMax.Version, noticeMax.Round = math.MaxUint64, math.MaxUint64

	type tcase struct {
		name  string
		msg   any
		check func(t *testing.T, b []byte)
	}
	ann := func(want RoundAnnouncement) func(*testing.T, []byte) {
		return func(t *testing.T, b []byte) {
			got, err := DecodeAnnouncement(b)
			if err != nil {
				t.Fatalf("DecodeAnnouncement(%s): %v", b, err)
			}
			if !announcementsEqual(*got, want) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", *got, want)
			}
		}
	}
	mn := func(want ModelNotice) func(*testing.T, []byte) {
		return func(t *testing.T, b []byte) {
			got, err := DecodeModelNotice(b)
			if err != nil {
				t.Fatalf("DecodeModelNotice(%s): %v", b, err)
			}
			if !noticesEqual(*got, want) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", *got, want)
			}
		}
	}
	ack := func(want Ack) func(*testing.T, []byte) {
		return func(t *testing.T, b []byte) {
			got, err := DecodeAck(b)
			if err != nil {
				t.Fatalf("DecodeAck(%s): %v", b, err)
			}
			if *got != want {
				t.Fatalf("round trip:\n got %+v\nwant %+v", *got, want)
			}
		}
	}
	for _, tc := range []tcase{
		{"announcement sync", sampleAnnouncement(), ann(sampleAnnouncement())},
		{"announcement async fedprox", async, ann(async)},
		{"announcement zoned times", zoned, ann(zoned)},
		{"announcement upper bounds", bounds, ann(bounds)},
		{"announcement lower bounds zero times", minimal, ann(minimal)},
		{"announcement pointer", func() any { a := sampleAnnouncement(); return &a }(), ann(sampleAnnouncement())},
		{"model notice", notice, mn(notice)},
		{"model notice round 0", noticeNoRound, mn(noticeNoRound)},
		{"model notice max numbers", noticeMax, mn(noticeMax)},
		{"ack accepted", sampleAck(), ack(sampleAck())},
		{"ack rejected with reason", rejected, ack(rejected)},
		{"ack duplicate", dup, ack(dup)},
		{"ack replay with the high-water mark", replay, ack(replay)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mustMarshal(t, tc.msg)
			if len(b) > MaxControlBytes {
				t.Fatalf("%d bytes", len(b))
			}
			tc.check(t, b)
			// Trailing white space is not data.
			tc.check(t, append(bytes.Clone(b), " \n\t\r"...))
		})
	}
}

func TestMarshalError(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
	}{
		{"channel", make(chan int)},
		{"NaN metric", UpdateHeader{Metrics: map[string]float64{"x": math.NaN()}}},
		{"year 10000", ModelNotice{Published: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Marshal(tc.v)
			if err == nil || b != nil || !strings.Contains(err.Error(), "encode message") {
				t.Fatalf("Marshal = %q, %v; want an \"encode message\" error", b, err)
			}
		})
	}
}

type refusalCase struct {
	name, reason string
	in           []byte
}

// controlRefusals are refusals every strict JSON decoder shares, built
// from a valid encoded message.
func controlRefusals(valid []byte) []refusalCase {
	cat := func(s string) []byte { return append(bytes.Clone(valid), s...) }
	pad := func(n int) []byte { return append(bytes.Clone(valid), bytes.Repeat([]byte(" "), n-len(valid))...) }
	return []refusalCase{
		{"empty", "EOF", nil},
		{"white space only", "EOF", []byte("  \n")},
		{"not JSON", "invalid character", []byte("ESUP")},
		{"array", "cannot unmarshal array", []byte("[]")},
		{"string", "cannot unmarshal string", []byte(`"v"`)},
		{"truncated", "unexpected EOF", valid[:len(valid)/2]},
		{"truncated before closing brace", "unexpected EOF", valid[:len(valid)-1]},
		{"trailing garbage", "trailing data", cat("x")},
		{"trailing second object", "trailing data", cat("{}")},
		{"trailing number", "trailing data", cat(" 1")},
		{"trailing closing brace", "trailing data", cat("}")},
		{"trailing closing bracket", "trailing data", cat("]")},
		{"trailing comma", "trailing data", cat(",")},
		{"trailing NUL", "trailing data", cat("\x00")},
		{"oversized", "65537 bytes exceeds 65536", pad(MaxControlBytes + 1)},
	}
}

func runControlRefusals[T any](t *testing.T, decode func([]byte) (*T, error), valid []byte, cases []refusalCase) {
	t.Helper()
	t.Run("valid padded to the size cap", func(t *testing.T) {
		in := append(bytes.Clone(valid), bytes.Repeat([]byte(" "), MaxControlBytes-len(valid))...)
		if _, err := decode(in); err != nil {
			t.Fatalf("%d-byte message refused: %v", len(in), err)
		}
	})
	cases = append(cases, controlRefusals(valid)...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decode(tc.in)
			refusal(t, err, got == nil, ErrMessage, tc.reason)
		})
	}
}

func TestDecodeAnnouncementRefusals(t *testing.T) {
	a := sampleAnnouncement()
	m := func(fn func(map[string]any)) []byte { return mutateJSON(t, a, fn) }
	runControlRefusals(t, DecodeAnnouncement, mustMarshal(t, a), []refusalCase{
		{"unknown field", `unknown field "extra"`, m(set("extra", 1))},
		{"unknown local field", `unknown field "momentum"`, m(setLocal("momentum", 0.9))},
		{"field of another message", `unknown field "site"`, m(set("site", "site-a"))},
		{"version 2", "announcement version 2", m(set("v", 2))},
		{"version missing", "announcement version 0", m(del("v"))},
		{"null", "announcement version 0", []byte("null")},
		{"version as string", "cannot unmarshal string", m(set("v", "1"))},
		{"round 0", "round 0", m(set("round", 0))},
		{"round missing", "round 0", m(del("round"))},
		{"round negative", "cannot unmarshal number -1", m(set("round", -1))},
		{"mode missing", `mode ""`, m(del("mode"))},
		{"mode unknown", `mode "batch"`, m(set("mode", "batch"))},
		{"mode wrong case", `mode "SYNC"`, m(set("mode", "SYNC"))},
		{"base model missing", "base model", m(del("base_model"))},
		{"base model short", "base model", m(set("base_model", baseModel[:63]))},
		{"base model long", "base model", m(set("base_model", baseModel+"0"))},
		{"base object missing", "object", m(del("base_object"))},
		{"opened not a time", `parsing time "yesterday"`, m(set("opened", "yesterday"))},
		{"deadline not a time", "Time.UnmarshalJSON: input is not a JSON string", m(set("deadline", 5))},
		{"local missing", "local training", m(del("local"))},
		{"iterations 0", "local training", m(setLocal("iterations", 0))},
		{"iterations 10001", "local training", m(setLocal("iterations", 10001))},
		{"episodes 0", "local training", m(setLocal("episodes", 0))},
		{"episodes 1001", "local training", m(setLocal("episodes", 1001))},
		{"lr 0", "local training", m(setLocal("lr", 0))},
		{"lr 1", "local training", m(setLocal("lr", 1))},
		{"lr negative", "local training", m(setLocal("lr", -1e-3))},
		{"lr overflows", "cannot unmarshal number 1e999", m(setLocal("lr", json.Number("1e999")))},
		{"prox_mu negative", "local training", m(setLocal("prox_mu", -0.1))},
		{"prox_mu 1e6", "local training", m(setLocal("prox_mu", 1e6))},
		{"min_updates 0", "min_updates 0", m(set("min_updates", 0))},
		{"min_updates negative", "min_updates -3", m(set("min_updates", -3))},
	})
}

func TestDecodeModelNoticeRefusals(t *testing.T) {
	n := sampleNotice()
	m := func(fn func(map[string]any)) []byte { return mutateJSON(t, n, fn) }
	runControlRefusals(t, DecodeModelNotice, mustMarshal(t, n), []refusalCase{
		{"unknown field", `unknown field "signature"`, m(set("signature", "x"))},
		{"version 2", "notice version 2", m(set("v", 2))},
		{"version missing", "notice version 0", m(del("v"))},
		{"null", "notice version 0", []byte("null")},
		{"model version 0", "model version 0", m(set("version", 0))},
		{"model version missing", "model version 0", m(del("version"))},
		{"float model missing", "model IDs/objects missing", m(del("float_model"))},
		{"float model short", "model IDs/objects missing", m(set("float_model", floatModel[:40]))},
		{"float object missing", "model IDs/objects missing", m(del("float_object"))},
		{"int8 model missing", "model IDs/objects missing", m(del("int8_model"))},
		{"int8 model long", "model IDs/objects missing", m(set("int8_model", int8Model+int8Model))},
		{"int8 object missing", "model IDs/objects missing", m(del("int8_object"))},
		{"published not a time", `parsing time "now"`, m(set("published", "now"))},
	})
}

func TestDecodeAckRefusals(t *testing.T) {
	a := sampleAck()
	m := func(fn func(map[string]any)) []byte { return mutateJSON(t, a, fn) }
	runControlRefusals(t, DecodeAck, mustMarshal(t, a), []refusalCase{
		{"unknown field", `unknown field "detail"`, m(set("detail", "x"))},
		{"version 2", "ack version 2", m(set("v", 2))},
		{"version missing", "ack version 0", m(del("v"))},
		{"null", "ack version 0", []byte("null")},
		{"site missing", `ack for site ""`, m(del("site"))},
		{"site upper case", `ack for site "Site-A"`, m(set("site", "Site-A"))},
		{"site with dot", `ack for site "site.a"`, m(set("site", "site.a"))},
		{"site wildcard", `ack for site ">"`, m(set("site", ">"))},
		{"site 64 chars", "ack for site", m(set("site", strings.Repeat("s", 64)))},
		{"seq 0", "seq 0", m(set("seq", 0))},
		{"seq missing", "seq 0", m(del("seq"))},
		{"status missing", `ack status ""`, m(del("status"))},
		{"status unknown", `ack status "ok"`, m(set("status", "ok"))},
		{"status wrong case", `ack status "Accepted"`, m(set("status", "Accepted"))},
		{"reason not a string", "cannot unmarshal number", m(set("reason", 3))},
		// a high-water mark only on a replay, from its seq to MaxSeq
		{"hwm on an accepted ack", "only a replay carries one", m(set("hwm", 9))},
		{"hwm on a duplicate without reason", "only a replay carries one", m(func(v map[string]any) { v["status"], v["hwm"] = "duplicate", 9 })},
		{"hwm on a rejection", "only a replay carries one", m(func(v map[string]any) { v["status"], v["reason"], v["hwm"] = "rejected", ReasonReplay, 9 })},
		{"hwm below the seq", "high-water mark 6", m(func(v map[string]any) { v["status"], v["reason"], v["hwm"] = "duplicate", ReasonReplay, 6 })},
		{"hwm above MaxSeq", "high-water mark 9223372036854775808", m(func(v map[string]any) {
			v["status"], v["reason"], v["hwm"] = "duplicate", ReasonReplay, uint64(MaxSeq)+1
		})},
		{"hwm negative", "cannot unmarshal number", m(func(v map[string]any) { v["status"], v["reason"], v["hwm"] = "duplicate", ReasonReplay, -1 })},
	})
}

// ---- update envelope ------------------------------------------------------

func TestUpdateMsgRoundTrip(t *testing.T) {
	f := newFixture(t)
	noMetrics := sampleHeader("site-a")
	noMetrics.Metrics = nil
	emptyMetrics := sampleHeader("site-a")
	emptyMetrics.Metrics = map[string]float64{}
	zoned := sampleHeader("site-b")
	zoned.Created = time.Date(2025, 3, 1, 23, 59, 59, 999999999, time.FixedZone("", 5*3600+1800))
	v0 := sampleHeader("site-a")
	v0.V = 0 // the encoder stamps the version
	bounds := sampleHeader("site-b")
	bounds.Seq, bounds.Round, bounds.BaseVersion, bounds.Samples = MaxSeq, math.MaxUint64, math.MaxUint64, math.MaxInt64
	bounds.Metrics = map[string]float64{}
	for i := range 64 {
		bounds.Metrics["m"+strconv.Itoa(i)] = 1e300 * float64(1-2*(i%2))
	}
	longSite := sampleHeader(strings.Repeat("z", 63))
	reg := &Registry{}
	for _, k := range []siteKey{f.a, f.b} {
		if err := reg.Add(k.name, k.pub); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.Add(longSite.Site, f.c.pub); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		h       UpdateHeader
		payload []byte
		signer  *quant.Signer
	}{
		{"int8 payload", sampleHeader("site-a"), updatePayload(t, 1000, esu.Int8), f.a.signer},
		{"float32 payload", sampleHeader("site-b"), updatePayload(t, 33, esu.Float32), f.b.signer},
		{"no metrics", noMetrics, updatePayload(t, 1, esu.Int8), f.a.signer},
		{"empty metrics", emptyMetrics, updatePayload(t, 2, esu.Int8), f.a.signer},
		{"zoned created time", zoned, updatePayload(t, 5, esu.Float32), f.b.signer},
		{"version stamped by encoder", v0, updatePayload(t, 5, esu.Int8), f.a.signer},
		{"numeric bounds, 64 metrics", bounds, updatePayload(t, 5, esu.Int8), f.b.signer},
		{"63-char site", longSite, updatePayload(t, 5, esu.Int8), f.c.signer},
		{"empty payload", sampleHeader("site-a"), nil, f.a.signer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mustEncodeUpdate(t, tc.h, tc.payload, tc.signer)
			if string(b[:4]) != "ESUP" || b[4] != ProtocolVersion {
				t.Fatalf("message starts %q", b[:5])
			}
			got, err := DecodeUpdateMsg(b, reg)
			if err != nil {
				t.Fatalf("DecodeUpdateMsg: %v", err)
			}
			want := tc.h
			want.V = ProtocolVersion
			if !headersEqual(got.Header, want) {
				t.Fatalf("header:\n got %+v\nwant %+v", got.Header, want)
			}
			if got.KeyID != tc.signer.ID {
				t.Fatalf("key ID %q, want %q", got.KeyID, tc.signer.ID)
			}
			if !bytes.Equal(got.Payload, tc.payload) {
				t.Fatalf("payload differs (%d bytes, want %d)", len(got.Payload), len(tc.payload))
			}
			if len(tc.payload) > 0 {
				u, err := esu.Decode(got.Payload, 0)
				if err != nil || u.Base != baseModel {
					t.Fatalf("payload no longer a quant update: %v", err)
				}
			}
			// ed25519 is deterministic: the same message encodes to the
			// same bytes.
			if again := mustEncodeUpdate(t, got.Header, got.Payload, tc.signer); !bytes.Equal(again, b) {
				t.Fatal("re-encoding the decoded message changed its bytes")
			}
		})
	}
}

func TestEncodeUpdateMsgRefusals(t *testing.T) {
	f := newFixture(t)
	p := updatePayload(t, 8, esu.Int8)
	h := func(fn func(*UpdateHeader)) UpdateHeader {
		x := sampleHeader("site-a")
		fn(&x)
		return x
	}
	manyMetrics := map[string]float64{}
	for i := range 65 {
		manyMetrics[strconv.Itoa(i)] = 1
	}
	for _, tc := range []struct {
		name    string
		h       UpdateHeader
		payload []byte
		signer  *quant.Signer
		want    error
		reason  string
	}{
		{"invalid site", h(func(x *UpdateHeader) { x.Site = "Site_A" }), p, f.a.signer, ErrMessage, `site "Site_A" is not a DNS label`},
		{"empty site", h(func(x *UpdateHeader) { x.Site = "" }), p, f.a.signer, ErrMessage, "not a DNS label"},
		{"seq 0", h(func(x *UpdateHeader) { x.Seq = 0 }), p, f.a.signer, ErrMessage, "sequence 0"},
		{"seq above MaxSeq", h(func(x *UpdateHeader) { x.Seq = MaxSeq + 1 }), p, f.a.signer, ErrMessage, "sequence 9223372036854775808 above the highest a site may use"},
		{"seq 2^64-1", h(func(x *UpdateHeader) { x.Seq = math.MaxUint64 }), p, f.a.signer, ErrMessage, "sequence 18446744073709551615 above the highest"},
		{"base model short", h(func(x *UpdateHeader) { x.BaseModel = "abc" }), p, f.a.signer, ErrMessage, `base model "abc"`},
		{"samples 0", h(func(x *UpdateHeader) { x.Samples = 0 }), p, f.a.signer, ErrMessage, "0 samples"},
		{"samples negative", h(func(x *UpdateHeader) { x.Samples = -5 }), p, f.a.signer, ErrMessage, "-5 samples"},
		{"metric NaN", h(func(x *UpdateHeader) { x.Metrics = map[string]float64{"loss": math.NaN()} }), p, f.a.signer, ErrMessage, "metric loss"},
		{"metric +Inf", h(func(x *UpdateHeader) { x.Metrics = map[string]float64{"loss": math.Inf(1)} }), p, f.a.signer, ErrMessage, "metric loss"},
		{"metric -1e301", h(func(x *UpdateHeader) { x.Metrics = map[string]float64{"loss": -1e301} }), p, f.a.signer, ErrMessage, "metric loss"},
		{"65 metrics", h(func(x *UpdateHeader) { x.Metrics = manyMetrics }), p, f.a.signer, ErrMessage, "65 metrics"},
		{"header over the control cap", h(func(x *UpdateHeader) {
			x.Metrics = map[string]float64{strings.Repeat("k", MaxControlBytes): 1}
		}), p, f.a.signer, ErrMessage, "update header of"},
		{"no signer", sampleHeader("site-a"), p, nil, ErrSiteSignature, "no signing key"},
		{"message over the update cap", sampleHeader("site-a"), make([]byte, MaxUpdateBytes), f.a.signer, ErrMessage, "exceeds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := EncodeUpdateMsg(tc.h, tc.payload, tc.signer)
			refusal(t, err, b == nil, tc.want, tc.reason)
		})
	}
}

func TestDecodeUpdateMsgRefusals(t *testing.T) {
	f := newFixture(t)
	p := updatePayload(t, 16, esu.Int8)
	valid := mustEncodeUpdate(t, sampleHeader("site-a"), p, f.a.signer)
	hdr := mustMarshal(t, sampleHeader("site-a"))
	kA := f.a.signer.ID
	body := func(b []byte) []byte { return b[:len(b)-ed25519.SignatureSize] }
	edit := func(fn func(b []byte)) []byte {
		b := bytes.Clone(valid)
		fn(b)
		return b
	}
	hdrOff := 6 + len(kA)                      // header length field
	plOff := hdrOff + 4 + len(hdr)             // payload length field
	resign := func(fn func(b []byte)) []byte { // edit the body, sign it again
		b := bytes.Clone(body(valid))
		fn(b)
		return signed(b, f.a.signer)
	}
	withHeader := func(fn func(map[string]any)) []byte {
		return signed(envelope(ProtocolVersion, kA, mutateJSON(t, sampleHeader("site-a"), fn), p), f.a.signer)
	}
	mustEnc := func(h UpdateHeader, s *quant.Signer) []byte { return mustEncodeUpdate(t, h, p, s) }

	for _, tc := range []struct {
		name   string
		in     []byte
		keys   SiteKeys
		want   error
		reason string
	}{
		// framing
		{"empty", nil, f.reg, ErrMessage, "magic"},
		{"shorter than any message", valid[:77], f.reg, ErrMessage, "magic"},
		{"wrong magic", edit(func(b []byte) { copy(b, "ESU1") }), f.reg, ErrMessage, "magic"},
		{"bare quant update", p, f.reg, ErrMessage, "magic"},
		{"JSON instead of an envelope", append(bytes.Clone(hdr), make([]byte, 64)...), f.reg, ErrMessage, "magic"},
		{"lower-case magic", edit(func(b []byte) { copy(b, "esup") }), f.reg, ErrMessage, "magic"},
		{"protocol version 0", edit(func(b []byte) { b[4] = 0 }), f.reg, ErrMessage, "protocol version 0"},
		{"protocol version 2", edit(func(b []byte) { b[4] = 2 }), f.reg, ErrMessage, "protocol version 2"},
		{"oversized", make([]byte, MaxUpdateBytes+1), f.reg, ErrMessage, "exceeds"},
		{"key ID length 0", edit(func(b []byte) { b[5] = 0 }), f.reg, ErrSiteSignature, "key ID length 0"},
		{"key ID length 65", edit(func(b []byte) { b[5] = 65 }), f.reg, ErrSiteSignature, "key ID length 65"},
		{"key ID past the end", append([]byte("ESUP\x01\x40"), make([]byte, 72)...), f.reg, ErrSiteSignature, "key ID length 64"},
		{"header length past the end", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[hdrOff:], uint32(len(valid))) }), f.reg, ErrMessage, "header length"},
		{"header length over the cap", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[hdrOff:], MaxControlBytes+1) }), f.reg, ErrMessage, "header length 65537"},
		{"header length 2^32-1", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[hdrOff:], math.MaxUint32) }), f.reg, ErrMessage, "header length"},
		{"payload length too long", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[plOff:], uint32(len(p)+1)) }), f.reg, ErrMessage, "payload length"},
		{"payload length too short", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[plOff:], uint32(len(p)-1)) }), f.reg, ErrMessage, "payload length"},
		{"payload length 2^32-1", edit(func(b []byte) { binary.LittleEndian.PutUint32(b[plOff:], math.MaxUint32) }), f.reg, ErrMessage, "payload length"},
		{"trailing byte", append(bytes.Clone(valid), 0), f.reg, ErrMessage, "payload length"},
		{"signature missing", body(valid), f.reg, ErrMessage, "payload length"},
		{"truncated by one byte", valid[:len(valid)-1], f.reg, ErrMessage, "payload length"},
		{"truncated inside the header", valid[:plOff+ed25519.SignatureSize-5], f.reg, ErrMessage, "header length"},
		// header (signed, so only its content is wrong)
		{"header unknown field", withHeader(set("extra", true)), f.reg, ErrMessage, `unknown field "extra"`},
		{"header trailing data", signed(envelope(1, kA, append(bytes.Clone(hdr), '}'), p), f.a.signer), f.reg, ErrMessage, "trailing data"},
		{"header not JSON", signed(envelope(1, kA, []byte("site-a"), p), f.a.signer), f.reg, ErrMessage, "update header"},
		{"header empty", signed(envelope(1, kA, nil, p), f.a.signer), f.reg, ErrMessage, "update header: EOF"},
		{"header truncated", signed(envelope(1, kA, hdr[:len(hdr)-1], p), f.a.signer), f.reg, ErrMessage, "unexpected EOF"},
		{"header seq as string", withHeader(set("seq", "7")), f.reg, ErrMessage, "cannot unmarshal string"},
		{"header metric overflows", withHeader(set("metrics", map[string]any{"x": json.Number("1e400")})), f.reg, ErrMessage, "cannot unmarshal number"},
		{"header version 2", withHeader(set("v", 2)), f.reg, ErrMessage, "update version 2"},
		{"header version missing", withHeader(del("v")), f.reg, ErrMessage, "update version 0"},
		{"header seq 0", withHeader(set("seq", 0)), f.reg, ErrMessage, "sequence 0"},
		{"header seq above MaxSeq", withHeader(set("seq", MaxSeq+1)), f.reg, ErrMessage, "sequence 9223372036854775808 above the highest a site may use"},
		{"header seq 2^64-1", withHeader(set("seq", uint64(math.MaxUint64))), f.reg, ErrMessage, "sequence 18446744073709551615 above the highest"},
		{"header base model short", withHeader(set("base_model", "ab")), f.reg, ErrMessage, `base model "ab"`},
		{"header samples 0", withHeader(del("samples")), f.reg, ErrMessage, "0 samples"},
		{"header metric 1e301", withHeader(set("metrics", map[string]any{"loss": 1e301})), f.reg, ErrMessage, "metric loss"},
		{"header invalid site, permissive keys", signed(envelope(1, kA, mutateJSON(t, sampleHeader("site-a"), set("site", "Site.A")), p), f.a.signer), anyKey(f.a.pub), ErrMessage, `site "Site.A" is not a DNS label`},
		{"header null, permissive keys", signed(envelope(1, kA, []byte("null"), p), f.a.signer), anyKey(f.a.pub), ErrMessage, "update version 0"},
		// who signed
		{"unknown site", mustEnc(sampleHeader("site-c"), f.c.signer), f.reg, ErrUnknownSite, `"site-c" is not registered`},
		{"invalid site name", withHeader(set("site", "Site.A")), f.reg, ErrUnknownSite, `"Site.A" is not registered`},
		{"header null", signed(envelope(1, kA, []byte("null"), p), f.a.signer), f.reg, ErrUnknownSite, `"" is not registered`},
		{"empty registry", valid, &Registry{}, ErrUnknownSite, "not registered"},
		{"no site keys", valid, nil, ErrSiteSignature, "no site keys"},
		{"another site's key", mustEnc(sampleHeader("site-a"), f.b.signer), f.reg, ErrSiteSignature, "signs with " + kA},
		{"unregistered key", mustEnc(sampleHeader("site-a"), f.c.signer), f.reg, ErrSiteSignature, "the message names " + f.c.signer.ID},
		{"key ID claims the site's key", signed(envelope(1, kA, hdr, p), f.b.signer), f.reg, ErrSiteSignature, "does not verify"},
		{"bad signature", edit(func(b []byte) { b[len(b)-1] ^= 0x80 }), f.reg, ErrSiteSignature, "does not verify"},
		{"zero signature", edit(func(b []byte) { clear(b[len(b)-64:]) }), f.reg, ErrSiteSignature, "does not verify"},
		{"tampered payload", edit(func(b []byte) { b[len(b)-65] ^= 1 }), f.reg, ErrSiteSignature, "does not verify"},
		{"tampered header", edit(func(b []byte) { b[bytes.Index(b, []byte(`"seq":7`))+6] = '8' }), f.reg, ErrSiteSignature, "does not verify"},
		{"tampered version byte, re-signed", resign(func(b []byte) { b[4] = 3 }), f.reg, ErrMessage, "protocol version 3"},
		{"replayed to another site", resign(func(b []byte) { copy(b[bytes.Index(b, []byte(`"site-a"`)):], `"site-b"`) }), f.reg, ErrSiteSignature, "signs with " + f.b.signer.ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeUpdateMsg(tc.in, tc.keys)
			refusal(t, err, got == nil, tc.want, tc.reason)
		})
	}
}

// Every proper prefix and every single-bit corruption of a valid message
// is refused.
func TestDecodeUpdateMsgCorruption(t *testing.T) {
	f := newFixture(t)
	valid := mustEncodeUpdate(t, sampleHeader("site-b"), updatePayload(t, 40, esu.Float32), f.b.signer)
	if _, err := DecodeUpdateMsg(valid, f.reg); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		count int
		make  func(i int) []byte
	}{
		{"truncated", len(valid), func(i int) []byte { return valid[:i] }},
		{"bit flipped", 8 * len(valid), func(i int) []byte {
			b := bytes.Clone(valid)
			b[i/8] ^= 1 << (i % 8)
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.count {
				got, err := DecodeUpdateMsg(tc.make(i), f.reg)
				if err == nil || got != nil {
					t.Fatalf("variant %d accepted", i)
				}
				if !errors.Is(err, ErrMessage) && !errors.Is(err, ErrSiteSignature) {
					t.Fatalf("variant %d: error %v wraps no protocol error", i, err)
				}
			}
		})
	}
}
