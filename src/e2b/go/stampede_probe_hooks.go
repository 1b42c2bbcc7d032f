package placement

// stampede's timing probe, the placement package's side (never part of E2B): what a
// decision read, and which of its candidates scores best just before its choice is
// marked.

import (
	"context"

	"github.com/e2b-dev/infra/packages/api/internal/orchestrator/nodemanager"
	"github.com/e2b-dev/infra/packages/api/internal/stampedeprobe"
)

func stampedeProbeNote(scores []stampedeprobe.Score, node *nodemanager.Node, score float64) []stampedeprobe.Score {
	if !stampedeprobe.Enabled() {
		return nil
	}
	pending := int64(0)
	for _, res := range node.PlacementMetrics.InProgress() {
		pending += res.CPUs
	}
	return append(scores, stampedeprobe.Score{Node: node.ID, Score: score, Reported: node.Metrics().CpuAllocated, Pending: pending})
}

func stampedeProbeRead(ctx context.Context, candidates []*nodemanager.Node, scores []stampedeprobe.Score, chosen *nodemanager.Node) {
	d := stampedeprobe.From(ctx)
	if d == nil {
		return
	}
	d.Nodes = candidates
	id := ""
	if chosen != nil {
		id = chosen.ID
	}
	stampedeprobe.Read(d, id, scores)
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
	mine := bk.Score(chosen, res, config)
	best, bestScore := chosen.ID, mine
	for _, n := range nodes {
		if s := bk.Score(n, res, config); s < bestScore {
			best, bestScore = n.ID, s
		}
	}
	return best
}
