//! The control socket's limits (connections at once, requests per turn) and
//! fuzzing of the control protocol (issue 14): random bytes, random JSON
//! objects and mutated valid requests, fed to [`Daemon::handle_line`].
//!
//! The fuzz invariant: every non-blank line gets exactly one reply line, a
//! JSON object with `"ok"`; a refusal's message is not empty; the daemon
//! answers `hello` afterwards; every fake endpoint open belongs to a link the
//! daemon reports. `PROPTEST_CASES` sets the budget (`make fuzz`).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use serde_json::{json, Map, Value};

use crate::daemon::{Config, Daemon};
use crate::protocol::OPS;
use crate::state::{MAX_CONNS, MAX_REQUESTS_PER_TURN};
use crate::tests::{add, daemon, ok, FakeOpener};

fn socket_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("linkd-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    dir
}

/// Lines readable now on `r` (non-blocking).
fn ready_lines(r: &mut BufReader<UnixStream>) -> Vec<Value> {
    r.get_ref().set_nonblocking(true).unwrap();
    let mut out = Vec::new();
    loop {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) if line.ends_with('\n') => out.push(serde_json::from_str(&line).unwrap()),
            Ok(_) => panic!("half a line: {line:?}"),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("{e}"),
        }
    }
    out
}

#[test]
fn a_flood_of_requests_is_answered_in_order_a_share_per_turn() {
    let dir = socket_dir("flood");
    let path = dir.join("ctl");
    let listener = UnixListener::bind(&path).unwrap();
    let mut d = Daemon::new(
        FakeOpener::default(),
        Config::default(),
        Some(listener),
        None,
    )
    .unwrap();
    let mut c = UnixStream::connect(&path).unwrap();
    let n = 10 * MAX_REQUESTS_PER_TURN + 7;
    let mut batch = String::new();
    for i in 0..n {
        batch.push_str(&format!("{{\"op\":\"hello\",\"id\":{i}}}\n"));
    }
    c.write_all(batch.as_bytes()).unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut ids = Vec::new();
    let mut turns = 0;
    while ids.len() < n {
        d.turn(Some(Duration::from_millis(5))).unwrap();
        turns += 1;
        assert!(turns < 10 * n, "replies stopped at {}", ids.len());
        // A turn serves the requests left from the last one, then reads: at
        // most two shares.
        let got = ready_lines(&mut r);
        assert!(
            got.len() <= 2 * MAX_REQUESTS_PER_TURN,
            "{} in one turn",
            got.len()
        );
        ids.extend(got.iter().map(|v| v["id"].as_u64().unwrap()));
    }
    assert_eq!(ids, (0..n as u64).collect::<Vec<_>>());
    assert!(turns >= n / (2 * MAX_REQUESTS_PER_TURN));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn connections_past_the_limit_are_told_why_and_closed() {
    let dir = socket_dir("conns");
    let path = dir.join("ctl");
    let listener = UnixListener::bind(&path).unwrap();
    let mut d = Daemon::new(
        FakeOpener::default(),
        Config::default(),
        Some(listener),
        None,
    )
    .unwrap();
    let mut open: Vec<UnixStream> = Vec::new();
    for _ in 0..MAX_CONNS {
        open.push(UnixStream::connect(&path).unwrap());
    }
    for _ in 0..5 {
        d.turn(Some(Duration::from_millis(2))).unwrap();
    }
    let mut extra = UnixStream::connect(&path).unwrap();
    for _ in 0..5 {
        d.turn(Some(Duration::from_millis(2))).unwrap();
    }
    extra
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut text = String::new();
    extra.read_to_string(&mut text).unwrap(); // ends: the daemon closed it
    let v: Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(v["ok"], false);
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains(&format!("{MAX_CONNS} connections")),
        "{v}"
    );
    // The ones already open are still served; closing one makes room.
    open[0].write_all(b"{\"op\":\"hello\",\"id\":1}\n").unwrap();
    let mut r = BufReader::new(open[0].try_clone().unwrap());
    let mut got = Vec::new();
    for _ in 0..100 {
        d.turn(Some(Duration::from_millis(2))).unwrap();
        got = ready_lines(&mut r);
        if !got.is_empty() {
            break;
        }
    }
    assert_eq!(got[0]["id"], 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

// -- fuzzing --------------------------------------------------------------------------

fn json_scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        (-1e6f64..1e6).prop_map(|f| json!(f)),
        "[a-z0-9_./-]{0,20}".prop_map(Value::String),
        Just(json!("l0")),
        Just(json!("/run/netns/x")),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_scalar().prop_recursive(3, 24, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,10}", inner, 0..5)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

const FIELDS: &[&str] = &[
    "link",
    "a",
    "b",
    "ab",
    "ba",
    "up",
    "netns",
    "ifname",
    "kind",
    "rate_bps",
    "delay_ns",
    "loss",
    "queue",
    "trace_ms",
    "queue_packets",
];

/// A request with a real op (or a made-up one) and fields from the protocol's
/// vocabulary with random values.
fn request() -> impl Strategy<Value = Value> {
    let op = prop_oneof![
        4 => prop::sample::select(OPS).prop_map(|s| json!(s)),
        1 => json_scalar(),
    ];
    let fields = prop::collection::vec((prop::sample::select(FIELDS), json_value()), 0..6);
    (op, fields, prop::option::of(json_value())).prop_map(|(op, fields, id)| {
        let mut m = Map::new();
        m.insert("op".into(), op);
        for (k, v) in fields {
            m.insert(k.to_owned(), v);
        }
        if let Some(id) = id {
            m.insert("id".into(), id);
        }
        Value::Object(m)
    })
}

/// A valid request with one part replaced by a random value, or removed.
fn mutated() -> impl Strategy<Value = Value> {
    let base = prop_oneof![
        Just(add(
            "l0",
            "t0a",
            "t0b",
            json!({"rate_bps": 1_000_000, "delay_ns": 1000}),
            json!({})
        )),
        Just(add(
            "l1",
            "t1a",
            "t1b",
            json!({"loss": {"model": "random", "probability": 0.1}}),
            json!({"trace_ms": [1, 2, 3]})
        )),
        Just(json!({"op": "set_link", "link": "l0", "ab": {"rate_bps": 5_000_000}})),
        Just(json!({"op": "set_state", "link": "l0", "up": false})),
        Just(json!({"op": "divert", "link": "l0", "a": "v0", "b": "v1"})),
        Just(json!({"op": "remove_link", "link": "l1"})),
        Just(json!({"op": "stats", "link": "l0"})),
        Just(json!({"op": "stats"})),
    ];
    (
        base,
        prop::sample::select(FIELDS),
        prop::option::of(json_value()),
    )
        .prop_map(|(mut v, key, val)| {
            let m = v.as_object_mut().expect("an object");
            match val {
                None => {
                    m.remove(key);
                }
                Some(x) if m.contains_key(key) => {
                    m.insert(key.to_owned(), x);
                }
                Some(x) => {
                    // A nested part: the first object-valued field gets the key.
                    match m.values_mut().find_map(|x| x.as_object_mut()) {
                        Some(inner) => inner.insert(key.to_owned(), x),
                        None => m.insert(key.to_owned(), x),
                    };
                }
            }
            v
        })
}

#[derive(Debug, Clone)]
enum Line {
    Bytes(Vec<u8>),
    Json(Value),
}

fn line() -> impl Strategy<Value = Line> {
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..80)
            .prop_map(|mut b| { b.retain(|&c| c != b'\n'); Line::Bytes(b) }),
        1 => json_value().prop_map(Line::Json),
        3 => request().prop_map(Line::Json),
        4 => mutated().prop_map(Line::Json),
    ]
}

static LINES: AtomicU64 = AtomicU64::new(0);
static OK: AtomicU64 = AtomicU64::new(0);
static REFUSED: AtomicU64 = AtomicU64::new(0);
static LINKS: AtomicU64 = AtomicU64::new(0);

#[test]
fn fuzz_control_lines_each_get_one_reply_and_nothing_breaks() {
    let mut runner = TestRunner::new(ProptestConfig::default()); // PROPTEST_CASES
    let strategy = prop::collection::vec(line(), 1..64);
    if let Err(e) = runner.run(&strategy, |lines| one_session(&lines)) {
        panic!("{e}");
    }
    eprintln!(
        "fuzz linkd: {} control lines: {} answered ok, {} refused (each with a message); \
         {} links left standing at the ends of sessions, every endpoint accounted for",
        LINES.load(Relaxed),
        OK.load(Relaxed),
        REFUSED.load(Relaxed),
        LINKS.load(Relaxed),
    );
}

fn one_session(lines: &[Line]) -> Result<(), TestCaseError> {
    let (mut d, opener) = daemon();
    for l in lines {
        let bytes = match l {
            Line::Bytes(b) => b.clone(),
            Line::Json(v) => v.to_string().into_bytes(),
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        LINES.fetch_add(1, Relaxed);
        let reply = d.handle_line(&bytes);
        prop_assert_eq!(reply.last(), Some(&b'\n'));
        prop_assert_eq!(reply.iter().filter(|&&c| c == b'\n').count(), 1);
        let v: Value = serde_json::from_slice(&reply).unwrap();
        match v["ok"].as_bool() {
            Some(true) => OK.fetch_add(1, Relaxed),
            Some(false) => {
                prop_assert!(!v["error"].as_str().unwrap_or("").is_empty(), "{}", v);
                REFUSED.fetch_add(1, Relaxed)
            }
            None => return Err(TestCaseError::fail(format!("no ok in {v}"))),
        };
        if d.shutdown_reason().is_some() {
            break;
        }
    }
    if d.shutdown_reason().is_none() {
        ok(&mut d, json!({"op": "hello"}));
        let stats = ok(&mut d, json!({"op": "stats"}));
        let links = stats["links"].as_object().map_or(0, Map::len);
        LINKS.fetch_add(links as u64, Relaxed);
        prop_assert_eq!(opener.live.get(), 2 * links);
    }
    Ok(())
}
