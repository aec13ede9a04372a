//! `set_state` at a planned instant: link-core applies it at that instant,
//! the loop wakes for it without traffic, and the reply says when.

use std::time::Duration;

use serde_json::json;

use crate::daemon::now_ns;
use crate::tests::{add, daemon, ok, recv_through};

#[test]
fn a_planned_state_change_takes_effect_at_its_instant() {
    let (mut d, o) = daemon();
    ok(&mut d, add("l", "a0", "b0", json!({}), json!({})));
    let (a, b) = (o.peer("a0"), o.peer("b0"));
    let at = now_ns() + 40_000_000;
    let r = ok(
        &mut d,
        json!({"op":"set_state","link":"l","up":false,"at_ns":at}),
    );
    assert_eq!(r["applied_ns"], at);
    assert_eq!(r["planned"], true);
    // Before the instant the link still carries.
    a.send(b"before").unwrap();
    assert_eq!(recv_through(&mut d, &b, Duration::from_secs(2)), b"before");
    assert!(
        now_ns() < at,
        "the test machine was too slow to see the link up"
    );
    // The loop wakes for the instant itself, with no traffic.
    while now_ns() < at + 5_000_000 {
        d.turn(Some(Duration::from_millis(50))).unwrap();
    }
    let r = ok(&mut d, json!({"op":"stats","link":"l"}));
    assert_eq!(r["links"]["l"]["up"], false);
    a.send(b"after").unwrap();
    d.turn(Some(Duration::from_millis(50))).unwrap();
    let r = ok(&mut d, json!({"op":"stats","link":"l"}));
    assert_eq!(r["links"]["l"]["ab"]["drops"]["down"], 1);
    // A past instant is now, and says so.
    let r = ok(
        &mut d,
        json!({"op":"set_state","link":"l","up":true,"at_ns":1}),
    );
    assert_eq!(r["planned"], false);
    assert!(r["applied_ns"].as_u64().unwrap() >= at);
    a.send(b"again").unwrap();
    assert_eq!(recv_through(&mut d, &b, Duration::from_secs(2)), b"again");
}

#[test]
fn a_change_made_now_forgets_the_planned_ones() {
    let (mut d, o) = daemon();
    ok(&mut d, add("l", "a0", "b0", json!({}), json!({})));
    let (a, b) = (o.peer("a0"), o.peer("b0"));
    let at = now_ns() + 20_000_000;
    ok(
        &mut d,
        json!({"op":"set_state","link":"l","up":false,"at_ns":at}),
    );
    // Brought up now: the planned cut is forgotten.
    ok(&mut d, json!({"op":"set_state","link":"l","up":true}));
    while now_ns() < at + 5_000_000 {
        d.turn(Some(Duration::from_millis(50))).unwrap();
    }
    a.send(b"carried").unwrap();
    assert_eq!(recv_through(&mut d, &b, Duration::from_secs(2)), b"carried");
    let r = ok(&mut d, json!({"op":"stats","link":"l"}));
    assert_eq!(r["links"]["l"]["up"], true);
    assert_eq!(r["links"]["l"]["ab"]["drops"]["down"], 0);
}

#[test]
fn a_flap_is_two_planned_changes() {
    let (mut d, o) = daemon();
    ok(&mut d, add("l", "a0", "b0", json!({}), json!({})));
    let a = o.peer("a0");
    let down = now_ns() + 20_000_000;
    let up = down + 30_000_000;
    ok(
        &mut d,
        json!({"op":"set_state","link":"l","up":true,"at_ns":up}),
    );
    ok(
        &mut d,
        json!({"op":"set_state","link":"l","up":false,"at_ns":down}),
    );
    let mut seen = Vec::new();
    while now_ns() < up + 10_000_000 {
        d.turn(Some(Duration::from_millis(1))).unwrap();
        let r = ok(&mut d, json!({"op":"stats","link":"l"}));
        let state = r["links"]["l"]["up"].as_bool().unwrap();
        if seen.last() != Some(&state) {
            seen.push(state);
        }
    }
    assert_eq!(seen, [true, false, true]);
    a.send(b"x").unwrap();
    d.turn(Some(Duration::from_millis(20))).unwrap();
    let r = ok(&mut d, json!({"op":"stats","link":"l"}));
    assert_eq!(r["links"]["l"]["ab"]["drops"]["down"], 0);
}
