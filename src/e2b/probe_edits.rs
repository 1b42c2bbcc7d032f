//! stampede's own edits to a build tree of E2B's API: the timing probe
//! (`--probe`) and the variants `locked-choice` and `reconciled`. Each edit hangs on a line of E2B's
//! code (`go_edit`), so a revision whose code moved fails with what was looked for.
//!
//! Where the probe looks (e2b-dev/infra, `packages/api/internal/orchestrator/`):
//! - `placement/placement_best_of_K.go`, `chooseNode`: the K scores read and the choice;
//! - `placement/placement.go`, `PlaceSandbox`: `StartPlacing` (the choice made visible
//!   to other decisions) and the return of `SandboxCreate` (the create no longer in
//!   progress);
//! - `nodemanager/node.go`: `OptimisticAdd` / `OptimisticRemove`;
//! - `nodemanager/sync.go` and `nodemanager/metrics.go`: a sync's `ServiceInfo` reply and
//!   the figure it replaces.

use std::path::Path;

use super::go_edit::{self, At, Edit, EditError};

const PLACEMENT: &str = "packages/api/internal/orchestrator/placement/placement.go";
const BEST_OF_K: &str = "packages/api/internal/orchestrator/placement/placement_best_of_K.go";
const NODE: &str = "packages/api/internal/orchestrator/nodemanager/node.go";
const METRICS: &str = "packages/api/internal/orchestrator/nodemanager/metrics.go";
const SYNC: &str = "packages/api/internal/orchestrator/nodemanager/sync.go";
const DELETE: &str = "packages/api/internal/orchestrator/delete_instance.go";

/// The probe's package, stampede's Go source.
const PROBE_PACKAGE: &str = include_str!("go/stampedeprobe.go");
/// Where it goes in the tree.
const PROBE_PACKAGE_PATH: &str = "packages/api/internal/stampedeprobe/stampedeprobe.go";
/// The import line every probed file gets.
const PROBE_IMPORT: &str = "\"github.com/e2b-dev/infra/packages/api/internal/stampedeprobe\"";
/// The placement package's side of the probe (it knows nodes and scores).
const PROBE_HOOKS: &str = include_str!("go/stampede_probe_hooks.go");
const PROBE_HOOKS_PATH: &str =
    "packages/api/internal/orchestrator/placement/stampede_probe_hooks.go";
/// The lock of the `locked-choice` fix.
const LOCK_FILE: &str = include_str!("go/stampede_locked_choice.go");
const LOCK_FILE_PATH: &str =
    "packages/api/internal/orchestrator/placement/stampede_locked_choice.go";
/// The per-sandbox ledger of the `reconciled` variant.
const RECONCILED_FILE: &str = include_str!("go/stampede_reconciled.go");
const RECONCILED_FILE_PATH: &str =
    "packages/api/internal/orchestrator/nodemanager/stampede_reconciled.go";

/// The import block's first E2B import, where a probed file gets the probe's.
const E2B_IMPORT: &str = "\"github.com/e2b-dev/infra/packages/api/internal/";

/// The request's resources, as `PlaceSandbox` builds them for `chooseNode`.
const RESOURCES: &str = "nodemanager.SandboxResources{CPUs: sbxRequest.GetSandbox().GetVcpu(), MiBMemory: sbxRequest.GetSandbox().GetRamMb()}";

/// The probe's import goes before the first import of E2B's own packages in `file`.
fn import_first(root: &Path, file: &'static str) -> Result<Edit, EditError> {
    let path = root.join(file);
    let text = std::fs::read_to_string(&path).map_err(|source| EditError::Io { path, source })?;
    let first = text
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(E2B_IMPORT))
        .ok_or_else(|| EditError::Anchor {
            file,
            anchor: E2B_IMPORT.into(),
            found: 0,
            expected: 1,
        })?;
    Ok(Edit::once(file, first, At::Before, PROBE_IMPORT))
}

/// A short fingerprint of stampede's Go sources and of this file's edits, part of a
/// probed or fixed build's cache key: a build made with other edits is not reused.
pub fn fingerprint() -> String {
    let text = [
        PROBE_PACKAGE,
        PROBE_HOOKS,
        LOCK_FILE,
        RECONCILED_FILE,
        include_str!("probe_edits.rs"),
    ]
    .concat();
    let h = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{:08x}", h >> 32)
}

/// Writes the probe into the tree at `root`.
pub fn apply_probe(root: &Path) -> Result<(), EditError> {
    go_edit::add_file(root, PROBE_PACKAGE_PATH, PROBE_PACKAGE)?;
    go_edit::add_file(root, PROBE_HOOKS_PATH, PROBE_HOOKS)?;
    let mut edits = Vec::new();
    for f in [PLACEMENT, BEST_OF_K, NODE, METRICS, SYNC] {
        edits.push(import_first(root, f)?);
    }
    edits.extend([
        // PlaceSandbox: one decision record per request, carried to chooseNode.
        Edit::once(
            PLACEMENT,
            "nodesExcluded := make(map[string]struct{})",
            At::After,
            "stampedeDecision := &stampedeprobe.Decision{Sandbox: sbxRequest.GetSandbox().GetSandboxId()}\nstampedeCtx := stampedeprobe.With(ctx, stampedeDecision)",
        ),
        Edit::once(
            PLACEMENT,
            "node, err = algorithm.chooseNode(ctx,",
            At::Swap("chooseNode(ctx,", "chooseNode(stampedeCtx,"),
            "",
        ),
        Edit::once(
            PLACEMENT,
            "node.PlacementMetrics.StartPlacing(",
            At::Before,
            format!("stampedeBestNow := stampedeProbeBestNow(algorithm, stampedeDecision, node, {RESOURCES})"),
        ),
        Edit::once(
            PLACEMENT,
            "node.PlacementMetrics.StartPlacing(",
            At::AfterEnd("})"),
            "stampedeprobe.Commit(stampedeDecision, node.ID, stampedeBestNow)",
        ),
        Edit::once(
            PLACEMENT,
            "resp, err := node.SandboxCreate(ctx, sbxRequest)",
            At::After,
            "stampedeprobe.Returned(stampedeDecision, node.ID, err == nil)",
        ),
        // chooseNode: the scores as read.
        Edit::once(
            BEST_OF_K,
            "func (b *BestOfK) chooseNode(_ context.Context,",
            At::Swap("chooseNode(_ context.Context,", "chooseNode(stampedeCtx context.Context,"),
            "",
        ),
        Edit::once(
            BEST_OF_K,
            "bestScore := math.MaxFloat64",
            At::After,
            "var stampedeScores []stampedeprobe.Score\nstampedeBegin := stampedeprobe.Now()",
        ),
        Edit::once(
            BEST_OF_K,
            "score := b.Score(node, resources, config)",
            At::After,
            "stampedeScores = stampedeProbeNote(stampedeScores, node, score, resources)",
        ),
        Edit::once(
            BEST_OF_K,
            "if bestNode == nil {",
            At::Before,
            "stampedeProbeRead(stampedeCtx, candidates, stampedeScores, bestNode, stampedeBegin)",
        ),
        // The optimistic add/remove and the figure after each.
        Edit::once(
            NODE,
            "n.metrics.CpuAllocated += uint32(res.CPUs)",
            At::After,
            "stampedeprobe.Optimistic(n.ID, \"add\", res.CPUs, n.metrics.CpuAllocated)",
        ),
        Edit::once(
            NODE,
            "n.metrics.CpuAllocated -= cpu",
            At::After,
            "stampedeprobe.Optimistic(n.ID, \"remove\", res.CPUs, n.metrics.CpuAllocated)",
        ),
        // A sync: its reply's round trip, and the figure it replaces.
        Edit::once(
            SYNC,
            "nodeInfo, err := client.Info.ServiceInfo(ctx, &emptypb.Empty{})",
            At::Before,
            "stampedeSent := time.Now()",
        ),
        Edit::once(
            SYNC,
            "answered = true",
            At::After,
            "stampedeprobe.SyncReply(n.ID, stampedeSent)",
        ),
        Edit::once(
            METRICS,
            "n.metrics.CpuAllocated = info.GetMetricCpuAllocated()",
            At::Before,
            "stampedeprobe.SyncApplied(n.ID, n.metrics.CpuAllocated, info.GetMetricCpuAllocated())",
        ),
    ]);
    go_edit::apply(root, &edits)
}

/// The `locked-choice` fix: a decision's score read and its in-progress mark under one
/// lock, so that no other decision reads the scores between a choice and its mark.
pub fn apply_locked_choice(root: &Path) -> Result<(), EditError> {
    go_edit::add_file(root, LOCK_FILE_PATH, LOCK_FILE)?;
    go_edit::apply(
        root,
        &[
            Edit::once(
                PLACEMENT,
                "for attempt < maxRetries {",
                At::Before,
                "stampedeChoiceHeld := false",
            ),
            Edit::once(
                PLACEMENT,
                "node, err = algorithm.chooseNode(",
                At::Before,
                "stampedeChoiceMu.Lock()",
            ),
            Edit::once(
                PLACEMENT,
                "node, err = algorithm.chooseNode(",
                At::After,
                "if err != nil {\n\tstampedeChoiceMu.Unlock()\n} else {\n\tstampedeChoiceHeld = true\n}",
            ),
            Edit::once(
                PLACEMENT,
                "node.PlacementMetrics.StartPlacing(",
                At::AfterEnd("})"),
                "if stampedeChoiceHeld {\n\tstampedeChoiceHeld = false\n\tstampedeChoiceMu.Unlock()\n}",
            ),
        ],
    )
}

/// The `reconciled` variant: the optimistic add and remove go through a ledger keyed by
/// sandbox id, and a sync's figure gets back what its ids do not confirm yet.
pub fn apply_reconciled(root: &Path) -> Result<(), EditError> {
    go_edit::add_file(root, RECONCILED_FILE_PATH, RECONCILED_FILE)?;
    go_edit::apply(
        root,
        &[
            Edit::once(
                PLACEMENT,
                "node.OptimisticAdd(nodemanager.SandboxResources{",
                At::Swap(
                    "node.OptimisticAdd(",
                    "node.StampedeReconciledAdd(sbxRequest.GetSandbox().GetSandboxId(), ",
                ),
                "",
            ),
            Edit::once(
                DELETE,
                "node.OptimisticRemove(ctx, nodemanager.SandboxResources{",
                At::Swap(
                    "node.OptimisticRemove(ctx, ",
                    "node.StampedeReconciledRemove(ctx, sbx.SandboxID, ",
                ),
                "",
            ),
            Edit::once(
                METRICS,
                "n.metrics.MemoryAllocatedBytes = info.GetMetricMemoryAllocatedBytes()",
                At::After,
                "n.stampedeReconcile(info)",
            ),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::super::test_dir::Dir;
    use super::*;

    const PLACE: &str =
        "\t\t\tnode.OptimisticAdd(nodemanager.SandboxResources{\n\t\t\t\tCPUs: 1,\n\t\t\t})\n";
    const DEL: &str =
        "\tnode.OptimisticRemove(ctx, nodemanager.SandboxResources{\n\t\tCPUs: sbx.VCpu,\n\t})\n";
    const METRIC: &str = "\tn.metrics.CpuAllocated = info.GetMetricCpuAllocated()\n\tn.metrics.MemoryAllocatedBytes = info.GetMetricMemoryAllocatedBytes()\n";

    fn tree(delete: &str) -> Dir {
        let d = Dir::new();
        for (file, text) in [(PLACEMENT, PLACE), (DELETE, delete), (METRICS, METRIC)] {
            d.write(file, text);
        }
        d
    }

    #[test]
    fn reconciled_routes_the_add_the_remove_and_the_sync_through_its_ledger() {
        let d = tree(DEL);
        apply_reconciled(d.path()).unwrap();
        assert!(d.read(PLACEMENT).contains(
            "node.StampedeReconciledAdd(sbxRequest.GetSandbox().GetSandboxId(), nodemanager.SandboxResources{"
        ));
        assert!(d.read(DELETE).contains(
            "node.StampedeReconciledRemove(ctx, sbx.SandboxID, nodemanager.SandboxResources{"
        ));
        let metrics = d.read(METRICS);
        let sync = metrics
            .find("n.stampedeReconcile(info)")
            .expect("reconcile call");
        assert!(
            sync > metrics.find("MemoryAllocatedBytes =").unwrap(),
            "{metrics}"
        );
        assert_eq!(d.read(RECONCILED_FILE_PATH), RECONCILED_FILE);
    }

    #[test]
    fn reconciled_on_a_revision_whose_delete_moved_names_the_line_it_looked_for() {
        let d = tree("\tnode.Forget(ctx)\n");
        let err = apply_reconciled(d.path()).unwrap_err().to_string();
        assert!(err.contains("delete_instance.go"), "{err}");
        assert!(err.contains("node.OptimisticRemove(ctx,"), "{err}");
    }
}
