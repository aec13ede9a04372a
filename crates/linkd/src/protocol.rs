//! The control protocol: one JSON object per line, each way.
//!
//! A request is an object with an `"op"` and, optionally, an `"id"` (any
//! JSON value) that the reply echoes. Replies are `{"ok":true,...}` or
//! `{"ok":false,"error":"..."}`, the message naming the offending field as a
//! dotted path (`ab.loss.p: ...`, `a.ifname: ...`). See `docs/linkd.md`.

use link_core::DirectionParams;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::endpoint::EndpointSpec;

/// The operations, as spelled in `"op"`.
pub const OPS: &[&str] = &[
    "hello",
    "add_link",
    "set_link",
    "set_state",
    "set_clock",
    "divert",
    "remove_link",
    "stats",
    "pulse",
    "clock",
    "shutdown",
];

/// A parsed control request.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// Identify the daemon.
    Hello,
    /// Departures and lateness of every active direction since the last
    /// pulse (cheap: no histograms), and the loops' spinning so far.
    Pulse,
    /// The model clock now (and, for a dilated run, a prompt to re-read its
    /// page: every loop re-arms its timer).
    Clock,
    /// Create a link and its two endpoints.
    AddLink(Box<AddLink>),
    /// Replace the parameters of one or both directions of a link.
    SetLink(Box<SetLink>),
    /// Bring a link up or down, now or at a set instant.
    SetState {
        /// The link's name.
        link: String,
        /// The new state.
        up: bool,
        /// When (CLOCK_MONOTONIC ns); `None` or past: now.
        at_ns: Option<u64>,
    },
    /// A cut link's clocks compared again: the peer's clock minus this one's,
    /// and how well that is known.
    SetClock {
        /// The link's name.
        link: String,
        /// The peer machine's clock minus this one's, ns.
        offset_ns: i64,
        /// How well that is known, ns.
        uncertainty_ns: Option<u64>,
    },
    /// Lead the traffic of two veth ends through the link's TAPs.
    Divert(Divert),
    /// Destroy a link and its endpoints.
    RemoveLink {
        /// The link's name.
        link: String,
    },
    /// Counters of one link, or of every link.
    Stats {
        /// The link's name; `None` for all links.
        link: Option<String>,
    },
    /// Reply, then close everything and exit.
    Shutdown,
}

/// Body of a `divert` request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Divert {
    /// The link whose TAPs stand beside the veth ends.
    pub link: String,
    /// The veth end beside endpoint a (in a's namespace).
    pub a: String,
    /// The veth end beside endpoint b.
    pub b: String,
}

/// Body of an `add_link` request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AddLink {
    /// Name of the new link, unique in the daemon.
    pub link: String,
    /// First endpoint.
    pub a: EndpointSpec,
    /// Second endpoint.
    pub b: EndpointSpec,
    /// Parameters of the direction a → b.
    pub ab: DirectionParams,
    /// Parameters of the direction b → a.
    pub ba: DirectionParams,
}

/// Body of a `set_link` request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetLink {
    /// The link's name.
    pub link: String,
    /// New parameters of a → b, if given.
    #[serde(default)]
    pub ab: Option<DirectionParams>,
    /// New parameters of b → a, if given.
    #[serde(default)]
    pub ba: Option<DirectionParams>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetStateBody {
    link: String,
    up: bool,
    #[serde(default)]
    at_ns: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetClockBody {
    link: String,
    offset_ns: i64,
    #[serde(default)]
    uncertainty_ns: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LinkBody {
    link: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatsBody {
    #[serde(default)]
    link: Option<String>,
}

/// A request line, parsed as far as it would go.
#[derive(Debug)]
pub struct Parsed {
    /// The request's `"id"`, if it had one (echoed even on errors).
    pub id: Option<Value>,
    /// The request, or why it is not one.
    pub request: Result<Request, String>,
}

/// Parse one request line (without its newline).
pub fn parse(line: &[u8]) -> Parsed {
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return Parsed {
                id: None,
                request: Err(format!("malformed JSON: {e}")),
            }
        }
    };
    let Value::Object(mut map) = value else {
        return Parsed {
            id: None,
            request: Err("a request must be a JSON object".to_owned()),
        };
    };
    let id = map.remove("id");
    Parsed {
        id,
        request: parse_object(map),
    }
}

fn parse_object(mut map: Map<String, Value>) -> Result<Request, String> {
    let op = match map.remove("op") {
        Some(Value::String(op)) => op,
        Some(other) => return Err(format!("op: expected a string, got {other}")),
        None => return Err(format!("op: missing (one of {})", OPS.join(", "))),
    };
    let body = Value::Object(map);
    Ok(match op.as_str() {
        "hello" => {
            body_of::<Empty>(&op, body)?;
            Request::Hello
        }
        "add_link" => Request::AddLink(Box::new(body_of(&op, body)?)),
        "set_link" => Request::SetLink(Box::new(body_of(&op, body)?)),
        "divert" => Request::Divert(body_of(&op, body)?),
        "set_state" => {
            let b: SetStateBody = body_of(&op, body)?;
            Request::SetState {
                link: b.link,
                up: b.up,
                at_ns: b.at_ns,
            }
        }
        "set_clock" => {
            let b: SetClockBody = body_of(&op, body)?;
            Request::SetClock {
                link: b.link,
                offset_ns: b.offset_ns,
                uncertainty_ns: b.uncertainty_ns,
            }
        }
        "remove_link" => Request::RemoveLink {
            link: body_of::<LinkBody>(&op, body)?.link,
        },
        "stats" => Request::Stats {
            link: body_of::<StatsBody>(&op, body)?.link,
        },
        "clock" => {
            body_of::<Empty>(&op, body)?;
            Request::Clock
        }
        "pulse" => {
            body_of::<Empty>(&op, body)?;
            Request::Pulse
        }
        "shutdown" => {
            body_of::<Empty>(&op, body)?;
            Request::Shutdown
        }
        _ => {
            return Err(format!(
                "op: unknown operation {op:?} (one of {})",
                OPS.join(", ")
            ))
        }
    })
}

/// Deserialise a request body, naming the failing field as a dotted path
/// (`ab.loss`); problems with the body as a whole are reported against the
/// op (`add_link: missing field ...`).
fn body_of<T: DeserializeOwned>(op: &str, body: Value) -> Result<T, String> {
    serde_path_to_error::deserialize(body).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." {
            format!("{op}: {inner}")
        } else {
            format!("{path}: {inner}")
        }
    })
}

/// Encode a reply line: `{"ok":true, "id":..., ...fields}` plus a newline.
pub fn reply(id: Option<Value>, result: Result<Map<String, Value>, String>) -> Vec<u8> {
    let mut map = match result {
        Ok(mut fields) => {
            fields.insert("ok".to_owned(), Value::Bool(true));
            fields
        }
        Err(message) => {
            let mut m = Map::new();
            m.insert("ok".to_owned(), Value::Bool(false));
            m.insert("error".to_owned(), Value::String(message));
            m
        }
    };
    if let Some(id) = id {
        map.insert("id".to_owned(), id);
    }
    let mut line = serde_json::to_vec(&Value::Object(map)).expect("a JSON map always serialises");
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(line: &str) -> String {
        parse(line.as_bytes()).request.unwrap_err()
    }

    fn ok(line: &str) -> Request {
        parse(line.as_bytes()).request.unwrap()
    }

    #[test]
    fn simple_ops() {
        assert_eq!(ok(r#"{"op":"hello"}"#), Request::Hello);
        assert_eq!(ok(r#"{"op":"shutdown","id":3}"#), Request::Shutdown);
        assert_eq!(ok(r#"{"op":"stats"}"#), Request::Stats { link: None });
        assert_eq!(
            ok(r#"{"op":"stats","link":"l1"}"#),
            Request::Stats {
                link: Some("l1".into())
            }
        );
        assert_eq!(
            ok(r#"{"op":"set_state","link":"l1","up":false}"#),
            Request::SetState {
                link: "l1".into(),
                up: false,
                at_ns: None
            }
        );
        assert_eq!(
            ok(r#"{"op":"set_state","link":"l1","up":true,"at_ns":5}"#),
            Request::SetState {
                link: "l1".into(),
                up: true,
                at_ns: Some(5)
            }
        );
        assert_eq!(
            ok(r#"{"op":"set_clock","link":"l1","offset_ns":-1500,"uncertainty_ns":40}"#),
            Request::SetClock {
                link: "l1".into(),
                offset_ns: -1500,
                uncertainty_ns: Some(40)
            }
        );
        assert_eq!(
            ok(r#"{"op":"remove_link","link":"l1"}"#),
            Request::RemoveLink { link: "l1".into() }
        );
    }

    #[test]
    fn add_link_parses_params_with_defaults() {
        let r = ok(
            r#"{"op":"add_link","link":"l","a":{"netns":"/run/netns/x","ifname":"e0"},
                       "b":{"ifname":"e1"},"ab":{"delay_ns":10000000},"ba":{}}"#,
        );
        let Request::AddLink(a) = r else {
            panic!("{r:?}")
        };
        assert_eq!(a.link, "l");
        assert_eq!(
            a.a.netns.as_deref(),
            Some(std::path::Path::new("/run/netns/x"))
        );
        assert_eq!(a.b.netns, None);
        assert_eq!(a.ab.delay_ns, 10_000_000);
        assert_eq!(a.ba, DirectionParams::default());
    }

    #[test]
    fn id_is_kept_even_on_errors() {
        let p = parse(br#"{"op":"nope","id":{"n":[1,2]}}"#);
        assert_eq!(p.id, Some(json!({"n":[1,2]})));
        assert!(p
            .request
            .unwrap_err()
            .contains("unknown operation \"nope\""));
        let p = parse(br#"{"op":"hello","id":"x","extra":1}"#);
        assert_eq!(p.id, Some(json!("x")));
        assert_eq!(
            p.request.unwrap_err(),
            "extra: unknown field `extra`, there are no fields"
        );
    }

    #[test]
    fn errors_name_the_field() {
        assert!(err("{not json").starts_with("malformed JSON: "));
        assert_eq!(err("[1]"), "a request must be a JSON object");
        assert!(err("{}").starts_with("op: missing"));
        assert!(err(r#"{"op":1}"#).starts_with("op: expected a string"));
        let e = err(
            r#"{"op":"add_link","link":"l","a":{"ifname":"x"},"b":{"ifname":"y"},
                        "ab":{"delay_ns":-1},"ba":{}}"#,
        );
        assert!(e.starts_with("ab.delay_ns: invalid value"), "{e}");
        let e = err(
            r#"{"op":"add_link","link":"l","a":{"ifname":"x"},"b":{"ifname":"y"},
                        "ab":{},"ba":{"dealy_ns":1}}"#,
        );
        assert!(
            e.starts_with("ba.dealy_ns: unknown field `dealy_ns`, expected one of"),
            "{e}"
        );
        let e = err(
            r#"{"op":"add_link","link":"l","a":{"ifname":"x"},"b":{"ifname":"y"},
                        "ab":{},"ba":{"loss":{"model":"random","probability":"x"}}}"#,
        );
        assert!(e.starts_with("ba.loss"), "{e}");
        let e = err(r#"{"op":"add_link","link":"l","a":{"ifname":"x"},"ab":{},"ba":{}}"#);
        assert_eq!(e, "add_link: missing field `b`");
        let e = err(
            r#"{"op":"add_link","link":"l","a":{"if":"x"},"b":{"ifname":"y"},"ab":{},"ba":{}}"#,
        );
        assert!(e.starts_with("a.if: unknown field `if`"), "{e}");
        let e = err(r#"{"op":"set_state","link":"l","up":"yes"}"#);
        assert!(e.starts_with("up: invalid type"), "{e}");
        let e = err(r#"{"op":"set_link","link":"l","ab":{},"xy":{}}"#);
        assert!(e.starts_with("xy: unknown field `xy`"), "{e}");
    }

    #[test]
    fn replies() {
        let mut m = Map::new();
        m.insert("pid".into(), json!(7));
        let line = reply(Some(json!(5)), Ok(m));
        assert_eq!(line.last(), Some(&b'\n'));
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v, json!({"ok":true,"id":5,"pid":7}));
        let v: Value = serde_json::from_slice(&reply(None, Err("x: bad".into()))).unwrap();
        assert_eq!(v, json!({"ok":false,"error":"x: bad"}));
    }
}
