//! One node at run time: its model, the faults in force on it, and its gRPC listener.

use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

use crate::clock::FleetClock;
use crate::model::NodeModel;
use crate::serve::{ServerTask, Stack};
use stampede_node_model::effect::FaultEffect;
use stampede_node_model::effect::Listener;

/// A node of the fleet as the servers and the admin API share it.
#[derive(Debug)]
pub struct NodeRuntime {
    /// Node id.
    pub id: String,
    /// Address the gRPC endpoint binds (and re-binds after a kill).
    pub addr: SocketAddr,
    /// Labels reported by ServiceInfo.
    pub labels: Vec<String>,
    /// The fleet clock.
    pub clock: FleetClock,
    model: Mutex<NodeModel>,
    /// Notified when the model hands a starting slot to a waiting call.
    slot_woken: Notify,
    effect: Mutex<FaultEffect>,
    /// Whether `effect` is other than no fault at all: while it is not, an RPC's gate
    /// reads this flag alone, neither the effect's lock nor the hang flag's.
    faulted: AtomicBool,
    hung: watch::Sender<bool>,
    server: tokio::sync::Mutex<Option<ServerTask>>,
    stack: Stack,
    rpc_cancel: Mutex<CancellationToken>,
}

impl NodeRuntime {
    /// A node that is not serving yet; it will serve on `stack`.
    pub fn new(
        model: NodeModel,
        addr: SocketAddr,
        labels: Vec<String>,
        clock: FleetClock,
        stack: Stack,
    ) -> Self {
        Self {
            id: model.id().to_string(),
            addr,
            labels,
            clock,
            model: Mutex::new(model),
            slot_woken: Notify::new(),
            effect: Mutex::new(FaultEffect::default()),
            faulted: AtomicBool::new(false),
            hung: watch::Sender::new(false),
            server: tokio::sync::Mutex::new(None),
            stack,
            rpc_cancel: Mutex::new(CancellationToken::new()),
        }
    }

    /// Locks the model. Never held across an `.await`. As the lock is let go, starting
    /// slots freed under it go to the calls waiting for one
    /// ([`NodeModel::wake_starting_waiters`]), which are woken.
    pub fn model(&self) -> ModelGuard<'_> {
        ModelGuard {
            model: self.model.lock().unwrap_or_else(|p| p.into_inner()),
            woken: &self.slot_woken,
        }
    }

    /// Notified whenever a waiting call may have been handed a starting slot (or let go):
    /// enable the `Notified` before looking at the model, so no wake is missed.
    pub fn slot_woken(&self) -> &Notify {
        &self.slot_woken
    }

    /// The fault effect in force.
    pub fn effect(&self) -> FaultEffect {
        // Without a fault the flag alone answers. [`apply`](Self::apply) stores it under
        // the model's lock, so a read under that lock sees what the effect's lock would;
        // one outside it reads the effect as of a moment earlier, as a lock taken then
        // would have.
        if !self.faulted.load(Ordering::Acquire) {
            return FaultEffect::default();
        }
        self.effect
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether any fault is in force now (one atomic load). While none is, an RPC has no
    /// gate to wait at: [`effect`](Self::effect) is the default one.
    pub fn is_faulted(&self) -> bool {
        self.faulted.load(Ordering::Acquire)
    }

    /// Whether the node is killed now (the effect's flag, without copying the effect).
    pub fn is_killed(&self) -> bool {
        self.effect.lock().unwrap_or_else(|p| p.into_inner()).killed
    }

    /// Token cancelled when the current server incarnation is killed.
    pub fn rpc_cancel(&self) -> CancellationToken {
        self.rpc_cancel
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Installs the token of a new server incarnation.
    pub fn set_rpc_cancel(&self, token: CancellationToken) {
        *self.rpc_cancel.lock().unwrap_or_else(|p| p.into_inner()) = token;
    }

    /// Whether a `hang` fault is in force now.
    pub fn is_hung(&self) -> bool {
        self.faulted.load(Ordering::Acquire) && *self.hung.borrow()
    }

    /// Waits while a `hang` fault is in force.
    pub async fn wait_unhung(&self) {
        let mut rx = self.hung.subscribe();
        // An error means the sender is gone (fleet shutting down): stop waiting.
        let _ = rx.wait_for(|h| !*h).await;
    }

    /// Re-binds `addr` and serves gRPC on it (no-op when already serving).
    pub async fn start_serving(self: &Arc<Self>) -> std::io::Result<()> {
        let mut slot = self.server.lock().await;
        if slot.is_none() {
            let listener = tokio::net::TcpListener::bind(self.addr).await?;
            *slot = Some(self.stack.serve(self.clone(), listener));
        }
        Ok(())
    }

    /// Serves gRPC on an already bound listener (the first start, when the port was 0).
    pub async fn serve_on(self: &Arc<Self>, listener: tokio::net::TcpListener) {
        let mut slot = self.server.lock().await;
        if slot.is_none() {
            *slot = Some(self.stack.serve(self.clone(), listener));
        }
    }

    /// Closes the listener and resets every connection; returns once the port is free.
    pub async fn stop_serving(&self) {
        let task = self.server.lock().await.take();
        if let Some(t) = task {
            t.stop().await;
        }
    }

    /// Installs a new fault effect, applying its [edges](NodeModel::fault_edges).
    pub async fn apply(self: &Arc<Self>, new: FaultEffect) -> std::io::Result<()> {
        let listener = {
            // The model lock first: RPCs that commit a change read the effect under it,
            // so each change commits either before the new effect holds or under it.
            let now = self.clock.now();
            let mut m = self.model();
            let old = {
                let mut e = self.effect.lock().unwrap_or_else(|p| p.into_inner());
                self.faulted
                    .store(new != FaultEffect::default(), Ordering::Release);
                std::mem::replace(&mut *e, new.clone())
            };
            m.fault_edges(&old, &new, now)
        };
        self.hung.send_replace(new.hung);
        match listener {
            Listener::Close => self.stop_serving().await,
            Listener::Reopen => self.start_serving().await?,
            Listener::Keep => {}
        }
        Ok(())
    }
}

/// The locked model of a node ([`NodeRuntime::model`]).
#[derive(Debug)]
pub struct ModelGuard<'a> {
    model: MutexGuard<'a, NodeModel>,
    woken: &'a Notify,
}

impl Deref for ModelGuard<'_> {
    type Target = NodeModel;
    fn deref(&self) -> &NodeModel {
        &self.model
    }
}

impl DerefMut for ModelGuard<'_> {
    fn deref_mut(&mut self) -> &mut NodeModel {
        &mut self.model
    }
}

impl Drop for ModelGuard<'_> {
    fn drop(&mut self) {
        // Every change to the node passes here, so a freed slot never waits for a poll.
        if self.model.wake_starting_waiters() {
            self.woken.notify_waiters();
        }
    }
}
