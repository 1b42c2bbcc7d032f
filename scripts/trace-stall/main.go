// Command trace-stall reads a probed E2B run's execution trace (`trace.out`) beside its
// probe log (`probe.log`) and says where a placement decision's goroutine spent the time
// between reading its scores and making its choice visible: off the CPU waiting to run
// (runnable), blocked (by reason), or in a system call. It is a measuring tool for
// docs/real-e2b-api.md, not part of stampede.
//
// Usage: go run . -tree BUILD_TREE RUN_DIR [RUN_DIR ...]
//
// BUILD_TREE is the probed build's source tree (under the e2b cache's trees/): the window's
// lines in PlaceSandbox are read from its placement.go, from the chooseNode call to the
// probe's commit line.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// window is PlaceSandbox's lines after a decision read its scores and up to its commit.
type window struct{ from, to int }

func findWindow(tree string) (window, error) {
	path := filepath.Join(tree, "packages/api/internal/orchestrator/placement/placement.go")
	f, err := os.Open(path)
	if err != nil {
		return window{}, err
	}
	defer f.Close()
	w := window{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.Contains(line, "algorithm.chooseNode(") && w.from == 0 {
			w.from = n
		}
		if strings.Contains(line, "stampedeprobe.Commit(") {
			w.to = n
		}
	}
	if w.from == 0 || w.to <= w.from {
		return window{}, fmt.Errorf("%s: no chooseNode call before a probe commit line", path)
	}
	return w, nil
}

// phase says where a goroutine stood when it left the CPU.
func (w window) phase(s trace.Stack) string {
	inPlace, line := false, 0
	for f := range s.Frames() {
		if strings.Contains(f.Func, "chooseNode") {
			return "read"
		}
		if strings.HasSuffix(f.Func, "placement.PlaceSandbox") {
			inPlace, line = true, int(f.Line)
		}
	}
	if !inPlace {
		return ""
	}
	if line > w.from && line <= w.to {
		return "window"
	}
	return "other"
}

type offCPU struct {
	since time.Duration // trace time the goroutine left the CPU
	state string
	phase string
	where string // the innermost frame outside the runtime and sync
}

// where names the innermost frame of s outside the runtime, sync and internal packages.
func where(s trace.Stack) string {
	for f := range s.Frames() {
		if strings.HasPrefix(f.Func, "runtime.") || strings.HasPrefix(f.Func, "sync.") || strings.HasPrefix(f.Func, "internal/") {
			continue
		}
		return fmt.Sprintf("%s:%d", f.Func, f.Line)
	}
	return "?"
}

type totals struct {
	count int
	sum   time.Duration
}

func main() {
	tree := flag.String("tree", "", "the probed build's source tree")
	flag.Parse()
	if *tree == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: trace-stall -tree BUILD_TREE RUN_DIR [RUN_DIR ...]")
		os.Exit(2)
	}
	w, err := findWindow(*tree)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("window: placement.go lines %d..%d\n", w.from+1, w.to)
	for _, dir := range flag.Args() {
		if err := analyse(w, dir); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", dir, err)
			os.Exit(1)
		}
	}
}

// probeLags reads the probe log: each decision's read-to-commit lag and the burst's
// wall-clock span (first read to last commit).
func probeLags(dir string) (lags []time.Duration, first, last int64, err error) {
	f, err := os.Open(filepath.Join(dir, "probe.log"))
	if err != nil {
		return nil, 0, 0, err
	}
	defer f.Close()
	read := map[string]int64{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || (fields[1] != "read" && fields[1] != "commit") {
			continue
		}
		ns, perr := strconv.ParseInt(fields[0], 10, 64)
		if perr != nil {
			continue
		}
		key := fields[2] + " " + fields[3]
		if fields[1] == "read" {
			read[key] = ns
			if first == 0 || ns < first {
				first = ns
			}
		} else if r, ok := read[key]; ok {
			lags = append(lags, time.Duration(ns-r))
			if ns > last {
				last = ns
			}
		}
	}
	return lags, first, last, sc.Err()
}

func analyse(w window, dir string) error {
	lags, firstWall, lastWall, err := probeLags(dir)
	if err != nil {
		return err
	}
	f, err := os.Open(filepath.Join(dir, "trace.out"))
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := trace.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return err
	}
	var (
		snapTrace trace.Time
		snapWall  int64
		haveSnap  bool
		start     trace.Time
		started   bool
		off       = map[trace.GoID]offCPU{}
		perGo     = map[trace.GoID]time.Duration{}
		byState   = map[string]*totals{}
		byWhere   = map[string]*totals{}
		gcMark    time.Duration
		gcSince   = map[string]time.Duration{}
		stw       totals
	)
	// burst turns the probe's wall span into trace offsets once a clock snapshot is seen.
	burst := func() (time.Duration, time.Duration, bool) {
		if !haveSnap {
			return 0, 0, false
		}
		base := snapTrace.Sub(start)
		return base + time.Duration(firstWall-snapWall), base + time.Duration(lastWall-snapWall), true
	}
	inBurst := func(t time.Duration) bool {
		b0, b1, ok := burst()
		return ok && t >= b0 && t <= b1
	}
	for {
		ev, err := r.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if !started {
			start, started = ev.Time(), true
		}
		t := ev.Time().Sub(start)
		switch ev.Kind() {
		case trace.EventSync:
			if s := ev.Sync(); s.ClockSnapshot != nil && !haveSnap {
				snapTrace, snapWall, haveSnap = s.ClockSnapshot.Trace, s.ClockSnapshot.Wall.UnixNano(), true
			}
		case trace.EventRangeBegin, trace.EventRangeEnd:
			name := ev.Range().Name
			if ev.Kind() == trace.EventRangeBegin {
				gcSince[name] = t
				continue
			}
			began, ok := gcSince[name]
			if !ok {
				continue
			}
			if inBurst(t) || inBurst(began) {
				if strings.Contains(name, "mark phase") {
					gcMark += t - began
				} else if strings.Contains(name, "stop-the-world") {
					stw.count++
					stw.sum += t - began
				}
			}
		case trace.EventStateTransition:
			st := ev.StateTransition()
			if st.Resource.Kind != trace.ResourceGoroutine {
				continue
			}
			g := st.Resource.Goroutine()
			from, to := st.Goroutine()
			if from == trace.GoRunning && to != trace.GoRunning {
				state := to.String()
				if to == trace.GoWaiting && st.Reason != "" {
					state += " (" + st.Reason + ")"
				}
				off[g] = offCPU{since: t, state: state, phase: w.phase(st.Stack), where: where(st.Stack)}
			}
			if to == trace.GoRunning {
				if o, ok := off[g]; ok && o.phase == "window" {
					d := t - o.since
					perGo[g] += d
					tot := byState[o.state]
					if tot == nil {
						tot = &totals{}
						byState[o.state] = tot
					}
					tot.count++
					tot.sum += d
					key := o.state + " at " + o.where
					wt := byWhere[key]
					if wt == nil {
						wt = &totals{}
						byWhere[key] = wt
					}
					wt.count++
					wt.sum += d
				}
				delete(off, g)
			}
		}
	}
	b0, b1, ok := burst()
	if !ok {
		return fmt.Errorf("the trace has no clock snapshot to align the probe's wall clock with")
	}
	fmt.Printf("\n%s\n", dir)
	fmt.Printf("  burst (first read to last commit): %v from the trace's start, %v long\n", b0.Round(time.Millisecond), (b1 - b0).Round(time.Millisecond))
	fmt.Printf("  probe lag read->commit (%d decisions): %s\n", len(lags), quantiles(lags))
	var goSums []time.Duration
	var all time.Duration
	for _, d := range perGo {
		goSums = append(goSums, d)
		all += d
	}
	fmt.Printf("  off-CPU inside the window, per goroutine (%d goroutines left the CPU there): %s\n", len(goSums), quantiles(goSums))
	var lagSum time.Duration
	for _, l := range lags {
		lagSum += l
	}
	fmt.Printf("  off-CPU inside the window, all decisions: %v of the lags' %v (%.0f%%)\n", all.Round(time.Millisecond), lagSum.Round(time.Millisecond), 100*all.Seconds()/lagSum.Seconds())
	states := make([]string, 0, len(byState))
	for s := range byState {
		states = append(states, s)
	}
	sort.Slice(states, func(i, j int) bool { return byState[states[i]].sum > byState[states[j]].sum })
	for _, s := range states {
		tot := byState[s]
		fmt.Printf("    %-40s %5d times  %9v  (%.0f%%)\n", s, tot.count, tot.sum.Round(time.Millisecond), 100*tot.sum.Seconds()/all.Seconds())
	}
	places := make([]string, 0, len(byWhere))
	for s := range byWhere {
		places = append(places, s)
	}
	sort.Slice(places, func(i, j int) bool { return byWhere[places[i]].sum > byWhere[places[j]].sum })
	for i, s := range places {
		if i == 5 {
			break
		}
		tot := byWhere[s]
		fmt.Printf("      %5d times %9v  %s\n", tot.count, tot.sum.Round(time.Millisecond), s)
	}
	fmt.Printf("  GC during the burst: mark phase %v, %d stop-the-world pauses totalling %v\n", gcMark.Round(time.Millisecond), stw.count, stw.sum.Round(time.Microsecond))
	return nil
}

func quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	q := func(p float64) time.Duration { return ds[int(p*float64(len(ds)-1))].Round(10 * time.Microsecond) }
	return fmt.Sprintf("p50 %v, p95 %v, max %v", q(0.5), q(0.95), q(1))
}
