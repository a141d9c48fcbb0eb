package sessions

import (
	"context"
	"testing"
)

// TestOnlyTheOperatorExcludesFromTheAudit: the server's --audit-exclude
// leaves paths out of the diff; the workspace's .gitignore does not.
func TestOnlyTheOperatorExcludesFromTheAudit(t *testing.T) {
	ctx := context.Background()
	data := jailData(t)
	m := newManager(t, openDB(t, data), Config{DataDir: data, AuditExclude: []string{"node_modules/", "*.o"}})
	s, err := m.Create(ctx, "alice", CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	write(t, s.Workspace, "node_modules/left/index.js", "x\n")
	write(t, s.Workspace, "sub/main.o", "object\n")
	write(t, s.Workspace, ".gitignore", "kept.txt\n")
	write(t, s.Workspace, "kept.txt", "recorded\n")
	_, d, err := m.Diff(ctx, "alice", s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, f := range d.Files {
		got[f.Path] = f.Status
	}
	if len(got) != 2 || got["kept.txt"] != "added" || got[".gitignore"] != "added" {
		t.Fatalf("diff files %v, want only .gitignore and kept.txt", got)
	}
}
