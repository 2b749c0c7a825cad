package boltcheck

import (
	"errors"
	"fmt"
	"os"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrCorrupt wraps every inconsistency the check finds.
var ErrCorrupt = errors.New("boltcheck: database inconsistent")

// Check opens path read-only and checks every page: the free list,
// reachability, and that no page is both used and free. It returns nil
// for a consistent database, an error wrapping ErrCorrupt listing what
// bbolt found, or the error that kept it from opening the file (wrapping
// fs.ErrNotExist when there is none: Check never creates it, unlike a
// read-only bolt.Open).
func Check(path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("boltcheck: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return fmt.Errorf("boltcheck: open %s: %w", path, err)
	}
	defer db.Close()
	var found []error
	if err := db.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			found = append(found, err)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("boltcheck: %s: %w", path, err)
	}
	if len(found) > 0 {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, path, errors.Join(found...))
	}
	return nil
}
