package placement

// stampede's timing probe, the placement package's side (never part of E2B): what a
// decision read, and which of its candidates scores best just before its choice is
// marked.
//
// The probe never calls PlacementMetrics.InProgress(): that Items() snapshot starts a
// goroutine per map shard and waits for each, which under a burst is where a decision
// spends its time (docs/real-e2b-api.md), so a probe calling it would stretch the very
// window it measures. It counts the creates in progress instead (Count() takes each
// shard's read lock, no goroutines) and multiplies by the request's vCPU: stampede's
// trials register one template, so every create in progress asks the same.

import (
	"context"
	"math"

	"github.com/e2b-dev/infra/packages/api/internal/orchestrator/nodemanager"
	"github.com/e2b-dev/infra/packages/api/internal/stampedeprobe"
)

// stampedeProbePending is the in-progress vCPU Score adds for node, without Items().
func stampedeProbePending(node *nodemanager.Node, res nodemanager.SandboxResources) int64 {
	return int64(node.PlacementMetrics.InProgressCount()) * res.CPUs
}

func stampedeProbeNote(scores []stampedeprobe.Score, node *nodemanager.Node, score float64, res nodemanager.SandboxResources) []stampedeprobe.Score {
	if !stampedeprobe.Enabled() {
		return nil
	}
	return append(scores, stampedeprobe.Score{Node: node.ID, Score: score, Reported: node.Metrics().CpuAllocated, Pending: stampedeProbePending(node, res), At: stampedeprobe.Now()})
}

func stampedeProbeRead(ctx context.Context, candidates []*nodemanager.Node, scores []stampedeprobe.Score, chosen *nodemanager.Node, begin int64) {
	d := stampedeprobe.From(ctx)
	if d == nil {
		return
	}
	d.Nodes = candidates
	id := ""
	if chosen != nil {
		id = chosen.ID
	}
	stampedeprobe.Read(d, id, scores, begin)
}

// stampedeProbeScoreNow is Score's formula (placement_best_of_K.go at the pinned
// revision) with the in-progress term from stampedeProbePending.
func stampedeProbeScoreNow(node *nodemanager.Node, res nodemanager.SandboxResources, config BestOfKConfig) float64 {
	m := node.Metrics()
	if m.CpuCount == 0 {
		return math.MaxFloat64
	}
	reserved := float64(m.CpuAllocated) + float64(stampedeProbePending(node, res))
	return (float64(res.CPUs) + reserved + config.Alpha*float64(m.CpuPercent)/100) / (config.R * float64(m.CpuCount))
}

// stampedeProbeBestNow re-scores the decision's candidates just before its mark: the
// chosen node when it still scores best (ties included), else the one that does.
func stampedeProbeBestNow(algorithm Algorithm, d *stampedeprobe.Decision, chosen *nodemanager.Node, res nodemanager.SandboxResources) string {
	if !stampedeprobe.Enabled() || d == nil || chosen == nil {
		return ""
	}
	bk, ok := algorithm.(*BestOfK)
	nodes, _ := d.Nodes.([]*nodemanager.Node)
	if !ok || len(nodes) == 0 {
		return ""
	}
	config := bk.getConfig()
	best, bestScore := chosen.ID, stampedeProbeScoreNow(chosen, res, config)
	for _, n := range nodes {
		if s := stampedeProbeScoreNow(n, res, config); s < bestScore {
			best, bestScore = n.ID, s
		}
	}
	return best
}
