package edgectl

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/quant"
	"github.com/edgesched/edgesched/sim"
)

func newDemoCommand(opts Options) *cobra.Command {
	var (
		out, progress string
		seed          uint64
		parallel      int
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the simulator comparison on the shipped openb trace and an edge scenario",
		Long: `demo compares every baseline scheduler and the shipped learned policies on
the real openb production trace (1,523 heterogeneous nodes, FGD paper's
inflate method up to 130% of GPU capacity; model "default") and on a replay
of the built-in retail-fleet edge scenario (model "edge"), printing the
tables and writing results and plots under --out.

The federated demo (embedded NATS, coordinator, simulated sites) will join
this command as its parts land.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			runs := []struct {
				sub, scenario string
				mode          sim.Mode
				policies      string
			}{
				{"openb", "", sim.Inflate, "all,learned"},
				{"retail-fleet", "builtin:retail-fleet", sim.Replay, "all,learned:edge"},
			}
			for i, r := range runs {
				in, err := loadInput("", "", r.scenario, nil)
				if err != nil {
					return err
				}
				factories, err := resolvePolicies(r.policies, quant.DecodeOptions{})
				if err != nil {
					return err
				}
				cfg := sim.DefaultRunConfig(r.mode)
				doc, err := runComparison(cmd.Context(), cmd.ErrOrStderr(), opts, comparison{in: in, factories: factories, seeds: []uint64{seed}, cfg: cfg, parallel: parallel, progress: progress})
				if err != nil {
					return err
				}
				if i > 0 {
					fmt.Fprintln(w)
				}
				if err := printTable(w, doc, nil); err != nil {
					return err
				}
				if err := writeOutputs(w, doc, filepath.Join(out, r.sub)); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "demo-out", "directory for results and plots")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the runs")
	cmd.Flags().IntVar(&parallel, "parallel", 0, "concurrent runs (default: number of CPUs)")
	cmd.Flags().StringVar(&progress, "progress", "auto", "progress bar on stderr: auto, always or never")
	return cmd
}
