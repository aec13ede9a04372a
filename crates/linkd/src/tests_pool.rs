//! `--threads N`: a control loop and N engine loops (see [`crate::pool`]),
//! with the fake endpoints of [`crate::tests`]. The engine loops run in their
//! own threads; the test drives the control loop.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::daemon::{now_ns, Config, Daemon};
use crate::pool::{merge_engine, Pool};
use crate::tests::{add, error, ok, FakeOpener};
use crate::vclock::VClock;

fn threaded(n: usize) -> (Daemon<FakeOpener>, FakeOpener) {
    let opener = FakeOpener::default();
    let theirs = opener.clone();
    let pool = Pool::start(n, Config::default(), &VClock::real(), move || {
        Ok(theirs.clone())
    })
    .unwrap();
    let d = Daemon::new(opener.clone(), Config::default(), None, None)
        .unwrap()
        .with_pool(pool);
    (d, opener)
}

/// Wait (without turning the control loop: the engine loops run on their
/// own) until `peer` has a frame.
fn recv(peer: &UnixDatagram) -> Vec<u8> {
    peer.set_nonblocking(true).unwrap();
    let start = Instant::now();
    let mut buf = vec![0u8; 70_000];
    loop {
        match peer.recv(&mut buf) {
            Ok(n) => return buf[..n].to_vec(),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
        assert!(start.elapsed() < Duration::from_secs(5), "no frame");
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn links_spread_over_the_loops_and_forward_on_them() {
    let (mut d, o) = threaded(2);
    let hello = ok(&mut d, json!({"op":"hello"}));
    assert_eq!(hello["threads"], 2);
    let delay = 20_000_000u64;
    for i in 0..3 {
        let ab = json!({"delay_ns": delay});
        ok(
            &mut d,
            add(
                &format!("l{i}"),
                &format!("a{i}"),
                &format!("b{i}"),
                ab,
                json!({}),
            ),
        );
    }
    assert_eq!(o.live.get(), 6);
    let r = ok(&mut d, json!({"op":"stats"}));
    assert_eq!(r["engine"]["threads"], 2);
    let per: Vec<u64> = r["engine"]["loops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["links"].as_u64().unwrap())
        .collect();
    assert_eq!(per, vec![2, 1], "the fewest-links loop takes each new link");
    assert_eq!(r["engine"]["links"], 3);
    assert_eq!(r["links"].as_object().unwrap().len(), 3);

    // Every link forwards, with its delay, on whichever loop carries it.
    for i in 0..3 {
        let (a, b) = (o.peer(&format!("a{i}")), o.peer(&format!("b{i}")));
        let t0 = now_ns();
        a.send(format!("frame {i}").as_bytes()).unwrap();
        assert_eq!(recv(&b), format!("frame {i}").as_bytes());
        assert!(now_ns() - t0 >= delay);
        b.send(b"back").unwrap();
        assert_eq!(recv(&a), b"back");
    }
    let r = ok(&mut d, json!({"op":"stats","link":"l2"}));
    assert_eq!(r["links"]["l2"]["ab"]["tx_packets"], 1);
    assert_eq!(r["links"].as_object().unwrap().len(), 1);

    // A removed link frees its loop: the next one goes there.
    ok(&mut d, json!({"op":"remove_link","link":"l0"}));
    assert_eq!(o.live.get(), 4);
    ok(&mut d, add("l3", "a3", "b3", json!({}), json!({})));
    let r = ok(&mut d, json!({"op":"stats"}));
    let per: Vec<u64> = r["engine"]["loops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["links"].as_u64().unwrap())
        .collect();
    assert_eq!(per, vec![2, 1]);

    ok(&mut d, json!({"op":"shutdown"}));
    d.run().unwrap();
    assert_eq!(o.live.get(), 0, "every loop closed its links");
}

#[test]
fn a_link_keeps_its_order_and_its_changes_on_its_loop() {
    let (mut d, o) = threaded(3);
    ok(
        &mut d,
        add("l", "a", "b", json!({"rate_bps": 50_000_000}), json!({})),
    );
    let (a, b) = (o.peer("a"), o.peer("b"));
    for seq in 0..200u32 {
        let mut frame = seq.to_be_bytes().to_vec();
        frame.resize(1000, 0);
        a.send(&frame).unwrap();
    }
    for seq in 0..200u32 {
        let got = recv(&b);
        assert_eq!(got[..4], seq.to_be_bytes(), "frame {seq} out of order");
    }
    ok(
        &mut d,
        json!({"op":"set_link","link":"l","ab":{"delay_ns": 30_000_000}}),
    );
    let t0 = now_ns();
    a.send(b"late").unwrap();
    assert_eq!(recv(&b), b"late");
    assert!(
        now_ns() - t0 >= 30_000_000,
        "set_link reached the link's loop"
    );
    ok(&mut d, json!({"op":"set_state","link":"l","up":false}));
    let r = ok(&mut d, json!({"op":"stats","link":"l"}));
    assert_eq!(r["links"]["l"]["up"], false);
    drop(d); // dropping the control loop stops and joins the engine loops
    assert_eq!(o.live.get(), 0);
}

#[test]
fn errors_from_the_loops_and_the_router() {
    let (mut d, o) = threaded(2);
    ok(&mut d, add("l", "a0", "b0", json!({}), json!({})));
    let e = error(&mut d, add("l", "a1", "b1", json!({}), json!({})));
    assert_eq!(e, "link: a link named \"l\" already exists");
    for req in [
        json!({"op":"set_link","link":"x","ab":{}}),
        json!({"op":"set_state","link":"x","up":true}),
        json!({"op":"remove_link","link":"x"}),
        json!({"op":"stats","link":"x"}),
        json!({"op":"divert","link":"x","a":"v0","b":"v1"}),
    ] {
        assert_eq!(error(&mut d, req), "link: no link named \"x\"");
    }
    // Refused by the loop: nothing placed, the name stays free.
    let e = error(
        &mut d,
        add("m", "a1", "b1", json!({"duplicate": 2.0}), json!({})),
    );
    assert_eq!(e, "ab.duplicate: 2 is outside 0..=1");
    *o.fail.borrow_mut() = Some("b1".into());
    let e = error(&mut d, add("m", "a1", "b1", json!({}), json!({})));
    assert!(e.starts_with("b.ifname: refused"), "{e}");
    *o.fail.borrow_mut() = None;
    assert_eq!(o.live.get(), 2);
    ok(&mut d, add("m", "a1", "b1", json!({}), json!({})));
    let r = ok(&mut d, json!({"op":"stats"}));
    assert_eq!(r["engine"]["links"], 2);
}

#[test]
fn merged_engine_reports_sum_counts_and_keep_the_worst() {
    let one = json!({"turns": 10, "busy_pct": 5.0, "lead_ns": 3000,
                     "wake_late": {"count": 4, "p999_ns": 100},
                     "realtime": {"policy": "SCHED_FIFO 10", "demoted": false,
                                  "demotions": 1, "demoted_ns": 50, "errors": 0}});
    let two = json!({"turns": 5, "busy_pct": 7.5, "lead_ns": 2000,
                     "wake_late": {"count": 6, "p999_ns": 400},
                     "realtime": {"policy": "SCHED_OTHER", "demoted": true,
                                  "demotions": 2, "demoted_ns": 70, "errors": 1}});
    let m = merge_engine(vec![one.clone(), two.clone()]);
    assert_eq!(m["turns"], 15);
    assert_eq!(m["busy_pct"], 7.5);
    assert_eq!(m["lead_ns"], 3000);
    assert_eq!(m["wake_late"], json!({"count": 10, "p999_ns": 400}));
    assert_eq!(m["realtime"]["policy"], "mixed");
    assert_eq!(m["realtime"]["demoted"], true);
    assert_eq!(m["realtime"]["demotions"], 3);
    assert_eq!(m["realtime"]["demoted_ns"], 120);
    assert_eq!(m["realtime"]["errors"], 1);
    assert_eq!(m["threads"], 2);
    assert_eq!(m["loops"], Value::Array(vec![one, two]));
}
