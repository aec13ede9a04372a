//! The packet path of the event loop: frames read from endpoints into the
//! directions they enter, and departures handed to their egress endpoints when
//! due.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::os::fd::AsFd;

use crate::daemon::{now_ns, Daemon, DirState, Link, DIR_NAMES, SIDE_NAMES};
use crate::endpoint::{Endpoint, Opener};
use crate::ingress::{self, Ingress};
use crate::log;
use crate::vclock::VClock;

impl<O: Opener> Daemon<O> {
    /// Read up to `batch` frames from endpoint `side` of link `id` and push
    /// each, timestamped as it is read, into the direction it enters (see
    /// [`ingress::enter`] for super-frames).
    pub(crate) fn read_endpoint(&mut self, id: u64, side: usize) {
        let Some(link) = self.links.get_mut(&id) else {
            return;
        };
        if link.gone[side] {
            return;
        }
        let header = link.ends[side].header_len();
        let mut pushed = false;
        for _ in 0..self.config.batch {
            match link.ends[side].recv(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => {
                    let read = now_ns();
                    // The kernel's arrival stamp where the endpoint has one
                    // (never later than now; a stamp more than a second old
                    // is not believed).
                    let now = self.clock.at(match link.ends[side].rx_stamp() {
                        Some(t) if t <= read && read - t < 1_000_000_000 => t,
                        _ => read,
                    });
                    // A cut link's frame: its delay counts from when it left
                    // the other half (never later than now).
                    let origin = link.ends[side]
                        .origin()
                        .filter(|&t| t <= read)
                        .map(|t| self.clock.at(t));
                    let frame = &self.buf[..n];
                    pushed = true;
                    let at = Ingress {
                        link: &link.name,
                        side,
                        header,
                        chunk_ns: self.config.chunk_ns,
                        origin,
                    };
                    ingress::enter(&mut link.dirs[side], &at, now, frame, &mut self.segments);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Not transient (for a TAP device: EBADFD once the
                    // device is gone). A level-triggered error would wake
                    // the loop forever: stop watching this endpoint.
                    link.dirs[side].read_errors += 1;
                    link.gone[side] = true;
                    let _ = self.epoll.delete(link.ends[side].as_fd());
                    log!(
                        "link {:?}: read from endpoint {} failed ({e}); no longer reading it",
                        link.name,
                        SIDE_NAMES[side]
                    );
                    break;
                }
            }
        }
        if pushed {
            self.schedule(id, side);
        }
    }

    /// Hand every due departure to its egress endpoint, in deadline order
    /// across links (see [`release`]).
    pub fn poll_departures(&mut self) {
        loop {
            let now = self.clock.now();
            let Some(&Reverse((due, id, i))) = self.deadlines.peek() else {
                break;
            };
            if due > now {
                break;
            }
            self.deadlines.pop();
            let Some(link) = self.links.get_mut(&id) else {
                continue;
            };
            if link.dirs[i].scheduled != Some(due) {
                continue; // stale: the direction was rescheduled
            }
            link.dirs[i].scheduled = None;
            let sent = release(link, i, &self.clock);
            schedule(&mut self.deadlines, id, i, &mut link.dirs[i]);
            if sent == 0 && link.dirs[i].scheduled.is_some_and(|d| d <= now) {
                // The model advanced without a departure and is due again:
                // leave it to the next turn rather than loop here.
                break;
            }
        }
    }
}

/// Enter direction `i`'s next deadline in `heap` if it changed.
pub(crate) fn schedule(
    heap: &mut BinaryHeap<Reverse<(u64, u64, usize)>>,
    id: u64,
    i: usize,
    st: &mut DirState,
) {
    let next = st.dir.next_deadline();
    if next != st.scheduled {
        st.scheduled = next;
        if let Some(d) = next {
            heap.push(Reverse((d, id, i)));
        }
    }
}

/// Send every departure of direction `i` of `link` that is due; return how
/// many left.
///
/// The clock is read before each `poll`; that reading, minus the
/// departure's scheduled time, is passed to `record_lateness`. Lateness is
/// therefore the *scheduling error* of the daemon (how long after its
/// deadline the frame was taken out of the model), measured just before the
/// write; the write's own cost is the same for every frame and shows in
/// throughput, not here.
fn release<E: Endpoint>(link: &mut Link<E>, i: usize, clock: &VClock) -> usize {
    let mut sent = 0;
    let st = &mut link.dirs[i];
    loop {
        let now = clock.now();
        match st.dir.next_deadline() {
            Some(d) if d <= now => {}
            _ => break,
        }
        let Some(dep) = st.dir.poll(now) else { break };
        sent += 1;
        let late = now.saturating_sub(dep.scheduled_ns);
        st.dir.record_lateness(late);
        st.pulse.record(late);
        if let Err(e) = link.ends[1 - i].send(&dep.data) {
            st.write_errors += 1;
            // One line per power of two: visible, never a flood.
            if st.write_errors.is_power_of_two() {
                log!(
                    "link {:?} {}: write to endpoint {} failed: {e} ({} write errors so far)",
                    link.name,
                    DIR_NAMES[i],
                    SIDE_NAMES[1 - i],
                    st.write_errors
                );
            }
        }
    }
    if sent > 0 {
        link.ends[1 - i].flush();
    }
    sent
}
