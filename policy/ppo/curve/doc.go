// Package curve draws a PPO training run's curve (training_curve.png):
// the mean training-episode return per PPO iteration and the evaluation
// measure where it was taken. `edgectl train` writes it beside the run's
// other outputs (docs/training.md).
//
// It lives apart from package ppo so that what trains without plotting
// (the edge agent's local training) does not link gonum.org/v1/plot and
// its embedded fonts; the plot is not part of the model, so moving it
// changes no trained byte.
//
// Concurrency: Write keeps no state; concurrent calls are safe when they
// write different files.
package curve
