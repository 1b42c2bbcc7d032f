//! [`PlacementCore`]: the facade the drivers (HTTP service, simulator) talk to.

use std::collections::BTreeSet;
use std::sync::Arc;

use indexmap::IndexMap;
use rand::Rng;

use super::answer::DeleteOutcome;
use super::candidates::CandidateDraw;
use super::channel::{routable, ChannelCell, ChannelState};
use super::config::PlacementConfig;
use super::node_view::{NodeId, NodeStatus, NodeView, SyncSnapshot};
use super::score::score;

/// Why no node was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoCandidate {
    /// No node is ready with a usable `cpu_count` (empty fleet, all draining/unhealthy).
    #[error("no compatible node: none is ready with cpu_count > 0")]
    NoCompatibleNode,
    /// Ready nodes exist, but every one is excluded for this request or over the
    /// `max_starting_per_node` filter.
    #[error("no capacity: every ready node is excluded or busy starting sandboxes")]
    CapacityUnavailable,
}

/// One placement instance's view of the fleet and its Best-of-K decision: no I/O, no
/// clock. Nodes iterate in insertion order, so a seeded run is reproducible.
#[derive(Debug, Clone)]
pub struct PlacementCore {
    config: PlacementConfig,
    /// Insertion-ordered; foldhash because every create and delete looks a node up by id.
    nodes: IndexMap<NodeId, NodeView, foldhash::fast::RandomState>,
    candidates: CandidateDraw,
    /// Whether the nodes keep only the configured mode's bookkeeping.
    configured_mode_only: bool,
    #[cfg(feature = "mutations")]
    mutation: Option<super::mutation::Mutation>,
}

impl PlacementCore {
    /// An instance with no nodes.
    pub fn new(config: PlacementConfig) -> Self {
        Self {
            config,
            nodes: IndexMap::default(),
            candidates: CandidateDraw::default(),
            configured_mode_only: false,
            #[cfg(feature = "mutations")]
            mutation: super::mutation::Mutation::from_env(),
        }
    }

    /// The parameters in use.
    pub fn config(&self) -> &PlacementConfig {
        &self.config
    }

    /// Keeps only the bookkeeping the configured mode reads, on every node tracked now
    /// or later ([`NodeAccounting::keep_only`](super::NodeAccounting::keep_only)): for a
    /// driver that reports no other mode's figure (the simulator). Decisions and the
    /// configured mode's figures do not change.
    pub fn keep_only_configured_mode(&mut self) {
        self.configured_mode_only = true;
        let mode = self.config.mode;
        for view in self.nodes.values_mut() {
            view.accounting_mut().keep_only(mode);
        }
    }

    /// Track a node (status `connecting` until its first sync). False if already known.
    pub fn add_node(&mut self, id: impl Into<NodeId>) -> bool {
        let id = id.into();
        if self.nodes.contains_key(&id) {
            return false;
        }
        let mut view = NodeView::new(id.clone());
        #[cfg(feature = "mutations")]
        view.accounting_mut().set_mutation(self.mutation);
        if self.configured_mode_only {
            view.accounting_mut().keep_only(self.config.mode);
        }
        self.nodes.insert(id, view);
        true
    }

    /// Stop tracking a node; returns what was known about it.
    pub fn remove_node(&mut self, id: &str) -> Option<NodeView> {
        self.nodes.shift_remove(id)
    }

    /// One node's view.
    pub fn node(&self, id: &str) -> Option<&NodeView> {
        self.nodes.get(id)
    }

    /// Every node, in insertion order.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeView> {
        self.nodes.values()
    }

    /// Number of nodes tracked.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether no node is tracked.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Track a node whose channel state the driver records in `channel` (the service's
    /// connector writes it from the transport). False if already known.
    pub fn add_node_with_channel(
        &mut self,
        id: impl Into<NodeId>,
        channel: Arc<ChannelCell>,
    ) -> bool {
        let id = id.into();
        if !self.add_node(id.clone()) {
            return false;
        }
        if let Some(n) = self.nodes.get_mut(&id) {
            n.set_channel_cell(channel);
        }
        true
    }

    /// Record the state of a node's gRPC channel; with a reported `ready` it decides
    /// whether the node is routable ([`node_status`](super::channel::node_status)).
    pub fn set_channel(&mut self, id: &str, state: ChannelState) {
        if let Some(n) = self.nodes.get(id) {
            n.channel().set(state);
        }
    }

    /// Overwrite a node's status (a failed sync marks it `unhealthy`). Unknown ids are
    /// ignored, as are all events below.
    pub fn set_status(&mut self, id: &str, status: NodeStatus) {
        if let Some(n) = self.nodes.get_mut(id) {
            n.set_status(status);
        }
    }

    /// Apply a sync: status and metrics overwritten, accounting reconciled per mode.
    pub fn apply_sync(&mut self, id: &str, snapshot: SyncSnapshot) {
        let unseen = self.config.reconcile_unseen_syncs;
        if let Some(n) = self.nodes.get_mut(id) {
            n.apply_sync(snapshot, unseen);
        }
    }

    /// Best-of-K: sample up to K distinct nodes that can accept (ready, not in
    /// `excluded`, passing the starting filter), return the lowest score. Nodes scoring
    /// `+inf` (`cpu_count == 0`) are never returned.
    pub fn choose<R: Rng + ?Sized>(
        &mut self,
        vcpu: u32,
        excluded: &BTreeSet<NodeId>,
        rng: &mut R,
    ) -> Option<NodeId> {
        self.try_choose(vcpu, excluded, rng).ok()
    }

    /// [`choose`](Self::choose), saying why nothing was chosen.
    pub fn try_choose<R: Rng + ?Sized>(
        &mut self,
        vcpu: u32,
        excluded: &BTreeSet<NodeId>,
        rng: &mut R,
    ) -> Result<NodeId, NoCandidate> {
        self.try_choose_at(vcpu, excluded, rng).map(|(_, id)| id)
    }

    /// [`try_choose`](Self::try_choose), with the chosen node's position in the node
    /// table (a [`NodeAt`] hint for the calls that follow).
    pub(crate) fn try_choose_at<R: Rng + ?Sized>(
        &mut self,
        vcpu: u32,
        excluded: &BTreeSet<NodeId>,
        rng: &mut R,
    ) -> Result<(usize, NodeId), NoCandidate> {
        let cfg = &self.config;
        let nodes = &self.nodes;
        let picked = self.candidates.sample(
            nodes.len(),
            cfg.k,
            |i| {
                nodes
                    .get_index(i)
                    .is_some_and(|(_, n)| can_accept(cfg, n, excluded))
            },
            rng,
        );
        let mut best: Option<(usize, f64)> = None;
        for &i in picked {
            let Some((_, n)) = nodes.get_index(i) else {
                continue;
            };
            let s = score_node(cfg, n, vcpu);
            // Strictly below the best so far, starting from +inf: E2B's tie rule.
            if s < best.map_or(f64::INFINITY, |(_, b)| b) {
                best = Some((i, s));
            }
        }
        match best.and_then(|(i, _)| Some((i, nodes.get_index(i)?.0))) {
            Some((i, id)) => Ok((i, id.clone())),
            None => Err(self.why_none()),
        }
    }

    /// Where `node` is in the node table, if known.
    pub(crate) fn position(&self, node: &str) -> Option<usize> {
        self.nodes.get_index_of(node)
    }

    /// The view of `node.id`, found at `node.at` without hashing its id when the table
    /// has not moved since the position was taken.
    fn view_mut(&mut self, node: NodeAt<'_>) -> Option<&mut NodeView> {
        let at = node.at.filter(|&i| {
            self.nodes
                .get_index(i)
                .is_some_and(|(id, _)| id.as_str() == node.id)
        });
        match at {
            Some(i) => self.nodes.get_index_mut(i).map(|(_, n)| n),
            None => self.nodes.get_mut(node.id),
        }
    }

    /// The nodes a Best-of-K decision for `vcpu` could return now (ready, not in
    /// `excluded`, passing the starting filter, finite score), in insertion order: a
    /// driver can tell that every possible choice would be refused.
    pub fn candidates<'s>(
        &'s self,
        vcpu: u32,
        excluded: &'s BTreeSet<NodeId>,
    ) -> impl Iterator<Item = &'s str> + 's {
        let cfg = &self.config;
        self.nodes
            .values()
            .filter(move |n| can_accept(cfg, n, excluded) && score_node(cfg, n, vcpu).is_finite())
            .map(NodeView::id)
    }

    /// The [`candidates`](Self::candidates) some Best-of-K draw could return now: a node
    /// wins a draw only over K - 1 others scoring no less, so with scores fixed the nodes
    /// ranked below the K-th highest score never win (E2B's closed form: ranks n-K+2..n
    /// get nothing). Ties count as winnable (the first sampled wins them). A driver can
    /// tell from this that every possible choice would be refused, though some node has
    /// room that no draw reaches.
    pub fn winnable(&self, vcpu: u32, excluded: &BTreeSet<NodeId>) -> Vec<&str> {
        let cfg = &self.config;
        let mut pool: Vec<(f64, &str)> = self
            .nodes
            .values()
            .filter(|n| can_accept(cfg, n, excluded))
            .map(|n| (score_node(cfg, n, vcpu), n.id()))
            .collect();
        let m = cfg.k.min(pool.len());
        if m == 0 {
            return Vec::new();
        }
        let mut scores: Vec<f64> = pool.iter().map(|&(s, _)| s).collect();
        // The m-th highest score: a node wins some draw iff it scores no more than it.
        let (_, &mut bar, _) = scores.select_nth_unstable_by(m - 1, |a, b| b.total_cmp(a));
        pool.retain(|&(s, _)| s.is_finite() && s <= bar);
        pool.into_iter().map(|(_, id)| id).collect()
    }

    /// The score `id` would get for a `vcpu` request now (`None` for an unknown node).
    pub fn score_of(&self, id: &str, vcpu: u32) -> Option<f64> {
        self.nodes
            .get(id)
            .map(|n| score_node(&self.config, n, vcpu))
    }

    /// A create of `sandbox_id` (`vcpu`) was sent to `node`.
    pub fn start_placing(&mut self, node: &str, sandbox_id: &str, vcpu: u32) {
        self.start_placing_at(NodeAt::id(node), sandbox_id, vcpu);
    }

    /// The create of `sandbox_id` (`vcpu`) on `node` succeeded.
    pub fn create_succeeded(&mut self, node: &str, sandbox_id: &str, vcpu: u32) {
        self.create_succeeded_at(NodeAt::id(node), sandbox_id, vcpu);
    }

    /// The create of `sandbox_id` on `node` failed (any error but ResourceExhausted).
    pub fn create_failed(&mut self, node: &str, sandbox_id: &str) {
        self.create_failed_at(NodeAt::id(node), sandbox_id);
    }

    /// The create of `sandbox_id` on `node` was refused with ResourceExhausted.
    pub fn create_refused(&mut self, node: &str, sandbox_id: &str) {
        self.create_refused_at(NodeAt::id(node), sandbox_id);
    }

    pub(crate) fn start_placing_at(&mut self, node: NodeAt<'_>, sandbox_id: &str, vcpu: u32) {
        if let Some(n) = self.view_mut(node) {
            n.accounting_mut().start_placing(sandbox_id, vcpu);
        }
    }

    pub(crate) fn create_succeeded_at(&mut self, node: NodeAt<'_>, sandbox_id: &str, vcpu: u32) {
        if let Some(n) = self.view_mut(node) {
            n.accounting_mut().create_succeeded(sandbox_id, vcpu);
            n.counters_mut().create_successes += 1;
        }
    }

    pub(crate) fn create_failed_at(&mut self, node: NodeAt<'_>, sandbox_id: &str) {
        if let Some(n) = self.view_mut(node) {
            n.accounting_mut().create_ended_without_sandbox(sandbox_id);
            n.counters_mut().create_fails += 1;
        }
    }

    pub(crate) fn create_refused_at(&mut self, node: NodeAt<'_>, sandbox_id: &str) {
        if let Some(n) = self.view_mut(node) {
            n.accounting_mut().create_ended_without_sandbox(sandbox_id);
            n.counters_mut().create_refusals += 1;
        }
    }

    /// `sandbox_id` (`vcpu`) was deleted from `node`.
    pub fn delete_succeeded(&mut self, node: &str, sandbox_id: &str, vcpu: u32) {
        if let Some(n) = self.nodes.get_mut(node) {
            n.accounting_mut().delete_succeeded(sandbox_id, vcpu);
        }
    }

    /// The Delete of `sandbox_id` (`vcpu`) on `node` ended with `outcome`: a success or a
    /// NotFound releases its vCPU; returns the HTTP status of the kill.
    pub fn delete_ended(
        &mut self,
        node: &str,
        sandbox_id: &str,
        vcpu: u32,
        outcome: DeleteOutcome,
    ) -> u16 {
        if outcome.releases_vcpu() {
            self.delete_succeeded(node, sandbox_id, vcpu);
        }
        outcome.status()
    }

    /// Allocated vCPU the configured mode believes `node` has.
    pub fn believed_allocated_vcpu(&self, node: &str) -> Option<u64> {
        self.nodes
            .get(node)
            .map(|n| n.believed_allocated_vcpu(self.config.mode))
    }

    /// This instance's creates in progress on `node`.
    pub fn in_flight(&self, node: &str) -> Option<usize> {
        self.nodes.get(node).map(NodeView::in_flight)
    }

    fn why_none(&self) -> NoCandidate {
        let usable = self
            .nodes
            .values()
            .any(|n| routable(n.status()) && n.metrics().cpu_count > 0);
        if usable {
            NoCandidate::CapacityUnavailable
        } else {
            NoCandidate::NoCompatibleNode
        }
    }
}

/// A node by id, with where it was in the node table when last seen: the per-create
/// calls find it there without hashing the id (checked against the id, so a table that
/// moved since only costs the lookup).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NodeAt<'a> {
    pub id: &'a str,
    pub at: Option<usize>,
}

impl<'a> NodeAt<'a> {
    /// `id`, looked up by hash.
    pub(crate) fn id(id: &'a str) -> Self {
        Self { id, at: None }
    }
}

fn can_accept(cfg: &PlacementConfig, n: &NodeView, excluded: &BTreeSet<NodeId>) -> bool {
    if !routable(n.status()) || excluded.contains(n.id()) {
        return false;
    }
    match cfg.max_starting_per_node {
        Some(max) => n.in_flight() <= max as usize,
        None => true,
    }
}

fn score_node(cfg: &PlacementConfig, n: &NodeView, vcpu: u32) -> f64 {
    let m = n.metrics();
    score(
        vcpu,
        n.believed_allocated_vcpu(cfg.mode),
        m.cpu_percent,
        m.cpu_count,
        cfg.r,
        cfg.alpha,
    )
}
