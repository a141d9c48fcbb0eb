package web

import (
	"fmt"
	"math"
	"net"
	"net/http"
	"time"
)

// Limits of console sign-ins: a person signs in a few times a day; a
// script trying tokens, or a user churning sign-ins, is slowed down to
// this.
const (
	// addrBurst sign-in attempts from one address pass at once, then one
	// more every addrEvery.
	addrBurst = 20
	addrEvery = 3 * time.Second
	// userBurst successful sign-ins of one user pass at once, then one
	// more every userEvery.
	userBurst = 10
	userEvery = 30 * time.Second
	// maxLimiterKeys bounds the addresses (and users) a limiter tracks.
	maxLimiterKeys = 4096
)

// limiter is a token bucket per key (an address or a user), bounded in the
// keys it holds. Its caller serializes calls (logins.mu).
type limiter struct {
	burst   float64
	every   time.Duration
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newLimiter(burst int, every time.Duration) *limiter {
	return &limiter{burst: float64(burst), every: every, buckets: map[string]*bucket{}}
}

// level is how many attempts key has left at now, refilled since last time.
func (l *limiter) level(key string, now time.Time) float64 {
	b, ok := l.buckets[key]
	if !ok {
		return l.burst
	}
	return min(l.burst, b.tokens+float64(now.Sub(b.at))/float64(l.every))
}

// wait is how long key has to wait for its next attempt: 0 when it may
// go now.
func (l *limiter) wait(key string, now time.Time) time.Duration {
	lv := l.level(key, now)
	if lv >= 1 {
		return 0
	}
	return time.Duration(math.Ceil((1 - lv) * float64(l.every)))
}

// take spends one attempt of key; call it after wait said 0.
func (l *limiter) take(key string, now time.Time) {
	lv := l.level(key, now)
	if _, ok := l.buckets[key]; !ok && len(l.buckets) >= maxLimiterKeys {
		l.prune(now)
	}
	l.buckets[key] = &bucket{tokens: max(0, lv-1), at: now}
}

// prune forgets the keys whose buckets are full again (they would start
// full anyway). When the keys are still too many (a flood from thousands
// of addresses), it forgets them all: the limits then start over, which
// costs the flood's sources nothing they could not get from more
// addresses, while the server's memory stays bounded.
func (l *limiter) prune(now time.Time) {
	for k := range l.buckets {
		if l.level(k, now) >= l.burst {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= maxLimiterKeys {
		clear(l.buckets)
	}
}

// clientAddr is the key of r's address for the limit: its IP, or for IPv6
// its /64, since one host commonly holds a whole /64.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}

// tooMany is a refusal for going over a limit: HTTP 429 with Retry-After.
type tooMany struct {
	what  string
	retry time.Duration
}

func (e *tooMany) Error() string {
	return fmt.Sprintf("too many %s: try again in %s", e.what, time.Duration(e.seconds())*time.Second)
}

// seconds is the wait in whole seconds, at least 1 (Retry-After).
func (e *tooMany) seconds() int {
	return max(1, int(math.Ceil(e.retry.Seconds())))
}
