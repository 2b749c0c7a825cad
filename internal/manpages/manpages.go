package manpages

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/spf13/cobra/doc"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/internal/edgectl"
)

// Write writes the pages into dir (created if missing) and returns their
// paths, sorted. date is the pages' date (the commit's, for reproducible
// pages).
func Write(dir string, date time.Time) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("man pages: %w", err)
	}
	root := edgectl.NewRootCommand(edgectl.Options{})
	root.DisableAutoGenTag = true
	header := &doc.GenManHeader{Title: "EDGECTL", Section: "1", Source: "edgesched " + cli.Info().Version, Manual: "edgesched manual", Date: &date}
	if err := doc.GenManTreeFromOpts(root, doc.GenManTreeOptions{Header: header, Path: dir, CommandSeparator: "-"}); err != nil {
		return nil, fmt.Errorf("man pages: %w", err)
	}
	pages, err := filepath.Glob(filepath.Join(dir, "edgectl*.1"))
	if err != nil {
		return nil, err
	}
	sort.Strings(pages)
	return pages, nil
}
