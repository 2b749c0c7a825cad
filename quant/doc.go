// Package quant is the int8 side of the policy and the system's model
// format: signed artifacts (Artifact, Encode, Decode; docs/quant.md),
// ed25519 keys (Signer, Keyring), quantization of a float model calibrated
// on simulator states (CollectRows, Quantize), the all-integer scorer
// (Int8Net) with its portable and vector (AVX2/AVX-512) kernels, the int8
// policy in the simulator (Factory; how often it agrees with the float
// policy is quant/agreement's), the codec of
// federated weight updates (EncodeUpdate, DecodeUpdate), and what model
// identity and trust mean to every loader: the abbreviated model ID
// (ShortID), rollback and freshness checks (CheckNewer, CheckFresh) and
// the rollback floor record the agent and the scheduler keep (Floor,
// DecodeFloor).
//
// quant reads a float model as plain data (policy.FloatModel; policy/nn's
// Model.Float makes one, nn.FromArtifact rebuilds one from a float32
// artifact), so it does not link the trainable network or gorgonia, and
// neither does the scheduler that links quant.
//
// Concurrency and lifetimes: an Artifact is a plain value; a Keyring and
// an Int8Net are read-only once built and safe to share; an Int8Scorer
// (Int8Net.Scorer) holds scratch and belongs to one goroutine (one
// simulator run or one scheduling cycle at a time). Decode never trusts
// its input: the signature is checked before anything else is read.
package quant
