//! A direction going down or up, now or at a planned instant.

use super::{Direction, Link};

impl Direction {
    /// Bring the link down or up at `now`.
    ///
    /// Down: arrivals are dropped (cause down), and everything queued or in
    /// flight (on the wire or in the delay line) is dropped (cause down).
    /// Packets scheduled to depart at or before `now` had already left and
    /// are still returned by [`poll`](Self::poll). Up again: normal
    /// operation, with an idle link; a trace keeps its clock. A change
    /// planned with [`set_up_at`](Self::set_up_at) is forgotten.
    pub fn set_up(&mut self, now: u64, up: bool) {
        let now = self.clock(now);
        self.pending_state.clear();
        self.apply_state(now, up);
    }

    /// Bring the link down or up at the instant `at`, exactly, whenever the
    /// direction is next told the time: an arrival at or after `at` finds
    /// the new state, one before it the old, and a packet due to depart
    /// after `at` from a link going down is dropped, as with
    /// [`set_up`](Self::set_up) at `at`. An `at` already past applies now.
    /// Several changes may be planned (a flap is two); they apply in order of
    /// their instants, and [`set_up`](Self::set_up) forgets them all.
    /// [`next_deadline`](Self::next_deadline) includes the earliest, so an
    /// event loop wakes for it.
    ///
    /// ```
    /// use link_core::{Direction, DirectionParams};
    /// const MS: u64 = 1_000_000;
    /// let mut d = Direction::new(DirectionParams::default()).unwrap();
    /// d.set_up_at(10 * MS, false);
    /// assert_eq!(d.next_deadline(), Some(10 * MS));
    /// d.push(10 * MS - 1, vec![0; 100]); // before the cut: carried
    /// d.push(10 * MS, vec![0; 100]); // at the cut: dropped
    /// assert!(!d.is_up());
    /// assert_eq!(d.stats().drops.down, 1);
    /// assert!(d.poll(10 * MS).is_some());
    /// // A flap planned as two changes: down at 20 ms, up at 30 ms.
    /// d.set_up(10 * MS, true);
    /// d.set_up_at(30 * MS, true);
    /// d.set_up_at(20 * MS, false);
    /// assert_eq!(d.pending_state(), Some((20 * MS, false)));
    /// d.push(25 * MS, vec![0; 100]); // dropped
    /// assert!(!d.is_up());
    /// d.push(30 * MS, vec![0; 100]); // carried
    /// assert!(d.is_up() && d.pending_state().is_none());
    /// assert_eq!(d.stats().drops.down, 2);
    /// ```
    pub fn set_up_at(&mut self, at: u64, up: bool) {
        if at <= self.now {
            self.set_up(self.now, up);
            return;
        }
        let i = self.pending_state.partition_point(|&(t, _)| t <= at);
        self.pending_state.insert(i, (at, up));
    }

    /// The earliest state change planned with [`set_up_at`](Self::set_up_at)
    /// and not yet applied: its instant and state.
    pub fn pending_state(&self) -> Option<(u64, bool)> {
        self.pending_state.first().copied()
    }

    pub(super) fn apply_state(&mut self, now: u64, up: bool) {
        self.advance(now);
        if self.up && !up {
            self.stats.drops.down +=
                self.queue.clear() + self.line.drop_after(now, |p| u64::from(p.packets));
            if let Link::Rate(r) = &mut self.link {
                r.abort(now);
            }
            self.chunk_on_wire = None;
        }
        self.up = up;
    }

    /// Whether the link is up.
    pub fn is_up(&self) -> bool {
        self.up
    }
}
