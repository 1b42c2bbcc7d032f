package nodemanager

// stampede's `reconciled` variant, never part of E2B: each optimistic add and remove is
// kept per sandbox id and released only when the ids behind a sync's figure confirm it.
// mock-node sends those ids as field 1000 of ServiceInfoResponse, which E2B's generated
// code keeps as an unknown field; a node that does not send them leaves E2B's own
// behaviour (the sync's figure overwrites every add and remove).
//
// The rules are stampede's `reconciled` accounting mode (placement/src/accounting.rs):
// - an add is held while no sync lists its id, and dropped after two syncs that do not
//   list it (the sandbox did not survive);
// - a remove of a listed sandbox is held while syncs still list it;
// - a remove of a sandbox no sync listed yet is remembered, and becomes a held remove
//   if a later (lagged) sync still lists it;
// - a create still in progress that a sync already lists is counted once: the figure
//   counts it, so the in-progress term's copy is taken off until its create returns.
//
// Every field is guarded by the node's metricsMu, the lock E2B's own metric updates take.

import (
	"context"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"

	orchestratorinfo "github.com/e2b-dev/infra/packages/shared/pkg/grpc/orchestrator-info"
)

// stampedeIDsField is ServiceInfoResponse's field 1000, stampede's id list.
const stampedeIDsField protowire.Number = 1000

// stampedeUnseenSyncs is how many syncs may miss an add before it is dropped (stampede's
// `reconcile_unseen_syncs` default).
const stampedeUnseenSyncs = 2

type stampedeHeld struct {
	res    SandboxResources
	missed int
}

type stampedeLedger struct {
	confirmed      map[string]struct{}
	adds           map[string]*stampedeHeld
	removes        map[string]SandboxResources
	unlisted       map[string]SandboxResources
	listedInFlight map[string]SandboxResources
}

var stampedeLedgers sync.Map // *Node -> *stampedeLedger

func newStampedeLedger() *stampedeLedger {
	return &stampedeLedger{
		confirmed:      map[string]struct{}{},
		adds:           map[string]*stampedeHeld{},
		removes:        map[string]SandboxResources{},
		unlisted:       map[string]SandboxResources{},
		listedInFlight: map[string]SandboxResources{},
	}
}

func (n *Node) stampedeLedger() *stampedeLedger {
	if l, ok := stampedeLedgers.Load(n); ok {
		return l.(*stampedeLedger)
	}
	l, _ := stampedeLedgers.LoadOrStore(n, newStampedeLedger())
	return l.(*stampedeLedger)
}

func (n *Node) stampedeMove(res SandboxResources, sign int64) {
	cpu := int64(n.metrics.CpuAllocated) + sign*res.CPUs
	mem := int64(n.metrics.MemoryAllocatedBytes) + sign*res.MiBMemory*1024*1024
	n.metrics.CpuAllocated = uint32(max(cpu, 0))
	n.metrics.MemoryAllocatedBytes = uint64(max(mem, 0))
}

// StampedeReconciledAdd replaces OptimisticAdd: the create of sandboxID succeeded.
func (n *Node) StampedeReconciledAdd(sandboxID string, res SandboxResources) {
	n.metricsMu.Lock()
	defer n.metricsMu.Unlock()
	l := n.stampedeLedger()
	if taken, ok := l.listedInFlight[sandboxID]; ok {
		// The in-progress term no longer counts it: give back what the sync took off.
		delete(l.listedInFlight, sandboxID)
		n.stampedeMove(taken, 1)
		return
	}
	if _, ok := l.confirmed[sandboxID]; ok {
		return // the figure counts it already
	}
	if old, ok := l.adds[sandboxID]; ok {
		n.stampedeMove(old.res, -1)
	}
	l.adds[sandboxID] = &stampedeHeld{res: res}
	n.stampedeMove(res, 1)
}

// StampedeReconciledRemove replaces OptimisticRemove: sandboxID was deleted from the node.
func (n *Node) StampedeReconciledRemove(_ context.Context, sandboxID string, res SandboxResources) {
	n.metricsMu.Lock()
	defer n.metricsMu.Unlock()
	l := n.stampedeLedger()
	if held, ok := l.adds[sandboxID]; ok {
		delete(l.adds, sandboxID)
		n.stampedeMove(held.res, -1)
		l.unlisted[sandboxID] = held.res
		return
	}
	if _, ok := l.confirmed[sandboxID]; ok {
		if _, held := l.removes[sandboxID]; !held {
			l.removes[sandboxID] = res
			n.stampedeMove(res, -1)
		}
		return
	}
	l.unlisted[sandboxID] = res
}

// stampedeIDs reads field 1000 of info: the ids behind its figure, and whether it was sent.
func stampedeIDs(info *orchestratorinfo.ServiceInfoResponse) (map[string]struct{}, bool) {
	raw := info.ProtoReflect().GetUnknown()
	var ids map[string]struct{}
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if n < 0 {
			return nil, false
		}
		raw = raw[n:]
		if num != stampedeIDsField || typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(num, typ, raw)
			if m < 0 {
				return nil, false
			}
			raw = raw[m:]
			continue
		}
		list, m := protowire.ConsumeBytes(raw)
		if m < 0 {
			return nil, false
		}
		raw = raw[m:]
		if ids == nil {
			ids = map[string]struct{}{}
		}
		for len(list) > 0 {
			inum, ityp, k := protowire.ConsumeTag(list)
			if k < 0 {
				return nil, false
			}
			list = list[k:]
			if inum == 1 && ityp == protowire.BytesType {
				id, k := protowire.ConsumeBytes(list)
				if k < 0 {
					return nil, false
				}
				ids[string(id)] = struct{}{}
				list = list[k:]
				continue
			}
			k = protowire.ConsumeFieldValue(inum, ityp, list)
			if k < 0 {
				return nil, false
			}
			list = list[k:]
		}
	}
	return ids, ids != nil
}

// stampedeReconcile runs inside UpdateMetricsFromServiceInfoResponse (metricsMu held),
// after the reply's figures replaced the node's: it puts back what no sync confirmed.
func (n *Node) stampedeReconcile(info *orchestratorinfo.ServiceInfoResponse) {
	l := n.stampedeLedger()
	ids, sent := stampedeIDs(info)
	if !sent {
		*l = *newStampedeLedger()
		return
	}
	l.confirmed = ids
	for id := range l.removes {
		if _, ok := ids[id]; !ok {
			delete(l.removes, id)
		}
	}
	for id, res := range l.unlisted {
		if _, ok := ids[id]; ok {
			if _, held := l.removes[id]; !held {
				l.removes[id] = res
			}
		}
	}
	l.unlisted = map[string]SandboxResources{}
	for id, held := range l.adds {
		if _, ok := ids[id]; ok {
			delete(l.adds, id)
			continue
		}
		held.missed++
		if held.missed >= stampedeUnseenSyncs {
			delete(l.adds, id)
		}
	}
	l.listedInFlight = map[string]SandboxResources{}
	for id, res := range n.PlacementMetrics.InProgress() {
		if _, ok := ids[id]; ok {
			l.listedInFlight[id] = res
		}
	}
	for _, held := range l.adds {
		n.stampedeMove(held.res, 1)
	}
	for _, res := range l.removes {
		n.stampedeMove(res, -1)
	}
	for _, res := range l.listedInFlight {
		n.stampedeMove(res, -1)
	}
}
