package runner

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The jail swaps a directory for a symlink to a big host directory while
// the server measures: the host directory must never be counted.
func TestDiskUsageNeverFollowsASwappedSymlink(t *testing.T) {
	ws := t.TempDir()
	decoy := t.TempDir()
	if err := os.WriteFile(filepath.Join(decoy, "secret-size"), make([]byte, 8<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(ws, "sub")
	if err := os.MkdirAll(filepath.Join(sub, "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the jail: sub is a directory, then a link to the decoy, and back
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.Rename(sub, sub+".d")
			_ = os.Symlink(decoy, sub)
			_ = os.Remove(sub)
			_ = os.Rename(sub+".d", sub)
		}
	}()
	deadline := time.Now().Add(2 * time.Second)
	walks := 0
	for time.Now().Before(deadline) {
		n, err := DiskUsage(ws)
		walks++
		if err != nil {
			t.Fatal(err)
		}
		if n >= 8<<20 {
			close(stop)
			wg.Wait()
			t.Fatalf("walk %d counted the host directory behind a swapped symlink: %d bytes", walks, n)
		}
	}
	close(stop)
	wg.Wait()
	if walks < 100 {
		t.Fatalf("only %d walks raced the swaps", walks)
	}
}

func TestDiskUsageRefusesATreeTooDeepToMeasure(t *testing.T) {
	ws := t.TempDir()
	deep := ws
	for i := 0; i < maxDepth+2; i++ {
		deep = filepath.Join(deep, "d")
	}
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	n, err := DiskUsage(ws)
	if !errors.Is(err, errTooDeep) || n <= 0 || !strings.Contains(err.Error(), "deeper than 256 levels") {
		t.Fatalf("a tree %d levels deep: %d bytes, %v", maxDepth+2, n, err)
	}
}
