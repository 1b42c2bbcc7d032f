//! Named builds of E2B's API: small source edits, written by stampede, that set what
//! Best-of-K's score counts. Facts from E2B's history (e2b-dev/infra):
//!
//! - `Score` (`placement/placement_best_of_K.go`) adds the CPUs of this API's creates in
//!   progress to the node's reported allocation since PR #2201; before it, the score used
//!   the last sync's `CpuAllocated` alone. The in-progress term is unconditional.
//! - PR #2201 also added `Node.OptimisticAdd` / `OptimisticRemove`
//!   (`nodemanager/node.go`), which move the node's allocation at once on a create or a
//!   delete. Until the flag was retired they ran only when the feature flag
//!   `sandbox-placement-optimistic-resource-accounting` was on (default off); since, they
//!   always run.
//!
//! A variant is named by what the score counts, as stampede's accounting modes are.

use std::path::{Path, PathBuf};

use crate::placement::AccountingMode;

/// Best-of-K's score file, under the checkout.
const SCORE_FILE: &str = "packages/api/internal/orchestrator/placement/placement_best_of_K.go";
/// The node's metrics and optimistic add/remove, under the checkout.
const NODE_FILE: &str = "packages/api/internal/orchestrator/nodemanager/node.go";

/// A named build of E2B's API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variant {
    /// E2B's code as committed: nothing applied to the score.
    AsCommitted,
    /// The score counts the last sync's allocation only: no in-progress term, no
    /// optimistic add/remove (E2B before PR #2201; stampede's `reported`).
    Reported,
    /// The in-progress term only (PR #2201 with its flag off; stampede's `in-flight`).
    InFlight,
    /// The in-progress term and the optimistic add/remove (E2B today; `optimistic`).
    Optimistic,
    /// The revision's score as committed, with a decision's score read and its
    /// in-progress mark taken under one lock (stampede's fix for the residual burst
    /// herd: no decision reads the scores between another's choice and its mark).
    LockedChoice,
    /// The in-progress term and the optimistic add/remove, each add and remove kept per
    /// sandbox id until the ids behind a sync's figure confirm it (stampede's
    /// `reconciled`; mock-node sends the ids as `ServiceInfo` field 1000).
    Reconciled,
}

impl Variant {
    /// Every variant, in the order the help lists them.
    pub const ALL: [Variant; 6] = [
        Variant::AsCommitted,
        Variant::Reported,
        Variant::InFlight,
        Variant::Optimistic,
        Variant::LockedChoice,
        Variant::Reconciled,
    ];

    /// The name on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Variant::AsCommitted => "as-committed",
            Variant::Reported => "reported",
            Variant::InFlight => "in-flight",
            Variant::Optimistic => "optimistic",
            Variant::LockedChoice => "locked-choice",
            Variant::Reconciled => "reconciled",
        }
    }

    /// The stampede accounting mode whose model this variant is; `None` for
    /// `as-committed` and `locked-choice`, whose mode is the revision's.
    pub fn mode(self) -> Option<AccountingMode> {
        match self {
            Variant::AsCommitted | Variant::LockedChoice => None,
            Variant::Reported => Some(AccountingMode::Reported),
            Variant::InFlight => Some(AccountingMode::InFlight),
            Variant::Optimistic => Some(AccountingMode::Optimistic),
            Variant::Reconciled => Some(AccountingMode::Reconciled),
        }
    }

    /// The edits this variant wants: (in-progress term, optimistic add/remove).
    fn wants(self) -> Option<(bool, bool)> {
        match self {
            Variant::AsCommitted | Variant::LockedChoice => None,
            Variant::Reported => Some((false, false)),
            Variant::InFlight => Some((true, false)),
            Variant::Optimistic | Variant::Reconciled => Some((true, true)),
        }
    }
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Variant::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Variant::ALL.iter().map(|v| v.as_str()).collect();
                format!("unknown variant `{s}` (one of: {})", names.join(", "))
            })
    }
}

/// What a revision's score and node code do, as found in its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScoreFacts {
    /// `Score` adds the creates in progress.
    pub in_progress: bool,
    /// How the optimistic add/remove runs.
    pub optimistic: Optimistic,
}

/// The optimistic add/remove of a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Optimistic {
    /// Not in the code (before PR #2201).
    Absent,
    /// Behind the feature flag, whose default is off.
    Flagged,
    /// Always on.
    Always,
}

impl ScoreFacts {
    /// The accounting mode the code as found behaves as (the flag at its default).
    pub fn mode(self) -> AccountingMode {
        match (self.in_progress, self.optimistic) {
            (false, _) => AccountingMode::Reported,
            (true, Optimistic::Always) => AccountingMode::Optimistic,
            (true, _) => AccountingMode::InFlight,
        }
    }

    /// One line for the output.
    pub fn describe(self) -> String {
        let opt = match self.optimistic {
            Optimistic::Absent => "no optimistic add/remove",
            Optimistic::Flagged => "optimistic add/remove behind its flag (default off)",
            Optimistic::Always => "optimistic add/remove always on",
        };
        let term = if self.in_progress {
            "in-progress term in Score"
        } else {
            "no in-progress term in Score"
        };
        format!("{term}, {opt}")
    }
}

/// Why a variant cannot be made at a revision.
#[derive(Debug, thiserror::Error)]
pub enum VariantError {
    /// A file the variant edits cannot be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The code is not in a shape the variant knows.
    #[error("variant `{variant}` does not apply: {file}: {found}")]
    DoesNotApply {
        /// The variant.
        variant: Variant,
        /// The file, relative to the checkout.
        file: &'static str,
        /// What was found there instead.
        found: String,
    },
}

/// Reads what the checkout at `root` does.
pub fn inspect(root: &Path) -> Result<ScoreFacts, VariantError> {
    let score = read(root, SCORE_FILE)?;
    let node = read(root, NODE_FILE)?;
    Ok(ScoreFacts {
        in_progress: score_line(&score, Variant::AsCommitted)?.1,
        optimistic: optimistic_of(&node),
    })
}

/// Applies `variant` to the checkout at `root` (a build tree of stampede's, never the
/// user's) and returns what the code did before.
pub fn apply(root: &Path, variant: Variant) -> Result<ScoreFacts, VariantError> {
    let facts = inspect(root)?;
    let Some((term, optimistic)) = variant.wants() else {
        return Ok(facts);
    };
    let mut score = read(root, SCORE_FILE)?;
    let (line, has_term) = score_line(&score, variant)?;
    match (term, has_term) {
        (true, false) => {
            return Err(VariantError::DoesNotApply {
                variant,
                file: SCORE_FILE,
                found: format!(
                    "Score has no in-progress term at this revision (`{}`): it predates PR #2201",
                    line.trim()
                ),
            })
        }
        (false, true) => {
            // Keep the loop's variable used (Go refuses an unused one).
            let indent: String = line.chars().take_while(|c| c.is_whitespace()).collect();
            let new = format!(
                "{indent}reserved := metrics.CpuAllocated // stampede variant `{variant}`: no in-progress term\n{indent}_ = pendingCPUs"
            );
            score = score.replacen(&line, &new, 1);
            write(root, SCORE_FILE, &score)?;
        }
        _ => {}
    }
    let node = read(root, NODE_FILE)?;
    let node = match (optimistic, facts.optimistic) {
        (true, Optimistic::Absent) => {
            return Err(VariantError::DoesNotApply {
                variant,
                file: NODE_FILE,
                found: "no OptimisticAdd at this revision: it predates PR #2201".into(),
            })
        }
        (true, Optimistic::Always) | (false, Optimistic::Absent) => None,
        (true, Optimistic::Flagged) => Some(force_flag_on(&node, variant)?),
        (false, _) => Some(disable_optimistic(&node, variant)?),
    };
    if let Some(node) = node {
        write(root, NODE_FILE, &node)?;
    }
    inspect(root)
}

fn read(root: &Path, file: &'static str) -> Result<String, VariantError> {
    let path = root.join(file);
    std::fs::read_to_string(&path).map_err(|source| VariantError::Io { path, source })
}

fn write(root: &Path, file: &'static str, text: &str) -> Result<(), VariantError> {
    let path = root.join(file);
    std::fs::write(&path, text).map_err(|source| VariantError::Io { path, source })
}

/// The line of `Score` that sets `reserved`, and whether it adds the creates in progress.
fn score_line(score: &str, variant: Variant) -> Result<(String, bool), VariantError> {
    let Some(line) = score
        .lines()
        .find(|l| l.trim_start().starts_with("reserved :="))
    else {
        let found = if score.contains("func (b *BestOfK) Score") {
            "Score sets no `reserved :=`".to_string()
        } else {
            "no BestOfK Score function".to_string()
        };
        return Err(VariantError::DoesNotApply {
            variant,
            file: SCORE_FILE,
            found,
        });
    };
    let rhs = line.split_once(":=").map(|(_, r)| r).unwrap_or_default();
    let rhs = rhs.split("//").next().unwrap_or_default();
    let in_progress = rhs.contains("pendingCPUs") && !line.contains("stampede variant");
    if !rhs.contains("metrics.CpuAllocated") {
        return Err(VariantError::DoesNotApply {
            variant,
            file: SCORE_FILE,
            found: format!(
                "`{}` does not start from the reported allocation",
                line.trim()
            ),
        });
    }
    Ok((line.to_string(), in_progress))
}

fn optimistic_of(node: &str) -> Optimistic {
    if !node.contains("func (n *Node) OptimisticAdd(") {
        Optimistic::Absent
    } else if node.contains("stampede variant") {
        // A tree this module already edited; `inspect` after `apply` reads it.
        if node.contains("no optimistic accounting") {
            Optimistic::Absent
        } else {
            Optimistic::Always
        }
    } else if node.contains("OptimisticResourceAccountingFlag") {
        Optimistic::Flagged
    } else {
        Optimistic::Always
    }
}

/// The flag's check, evaluated as if the flag were on.
fn force_flag_on(node: &str, variant: Variant) -> Result<String, VariantError> {
    let mut out = String::with_capacity(node.len());
    let mut changed = 0;
    for line in node.split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with("if ") && t.contains("OptimisticResourceAccountingFlag") {
            let indent: String = line.chars().take_while(|c| c.is_whitespace()).collect();
            out.push_str(&format!(
                "{indent}if false {{ // stampede variant `{variant}`: the flag taken as on\n"
            ));
            changed += 1;
        } else {
            out.push_str(line);
        }
    }
    if changed != 2 {
        return Err(VariantError::DoesNotApply {
            variant,
            file: NODE_FILE,
            found: format!("{changed} flag checks where OptimisticAdd and OptimisticRemove make 2"),
        });
    }
    Ok(out)
}

/// Returns at once from OptimisticAdd and OptimisticRemove.
fn disable_optimistic(node: &str, variant: Variant) -> Result<String, VariantError> {
    let mut out = String::with_capacity(node.len() + 200);
    let mut changed = 0;
    for line in node.split_inclusive('\n') {
        out.push_str(line);
        let t = line.trim_start();
        if (t.starts_with("func (n *Node) OptimisticAdd(")
            || t.starts_with("func (n *Node) OptimisticRemove("))
            && t.trim_end().ends_with('{')
        {
            out.push_str(&format!(
                "\treturn // stampede variant `{variant}`: no optimistic accounting\n"
            ));
            changed += 1;
        }
    }
    if changed != 2 {
        return Err(VariantError::DoesNotApply {
            variant,
            file: NODE_FILE,
            found: format!(
                "{changed} of OptimisticAdd / OptimisticRemove found with a body on the same line"
            ),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::test_dir::Dir;
    use super::*;

    /// A checkout of our own making with the two files in a given shape.
    fn tree(score_line: &str, node_body: &str) -> Dir {
        let d = Dir::new();
        let score = format!(
            "package placement\n\nfunc (b *BestOfK) Score() float64 {{\n\tmetrics := node.Metrics()\n\tpendingCPUs := int64(0)\n{score_line}\n\treturn 0\n}}\n"
        );
        d.write(SCORE_FILE, &score);
        d.write(NODE_FILE, &format!("package nodemanager\n\n{node_body}"));
        d
    }

    const FLAGGED: &str = "func (n *Node) OptimisticAdd(ctx context.Context, res SandboxResources) {\n\tif n.featureflags != nil && !n.featureflags.BoolFlag(ctx, featureflags.OptimisticResourceAccountingFlag) {\n\t\treturn\n\t}\n\tn.add(res)\n}\n\nfunc (n *Node) OptimisticRemove(ctx context.Context, res SandboxResources) {\n\tif n.featureflags != nil && !n.featureflags.BoolFlag(ctx, featureflags.OptimisticResourceAccountingFlag) {\n\t\treturn\n\t}\n\tn.remove(res)\n}\n";
    const ALWAYS: &str = "func (n *Node) OptimisticAdd(res SandboxResources) {\n\tn.add(res)\n}\n\nfunc (n *Node) OptimisticRemove(ctx context.Context, res SandboxResources) {\n\tn.remove(res)\n}\n";
    const TERM: &str = "\treserved := metrics.CpuAllocated + uint32(pendingCPUs)";
    const NO_TERM: &str = "\treserved := metrics.CpuAllocated";

    #[test]
    fn each_variant_gives_its_mode_on_a_flagged_revision() {
        for (v, mode) in [
            (Variant::Reported, AccountingMode::Reported),
            (Variant::InFlight, AccountingMode::InFlight),
            (Variant::Optimistic, AccountingMode::Optimistic),
        ] {
            let d = tree(TERM, FLAGGED);
            let before = inspect(d.path()).unwrap();
            assert_eq!(before.mode(), AccountingMode::InFlight);
            let after = apply(d.path(), v).unwrap();
            assert_eq!(after.mode(), mode, "{v}");
        }
    }

    #[test]
    fn each_variant_gives_its_mode_after_the_flag_was_retired() {
        for (v, mode) in [
            (Variant::Reported, AccountingMode::Reported),
            (Variant::InFlight, AccountingMode::InFlight),
            (Variant::Optimistic, AccountingMode::Optimistic),
        ] {
            let d = tree(TERM, ALWAYS);
            assert_eq!(
                inspect(d.path()).unwrap().mode(),
                AccountingMode::Optimistic
            );
            assert_eq!(apply(d.path(), v).unwrap().mode(), mode, "{v}");
        }
    }

    #[test]
    fn a_revision_before_the_fix_refuses_the_variants_that_need_it() {
        let d = tree(NO_TERM, "");
        assert_eq!(inspect(d.path()).unwrap().mode(), AccountingMode::Reported);
        assert_eq!(
            apply(d.path(), Variant::Reported).unwrap().mode(),
            AccountingMode::Reported
        );
        let err = apply(d.path(), Variant::InFlight).unwrap_err().to_string();
        assert!(err.contains("predates PR #2201"), "{err}");
        assert!(err.contains("reserved := metrics.CpuAllocated"), "{err}");
    }

    #[test]
    fn an_unknown_shape_says_what_it_found() {
        let d = tree("\treserved := 7", FLAGGED);
        let err = apply(d.path(), Variant::Reported).unwrap_err().to_string();
        assert!(err.contains("reserved := 7"), "{err}");
        assert!(err.contains("does not apply"), "{err}");
    }

    #[test]
    fn names_round_trip() {
        for v in Variant::ALL {
            assert_eq!(v.as_str().parse::<Variant>().unwrap(), v);
        }
        assert!("herd".parse::<Variant>().unwrap_err().contains("in-flight"));
    }
}
