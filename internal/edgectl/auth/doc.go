// Package auth holds edgectl auth and its verbs: the fleet's identities
// and keys in a key directory (init, site create|list|revoke, model-key
// rotate|retire), the NATS server's authorization config (config) and
// TLS certificates (tls). Package federated/natsauth does the work; these
// verbs parse flags, call it and print what to do next.
//
// Each constructor returns a new command with its own flags. The verbs
// change the key directory through natsauth.Dir, which locks it for each
// change.
package auth
