package adminclient

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/coordinator"
	"github.com/edgesched/edgesched/federated"
	"github.com/edgesched/edgesched/federated/natsauth"
	"github.com/edgesched/edgesched/internal/boundedio"
	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
	"github.com/edgesched/edgesched/internal/natsflags"
)

// LegacyEnv are edgectl's former connection variables, still read after
// the nats CLI's (NATS_URL, NATS_NKEY, NATS_CA) and the context
// (deprecated; docs/cli.md, "NATS connection").
var LegacyEnv = map[string]string{
	natsflags.EnvURL:  "EDGESCHED_NATS",
	natsflags.EnvNKey: "EDGESCHED_NKEY",
	natsflags.EnvCA:   "EDGESCHED_TLS_CA",
}

// Flags are the flags of every verb that talks to the coordinator's
// admin API over NATS.
type Flags struct {
	nats    *natsflags.Flags
	server  string // resolved by Call
	conn    natsauth.ClientConfig
	timeout time.Duration
	output  string
}

// Register adds the flags to cmd.
func (f *Flags) Register(cmd *cobra.Command) {
	fl := cmd.Flags()
	// -s/--server, --context, --creds, --nkey, --tlsca, --tlscert,
	// --tlskey, --inbox-prefix: the nats CLI's names, its variables and
	// its contexts (the selected one too)
	f.nats = natsflags.AddPFlags(fl, natsflags.Options{DefaultServer: nats.DefaultURL, Inbox: natsauth.AdminInboxPrefix, UseSelected: true, LegacyEnv: LegacyEnv})
	fl.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the coordinator")
	cmdutil.AddOutputFlag(cmd, &f.output)
}

func (f *Flags) validate() error {
	if err := cmdutil.CheckOutput(f.output); err != nil {
		return err
	}
	if f.timeout <= 0 {
		return cli.Usagef("--timeout %v: must be positive", f.timeout)
	}
	c, err := f.nats.Resolve(nil)
	if err != nil {
		return err // a connection that cannot be made: a failure (docs/cli.md)
	}
	if err := checkSecretFiles(c.Config); err != nil {
		return err
	}
	f.server, f.conn = c.URL, c.Config
	return nil
}

// MaxSecretFileBytes caps the credentials file and the client
// certificate and key: nats.go and crypto/tls read them whole, with no
// limit of their own (a 2 GiB --creds took 4 GB and minutes, at every
// reconnect).
const MaxSecretFileBytes = 1 << 20

// checkSecretFiles refuses, before they are read, a credentials file or
// client certificate or key that is not a regular file (a FIFO would
// block) or is larger than MaxSecretFileBytes. The NKey seed and the CA
// are read within limits by natsauth.
func checkSecretFiles(c natsauth.ClientConfig) error {
	if c.CredsFile != "" {
		// nats.go reads it again at every reconnect: a regular file
		if _, err := boundedio.Stat(c.CredsFile, MaxSecretFileBytes); err != nil {
			return fmt.Errorf("--creds: %w", err)
		}
	}
	for _, f := range []struct{ flag, path string }{{"--tlscert", c.CertFile}, {"--tlskey", c.KeyFile}} {
		if f.path == "" {
			continue
		}
		// read once: a pipe (`<(vault read ...)`) is fine
		if _, err := boundedio.StatOrPipe(f.path, MaxSecretFileBytes); err != nil {
			return fmt.Errorf("%s: %w", f.flag, err)
		}
	}
	return nil
}

// Call sends one admin request and decodes the JSON answer into out.
func (f *Flags) Call(endpoint string, req coordinator.AdminRequest, out any) error {
	if err := f.validate(); err != nil {
		return err
	}
	opts, err := f.conn.Options()
	if err != nil {
		return err
	}
	// the server reports a refused publish asynchronously: keep it to
	// explain a request that then times out
	denied := make(chan error, 1)
	opts = append(opts, nats.Name("edgectl"), nats.Timeout(f.timeout), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			select {
			case denied <- err:
			default:
			}
		}
	}))
	nc, err := nats.Connect(f.server, opts...)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", f.server, err)
	}
	defer nc.Close()
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	subject := federated.AdminSubjectPrefix + "." + endpoint
	msg, err := nc.Request(subject, body, f.timeout)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return fmt.Errorf("no coordinator answers on %s at %s (is edge-coordinator running?)", subject, f.server)
	case errors.Is(err, nats.ErrTimeout):
		select {
		case perr := <-denied:
			return fmt.Errorf("%s: the NATS server refused this identity (is it an operator's? --nkey): %w", endpoint, perr)
		default:
		}
		return fmt.Errorf("coordinator did not answer %s within %v", endpoint, f.timeout)
	case err != nil:
		return fmt.Errorf("%s: %w", endpoint, err)
	}
	if e := msg.Header.Get(micro.ErrorHeader); e != "" {
		// the coordinator's errors start with its own name already
		return &ServerError{Code: msg.Header.Get(micro.ErrorCodeHeader), Message: strings.TrimPrefix(e, "coordinator: ")}
	}
	return decodeReply(endpoint, msg.Data, MaxReplyBytes, out)
}

// ServerError is the coordinator's refusal of a request: an HTTP-like
// code ("400", "409", "413", "500", "503") and its description.
type ServerError struct {
	Code, Message string
}

func (e *ServerError) Error() string { return fmt.Sprintf("coordinator: %s (%s)", e.Message, e.Code) }

// MaxReplyBytes caps an answer of the coordinator (an admin, region or
// replica reply) that Call decodes: the largest max_payload
// natsauth.ServerOptions accepts for a hub (its default is 8 MiB), so no
// answer an edgesched hub can carry is refused, while the server edgectl
// is pointed at cannot make it decode without bound.
const MaxReplyBytes = 64 << 20

// decodeReply decodes endpoint's JSON answer into out, refusing one over
// max bytes (boundedio.ErrTooLarge) before decoding it.
func decodeReply(endpoint string, data []byte, max int, out any) error {
	if len(data) > max {
		return fmt.Errorf("decode %s answer: %w: %d bytes, the limit is %d", endpoint, boundedio.ErrTooLarge, len(data), max)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode %s answer: %w", endpoint, err)
	}
	return nil
}

// Print writes v as -o asks (cmdutil.PrintData), the table with table.
func (f *Flags) Print(w io.Writer, v any, table func(tw *tabwriter.Writer)) error {
	return cmdutil.PrintData(w, f.output, v, func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		table(tw)
		return tw.Flush()
	})
}

// Ago formats how long ago t was ("-" for never).
func Ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String() + " ago"
}

// Dash formats a version or round number, "-" for none.
func Dash(n uint64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// CheckLimit validates a listing's --limit: 1 to the coordinator's
// coordinator.MaxListLimit, a usage error otherwise (checked before any
// request).
func CheckLimit(limit int) error {
	if limit < 1 || limit > coordinator.MaxListLimit {
		return cli.Usagef("--limit %d: want 1 to %d", limit, coordinator.MaxListLimit)
	}
	return nil
}

// VersionArg parses a model version or round number argument: a
// positive decimal number that fits 64 bits, optionally after one "v"
// ("12", "v12"), and nothing else (no sign, space, fraction or suffix).
func VersionArg(what, s string) (uint64, error) {
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "v"), 10, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("%s %q: want a positive number", what, s)
	}
	return v, nil
}
