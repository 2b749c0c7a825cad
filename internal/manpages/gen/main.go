// Command gen writes edgectl's man pages (package manpages): make man.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/edgesched/edgesched/internal/manpages"
)

func main() {
	out := flag.String("out", "bin/man", "directory for the pages")
	flag.Parse()
	// SOURCE_DATE_EPOCH (reproducible builds; the Makefile passes the
	// commit's time), else now
	date := time.Now().UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gen: SOURCE_DATE_EPOCH %q: %v\n", s, err)
			os.Exit(2)
		}
		date = time.Unix(sec, 0).UTC()
	}
	pages, err := manpages.Write(*out, date)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %d man pages into %s (man -l %s/edgectl.1)\n", len(pages), *out, *out)
}
