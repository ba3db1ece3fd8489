//! `moco local credential rotate`: new passwords for MOCO's eight accounts, without a
//! failed login on the way.
//!
//! The command only draws the new passwords into `secret.json` (beside the old ones; a
//! rotation in progress is resumed, never drawn again) and then follows the manager, which
//! takes the rotation's steps between its rounds (`moco_core::rotation`): adds the new
//! passwords beside the old on the primary, publishes them (`secret.json`, `client/*.cnf`, its
//! own connections), re-points each replica's channel, drops the old ones. Interrupted at any
//! step, by this command's end or the manager's, it finishes once a manager runs again.

use std::time::{Duration, Instant};

use crate::platform::port::EventRecord;
use crate::platform::secret::Secret;
use moco_core::rotation::RotationPhase;

use crate::control::{open, require_manager};
use crate::error::{Error, usage};
use crate::options::RotateOptions;
use crate::output::out;

/// The reason of the manager's rotation events (`moco_cluster::manager::ROTATION_REASON`).
const EVENT_REASONS: [&str; 2] = ["PasswordRotation", "PasswordRotationFailed"];

/// `credential rotate`: starts (or resumes) a rotation and waits until it finished.
pub async fn rotate(options: RotateOptions) -> Result<(), Error> {
    let (layout, _manifest) = open(&options.dir)?;
    require_manager(&layout)?;
    let seen = events(&layout).len();
    let (_, started) = Secret::update(&layout, Secret::begin_rotation)?;
    if started {
        out!("new passwords drawn for MOCO's 8 accounts; the manager rotates them");
    } else {
        out!("a rotation is in progress: waiting for the manager to finish it");
    }
    let begun = Instant::now();
    let deadline = begun + options.timeout;
    let mut printed = seen;
    let mut phase = Some(RotationPhase::Drawn);
    loop {
        let all = events(&layout);
        for e in all.get(printed..).unwrap_or_default() {
            out!("{}: {}", e.reason, e.message);
        }
        printed = all.len().max(printed);
        let now = Secret::load(&layout)?.rotation.map(|r| r.phase);
        if now.is_none() {
            out!(
                "rotation finished in {} ms: the old passwords are refused",
                begun.elapsed().as_millis()
            );
            return Ok(());
        }
        phase = now.or(phase);
        if crate::platform::run::running_manager(&layout)?.is_none() {
            return Err(usage(format!(
                "credential rotate: the manager stopped ({}); the rotation finishes once `moco local resume --dir {}` starts it again",
                phase.map_or("", RotationPhase::as_str),
                layout.root().display()
            )));
        }
        if Instant::now() >= deadline {
            return Err(usage(format!(
                "credential rotate: not finished after {} s (phase {}); it goes on in the manager: run the command again to follow it",
                options.timeout.as_secs(),
                phase.map_or("", RotationPhase::as_str)
            )));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The manager's rotation events, oldest first.
fn events(layout: &crate::platform::Layout) -> Vec<EventRecord> {
    std::fs::read_to_string(layout.events())
        .unwrap_or_default()
        .lines()
        .filter_map(|line| serde_json::from_str::<EventRecord>(line).ok())
        .filter(|e| EVENT_REASONS.contains(&e.reason.as_str()))
        .collect()
}
