package cluster

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgesched/edgesched/agent/trace"
	"github.com/edgesched/edgesched/internal/atomicfile"
	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl/cmdutil"
)

// errNotTraceDB: --db names something that cannot be a trace database.
var errNotTraceDB = errors.New("not a trace database")

// NewTraceCommand returns edgectl trace and its verbs.
func NewTraceCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "Work with a site's recorded workload trace (the edge agent's trace.db)",
	}
	cmd.AddCommand(newTraceExportCommand())
	return cmd
}

func newTraceExportCommand() *cobra.Command {
	var db, out, name string
	var since time.Duration
	cmd := &cobra.Command{
		Use:   "export --db FILE --out FILE [--since DUR]",
		Short: "Write a site's workload trace as a simulator scenario",
		Long: `Export the workload an edge agent recorded (its trace.db, in the agent's data
directory) as a scenario file for 'edgectl sim --scenario' and 'edgectl
train': the site's nodes as node pools, the pods that ran with their
requests, creation and deletion times and measured CPU usage, and the
service dependency graph with call rates (docs/site-leader.md).

The agent holds trace.db locked while it runs: export from a stopped
agent's file, or from a copy taken while it was stopped.`,
		Example: `  edgectl trace export --db /var/lib/edgesched/trace.db --out site.yaml
  edgectl trace export --db trace.db --out last-day.yaml --since 24h
  edgectl sim --scenario site.yaml --policies fgd,learned`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case db == "":
				return cli.Usagef("--db is required (the agent's trace.db)")
			case out == "":
				return cli.Usagef("--out is required (the scenario file to write)")
			case since < 0:
				return cli.Usagef("--since %v: want a positive duration (or 0 for everything)", since)
			}
			fi, err := os.Stat(db)
			switch {
			case err != nil:
				return fmt.Errorf("--db: %w", err)
			case fi.IsDir():
				return fmt.Errorf("--db %s: %w (a directory), want the agent's trace.db", db, errNotTraceDB)
			case !fi.Mode().IsRegular():
				return fmt.Errorf("--db %s: %w (not a regular file), want the agent's trace.db", db, errNotTraceDB)
			case fi.Size() == 0:
				return fmt.Errorf("--db %s: %w (an empty file), want the agent's trace.db", db, errNotTraceDB)
			}
			if err := cmdutil.CheckOutFile("--out", out); err != nil {
				return err
			}
			s, err := trace.OpenStoreReadOnly(db)
			if err != nil {
				return err
			}
			defer s.Close()
			opt := trace.ExportOptions{Name: name, Until: time.Now()}
			if since > 0 {
				opt.Since = opt.Until.Add(-since)
			}
			b, st, err := s.Export(opt)
			if err != nil {
				return err
			}
			if err := atomicfile.Write(out, b, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %d nodes, %d pods (%d with measured CPU usage), %d services, %d dependencies, from %s to %s\n",
				out, st.Nodes, st.Pods, st.Measured, st.Services, st.Dependencies, st.Start.UTC().Format(time.RFC3339), st.End.UTC().Format(time.RFC3339))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&db, "db", "", "the agent's trace database (trace.db)")
	fl.StringVar(&out, "out", "", "scenario file to write")
	fl.DurationVar(&since, "since", 0, "export only the last DUR of the trace (pods running at its start begin at time 0); 0: everything retained")
	fl.StringVar(&name, "name", "site-trace", "the scenario's name")
	return cmd
}
