package sessions

import (
	"context"
	"testing"
)

// BenchmarkSnapshotOfAnUnchangedTree is a snapshot (as pause takes) of a
// workspace of 10,000 files that did not change since the last one: the
// runner sends each file's stamp and no content, and the server reads no
// workspace path.
// go test -run X -bench SnapshotOfAnUnchangedTree -benchtime 5x ./sessions/
func BenchmarkSnapshotOfAnUnchangedTree(b *testing.B) {
	ctx := context.Background()
	data := jailData(b)
	m := newManager(b, openDB(b, data), Config{DataDir: data})
	b.Cleanup(func() { m.Close(context.Background()) })
	s, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	run(b, m, "alice", s.ID, `for d in $(seq 100); do mkdir d$d; for f in $(seq 100); do echo "file $d $f" > d$d/f$f; done; done; touch -d '1 hour ago' d*/* d*`)
	if err := m.snapshot(ctx, s, "first"); err != nil { // the first reads everything
		b.Fatal(err)
	}
	for b.Loop() {
		if err := m.snapshot(ctx, s, "again"); err != nil {
			b.Fatal(err)
		}
	}
}
