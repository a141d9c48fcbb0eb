package sessions

import (
	"context"
	"database/sql"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// heartbeat renews this replica's leases (every TTL/5), answers handover
// requests (every handoverPoll), and kills the jails of leases it could
// not renew before they went stale.
func (l *leaser) heartbeat(ctx context.Context) {
	defer close(l.done)
	poll := time.NewTicker(handoverPoll)
	defer poll.Stop()
	renewEvery := l.ttl / 5
	lastRenew := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		}
		if l.heldCount() == 0 {
			lastRenew = time.Now()
			continue // nothing to renew, nobody can ask us for anything
		}
		l.answerHandovers(ctx)
		if time.Since(lastRenew) >= renewEvery {
			lastRenew = time.Now()
			l.renewAll(ctx)
		}
	}
}

func (l *leaser) heldCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

// renewAll renews every lease this replica holds in one statement; those
// the database no longer gives it are lost, and so are those whose
// validity ran out while the database could not be reached.
func (l *leaser) renewAll(ctx context.Context) {
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, l.validFor()/2)
	defer cancel()
	rows, err := l.db.QueryContext(rctx, `UPDATE session_leases SET expires_at = `+l.now+` + ? WHERE holder = ?
		RETURNING session_id, epoch`, l.ttl.Milliseconds(), l.id)
	renewed := map[string]int64{}
	if err == nil {
		for rows.Next() {
			var id string
			var epoch int64
			if rows.Scan(&id, &epoch) == nil {
				renewed[id] = epoch
			}
		}
		err = rows.Err()
		rows.Close()
	}
	type gone struct {
		id    string
		epoch int64
		why   string
	}
	var lost []gone
	var strays []gone
	l.mu.Lock()
	for id, h := range l.held {
		e, ok := renewed[id]
		switch {
		case err == nil && ok && e == h.epoch:
			h.valid = start.Add(l.validFor())
		case err == nil:
			lost = append(lost, gone{id, h.epoch, "another replica took it over"})
		case time.Now().After(h.valid):
			lost = append(lost, gone{id, h.epoch, "the database could not be reached to renew it"})
		}
	}
	// A row under this id that no held lease explains, twice in a row (a
	// take records its lease right after its row is written): give it up.
	seen := map[string]int64{}
	for id, e := range renewed {
		if h := l.held[id]; h == nil || h.epoch != e {
			if prev, ok := l.strays[id]; ok && prev == e {
				strays = append(strays, gone{id: id, epoch: e})
			} else {
				seen[id] = e
			}
		}
	}
	l.strays = seen
	l.mu.Unlock()
	for _, g := range lost {
		l.lose(g.id, g.epoch, g.why)
	}
	for _, g := range strays {
		l.release(g.id, g.epoch)
	}
}

// answerHandovers hands over the sessions other replicas ask for.
func (l *leaser) answerHandovers(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rows, err := l.db.QueryContext(qctx, `SELECT session_id, epoch FROM session_leases WHERE holder = ? AND handover <> ''`, l.id)
	if err != nil {
		return
	}
	type ask struct {
		id    string
		epoch int64
	}
	var asks []ask
	for rows.Next() {
		var a ask
		if rows.Scan(&a.id, &a.epoch) == nil {
			asks = append(asks, a)
		}
	}
	rows.Close()
	for _, a := range asks {
		l.mu.Lock()
		h := l.held[a.id]
		start := h != nil && h.epoch == a.epoch && !h.releasing
		if start {
			h.releasing = true
		}
		l.mu.Unlock()
		if start {
			go l.handOver(a.id, a.epoch)
		}
	}
}

// handOver lets session id go: once no command runs in it (up to the
// wait), its cwd and exports are saved, its jail stopped and its lease
// released. A command that outlives the wait keeps the lease: the asker
// gets a clear error.
func (l *leaser) handOver(id string, epoch int64) {
	keep := func() {
		l.mu.Lock()
		if h := l.held[id]; h != nil && h.epoch == epoch {
			h.releasing = false
		}
		l.mu.Unlock()
	}
	deadline := time.Now().Add(l.wait)
	for i := 1; l.m.commandRuns(id); i++ {
		// Stop waiting once nobody asks any more (the asker gave up).
		if time.Now().After(deadline) || (i%10 == 0 && !l.stillAsked(id, epoch)) {
			keep()
			return
		}
		time.Sleep(handoverPoll / 2)
	}
	if err := l.m.saveBeforeHandover(id, l.wait); err != nil {
		l.m.leaseLog("kept the lease: its state could not be saved ("+err.Error()+")", id, epoch)
		keep()
		return
	}
	l.m.letGo(id)
	l.release(id, epoch)
	l.handedOver.Add(1)
	l.m.leaseLog("handed the session over", id, epoch)
}

// stillAsked reports whether another replica still asks for session id's
// lease (true when the database cannot say).
func (l *leaser) stillAsked(id string, epoch int64) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var who string
	err := l.db.QueryRowContext(ctx, `SELECT handover FROM session_leases WHERE session_id = ? AND holder = ? AND epoch = ?`,
		id, l.id, epoch).Scan(&who)
	return err != nil || who != ""
}

// close releases every lease (after the manager saved the shells' state)
// and stops the heartbeat.
func (l *leaser) close() {
	if l == nil {
		return
	}
	l.stop()
	<-l.done
	l.mu.Lock()
	held := l.held
	l.held = map[string]*heldLease{}
	l.mu.Unlock()
	for id, h := range held {
		l.release(id, h.epoch)
	}
}

// commandRuns reports whether a command runs or waits in session id here.
func (m *Manager) commandRuns(id string) bool {
	if m.jobs.running(id) != nil {
		return true
	}
	m.mu.Lock()
	l := m.live[id]
	m.mu.Unlock()
	return l != nil && l.sh.Busy()
}

// saveBeforeHandover writes session id's newest cwd and exports, waiting
// up to wait for the database.
func (m *Manager) saveBeforeHandover(id string, wait time.Duration) error {
	m.mu.Lock()
	l, s := m.live[id], m.known[id]
	m.mu.Unlock()
	if l == nil || s == nil {
		return nil // no jail: the saved state is the newest
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return m.saveState(ctx, s, l.sh)
}

// leaseLog logs a change of a lease of this replica.
func (m *Manager) leaseLog(msg, id string, epoch int64) {
	if m.cfg.LeaseLog != nil {
		m.cfg.LeaseLog(msg, id, epoch)
	}
}

var (
	replicaDesc = prometheus.NewDesc("warren_replica_info",
		"This replica of warren (its id, in the session leases) when sessions are leased (PostgreSQL).", []string{"replica"}, nil)
	leasesHeldDesc = prometheus.NewDesc("warren_session_leases_held",
		"Session leases this replica holds: the sessions whose jails it drives.", nil, nil)
	leaseEventsDesc = prometheus.NewDesc("warren_session_lease_events_total",
		"Session leases this replica took, handed over to another replica, or lost.", []string{"event"}, nil)
)

// LeaseCollector returns the collector of this replica's leases (nothing
// without leases).
func (m *Manager) LeaseCollector() prometheus.Collector { return leaseCollector{m.leases} }

type leaseCollector struct{ l *leaser }

func (c leaseCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- replicaDesc
	ch <- leasesHeldDesc
	ch <- leaseEventsDesc
}

func (c leaseCollector) Collect(ch chan<- prometheus.Metric) {
	if c.l == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(replicaDesc, prometheus.GaugeValue, 1, c.l.id)
	ch <- prometheus.MustNewConstMetric(leasesHeldDesc, prometheus.GaugeValue, float64(c.l.heldCount()))
	ch <- prometheus.MustNewConstMetric(leaseEventsDesc, prometheus.CounterValue, float64(c.l.acquired.Load()), "taken")
	ch <- prometheus.MustNewConstMetric(leaseEventsDesc, prometheus.CounterValue, float64(c.l.handedOver.Load()), "handed_over")
	ch <- prometheus.MustNewConstMetric(leaseEventsDesc, prometheus.CounterValue, float64(c.l.lost.Load()), "lost")
}

var liveLeasesDesc = prometheus.NewDesc("warren_session_leases",
	"Live session leases in the database, by the replica that holds them: which replicas drive jails now.", []string{"replica"}, nil)

// LeaseStateCollector returns a collector of the live leases in db by
// replica, read when collected: the same for every replica and for
// 'warren status'. Nothing on a database without leases.
func LeaseStateCollector(db *sql.DB) prometheus.Collector { return leaseStateCollector{db} }

type leaseStateCollector struct{ db *sql.DB }

func (c leaseStateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- liveLeasesDesc }

func (c leaseStateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := c.db.QueryContext(ctx, `SELECT holder, count(*) FROM session_leases WHERE holder <> '' AND expires_at > `+
		dbNowMillis(c.db)+` GROUP BY holder ORDER BY holder LIMIT 100`)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(liveLeasesDesc, err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var holder string
		var n float64
		if err := rows.Scan(&holder, &n); err != nil {
			ch <- prometheus.NewInvalidMetric(liveLeasesDesc, err)
			return
		}
		ch <- prometheus.MustNewConstMetric(liveLeasesDesc, prometheus.GaugeValue, n, holder)
	}
}

// letGo ends this replica's shell of session id because another replica
// drives the session next (a handover, a lease lost or taken anew). It is
// closed, not stopped: a local jail dies with it, but what a runner away
// from this host runs on (a Kubernetes Sandbox's pod) stays up, so that
// the next holder connects to it at once instead of waiting for the pod
// to be suspended and made again. The runner ends the closed
// connection's shell, and a new connection ends any it still serves.
func (m *Manager) letGo(id string) {
	m.mu.Lock()
	l := m.live[id]
	delete(m.live, id)
	m.mu.Unlock()
	if l == nil {
		return
	}
	l.sh.Close()
	if st := m.sessionState(id); st == StateArchived || st == StateDeleted {
		m.forgetNetwork(id)
	}
}
