// Package ppo trains the learned policy in the simulator: optional
// behaviour cloning of a teacher (a baseline, or the planning teacher
// fgd-lookahead), then proximal policy optimisation (clipped surrogate,
// GAE(lambda), value loss, entropy bonus, minibatch epochs, Adam,
// gradient-norm clipping) with the project's reward (Reward).
//
// Train is configured by a Config (YAML kind TrainConfig, documented field
// by field in docs/training.md; start from DefaultConfig). Every random
// choice derives from Config.Seed through one PCG stream whose state is
// checkpointed, so a run is reproducible bit for bit on one architecture
// and Go version, resumed or not.
//
// Concurrency: Train runs Config.Workers rollout goroutines per batch of
// episodes, each with its own network copy and environment; it owns and
// waits for them, and stops at the next episode boundary when its context
// is cancelled. Gradient steps run on the calling goroutine.
package ppo
