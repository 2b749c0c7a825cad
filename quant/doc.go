// Package quant is the int8 side of the policy and the system's model
// format: signed artifacts (Artifact, Encode, Decode; docs/quant.md),
// ed25519 keys (Signer, Keyring), quantization of a float model calibrated
// on simulator states (CollectRows, Quantize) against its float reference
// (ReferenceScores), the integer arithmetic an int8 artifact's scales
// stand for (QuantizeInput, Artifact.Requantization), and what model
// identity and trust mean to every loader: the abbreviated model ID
// (ShortID), rollback and freshness checks (CheckNewer, CheckFresh) and
// the rollback floor record the agent and the scheduler keep (Floor,
// DecodeFloor). Its subpackages: quant/int8net runs int8 artifacts (the
// all-integer scorer, its portable and vector kernels, the int8 policy
// in the simulator), quant/esu is the codec of federated weight updates,
// quant/agreement measures how often the int8 policy decides as the
// float one.
//
// quant reads a float model as plain data (policy.FloatModel; policy/nn's
// Model.Float makes one, nn.FromArtifact rebuilds one from a float32
// artifact), so it does not link the trainable network or gorgonia, and
// neither does the scheduler that links quant.
//
// Concurrency and lifetimes: an Artifact and a Requantization are plain
// values; a Keyring is read-only once built and safe to share. Decode
// never trusts its input: the signature is checked before anything else
// is read.
package quant
