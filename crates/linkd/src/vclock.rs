//! The engine's model clock: real `CLOCK_MONOTONIC`, or the virtual time of a
//! dilated run.
//!
//! A dilated run (issue 11, `docs/virtual-time.md`) has one clock page, the
//! same file the nodes' clock shim reads (`fidelnet.vt.page`; layout below).
//! With `--clock-page` the daemon maps it read-only and runs every link's
//! model in the page's virtual monotonic time: a rate of 10 Gbit/s sends
//! 10 Gbit per *virtual* second, a 10 ms delay lasts 10 virtual ms, and
//! lateness is virtual. Only the loop's own timing (the timer it arms, its
//! spin lead and budget) stays in real time. A TDF change on the page is
//! seen on the next clock read: a packet keeps its virtual due time, which
//! maps to a new real instant (the caller wakes the loop so that its timer
//! is re-armed).
//!
//! Page layout, little-endian: `u32 magic "fnVt"`, `u32 version 1`,
//! `u32 seq` (odd while the writer changes it), `u32 pad`, `f64 tdf`, then
//! three anchor pairs `(i64 real_ns, i64 virt_ns)` for realtime, monotonic and
//! boottime. Virtual monotonic = `virt + (real_now - real) / tdf`.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Arc;

use crate::state::now_ns;

const MAGIC: u32 = 0x7456_6E66;
const VERSION: u32 = 1;
const SIZE: usize = 4096;
const SEQ: usize = 8;
const TDF: usize = 16;
const MONO_ANCHOR: usize = 24 + 16;

/// One consistent reading of the page: the factor and the monotonic anchor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct View {
    /// Time dilation factor.
    pub tdf: f64,
    /// Real `CLOCK_MONOTONIC` ns of the anchor.
    pub real: i64,
    /// Virtual monotonic ns at the anchor.
    pub virt: i64,
}

impl View {
    /// Virtual time at real instant `real_ns`.
    pub fn virt_at(&self, real_ns: u64) -> u64 {
        let dt = real_ns as i64 - self.real;
        (self.virt + (dt as f64 / self.tdf) as i64).max(0) as u64
    }

    /// The real instant at which virtual time reaches `virt_ns`.
    pub fn real_at(&self, virt_ns: u64) -> u64 {
        let dv = virt_ns as i64 - self.virt;
        (self.real + (dv as f64 * self.tdf).ceil() as i64).max(0) as u64
    }
}

/// The mapped page.
struct Page {
    base: NonNull<u8>,
}

// SAFETY: the mapping is read-only and lives as long as the `Page`; every
// read goes through atomics or volatile loads.
unsafe impl Send for Page {}
// SAFETY: as above.
unsafe impl Sync for Page {}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: `base` is the start of a SIZE-byte mapping made in `open`.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), SIZE);
        }
    }
}

impl Page {
    fn seq(&self) -> &AtomicU32 {
        // SAFETY: offset SEQ is 4-byte aligned inside the mapping, and the
        // writer only ever stores whole u32 values there.
        unsafe { &*self.base.as_ptr().add(SEQ).cast::<AtomicU32>() }
    }

    fn read<T: Copy>(&self, offset: usize) -> T {
        // SAFETY: every offset used is inside the mapping and aligned for T.
        unsafe { std::ptr::read_volatile(self.base.as_ptr().add(offset).cast::<T>()) }
    }
}

/// Real or virtual monotonic time for the links' models.
#[derive(Clone, Default)]
pub struct VClock {
    page: Option<Arc<Page>>,
}

impl std::fmt::Debug for VClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.page {
            None => write!(f, "VClock(real)"),
            Some(_) => write!(f, "VClock(page, tdf {})", self.view().tdf),
        }
    }
}

impl VClock {
    /// Real time: the model clock is `CLOCK_MONOTONIC`.
    pub fn real() -> Self {
        Self { page: None }
    }

    /// The page at `path`, checked.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        if len < SIZE as u64 {
            return Err(io::Error::other(format!(
                "{} is {len} bytes, not a clock page ({SIZE})",
                path.display()
            )));
        }
        // SAFETY: a fresh shared read-only mapping of a file at least SIZE
        // bytes long; checked for MAP_FAILED below.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                SIZE,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(addr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap: null"))?;
        let page = Page { base };
        let (magic, version) = (page.read::<u32>(0), page.read::<u32>(4));
        if magic != MAGIC || version != VERSION {
            return Err(io::Error::other(format!(
                "{} is not a version {VERSION} clock page (magic {magic:#x}, version {version})",
                path.display()
            )));
        }
        Ok(Self {
            page: Some(Arc::new(page)),
        })
    }

    /// Whether the model runs in virtual time.
    pub fn dilated(&self) -> bool {
        self.page.is_some()
    }

    /// The page's factor and anchor now (TDF 1 at real time without a page).
    pub fn view(&self) -> View {
        self.read(|| 0).0
    }

    /// A consistent view with `f` run inside the seqlock (the real clock read,
    /// so that no reading pairs a new anchor with an older real time).
    fn read<T>(&self, mut f: impl FnMut() -> T) -> (View, T) {
        let Some(page) = &self.page else {
            return (
                View {
                    tdf: 1.0,
                    real: 0,
                    virt: 0,
                },
                f(),
            );
        };
        loop {
            let s1 = page.seq().load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let tdf: f64 = page.read(TDF);
            let real: i64 = page.read(MONO_ANCHOR);
            let virt: i64 = page.read(MONO_ANCHOR + 8);
            let out = f();
            fence(Ordering::Acquire);
            if page.seq().load(Ordering::Relaxed) == s1 && tdf > 0.0 && tdf.is_finite() {
                return (View { tdf, real, virt }, out);
            }
        }
    }

    /// Model time now.
    pub fn now(&self) -> u64 {
        if self.page.is_none() {
            return now_ns();
        }
        let (view, real) = self.read(now_ns);
        view.virt_at(real)
    }

    /// Model time at real `CLOCK_MONOTONIC` instant `real_ns` (a kernel
    /// arrival stamp, an instant the caller planned).
    pub fn at(&self, real_ns: u64) -> u64 {
        if self.page.is_none() {
            return real_ns;
        }
        self.view().virt_at(real_ns)
    }

    /// The real instant at which model time reaches `model_ns`, at the
    /// current factor.
    pub fn real_at(&self, model_ns: u64) -> u64 {
        if self.page.is_none() {
            return model_ns;
        }
        self.view().real_at(model_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(tdf: f64, real: i64, virt: i64) -> tempfile_page::Tmp {
        let mut b = vec![0u8; SIZE];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&VERSION.to_le_bytes());
        b[8..12].copy_from_slice(&2u32.to_le_bytes());
        b[16..24].copy_from_slice(&tdf.to_le_bytes());
        b[MONO_ANCHOR..MONO_ANCHOR + 8].copy_from_slice(&real.to_le_bytes());
        b[MONO_ANCHOR + 8..MONO_ANCHOR + 16].copy_from_slice(&virt.to_le_bytes());
        tempfile_page::Tmp::new(&b)
    }

    mod tempfile_page {
        use std::path::PathBuf;

        pub struct Tmp(pub PathBuf);

        impl Tmp {
            pub fn new(bytes: &[u8]) -> Self {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let p = std::env::temp_dir().join(format!(
                    "linkd-vclock-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                let mut f = std::fs::File::create(&p).unwrap();
                std::io::Write::write_all(&mut f, bytes).unwrap();
                Self(p)
            }
        }

        impl Drop for Tmp {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
    }

    #[test]
    fn without_a_page_model_time_is_real_time() {
        let c = VClock::real();
        assert!(!c.dilated());
        assert_eq!(c.at(123), 123);
        assert_eq!(c.real_at(456), 456);
        let (a, b, d) = (now_ns(), c.now(), now_ns());
        assert!(a <= b && b <= d);
    }

    #[test]
    fn a_page_dilates_the_model_clock() {
        let real = now_ns() as i64;
        let p = page(4.0, real, 1_000_000_000);
        let c = VClock::open(&p.0).unwrap();
        assert!(c.dilated());
        // 4 ms of real time past the anchor is 1 ms of model time.
        assert_eq!(c.at(real as u64 + 4_000_000), 1_001_000_000);
        assert_eq!(c.real_at(1_001_000_000), real as u64 + 4_000_000);
        let v = c.now();
        assert!(v >= 1_000_000_000, "{v}");
        assert!(v < 1_000_000_000 + 1_000_000_000, "{v}");
    }

    /// A daemon on a page at TDF 4 holds a 10 ms delay for 40 ms of real
    /// time; after the page goes to TDF 1 (and a `clock` request), 10 ms.
    #[test]
    fn a_dilated_daemon_runs_its_links_in_virtual_time() {
        use crate::daemon::Daemon;
        use crate::tests::{add, ok, recv_through, FakeOpener};
        use serde_json::json;
        use std::time::Duration;

        let real = now_ns() as i64;
        let p = page(4.0, real, real);
        let opener = FakeOpener::default();
        let mut d = Daemon::new(opener.clone(), crate::daemon::Config::default(), None, None)
            .unwrap()
            .with_clock(VClock::open(&p.0).unwrap());
        let r = ok(&mut d, json!({"op": "clock"}));
        assert_eq!(
            (r["dilated"].clone(), r["tdf"].clone()),
            (json!(true), json!(4.0))
        );
        ok(
            &mut d,
            add("l", "a0", "b0", json!({"delay_ns": 10_000_000}), json!({})),
        );
        let (a, b) = (opener.peer("a0"), opener.peer("b0"));
        let t0 = now_ns();
        a.send(b"x").unwrap();
        assert_eq!(recv_through(&mut d, &b, Duration::from_secs(2)), b"x");
        let took = now_ns() - t0;
        assert!(
            (40_000_000..80_000_000).contains(&took),
            "{took} ns at TDF 4"
        );

        // The writer's TDF change: re-anchor at one instant, odd seq around it.
        let now = now_ns() as i64;
        let virt = VClock::open(&p.0).unwrap().at(now as u64) as i64;
        let mut b2 = std::fs::read(&p.0).unwrap();
        b2[8..12].copy_from_slice(&4u32.to_le_bytes());
        b2[16..24].copy_from_slice(&1.0f64.to_le_bytes());
        b2[MONO_ANCHOR..MONO_ANCHOR + 8].copy_from_slice(&now.to_le_bytes());
        b2[MONO_ANCHOR + 8..MONO_ANCHOR + 16].copy_from_slice(&virt.to_le_bytes());
        std::fs::write(&p.0, &b2).unwrap();
        let r = ok(&mut d, json!({"op": "clock"}));
        assert_eq!(r["tdf"], json!(1.0));
        let t0 = now_ns();
        a.send(b"y").unwrap();
        assert_eq!(recv_through(&mut d, &b, Duration::from_secs(2)), b"y");
        let took = now_ns() - t0;
        assert!(
            (10_000_000..35_000_000).contains(&took),
            "{took} ns at TDF 1"
        );
        let r = ok(&mut d, json!({"op": "stats", "link": "l"}));
        assert_eq!(r["clock"]["tdf"], json!(1.0));
        assert_eq!(r["links"]["l"]["ab"]["tx_packets"], 2);
        // A pulse: the window's departures and their lateness, then a new window.
        let p = ok(&mut d, json!({"op": "pulse"}));
        let dirs = p["directions"].as_array().unwrap();
        assert_eq!(dirs.len(), 1, "{p}");
        assert_eq!(
            (dirs[0]["dir"].clone(), dirs[0]["departures"].clone()),
            (json!("ab"), json!(2))
        );
        assert!(dirs[0]["p99_ns"].as_u64().unwrap() <= dirs[0]["max_ns"].as_u64().unwrap());
        let p = ok(&mut d, json!({"op": "pulse"}));
        assert_eq!(p["directions"], json!([]));
    }

    #[test]
    fn pulse_quantiles_are_bucket_bounds() {
        let mut p = crate::state::Pulse::default();
        assert_eq!(p.quantile_ns(0.99), 1 << 47); // nothing recorded
        for late in [0, 5, 900, 1_000, 1_500_000] {
            p.record(late);
        }
        assert_eq!(p.departures, 5);
        assert_eq!(p.quantile_ns(0.2), 0);
        assert_eq!(p.quantile_ns(0.6), 1024); // 900 is below 2^10
        assert_eq!(p.quantile_ns(1.0), 1 << 21); // 1.5 ms is below 2^21 ns
    }

    #[test]
    fn a_file_that_is_not_a_page_is_refused() {
        let p = tempfile_page::Tmp::new(&[0u8; SIZE]);
        let e = VClock::open(&p.0).unwrap_err().to_string();
        assert!(e.contains("not a version 1 clock page"), "{e}");
        let short = tempfile_page::Tmp::new(&[0u8; 16]);
        let e = VClock::open(&short.0).unwrap_err().to_string();
        assert!(e.contains("not a clock page"), "{e}");
    }
}
