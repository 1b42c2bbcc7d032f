// Package stampedeprobe is stampede's timing probe for E2B's API: written into a build
// tree by `stampede e2b build --probe`, never part of E2B. It records, with wall-clock
// nanoseconds, the moments of a placement decision (the scores read, the choice made
// visible, the Create's return), the optimistic add/remove and each node sync, one
// line per event, into the file named by STAMPEDE_PROBE_FILE.
//
// The hot path takes no lock: an event claims a slot of a fixed ring with one atomic
// add and publishes it with one atomic store; a single goroutine writes published
// slots out in order. Events past the ring's end are counted, not written.
//
// With STAMPEDE_PROBE_PPROF=HOST:PORT it also serves Go's profiles (net/http/pprof)
// there, with the mutex and block profiles switched on.
package stampedeprobe

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// ringSlots bounds the events of one process (a retry storm makes a few per refusal).
const ringSlots = 1 << 21

type slot struct {
	ready atomic.Bool
	line  string
}

var (
	enabled bool
	ring    []slot
	claimed atomic.Int64
	dropped atomic.Int64
)

func init() {
	path := os.Getenv("STAMPEDE_PROBE_FILE")
	if path == "" {
		return
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "stampede probe: %v\n", err)
		return
	}
	ring = make([]slot, ringSlots)
	enabled = true
	go flush(f)
	if addr := os.Getenv("STAMPEDE_PROBE_PPROF"); addr != "" {
		runtime.SetMutexProfileFraction(1)
		// One blocking event sampled per 10 us spent blocked.
		runtime.SetBlockProfileRate(10_000)
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.ListenAndServe(); err != nil {
				fmt.Fprintf(os.Stderr, "stampede probe pprof: %v\n", err)
			}
		}()
	}
	record("start", "pid="+strconv.Itoa(os.Getpid()))
}

func flush(f *os.File) {
	w := bufio.NewWriterSize(f, 1<<16)
	next := 0
	lastDropped := int64(0)
	for {
		wrote := false
		for next < ringSlots && ring[next].ready.Load() {
			w.WriteString(ring[next].line)
			w.WriteByte('\n')
			ring[next].line = ""
			next++
			wrote = true
		}
		if d := dropped.Load(); d != lastDropped {
			fmt.Fprintf(w, "%d dropped n=%d\n", time.Now().UnixNano(), d)
			lastDropped = d
			wrote = true
		}
		if wrote {
			w.Flush()
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func record(event, fields string) {
	if !enabled {
		return
	}
	i := claimed.Add(1) - 1
	if i >= ringSlots {
		dropped.Add(1)
		return
	}
	ring[i].line = strconv.FormatInt(time.Now().UnixNano(), 10) + " " + event + " " + fields
	ring[i].ready.Store(true)
}

// Enabled says whether this process records.
func Enabled() bool { return enabled }

// Decision follows one sandbox's placement through its attempts.
type Decision struct {
	Sandbox string
	Try     int
	// Nodes are the candidates of the last read, opaque to this package.
	Nodes any
}

type decisionKey struct{}

// With returns ctx carrying d.
func With(ctx context.Context, d *Decision) context.Context {
	if !enabled || d == nil {
		return ctx
	}
	return context.WithValue(ctx, decisionKey{}, d)
}

// From returns the decision ctx carries, or nil.
func From(ctx context.Context) *Decision {
	if ctx == nil {
		return nil
	}
	d, _ := ctx.Value(decisionKey{}).(*Decision)
	return d
}

// Score is one candidate's score as a decision read it.
type Score struct {
	Node     string
	Score    float64
	Reported uint32
	Pending  int64
	// At is when the score was computed (Now).
	At int64
}

// Now is the probe's clock: wall-clock Unix nanoseconds, as every line carries.
func Now() int64 { return time.Now().UnixNano() }

// Read records the scores a decision read, its choice, and when it began reading them
// (begin, from Now).
func Read(d *Decision, chosen string, scores []Score, begin int64) {
	if !enabled || d == nil {
		return
	}
	d.Try++
	var b strings.Builder
	for i, s := range scores {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s:%.6f:%d:%d:%d", s.Node, s.Score, s.Reported, s.Pending, s.At)
	}
	record("read", fmt.Sprintf("sbx=%s try=%d node=%s begin=%d cands=%s", d.Sandbox, d.Try, chosen, begin, b.String()))
}

// Commit records the moment a choice became visible to other decisions (its
// in-progress mark taken), and which candidate scored best just before it.
func Commit(d *Decision, node, bestNow string) {
	if !enabled || d == nil {
		return
	}
	record("commit", fmt.Sprintf("sbx=%s try=%d node=%s best_now=%s", d.Sandbox, d.Try, node, bestNow))
}

// Returned records a Create's return to the API.
func Returned(d *Decision, node string, ok bool) {
	if !enabled || d == nil {
		return
	}
	record("returned", fmt.Sprintf("sbx=%s try=%d node=%s ok=%t", d.Sandbox, d.Try, node, ok))
}

// Optimistic records an optimistic add or remove and the node's figure after it.
func Optimistic(node, op string, cpus int64, after uint32) {
	if !enabled {
		return
	}
	record("optimistic", fmt.Sprintf("node=%s op=%s cpus=%d after=%d", node, op, cpus, after))
}

// SyncApplied records a sync's figure replacing the API's.
func SyncApplied(node string, before, after uint32) {
	if !enabled {
		return
	}
	record("sync", fmt.Sprintf("node=%s before=%d after=%d", node, before, after))
}

// SyncReply records a ServiceInfo call's send and reply times.
func SyncReply(node string, sent time.Time) {
	if !enabled {
		return
	}
	record("sync_reply", fmt.Sprintf("node=%s sent=%d", node, sent.UnixNano()))
}
