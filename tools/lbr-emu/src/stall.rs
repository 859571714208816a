// SPDX-License-Identifier: GPL-2.0

//! `stall=VCPU:ARM:RELEASE`: one vCPU that stops executing instructions for a while, as a core
//! held by an SMI, by the host (a vCPU thread preempted), or by a slow machine, at a place a test
//! chooses: its first freeze (an on-to-off transition of the recorder, the first instruction of
//! a capture) after the guest's marker ARM. The vCPU's thread waits in the emulator, inside the
//! callback of the instruction that froze (after it took effect), until a guest marker RELEASE
//! from another vCPU, or at most [`LIMIT`]; interrupts and NMIs sent to it meanwhile stay
//! pending, as they do on a core that does not run, and are taken when it goes on. Once per run.
//! The other vCPUs go on (QEMU's multi-threaded TCG gives each its own thread); a QEMU
//! operation that needs every vCPU out of its loop (a translation cache flush) waits for the
//! stall to end.
//!
//! The state machine is here (host-tested); the plugin calls [`Stall::marker`] on every marker,
//! [`Stall::freeze`] at every freeze, and [`Stall::hold`] when the vCPU's callback no longer
//! holds any lock of the emulator's.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The longest stall: a test whose release never comes gets its vCPU back after a minute.
pub const LIMIT: Duration = Duration::from_secs(60);

/// What the `stall=` argument asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    /// The vCPU (QEMU's index, the guest's CPU number on PC machines) that stalls.
    pub cpu: u32,
    /// The marker after which its next freeze stalls it.
    pub arm: u32,
    /// The marker that ends the stall.
    pub release: u32,
}

impl Spec {
    /// Parses `VCPU:ARM:RELEASE` (decimal).
    pub fn parse(v: &str) -> Result<Spec, String> {
        let nums: Vec<_> = v.split(':').map(str::parse::<u32>).collect();
        let [Ok(cpu), Ok(arm), Ok(release)] = nums[..] else {
            return Err(format!(
                "stall={v}: VCPU:ARM:RELEASE, three numbers (a vCPU, two marker values)"
            ));
        };
        if arm == release {
            return Err(format!(
                "stall={v}: the arming and releasing markers must differ"
            ));
        }
        Ok(Spec { cpu, arm, release })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the arming marker.
    Unarmed,
    /// Armed: the vCPU's next freeze stalls it.
    Armed,
    /// The vCPU froze; it stalls as soon as its callback has let go of the emulator's locks.
    Due,
    /// The vCPU is stalled.
    Holding,
    /// Released while holding (the vCPU has not noticed yet).
    Released,
    /// Done (or released before the freeze came): nothing more.
    Over,
}

/// How a stall ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The releasing marker.
    Marker,
    /// [`LIMIT`] ran out first.
    Limit,
}

impl End {
    pub fn name(self) -> &'static str {
        match self {
            End::Marker => "marker",
            End::Limit => "limit",
        }
    }
}

pub struct Stall {
    pub spec: Spec,
    phase: Mutex<Phase>,
    released: Condvar,
}

impl Stall {
    pub fn new(spec: Spec) -> Stall {
        Stall {
            spec,
            phase: Mutex::new(Phase::Unarmed),
            released: Condvar::new(),
        }
    }

    fn phase(&self) -> MutexGuard<'_, Phase> {
        self.phase.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A guest marker `value` (on any vCPU).
    pub fn marker(&self, value: u32) {
        let mut p = self.phase();
        *p = match (*p, value) {
            (Phase::Unarmed, v) if v == self.spec.arm => Phase::Armed,
            (Phase::Armed | Phase::Due, v) if v == self.spec.release => Phase::Over,
            (Phase::Holding, v) if v == self.spec.release => {
                self.released.notify_all();
                Phase::Released
            }
            (p, _) => p,
        };
    }

    /// vCPU `cpu` froze its recorder. True if this freeze stalls it ([`Stall::hold`] next).
    pub fn freeze(&self, cpu: u32) -> bool {
        let mut p = self.phase();
        if cpu == self.spec.cpu && *p == Phase::Armed {
            *p = Phase::Due;
            return true;
        }
        false
    }

    /// Whether vCPU `cpu` is due to stall.
    pub fn due(&self, cpu: u32) -> bool {
        cpu == self.spec.cpu && *self.phase() == Phase::Due
    }

    /// Whether the stall is at rest, so that a fresh plugin can take it over (`save=`):
    /// `Ok(false)` not armed yet (a fresh one's state), `Ok(true)` over (a fresh one must be
    /// set over, [`Stall::set_over`]: once per run); otherwise why not.
    pub fn at_rest(&self) -> Result<bool, &'static str> {
        match *self.phase() {
            Phase::Unarmed => Ok(false),
            Phase::Over => Ok(true),
            Phase::Armed => Err("stall=: armed, waiting for the vCPU's freeze"),
            Phase::Due => Err("stall=: the vCPU froze and is about to stall"),
            Phase::Holding => Err("stall=: the vCPU is stalled"),
            Phase::Released => Err("stall=: released, the stalled vCPU has not gone on yet"),
        }
    }

    /// The stall is over, as it was in the plugin whose state was loaded (`load=`).
    pub fn set_over(&self) {
        *self.phase() = Phase::Over;
    }

    /// On vCPU `cpu`, with no lock of the emulator's held: if it is due, waits until the
    /// release (or at most `limit`) and says how the stall ended and how long it was; `started`
    /// is called first, once the stall has begun. None if the vCPU is not due.
    pub fn hold(
        &self,
        cpu: u32,
        limit: Duration,
        started: impl FnOnce(),
    ) -> Option<(End, Duration)> {
        let mut p = self.phase();
        if cpu != self.spec.cpu || *p != Phase::Due {
            return None;
        }
        *p = Phase::Holding;
        drop(p);
        started();
        let t0 = Instant::now();
        let p = self.phase();
        let (mut p, _) = self
            .released
            .wait_timeout_while(p, limit, |p| *p == Phase::Holding)
            .unwrap_or_else(|e| e.into_inner());
        let end = if *p == Phase::Released {
            End::Marker
        } else {
            End::Limit
        };
        *p = Phase::Over;
        Some((end, t0.elapsed()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread;

    const SPEC: Spec = Spec {
        cpu: 1,
        arm: 7,
        release: 8,
    };

    #[test]
    fn parse() {
        assert_eq!(Spec::parse("1:7:8"), Ok(SPEC));
        for bad in ["1:7", "1:7:8:9", "x:7:8", "1:-7:8", ""] {
            assert!(
                Spec::parse(bad).unwrap_err().contains("VCPU:ARM:RELEASE"),
                "{bad}"
            );
        }
        assert!(Spec::parse("1:7:7").unwrap_err().contains("must differ"));
    }

    #[test]
    fn only_the_first_freeze_of_that_cpu_after_the_arming_marker_stalls() {
        let s = Stall::new(SPEC);
        assert!(!s.freeze(1), "not armed yet");
        s.marker(8);
        assert!(
            !s.freeze(1),
            "a release before the arming marker arms nothing"
        );
        s.marker(7);
        assert!(!s.freeze(0), "another vCPU");
        assert!(!s.due(0));
        assert!(s.freeze(1));
        assert!(s.due(1));
        assert!(!s.freeze(1), "one freeze is due, not two");
        assert!(
            s.hold(0, LIMIT, || ()).is_none(),
            "another vCPU does not hold"
        );
    }

    #[test]
    fn a_release_before_the_freeze_ends_it() {
        let s = Stall::new(SPEC);
        s.marker(7);
        s.marker(8);
        assert!(!s.freeze(1));
        assert!(s.hold(1, LIMIT, || ()).is_none());
    }

    #[test]
    fn held_until_the_release() {
        let s = Arc::new(Stall::new(SPEC));
        s.marker(7);
        assert!(s.freeze(1));
        let (tx, rx) = std::sync::mpsc::channel();
        let held = {
            let s = s.clone();
            thread::spawn(move || s.hold(1, LIMIT, || tx.send(()).unwrap()))
        };
        rx.recv().unwrap();
        thread::sleep(Duration::from_millis(50));
        assert!(!held.is_finished(), "the vCPU went on before the release");
        s.marker(8);
        let (end, took) = held.join().unwrap().unwrap();
        assert_eq!(end, End::Marker);
        assert!(took >= Duration::from_millis(50), "{took:?}");
        s.marker(7);
        assert!(!s.freeze(1), "once per run");
    }

    #[test]
    fn at_rest_only_before_arming_and_once_over() {
        let s = Stall::new(SPEC);
        assert_eq!(s.at_rest(), Ok(false));
        s.marker(7);
        assert!(s.at_rest().unwrap_err().contains("armed"));
        assert!(s.freeze(1));
        assert!(s.at_rest().unwrap_err().contains("about to stall"));
        s.hold(1, Duration::from_millis(1), || ()).unwrap();
        assert_eq!(s.at_rest(), Ok(true));
        let fresh = Stall::new(SPEC);
        fresh.set_over();
        fresh.marker(7);
        assert!(!fresh.freeze(1), "a stall set over does not come again");
        assert_eq!(fresh.at_rest(), Ok(true));
    }

    #[test]
    fn the_limit_ends_a_stall_never_released() {
        let s = Stall::new(SPEC);
        s.marker(7);
        assert!(s.freeze(1));
        let (end, took) = s.hold(1, Duration::from_millis(20), || ()).unwrap();
        assert_eq!(end, End::Limit);
        assert!(took >= Duration::from_millis(20));
        assert!(!s.due(1));
    }
}
