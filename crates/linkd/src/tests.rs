//! Dispatch and forwarding tests with a fake endpoint: each endpoint is one
//! end of a datagram socket pair, the test holds the other end. No root
//! needed.

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::daemon::{now_ns, Config, Daemon};
use crate::endpoint::{Endpoint, EndpointSpec, Opener};
use crate::tcx::Way;

/// A counter shared between the test and the fakes (which may live in an
/// engine loop's thread).
#[derive(Default, Clone)]
pub(crate) struct Count(Arc<AtomicUsize>);

impl Count {
    pub(crate) fn get(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
    fn set(&self, v: usize) {
        self.0.store(v, Ordering::SeqCst);
    }
}

/// A value shared between the test and the fakes.
#[derive(Default)]
pub(crate) struct Shared<T>(Arc<Mutex<T>>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T> Shared<T> {
    fn borrow(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap()
    }
    pub(crate) fn borrow_mut(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap()
    }
}

/// A fake endpoint; counts itself in `live` while it exists.
pub(crate) struct Fake {
    sock: UnixDatagram,
    live: Count,
    /// Frames carry a virtio-net header.
    vnet: bool,
    spec: EndpointSpec,
    /// Redirect guards held (counted in `FakeOpener::held` while held).
    guards: Vec<OwnedFd>,
    held: Count,
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.live.set(self.live.get() - 1);
        self.held.set(self.held.get() - self.guards.len());
    }
}

impl AsFd for Fake {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl Endpoint for Fake {
    fn header_len(&self) -> usize {
        if self.vnet {
            crate::gso::VNET_HDR_LEN
        } else {
            0
        }
    }
    fn spec(&self) -> Option<&EndpointSpec> {
        Some(&self.spec)
    }
    fn hold(&mut self, guard: OwnedFd) {
        self.guards.push(guard);
        self.held.set(self.held.get() + 1);
    }
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.sock.recv(buf)
    }
    fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        self.sock.send(frame).map(drop)
    }
}

/// A redirect the fake opener made: (netns, from, to, way).
type Redirect = (String, String, String, Way);

/// Hands out fakes; the test side of each is kept under its ifname.
#[derive(Default, Clone)]
pub(crate) struct FakeOpener {
    pub(crate) live: Count,
    opened: Count,
    peers: Shared<HashMap<String, UnixDatagram>>,
    /// Opening an endpoint with this ifname fails.
    pub(crate) fail: Shared<Option<String>>,
    /// Endpoints carry virtio-net headers.
    vnet: bool,
    /// Redirects made, in order: (netns, from, to, way).
    redirects: Shared<Vec<Redirect>>,
    /// A redirect from this interface fails.
    fail_redirect: Shared<Option<String>>,
    held: Count,
}

impl Opener for FakeOpener {
    type Endpoint = Fake;

    fn kind(&self) -> &'static str {
        "fake"
    }

    fn open(&mut self, spec: &EndpointSpec, side: &str) -> Result<Fake, String> {
        if self.fail.borrow().as_deref() == Some(spec.ifname.as_str()) {
            return Err(format!("{side}.ifname: refused by the test"));
        }
        let (ours, theirs) = UnixDatagram::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        theirs
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        self.peers.borrow_mut().insert(spec.ifname.clone(), theirs);
        self.live.set(self.live.get() + 1);
        self.opened.set(self.opened.get() + 1);
        Ok(Fake {
            sock: ours,
            live: self.live.clone(),
            vnet: self.vnet,
            spec: spec.clone(),
            guards: Vec::new(),
            held: self.held.clone(),
        })
    }

    fn redirect(
        &mut self,
        at: &EndpointSpec,
        side: &str,
        from: &str,
        to: &str,
        way: Way,
    ) -> Result<OwnedFd, String> {
        if self.fail_redirect.borrow().as_deref() == Some(from) {
            return Err(format!("{side}: refused by the test"));
        }
        let ns = at.netns.as_ref().map(|p| p.display().to_string());
        self.redirects.borrow_mut().push((
            ns.unwrap_or_default(),
            from.to_owned(),
            to.to_owned(),
            way,
        ));
        Ok(std::fs::File::open("/dev/null").unwrap().into())
    }
}

impl FakeOpener {
    pub(crate) fn peer(&self, ifname: &str) -> UnixDatagram {
        self.peers.borrow()[ifname].try_clone().unwrap()
    }
}

pub(crate) fn daemon() -> (Daemon<FakeOpener>, FakeOpener) {
    let opener = FakeOpener::default();
    let d = Daemon::new(opener.clone(), Config::default(), None, None).unwrap();
    (d, opener)
}

pub(crate) fn call(d: &mut Daemon<FakeOpener>, req: Value) -> Value {
    let reply = d.handle_line(req.to_string().as_bytes());
    assert_eq!(reply.last(), Some(&b'\n'));
    assert_eq!(reply.iter().filter(|&&b| b == b'\n').count(), 1);
    serde_json::from_slice(&reply).unwrap()
}

pub(crate) fn ok(d: &mut Daemon<FakeOpener>, req: Value) -> Value {
    let r = call(d, req.clone());
    assert_eq!(r["ok"], true, "{req} -> {r}");
    r
}

pub(crate) fn error(d: &mut Daemon<FakeOpener>, req: Value) -> String {
    let r = call(d, req.clone());
    assert_eq!(r["ok"], false, "{req} -> {r}");
    r["error"].as_str().unwrap().to_owned()
}

pub(crate) fn add(name: &str, a: &str, b: &str, ab: Value, ba: Value) -> Value {
    json!({"op":"add_link","link":name,
           "a":{"netns":"/run/netns/x","ifname":a},"b":{"netns":"/run/netns/y","ifname":b},
           "ab":ab,"ba":ba})
}

/// Turn the loop until `peer` has a frame or `limit` passes.
pub(crate) fn recv_through(
    d: &mut Daemon<FakeOpener>,
    peer: &UnixDatagram,
    limit: Duration,
) -> Vec<u8> {
    peer.set_nonblocking(true).unwrap();
    let start = Instant::now();
    let mut buf = vec![0u8; 70_000];
    loop {
        match peer.recv(&mut buf) {
            Ok(n) => return buf[..n].to_vec(),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
        assert!(start.elapsed() < limit, "no frame within {limit:?}");
        d.turn(Some(Duration::from_millis(5))).unwrap();
    }
}

#[test]
fn hello() {
    let (mut d, _) = daemon();
    let r = ok(&mut d, json!({"op":"hello","id":"h1"}));
    assert_eq!(r["id"], "h1");
    assert_eq!(r["endpoint"], "fake");
    assert_eq!(r["pid"], std::process::id());
    assert_eq!(r["version"], env!("CARGO_PKG_VERSION"));
}

#[test]
fn malformed_and_unknown_requests_get_errors() {
    let (mut d, _) = daemon();
    let r: Value = serde_json::from_slice(&d.handle_line(b"{oops")).unwrap();
    assert_eq!(r["ok"], false);
    assert!(r["error"].as_str().unwrap().starts_with("malformed JSON"));
    let e = error(&mut d, json!({"op":"frobnicate","id":9}));
    assert!(e.contains("unknown operation"), "{e}");
    // Still usable.
    ok(&mut d, json!({"op":"hello"}));
}

#[test]
fn add_remove_and_duplicates() {
    let (mut d, o) = daemon();
    ok(&mut d, add("l1", "a0", "b0", json!({}), json!({})));
    assert_eq!(o.live.get(), 2);
    let e = error(&mut d, add("l1", "a1", "b1", json!({}), json!({})));
    assert_eq!(e, "link: a link named \"l1\" already exists");
    assert_eq!(o.live.get(), 2);
    let e = error(&mut d, add("", "a1", "b1", json!({}), json!({})));
    assert!(e.starts_with("link: "), "{e}");
    let e = error(&mut d, add("l2", "bad/name", "b1", json!({}), json!({})));
    assert!(e.starts_with("a.ifname: "), "{e}");
    let same = json!({"op":"add_link","link":"l2","a":{"ifname":"x"},"b":{"ifname":"x"},
                      "ab":{},"ba":{}});
    assert_eq!(error(&mut d, same), "b: the same endpoint as a");
    ok(&mut d, json!({"op":"remove_link","link":"l1"}));
    assert_eq!(o.live.get(), 0);
    let e = error(&mut d, json!({"op":"remove_link","link":"l1"}));
    assert_eq!(e, "link: no link named \"l1\"");
    // The name is free again.
    ok(&mut d, add("l1", "a0", "b0", json!({}), json!({})));
    assert_eq!(o.live.get(), 2);
}

#[test]
fn bad_params_create_nothing() {
    let (mut d, o) = daemon();
    let e = error(
        &mut d,
        add("l", "a0", "b0", json!({}), json!({"duplicate": 2.0})),
    );
    assert_eq!(e, "ba.duplicate: 2 is outside 0..=1");
    let e = error(
        &mut d,
        add("l", "a0", "b0", json!({"rate_bps": 0}), json!({})),
    );
    assert!(e.starts_with("ab.rate_bps: "), "{e}");
    let e = error(&mut d, add("l", "a0", "b0", json!({"delay": 5}), json!({})));
    assert!(e.starts_with("ab.delay: unknown field `delay`"), "{e}");
    assert_eq!(o.opened.get(), 0);
    let r = ok(&mut d, json!({"op":"stats"}));
    assert_eq!(r["links"], json!({}));
}

#[test]
fn second_endpoint_failure_closes_the_first() {
    let (mut d, o) = daemon();
    *o.fail.borrow_mut() = Some("b0".into());
    let e = error(&mut d, add("l", "a0", "b0", json!({}), json!({})));
    assert_eq!(e, "b.ifname: refused by the test");
    assert_eq!(o.opened.get(), 1);
    assert_eq!(o.live.get(), 0);
    let e = error(&mut d, json!({"op":"stats","link":"l"}));
    assert_eq!(e, "link: no link named \"l\"");
}

#[test]
fn set_link_is_all_or_nothing() {
    let (mut d, _) = daemon();
    ok(
        &mut d,
        add(
            "l",
            "a0",
            "b0",
            json!({"delay_ns": 1}),
            json!({"delay_ns": 2}),
        ),
    );
    let e = error(
        &mut d,
        json!({"op":"set_link","link":"l","ab":{"delay_ns":5},"ba":{"corrupt":-1.0}}),
    );
    assert_eq!(e, "ba.corrupt: -1 is outside 0..=1");
    ok(
        &mut d,
        json!({"op":"set_link","link":"l","ba":{"delay_ns":7}}),
    );
    let e = error(&mut d, json!({"op":"set_link","link":"l"}));
    assert_eq!(e, "set_link: give ab, ba or both");
    let e = error(&mut d, json!({"op":"set_link","link":"zz","ab":{}}));
    assert_eq!(e, "link: no link named \"zz\"");
}

#[test]
fn set_link_keeps_old_params_on_error() {
    let (mut d, o) = daemon();
    ok(&mut d, add("l", "a0", "b0", json!({}), json!({})));
    let _ = error(
        &mut d,
        json!({"op":"set_link","link":"l","ab":{"delay_ns":3000000000u64},"ba":{"rate_bps":0}}),
    );
    // Still no delay on ab: a frame goes straight through.
    let (a, b) = (o.peer("a0"), o.peer("b0"));
    a.send(b"x").unwrap();
    let t = Instant::now();
    assert_eq!(recv_through(&mut d, &b, Duration::from_secs(2)), b"x");
    assert!(t.elapsed() < Duration::from_secs(1));
}

#[test]
fn forwards_both_ways_with_delay() {
    let (mut d, o) = daemon();
    let delay = 20_000_000u64;
    ok(
        &mut d,
        add("l", "a0", "b0", json!({"delay_ns": delay}), json!({})),
    );
    let (a, b) = (o.peer("a0"), o.peer("b0"));
    let frame: Vec<u8> = (0..1500u32).map(|i| i as u8).collect();
    let t0 = now_ns();
    a.send(&frame).unwrap();
    assert_eq!(recv_through(&mut d, &b, Duration::from_secs(2)), frame);
    let took = now_ns() - t0;
    assert!(took >= delay, "forwarded after {took} ns, before the delay");
    // ba has no delay.
    b.send(b"back").unwrap();
    assert_eq!(recv_through(&mut d, &a, Duration::from_secs(2)), b"back");

    let r = ok(&mut d, json!({"op":"stats","link":"l","id":1}));
    assert!(r["now_ns"].as_u64().unwrap() >= t0);
    let l = &r["links"]["l"];
    assert_eq!(l["up"], true);
    assert_eq!(l["ab"]["rx_packets"], 1);
    assert_eq!(l["ab"]["tx_packets"], 1);
    assert_eq!(l["ab"]["tx_bytes"], 1500);
    assert_eq!(l["ab"]["write_errors"], 0);
    assert_eq!(l["ba"]["tx_packets"], 1);
    assert_eq!(l["ba"]["lateness"]["count"], 1);
}

#[test]
fn batches_more_than_the_cap() {
    let opener = FakeOpener::default();
    let config = Config {
        batch: 4,
        ..Config::default()
    };
    let mut d = Daemon::new(opener.clone(), config, None, None).unwrap();
    ok(&mut d, add("l", "a0", "b0", json!({}), json!({})));
    let (a, b) = (opener.peer("a0"), opener.peer("b0"));
    for i in 0..10u8 {
        a.send(&[i]).unwrap();
    }
    // A turn reads at most 4; level-triggered epoll brings the rest.
    d.turn(Some(Duration::from_millis(100))).unwrap();
    let r = ok(&mut d, json!({"op":"stats","link":"l"}));
    assert_eq!(r["links"]["l"]["ab"]["rx_packets"], 4);
    for i in 0..10u8 {
        assert_eq!(recv_through(&mut d, &b, Duration::from_secs(2)), [i]);
    }
}

#[test]
fn link_down_drops_and_write_errors_are_counted() {
    let (mut d, o) = daemon();
    ok(&mut d, add("l", "a0", "b0", json!({}), json!({})));
    let (a, b) = (o.peer("a0"), o.peer("b0"));
    ok(&mut d, json!({"op":"set_state","link":"l","up":false}));
    a.send(b"lost").unwrap();
    d.turn(Some(Duration::from_millis(100))).unwrap();
    let r = ok(&mut d, json!({"op":"stats"}));
    assert_eq!(r["links"]["l"]["up"], false);
    assert_eq!(r["links"]["l"]["ab"]["drops"]["down"], 1);
    ok(&mut d, json!({"op":"set_state","link":"l","up":true}));

    // The far side goes away: writes fail, the daemon carries on.
    o.peers.borrow_mut().remove("b0");
    drop(b);
    a.send(b"one").unwrap();
    a.send(b"two").unwrap();
    for _ in 0..3 {
        d.turn(Some(Duration::from_millis(20))).unwrap();
    }
    let r = ok(&mut d, json!({"op":"stats","link":"l"}));
    assert_eq!(r["links"]["l"]["ab"]["write_errors"], 2);
    a.send(b"three").unwrap();
    d.turn(Some(Duration::from_millis(20))).unwrap();
    let r = ok(&mut d, json!({"op":"stats","link":"l"}));
    assert_eq!(r["links"]["l"]["ab"]["write_errors"], 3);
}

#[test]
fn default_queue_limit_applies_only_without_a_limit() {
    let (d, _) = daemon();
    let p = |v: Value| d.prepare(serde_json::from_value(v).unwrap(), "ab");
    assert_eq!(p(json!({})).unwrap().queue_packets, Some(1000));
    let q = p(json!({"queue_bytes": 10})).unwrap();
    assert_eq!((q.queue_packets, q.queue_bytes), (None, Some(10)));
    assert_eq!(
        p(json!({"queue_packets": 5})).unwrap().queue_packets,
        Some(5)
    );
    assert_eq!(
        p(json!({"queue_packets": 0})).unwrap_err(),
        "ab.queue_packets: a queue limit must be at least 1 (omit it for no limit)"
    );
}

#[test]
fn shutdown_request() {
    let (mut d, o) = daemon();
    ok(&mut d, add("l", "a0", "b0", json!({}), json!({})));
    assert!(d.shutdown_reason().is_none());
    ok(&mut d, json!({"op":"shutdown"}));
    assert_eq!(d.shutdown_reason(), Some("shutdown request"));
    d.run().unwrap();
    assert_eq!(o.live.get(), 0);
}

/// The whole control path over a real unix socket: several clients,
/// several requests per write, a malformed line in between, a request
/// split across writes.
#[test]
fn control_socket_clients() {
    let dir = std::env::temp_dir().join(format!("linkd-ctl-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    let path = dir.join("ctl");
    let listener = UnixListener::bind(&path).unwrap();
    let opener = FakeOpener::default();
    let mut d = Daemon::new(opener.clone(), Config::default(), Some(listener), None).unwrap();

    let mut c1 = UnixStream::connect(&path).unwrap();
    let mut c2 = UnixStream::connect(&path).unwrap();
    c1.write_all(b"{\"op\":\"hello\",\"id\":1}\nnot json\n\n{\"op\":\"st")
        .unwrap();
    c2.write_all(b"{\"op\":\"hello\",\"id\":\"two\"}\n")
        .unwrap();
    let mut r1 = BufReader::new(c1.try_clone().unwrap());
    let mut r2 = BufReader::new(c2.try_clone().unwrap());
    let read = |r: &mut BufReader<UnixStream>, d: &mut Daemon<FakeOpener>| -> Value {
        r.get_ref()
            .set_read_timeout(Some(Duration::from_millis(10)))
            .unwrap();
        let mut line = String::new();
        for _ in 0..200 {
            match r.read_line(&mut line) {
                Ok(_) if line.ends_with('\n') => return serde_json::from_str(&line).unwrap(),
                Ok(0) => panic!("connection closed"),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("{e}"),
            }
            d.turn(Some(Duration::from_millis(1))).unwrap();
        }
        panic!("no reply");
    };
    let v = read(&mut r1, &mut d);
    assert_eq!((v["ok"].clone(), v["id"].clone()), (json!(true), json!(1)));
    let v = read(&mut r1, &mut d);
    assert_eq!(v["ok"], false);
    let v = read(&mut r2, &mut d);
    assert_eq!(v["id"], "two");
    c1.write_all(b"ats\"}\n").unwrap();
    let v = read(&mut r1, &mut d);
    assert_eq!(v["ok"], true);
    assert_eq!(v["links"], json!({}));
    // A client that sends its last request without a newline and closes its
    // sending side still gets the reply.
    c2.write_all(b"{\"op\":\"hello\",\"id\":3}").unwrap();
    c2.shutdown(std::net::Shutdown::Write).unwrap();
    let v = read(&mut r2, &mut d);
    assert_eq!(v["id"], 3);
    c1.write_all(b"{\"op\":\"shutdown\"}\n").unwrap();
    let v = read(&mut r1, &mut d);
    assert_eq!(v["ok"], true);
    assert!(d.shutdown_reason().is_some());
    d.run().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn spinning_still_serves_and_forwards() {
    let opener = FakeOpener::default();
    let config = Config {
        spin_ns: 500_000,
        ..Config::default()
    };
    let mut d = Daemon::new(opener.clone(), config, None, None).unwrap();
    let delay = 3_000_000u64;
    ok(
        &mut d,
        add("l", "a0", "b0", json!({"delay_ns": delay}), json!({})),
    );
    let (a, b) = (opener.peer("a0"), opener.peer("b0"));
    let t0 = now_ns();
    for i in 0..3u8 {
        a.send(&[i]).unwrap();
    }
    for i in 0..3u8 {
        assert_eq!(recv_through(&mut d, &b, Duration::from_secs(2)), [i]);
    }
    assert!(now_ns() - t0 >= delay);
    let r = ok(&mut d, json!({"op":"stats","link":"l"}));
    assert_eq!(r["links"]["l"]["ab"]["lateness"]["count"], 3);
}

#[test]
fn departures_leave_in_deadline_order_across_links() {
    let (mut d, opener) = daemon();
    ok(
        &mut d,
        add(
            "slow",
            "a0",
            "b0",
            json!({"delay_ns": 6_000_000}),
            json!({}),
        ),
    );
    ok(
        &mut d,
        add(
            "fast",
            "a1",
            "b1",
            json!({"delay_ns": 1_000_000}),
            json!({}),
        ),
    );
    let (a0, b0) = (opener.peer("a0"), opener.peer("b0"));
    let (a1, b1) = (opener.peer("a1"), opener.peer("b1"));
    b0.set_nonblocking(true).unwrap();
    b1.set_nonblocking(true).unwrap();
    a0.send(b"slow").unwrap();
    a1.send(b"fast").unwrap();
    let start = Instant::now();
    let mut order = Vec::new();
    let mut buf = [0u8; 16];
    while order.len() < 2 {
        assert!(start.elapsed() < Duration::from_secs(2), "got {order:?}");
        d.turn(Some(Duration::from_millis(5))).unwrap();
        for peer in [&b0, &b1] {
            if let Ok(n) = peer.recv(&mut buf) {
                order.push(buf[..n].to_vec());
            }
        }
    }
    assert_eq!(order, [b"fast".to_vec(), b"slow".to_vec()]);
    // Removing a link with a pending departure leaves a stale heap entry,
    // which is skipped.
    a0.send(b"gone").unwrap();
    d.turn(Some(Duration::from_millis(1))).unwrap();
    ok(&mut d, json!({"op":"remove_link","link":"slow"}));
    a1.send(b"next").unwrap();
    assert_eq!(recv_through(&mut d, &b1, Duration::from_secs(2)), b"next");
}

#[test]
fn engine_timing_is_reported() {
    let opener = FakeOpener::default();
    let config = Config {
        spin_ns: 200_000,
        spin_budget_pct: 50,
        ..Config::default()
    };
    let mut d = Daemon::new(opener.clone(), config, None, None).unwrap();
    ok(
        &mut d,
        add("l", "a0", "b0", json!({"delay_ns": 2_000_000}), json!({})),
    );
    let (a, b) = (opener.peer("a0"), opener.peer("b0"));
    for i in 0..20u8 {
        a.send(&[i]).unwrap();
        assert_eq!(recv_through(&mut d, &b, Duration::from_secs(2)), [i]);
    }
    let r = ok(&mut d, json!({"op":"stats"}));
    let e = &r["engine"];
    assert!(e["turns"].as_u64().unwrap() > 20, "{e}");
    assert!(e["timer_wakeups"].as_u64().unwrap() >= 1, "{e}");
    assert!(e["spin_ns"].as_u64().unwrap() > 0, "{e}");
    assert_eq!(e["max_lead_ns"], 200_000);
    assert_eq!(e["spin_budget_pct"], 50);
    let lead = e["lead_ns"].as_u64().unwrap();
    assert!(lead > 0 && lead <= 200_000, "{e}");
    // Spinning never lets a departure go early, and the lead keeps it near
    // its deadline.
    assert_eq!(r["links"]["l"]["ab"]["lateness"]["count"], 20);
}

#[test]
fn offloaded_super_frames_pass_whole_in_chunks_or_as_wire_packets() {
    let opener = FakeOpener {
        vnet: true,
        ..FakeOpener::default()
    };
    let mut d = Daemon::new(opener.clone(), Config::default(), None, None).unwrap();
    let delay = json!({"delay_ns": 1_000_000});
    ok(&mut d, add("l", "a0", "b0", delay.clone(), delay));
    let (a, b) = (opener.peer("a0"), opener.peer("b0"));
    let frame = crate::gso::tests::tcp_super_frame(4000, 1448);
    // Delay only: the super-frame leaves whole, header and all.
    a.send(&frame).unwrap();
    assert_eq!(recv_through(&mut d, &b, Duration::from_secs(2)), frame);
    // Shaped at 1 Gbit/s: 4 segments serialise in the default 50 us, so its
    // 3 leave as one chunk, a super-frame of its own.
    ok(
        &mut d,
        json!({"op":"set_link","link":"l","ab":{"rate_bps": 1_000_000_000u64}}),
    );
    a.send(&frame).unwrap();
    let chunk = recv_through(&mut d, &b, Duration::from_secs(2));
    let h = crate::gso::VnetHdr::parse(&chunk).unwrap();
    assert_eq!((h.flags, h.gso_type, h.gso_size), (1, 1, 1448));
    assert_eq!(chunk.len(), frame.len());
    // Jittered: every packet is drawn on its own, so it leaves as its
    // three wire packets, each with a zero header.
    ok(
        &mut d,
        json!({"op":"set_link","link":"l","ab":{"rate_bps": 1_000_000_000u64, "jitter_ns": 1000}}),
    );
    a.send(&frame).unwrap();
    let mut payload = 0;
    for _ in 0..3 {
        let seg = recv_through(&mut d, &b, Duration::from_secs(2));
        assert_eq!(&seg[..10], &[0u8; 10]);
        payload += seg.len() - 10 - 54;
    }
    assert_eq!(payload, 4000);
    let r = ok(&mut d, json!({"op":"stats","link":"l"}));
    let ab = &r["links"]["l"]["ab"];
    assert_eq!(ab["offload"]["whole"], 1);
    assert_eq!(ab["offload"]["split"], 2);
    assert_eq!(ab["offload"]["chunks"], 1);
    assert_eq!(ab["offload"]["segments"], 6);
    // The header is not counted: 4054 bytes of frame, then twice 3 x 54 +
    // 4000 on the wire.
    assert_eq!(ab["rx_packets"], 7);
    assert_eq!(ab["tx_packets"], 7);
    assert_eq!(ab["rx_bytes"], 4054 + 2 * (3 * 54 + 4000));
    assert_eq!(ab["tx_bytes"], ab["rx_bytes"]);
    // A frame that cannot be segmented is dropped and counted.
    let mut bad = frame.clone();
    bad[1] = 3; // UFO: never enabled
    a.send(&bad).unwrap();
    for _ in 0..5 {
        d.turn(Some(Duration::from_millis(1))).unwrap();
    }
    let r = ok(&mut d, json!({"op":"stats","link":"l"}));
    assert_eq!(r["links"]["l"]["ab"]["offload"]["errors"], 1);
}

#[test]
fn divert_leads_both_veths_through_the_taps_ingress_first() {
    let (mut d, o) = daemon();
    ok(&mut d, add("l", "v0-e", "v1-e", json!({}), json!({})));
    ok(&mut d, json!({"op":"divert","link":"l","a":"v0","b":"v1"}));
    let made = o.redirects.borrow().clone();
    let x = "/run/netns/x".to_owned();
    let y = "/run/netns/y".to_owned();
    assert_eq!(
        made,
        vec![
            (x.clone(), "v0-e".into(), "v0".into(), Way::IngressToIngress),
            (y.clone(), "v1-e".into(), "v1".into(), Way::IngressToIngress),
            (x, "v0".into(), "v0-e".into(), Way::EgressToEgress),
            (y, "v1".into(), "v1-e".into(), Way::EgressToEgress),
        ]
    );
    assert_eq!(o.held.get(), 4);
    let e = error(&mut d, json!({"op":"divert","link":"l","a":"v0","b":"v1"}));
    assert_eq!(e, "link: \"l\" is diverted already");
    // The redirects last as long as the link.
    ok(&mut d, json!({"op":"remove_link","link":"l"}));
    assert_eq!(o.held.get(), 0);
}

#[test]
fn divert_is_all_or_nothing_and_checks_names() {
    let (mut d, o) = daemon();
    ok(&mut d, add("l", "v0-e", "v1-e", json!({}), json!({})));
    let e = error(
        &mut d,
        json!({"op":"divert","link":"l","a":"bad/name","b":"v1"}),
    );
    assert!(e.starts_with("a.ifname: "), "{e}");
    let e = error(
        &mut d,
        json!({"op":"divert","link":"nope","a":"v0","b":"v1"}),
    );
    assert_eq!(e, "link: no link named \"nope\"");
    *o.fail_redirect.borrow_mut() = Some("v1".to_owned()); // the last one fails
    let e = error(&mut d, json!({"op":"divert","link":"l","a":"v0","b":"v1"}));
    assert_eq!(e, "b: refused by the test");
    assert_eq!(o.held.get(), 0); // the three made went with the error
    *o.fail_redirect.borrow_mut() = None;
    ok(&mut d, json!({"op":"divert","link":"l","a":"v0","b":"v1"}));
    assert_eq!(o.held.get(), 4);
}
