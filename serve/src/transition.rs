//! The lifecycle moves in flight (a pause, a resume, a kill, a snapshot), one at most per
//! sandbox, and the one consistent look at where a sandbox is.
//!
//! A move is registered before its sandbox leaves the store it is in (running or
//! paused) and unregistered after it reaches the next one, so a sandbox that exists is
//! always in the running store, the paused store or this registry. A move begins and
//! ends under the registry's lock, and [`locate`] reads the stores under it, so no move
//! can be half seen: a sandbox that exists is never found nowhere. (E2B keeps the same
//! fact as a state plus a transition key per sandbox,
//! `packages/api/internal/sandbox/storage/redis/state_change.go`.)
//!
//! The sets the sync and the evictor read (`placing`, `removing`) stay as they are; a
//! move also enters the one of them that keeps its sandbox from being taken for an
//! orphan.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use super::state::{lock, SandboxRecord, Shared};

/// What a move does to its sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Move {
    /// Running to paused (`POST /pause`).
    Pause,
    /// Paused to running (`POST /resume`, `/connect`).
    Resume,
    /// Running to gone (`DELETE`, the evictor).
    Kill,
    /// Running to running, a snapshot template taken on the way
    /// (`POST /sandboxes/{id}/snapshots`, E2B's `StateSnapshotting`).
    Snapshot,
}

/// The moves in flight, by sandbox id.
#[derive(Debug, Default)]
pub(crate) struct Transitions {
    moving: Mutex<HashMap<String, InFlight>>,
}

#[derive(Debug)]
struct InFlight {
    what: Move,
    record: SandboxRecord,
    ended: watch::Receiver<Option<bool>>,
}

/// Where a sandbox is, read in one piece ([`locate`]).
#[derive(Debug)]
pub(crate) enum Whereabouts {
    /// In the running store.
    Running(Box<SandboxRecord>),
    /// A snapshot in the paused store.
    Paused,
    /// In a move; [`Settling::settled`] waits for its end.
    Moving(Settling),
    /// Nowhere: this instance does not know it.
    Unknown,
}

/// A move seen in flight, to wait for.
#[derive(Debug)]
pub(crate) struct Settling {
    /// The move.
    pub what: Move,
    /// The sandbox as it was when the move began.
    pub record: Box<SandboxRecord>,
    ended: watch::Receiver<Option<bool>>,
}

impl Settling {
    /// Wait until the move ends; whether it did what it set out to do.
    pub(crate) async fn settled(mut self) -> bool {
        match self.ended.wait_for(Option::is_some).await {
            Ok(done) => *done == Some(true),
            // The guard always sends before it goes; a closed channel means it did not.
            Err(_) => false,
        }
    }
}

/// A move begun: its sandbox is registered until this is dropped, which wakes every
/// waiter; [`MoveGuard::succeeded`] before that says the move did what it set out to.
#[derive(Debug)]
pub(crate) struct MoveGuard {
    shared: Arc<Shared>,
    id: String,
    ended: watch::Sender<Option<bool>>,
    ok: bool,
}

impl MoveGuard {
    /// The move did what it set out to do (the sandbox is where it was going).
    pub(crate) fn succeeded(&mut self) {
        self.ok = true;
    }
}

impl Drop for MoveGuard {
    fn drop(&mut self) {
        lock(&self.shared.transitions.moving).remove(&self.id);
        self.ended.send_replace(Some(self.ok));
    }
}

/// Where `id` is now, the registry locked across the look.
pub(crate) fn locate(shared: &Shared, id: &str) -> Whereabouts {
    let moving = lock(&shared.transitions.moving);
    look(shared, &moving, id)
}

fn look(shared: &Shared, moving: &HashMap<String, InFlight>, id: &str) -> Whereabouts {
    if let Some(m) = moving.get(id) {
        return Whereabouts::Moving(Settling {
            what: m.what,
            record: Box::new(m.record.clone()),
            ended: m.ended.clone(),
        });
    }
    if let Some(r) = lock(&shared.sandboxes).get(id) {
        return Whereabouts::Running(Box::new(r.clone()));
    }
    if lock(&shared.paused).contains_key(id) {
        return Whereabouts::Paused;
    }
    Whereabouts::Unknown
}

fn register(
    shared: &Arc<Shared>,
    moving: &mut HashMap<String, InFlight>,
    id: &str,
    what: Move,
    record: &SandboxRecord,
) -> MoveGuard {
    let (tx, rx) = watch::channel(None);
    let record = record.clone();
    moving.insert(
        id.to_string(),
        InFlight {
            what,
            record,
            ended: rx,
        },
    );
    MoveGuard {
        shared: shared.clone(),
        id: id.to_string(),
        ended: tx,
        ok: false,
    }
}

/// Begin `what` (a pause, a kill or a snapshot) of the running sandbox `id`: taken out of the
/// running store into `removing` and registered, in one step. Where it is otherwise.
pub(crate) fn begin_from_running(
    shared: &Arc<Shared>,
    id: &str,
    what: Move,
) -> Result<(MoveGuard, SandboxRecord), Whereabouts> {
    let mut moving = lock(&shared.transitions.moving);
    if moving.contains_key(id) {
        return Err(look(shared, &moving, id));
    }
    let taken = {
        let mut running = lock(&shared.sandboxes);
        let r = running.remove(id);
        if r.is_some() {
            lock(&shared.removing).insert(id.to_string());
        }
        r
    };
    match taken {
        Some(record) => Ok((register(shared, &mut moving, id, what, &record), record)),
        None => Err(look(shared, &moving, id)),
    }
}

/// Begin the resume of the paused sandbox `id`: taken out of the paused store into
/// `placing` and registered, in one step. Where it is otherwise.
pub(crate) fn begin_resume(
    shared: &Arc<Shared>,
    id: &str,
) -> Result<(MoveGuard, SandboxRecord), Whereabouts> {
    let mut moving = lock(&shared.transitions.moving);
    if moving.contains_key(id) {
        return Err(look(shared, &moving, id));
    }
    let taken = lock(&shared.paused).remove(id);
    match taken {
        Some(record) => {
            lock(&shared.placing).insert(id.to_string());
            Ok((
                register(shared, &mut moving, id, Move::Resume, &record),
                record,
            ))
        }
        None => Err(look(shared, &moving, id)),
    }
}

/// Delete the snapshot of the paused sandbox `id`, unless a move holds it; where it is
/// otherwise.
pub(crate) fn delete_snapshot(shared: &Shared, id: &str) -> Result<(), Whereabouts> {
    let moving = lock(&shared.transitions.moving);
    if !moving.contains_key(id) && lock(&shared.paused).remove(id).is_some() {
        return Ok(());
    }
    Err(look(shared, &moving, id))
}
