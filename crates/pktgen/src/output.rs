//! The JSON reports and the HdrHistogram interval log.
//!
//! Both reports are one JSON object on one line, written when the run ends
//! to `--json PATH` (opened, i.e. created, when the program starts, so a bad
//! path fails before any packet) or to stdout for `-`.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::{Duration, SystemTime};

use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;
use serde::Serialize;

use crate::account::{Accounting, IntervalSink};
use crate::hist::{self, Summary};

/// Where a report goes.
pub enum Sink {
    /// `-`.
    Stdout,
    /// A file, created at start.
    File(File, String),
}

impl Sink {
    /// Open `--json PATH` (`-`: stdout). `option` names the option in errors.
    pub fn open(path: &Path, option: &str) -> Result<Sink, String> {
        if path.as_os_str() == "-" {
            return Ok(Sink::Stdout);
        }
        let shown = path.display().to_string();
        File::create(path)
            .map(|f| Sink::File(f, shown.clone()))
            .map_err(|e| format!("{option} {shown}: cannot create: {e}"))
    }

    /// Write `value` as one line of JSON.
    pub fn write<T: Serialize>(self, value: &T) -> Result<(), String> {
        let mut line =
            serde_json::to_vec(value).map_err(|e| format!("cannot encode the report: {e}"))?;
        line.push(b'\n');
        match self {
            Sink::Stdout => {
                let mut out = io::stdout().lock();
                out.write_all(&line)
                    .and_then(|()| out.flush())
                    .map_err(|e| format!("cannot write the report to stdout: {e}"))
            }
            Sink::File(mut f, shown) => {
                f.write_all(&line)
                    .map_err(|e| format!("cannot write the report to {shown}: {e}"))?;
                // Durable before exit; not possible (nor needed) for
                // /dev/null, pipes and the like.
                if f.metadata().is_ok_and(|m| m.is_file()) {
                    f.sync_all()
                        .map_err(|e| format!("cannot write the report to {shown}: {e}"))?;
                }
                Ok(())
            }
        }
    }
}

/// One flow of the sender's report.
#[derive(Debug, Serialize)]
pub struct SendFlow {
    /// Flow id (index of its `--flow`).
    pub id: u16,
    /// Destination.
    pub dst: String,
    /// Packets sent.
    pub sent: u64,
    /// UDP payload bytes of this flow's packets (IPv6 flows carry 20
    /// fewer than IPv4 ones for the same frame size).
    pub payload_bytes: usize,
}

/// The sender's report.
#[derive(Debug, Serialize)]
pub struct SendReport {
    pub role: &'static str,
    pub version: &'static str,
    pub flows: Vec<SendFlow>,
    pub sent: u64,
    pub send_errors: u64,
    pub requested_pps: f64,
    pub achieved_pps: f64,
    pub rate_reached: bool,
    pub size: usize,
    pub payload_bytes: usize,
    pub pattern: &'static str,
    pub burst: Option<u64>,
    pub seed: u64,
    pub duration_s: f64,
    pub start_ns: u64,
    pub first_send_ns: Option<u64>,
    pub last_send_ns: Option<u64>,
    pub behind_max_ns: u64,
    pub cpu: Option<u32>,
    pub batch: u32,
    pub user_cpu_s: f64,
    pub sys_cpu_s: f64,
    // Beyond the required keys.
    pub mode: &'static str,
    /// Departures in `[0, duration)`: sent + send_errors + backlog.
    pub scheduled: u64,
    /// `scheduled / duration`: what `achieved_pps` is held against.
    pub scheduled_pps: f64,
    /// Departures never attempted because the loop was still behind at
    /// the end.
    pub backlog: u64,
    /// Transmit calls (sendmmsg or AF_PACKET batches).
    pub calls: u64,
    /// Failed calls by errno name.
    pub errors: BTreeMap<String, u64>,
    /// Last send call's end, s after the start.
    pub elapsed_s: f64,
}

/// One flow of the receiver's report.
#[derive(Debug, Serialize)]
pub struct RecvFlow {
    pub id: u16,
    pub received: u64,
    pub unique: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub max_seq: u64,
    /// Send timestamp of `max_seq` (CLOCK_REALTIME ns).
    pub max_seq_send_ns: u64,
    /// The first sequence number that arrived, and its send timestamp.
    pub first_seq: u64,
    pub first_send_ns: u64,
    pub lost_by_seq: u64,
    pub latency: Summary,
    pub latency_hdr: String,
    pub jitter: Summary,
    pub jitter_hdr: String,
    pub beyond_window: u64,
}

/// Malformed datagrams by reason.
#[derive(Debug, Serialize)]
pub struct MalformedReport {
    pub total: u64,
    pub too_short: u64,
    pub bad_magic: u64,
    pub bad_check: u64,
}

/// One interval of the receiver's series.
#[derive(Debug, Serialize)]
pub struct IntervalReport {
    pub t_ns: u64,
    pub packets: u64,
    pub duplicates: u64,
    pub bytes: u64,
    pub frame_bytes: u64,
    pub latency_max_ns: u64,
    pub latency_p50_ns: u64,
    pub latency_p99_ns: u64,
    pub latency_count: u64,
}

/// A jump in a flow's sequence numbers (`account::Gap`).
#[derive(Debug, Serialize)]
pub struct GapReport {
    pub flow: u16,
    pub after_seq: u64,
    pub after_send_ns: u64,
    pub before_seq: u64,
    pub before_send_ns: u64,
    pub before_rx_ns: u64,
    pub lost: u64,
    pub filled: u64,
}

/// The receiver's report.
#[derive(Debug, Serialize)]
pub struct RecvReport {
    pub role: &'static str,
    pub version: &'static str,
    pub received: u64,
    pub unique: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub malformed: MalformedReport,
    pub negative_latency: u64,
    pub userspace_timestamps: u64,
    pub timestamp_source: &'static str,
    pub bytes: u64,
    pub first_rx_ns: Option<u64>,
    pub last_rx_ns: Option<u64>,
    pub interval_ms: u64,
    pub latency: Summary,
    pub latency_hdr: String,
    pub jitter: Summary,
    /// The highest latencies kept (`--worst`): [receive ns, latency ns, flow].
    pub worst: Vec<(u64, u64, u16)>,
    pub flows: Vec<RecvFlow>,
    pub intervals: Vec<IntervalReport>,
    pub gaps: Vec<GapReport>,
    pub gaps_dropped: u64,
    pub rcvbuf: usize,
    pub socket_drops: u64,
    pub cpu: Option<u32>,
    pub user_cpu_s: f64,
    pub sys_cpu_s: f64,
    // Beyond the required keys.
    pub frame_bytes: u64,
    pub interval_late: u64,
    pub dup_window: u64,
    pub stop_reason: &'static str,
    pub run_s: f64,
    pub binds: Vec<String>,
}

/// The parts of the receiver's report that come from the accounting.
pub fn recv_report(acc: &Accounting, interval_ms: u64) -> RecvReport {
    RecvReport {
        role: "recv",
        version: env!("CARGO_PKG_VERSION"),
        received: acc.received,
        unique: acc.unique,
        duplicates: acc.duplicates,
        reordered: acc.reordered,
        malformed: MalformedReport {
            total: acc.malformed.total(),
            too_short: acc.malformed.too_short,
            bad_magic: acc.malformed.bad_magic,
            bad_check: acc.malformed.bad_check,
        },
        negative_latency: acc.negative_latency,
        userspace_timestamps: 0,
        timestamp_source: "so_timestamping_software",
        bytes: acc.bytes,
        first_rx_ns: acc.first_rx_ns,
        last_rx_ns: acc.last_rx_ns,
        interval_ms,
        latency: hist::summary(&acc.latency),
        latency_hdr: hist::encode(&acc.latency),
        jitter: hist::summary(&acc.jitter),
        worst: acc.worst(),
        flows: acc
            .flows()
            .map(|(id, f)| RecvFlow {
                id,
                received: f.received,
                unique: f.unique,
                duplicates: f.duplicates,
                reordered: f.reordered,
                max_seq: f.max_seq(),
                max_seq_send_ns: f.max_seq_send_ns(),
                first_seq: f.first.map_or(0, |(seq, _)| seq),
                first_send_ns: f.first.map_or(0, |(_, ns)| ns),
                lost_by_seq: f.lost_by_seq(),
                latency: hist::summary(&f.latency),
                latency_hdr: hist::encode(&f.latency),
                jitter: hist::summary(&f.jitter),
                jitter_hdr: hist::encode(&f.jitter),
                beyond_window: f.beyond_window,
            })
            .collect(),
        intervals: acc
            .intervals
            .iter()
            .map(|i| IntervalReport {
                t_ns: i.t_ns,
                packets: i.packets,
                duplicates: i.duplicates,
                bytes: i.bytes,
                frame_bytes: i.frame_bytes,
                latency_max_ns: i.latency_max_ns,
                latency_p50_ns: i.latency_p50_ns,
                latency_p99_ns: i.latency_p99_ns,
                latency_count: i.latency_count,
            })
            .collect(),
        gaps: acc
            .gaps
            .iter()
            .map(|g| GapReport {
                flow: g.flow,
                after_seq: g.after_seq,
                after_send_ns: g.after_send_ns,
                before_seq: g.before_seq,
                before_send_ns: g.before_send_ns,
                before_rx_ns: g.before_rx_ns,
                lost: g.lost(),
                filled: g.filled,
            })
            .collect(),
        gaps_dropped: acc.gaps_dropped,
        rcvbuf: 0,
        socket_drops: 0,
        cpu: None,
        user_cpu_s: 0.0,
        sys_cpu_s: 0.0,
        frame_bytes: acc.frame_bytes,
        interval_late: acc.interval_late,
        dup_window: crate::account::DUP_WINDOW,
        stop_reason: "",
        run_s: 0.0,
        binds: Vec::new(),
    }
}

/// `--hdr-log`: the standard HdrHistogram interval log (as Java's
/// `HistogramLogWriter` writes it): a format-version comment, StartTime and
/// BaseTime (both the first packet's timestamp, to the ms), then one line
/// per interval, `start,length,max,histogram` with start relative to
/// BaseTime in s, histogram V2 + DEFLATE in base64, max in ns.
pub struct HdrLog {
    out: BufWriter<File>,
    shown: String,
    serializer: V2DeflateSerializer,
    base_ns: Option<u64>,
    /// The first write error; later writes are skipped.
    pub error: Option<String>,
}

impl HdrLog {
    /// Create the log file.
    pub fn create(path: &Path) -> Result<HdrLog, String> {
        let shown = path.display().to_string();
        let f = File::create(path).map_err(|e| format!("--hdr-log {shown}: cannot create: {e}"))?;
        Ok(HdrLog {
            out: BufWriter::new(f),
            shown,
            serializer: V2DeflateSerializer::new(),
            base_ns: None,
            error: None,
        })
    }

    fn header(&mut self, start_ns: u64) -> io::Result<()> {
        let base = start_ns - start_ns % 1_000_000;
        let at = SystemTime::UNIX_EPOCH + Duration::from_nanos(base);
        IntervalLogWriterBuilder::new()
            .add_comment(&format!(
                "Logged with fidelnet-pktgen {}: one-way latency in ns, all flows",
                env!("CARGO_PKG_VERSION")
            ))
            .add_comment("[Histogram log format version 1.3]")
            .with_start_time(at)
            .with_base_time(at)
            .begin_log_with(&mut self.out, &mut self.serializer)?;
        self.base_ns = Some(base);
        Ok(())
    }

    fn entry(&mut self, start_ns: u64, width_ns: u64, h: &Histogram<u64>) -> Result<(), String> {
        if self.base_ns.is_none() {
            self.header(start_ns).map_err(|e| e.to_string())?;
        }
        let base = self.base_ns.unwrap_or(0);
        IntervalLogWriterBuilder::new()
            .begin_log_with(&mut self.out, &mut self.serializer)
            .map_err(|e| e.to_string())?
            .write_histogram(
                h,
                Duration::from_nanos(start_ns.saturating_sub(base)),
                Duration::from_nanos(width_ns),
                None,
            )
            .map_err(|e| e.to_string())
    }

    /// Flush; a log without intervals gets its header (StartTime `now`).
    pub fn finish(mut self, now_ns: u64) -> Result<(), String> {
        if self.error.is_none() && self.base_ns.is_none() {
            if let Err(e) = self.header(now_ns) {
                self.error = Some(e.to_string());
            }
        }
        if let Some(e) = self.error.take() {
            return Err(format!("--hdr-log {}: {e}", self.shown));
        }
        self.out
            .flush()
            .and_then(|()| self.out.get_ref().sync_all())
            .map_err(|e| format!("--hdr-log {}: {e}", self.shown))
    }
}

impl IntervalSink for HdrLog {
    fn interval(&mut self, start_ns: u64, width_ns: u64, latency: &Histogram<u64>) {
        if self.error.is_none() {
            if let Err(e) = self.entry(start_ns, width_ns, latency) {
                self.error = Some(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

    #[test]
    fn interval_log_reads_back() {
        let path = std::env::temp_dir().join(format!("pktgen-hdrlog-{}", std::process::id()));
        let mut log = HdrLog::create(&path).unwrap();
        let start = 1_700_000_000_123_456_789u64;
        let mut h = hist::new();
        h.record(50_000).unwrap();
        log.interval(start, 100_000_000, &h);
        log.interval(start + 100_000_000, 100_000_000, &hist::new());
        log.finish(0).unwrap();
        let text = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let s = String::from_utf8(text.clone()).unwrap();
        assert!(
            s.contains("#[StartTime: 1700000000.123 (seconds since epoch)]"),
            "{s}"
        );
        assert!(
            s.contains("#[BaseTime: 1700000000.123 (seconds since epoch)]"),
            "{s}"
        );
        let intervals: Vec<_> = IntervalLogIterator::new(&text)
            .filter_map(|e| match e.unwrap() {
                LogEntry::Interval(i) => Some((i.start_timestamp(), i.duration(), i.max())),
                _ => None,
            })
            .collect();
        assert_eq!(intervals.len(), 2);
        assert_eq!(intervals[0].1, Duration::from_millis(100));
        assert!(intervals[1].0 > intervals[0].0);
        assert!((intervals[0].2 - 50_000.0).abs() < 50.0, "{intervals:?}");
    }
}
