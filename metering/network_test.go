package metering

import (
	"context"
	"testing"
)

// Bytes a session moved through the egress proxy are a usage record of
// their own kind, summed in reports (records and the daily rollup alike).
func TestNetworkBytesAreReported(t *testing.T) {
	db, _ := openDB(t)
	ctx := context.Background()
	m := mustOpen(t, db, Options{})
	for _, n := range []int64{1000, 2500} {
		if _, err := m.Record(ctx, Record{User: "ann", Session: "s1", Kind: KindNetwork, Bytes: n}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Record(ctx, Record{User: "ann", Session: "s1", Kind: KindNetwork, InputTokens: 5}); err == nil {
		t.Fatal("a network record with tokens was accepted")
	}
	rep, err := m.Report(ctx, ReportQuery{User: "ann", GroupBy: GroupSession})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total.NetworkBytes != 3500 || len(rep.Rows) != 1 || rep.Rows[0].NetworkBytes != 3500 || rep.Total.ToolOutputBytes != 0 {
		t.Fatalf("report: %+v", rep)
	}
	byKind, err := m.Report(ctx, ReportQuery{User: "ann", GroupBy: GroupKind})
	if err != nil {
		t.Fatal(err)
	}
	if len(byKind.Rows) != 1 || byKind.Rows[0].Key != KindNetwork {
		t.Fatalf("by kind: %+v", byKind.Rows)
	}
}
