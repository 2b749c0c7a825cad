// Package natsflags is the NATS connection every edgesched program takes
// from its command line, named as the nats CLI names it (docs/cli.md,
// "NATS connection"):
//
//	-s, --server URL   $NATS_URL       the server (comma-separated URLs)
//	--context NAME     $NATS_CONTEXT   a nats CLI context (~/.config/nats/context/NAME.json)
//	--creds FILE       $NATS_CREDS     a credentials file (user JWT and seed)
//	--nkey FILE        $NATS_NKEY      an NKey seed file (edgectl auth)
//	--tlsca FILE       $NATS_CA        the CA that verifies the server; turns TLS on
//	--tlscert FILE     $NATS_CERT      a client certificate (mutual TLS)
//	--tlskey FILE      $NATS_KEY       its private key
//	--inbox-prefix P                   reply subjects (the identity's permissions)
//
// Each setting comes from, first to last: its flag, its environment
// variable, the context (--context, else $NATS_CONTEXT, else — where the
// program allows it, edgectl — the nats CLI's selected context in
// ~/.config/nats/context.txt), the program's default. Contexts are the
// nats CLI's files under $XDG_CONFIG_HOME/nats, else $HOME/.config/nats,
// read here (the nats CLI's package, jsm.go/natscontext, would link the
// NATS server's packages into edge-agent): url, creds, nkey, cert, key,
// ca and inbox_prefix, with ~ and $VAR expanded; a context that
// authenticates otherwise (user, token, inline JWT, nsc) is refused.
//
// The old names stay as deprecated aliases that print a warning when used:
// --nats (the daemons' server flag, Options.LegacyServerFlag), --tls-ca,
// --tls-cert and --tls-key. AddPFlags registers them on a pflag set: every
// edgesched binary is on cobra.
//
// A Flags is filled by one parse and read by one goroutine; Resolve reads
// the environment and the context files when called, not at registration.
package natsflags
