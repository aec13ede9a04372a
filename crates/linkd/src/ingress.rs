//! How a frame read from an endpoint enters its direction.
//!
//! A wire packet is pushed as it is. A segmentation-offload super-frame
//! (TAP endpoints with virtio-net headers, see [`crate::gso`]) depends on
//! what the direction does:
//!
//! - one that treats every packet alike (perfect or delay-only:
//!   [`link_core::DirectionParams::needs_wire_packets`] is false) takes it
//!   **whole**;
//! - one that only shapes (a rate, a drop-tail queue, a delay:
//!   [`link_core::DirectionParams::allows_chunks`]) takes it in **chunks**:
//!   pieces of as many wire packets as the rate serialises in
//!   [`Config::chunk_ns`](crate::state::Config::chunk_ns), each a smaller
//!   super-frame charged, queued and released as the packets it holds
//!   ([`link_core::Direction::push_chunk`]), sized so that the queue admits
//!   and drops exactly the packets it would one by one;
//! - any other (loss, duplication, corruption, jitter, a trace, HiFi) takes
//!   it as its **wire packets**, one by one.

use link_core::Direction;

use crate::gso::{self, Segmenter, VnetHdr};
use crate::log;
use crate::state::{DirState, OffloadCounts, DIR_NAMES};

/// Where a frame enters.
pub(crate) struct Ingress<'a> {
    /// The link's name, for the log.
    pub link: &'a str,
    /// The side it was read from (the direction's index).
    pub side: usize,
    /// The endpoint's header length (0: no virtio-net header).
    pub header: usize,
    /// [`crate::state::Config::chunk_ns`].
    pub chunk_ns: u64,
    /// When a cut link's frame left the other half (model time), if it is one.
    pub origin: Option<u64>,
}

/// Push `frame`, read at `now`, into `st` (`segments` is scratch space).
pub(crate) fn enter(
    st: &mut DirState,
    at: &Ingress<'_>,
    now: u64,
    frame: &[u8],
    segments: &mut Vec<Vec<u8>>,
) {
    let wire = at.header == 0 || VnetHdr::parse(frame).is_none_or(|h| h.is_wire());
    if wire {
        match at.origin {
            Some(origin) => st.dir.push_from(now, origin, frame.to_vec()),
            None => st.dir.push(now, frame.to_vec()),
        }
        return;
    }
    if !st.dir.params().needs_wire_packets() {
        st.offload.whole += 1;
        st.dir.push(now, frame.to_vec());
        return;
    }
    let chunks = at.chunk_ns > 0 && st.dir.params().allows_chunks();
    if let Some(cut) = Segmenter::new(frame).filter(|_| chunks) {
        match cut {
            Ok(cut) => in_chunks(&mut st.dir, &mut st.offload, cut, now, at.chunk_ns),
            Err(e) => error(at, &mut st.offload, &e),
        }
        return;
    }
    match gso::to_wire(frame, segments) {
        Ok(k) => {
            st.offload.split += 1;
            st.offload.segments += k as u64;
            for seg in segments.drain(..) {
                st.dir.push(now, seg);
            }
        }
        Err(e) => {
            segments.clear();
            error(at, &mut st.offload, &e);
        }
    }
}

fn in_chunks(
    dir: &mut Direction,
    counts: &mut OffloadCounts,
    mut cut: Segmenter<'_>,
    now: u64,
    chunk_ns: u64,
) {
    counts.split += 1;
    counts.segments += cut.remaining() as u64;
    let seg = cut.segment_bytes() as u64;
    loop {
        let n = dir.chunk_packets(now, seg, chunk_ns);
        let Some((f, k, bytes)) = cut.take(n as usize) else {
            break;
        };
        if k > 1 {
            counts.chunks += 1;
            dir.push_chunk(now, f, k, bytes);
        } else {
            dir.push(now, f);
        }
    }
}

/// Count (and log at powers of two) an offloaded frame the engine could
/// not cut, dropped.
fn error(at: &Ingress<'_>, counts: &mut OffloadCounts, e: &str) {
    counts.errors += 1;
    if counts.errors.is_power_of_two() {
        log!(
            "link {:?} {}: offloaded frame dropped: {e} ({} so far)",
            at.link,
            DIR_NAMES[at.side],
            counts.errors
        );
    }
}
