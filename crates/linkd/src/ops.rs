//! The control protocol's operations: adding, changing, reporting and
//! removing links.

use std::os::fd::AsFd;

use link_core::{Direction, DirectionParams};
use nix::sys::epoll::{EpollEvent, EpollFlags};
use serde_json::{json, Map, Value};

use crate::daemon::now_ns;
use crate::daemon::{tap_token, Daemon, DirState, Link, DIR_NAMES, SIDE_NAMES};
use crate::endpoint::{Endpoint, EndpointKind, EndpointSpec, Opener};
use crate::log;
use crate::protocol::{AddLink, Divert, Request, SetLink};
use crate::state::Pulse;
use crate::tcx::Way;

impl<O: Opener> Daemon<O> {
    pub(crate) fn dispatch(&mut self, request: Request) -> Result<Map<String, Value>, String> {
        match request {
            Request::Hello => Ok(fields(json!({
                "version": env!("CARGO_PKG_VERSION"),
                "pid": std::process::id(),
                "endpoint": self.opener.kind(),
                "endpoint_kinds": self.opener.kinds(),
                "offloads": self.opener.offloads(),
                "threads": self.pool.as_ref().map_or(1, |p| p.len()),
            }))),
            Request::Shutdown if self.inbox.is_some() => {
                self.shutdown = Some("the control loop stops".to_owned());
                Ok(Map::new())
            }
            Request::Shutdown => {
                log!("shutdown requested");
                self.shutdown = Some("shutdown request".to_owned());
                Ok(Map::new())
            }
            request if self.pool.is_some() => self.pool.as_mut().expect("checked").route(request),
            Request::AddLink(req) => self.add_link(*req),
            Request::SetLink(req) => self.set_link(*req),
            Request::SetState { link, up, at_ns } => self.set_state(&link, up, at_ns),
            Request::SetClock {
                link,
                offset_ns,
                uncertainty_ns,
            } => self.set_clock(&link, offset_ns, uncertainty_ns),
            Request::Divert(req) => self.divert(req),
            Request::RemoveLink { link } => self.remove_link(&link),
            Request::Stats { link } => self.stats(link.as_deref()),
            Request::Clock => Ok(self.clock_report()),
            Request::Pulse => Ok(self.pulse()),
        }
    }

    /// Every direction with departures since the last pulse: how many, their
    /// lateness p99 and max (bucket bounds, model ns), and the ingress drops so
    /// far; then the windows start again. With the loop's spinning so far.
    pub(crate) fn pulse(&mut self) -> Map<String, Value> {
        let mut dirs = Vec::new();
        for link in self.links.values_mut() {
            for (i, st) in link.dirs.iter_mut().enumerate() {
                let drops = link.ends[i].ingress_drops();
                if st.pulse.departures > 0 || drops > 0 {
                    dirs.push(json!({
                        "link": link.name, "dir": DIR_NAMES[i],
                        "departures": st.pulse.departures,
                        "p99_ns": st.pulse.quantile_ns(0.99),
                        "max_ns": st.pulse.quantile_ns(1.0),
                        "ingress_drops": drops,
                    }));
                }
                st.pulse = Pulse::default();
            }
        }
        let mut out = Map::new();
        out.insert("directions".to_owned(), Value::Array(dirs));
        out.insert("spin_ns".to_owned(), self.timing.spin_ns().into());
        out
    }

    /// The model clock: its factor, model time and real time now.
    pub(crate) fn clock_report(&self) -> Map<String, Value> {
        let view = self.clock.view();
        fields(json!({
            "dilated": self.clock.dilated(),
            "tdf": view.tdf,
            "model_now_ns": self.clock.now(),
            "now_ns": now_ns(),
        }))
    }

    fn lookup(&self, name: &str) -> Result<u64, String> {
        self.names
            .get(name)
            .copied()
            .ok_or_else(|| format!("link: no link named {name:?}"))
    }

    /// Apply the daemon's defaults to `params` and check them; `dir`
    /// (`"ab"` or `"ba"`) prefixes the message.
    pub(crate) fn prepare(
        &self,
        mut params: DirectionParams,
        dir: &str,
    ) -> Result<DirectionParams, String> {
        if params.queue_packets.is_none() && params.queue_bytes.is_none() {
            params.queue_packets = self.config.default_queue_packets;
        }
        params.validate().map_err(|e| format!("{dir}.{e}"))?;
        Ok(params)
    }

    fn add_link(&mut self, req: AddLink) -> Result<Map<String, Value>, String> {
        if req.link.is_empty() {
            return Err("link: the name must not be empty".to_owned());
        }
        if self.names.contains_key(&req.link) {
            return Err(format!("link: a link named {:?} already exists", req.link));
        }
        req.a.validate("a")?;
        req.b.validate("b")?;
        if req.a == req.b {
            return Err("b: the same endpoint as a".to_owned());
        }
        let cut = req.b.kind == EndpointKind::Udp;
        if cut && req.a.kind != EndpointKind::Tap {
            // The UDP end takes the framing of the TAP opened just before it.
            return Err(format!(
                "a.kind: {:?}: a cut link's udp end (b) stands beside a tap end (a)",
                req.a.kind.name()
            ));
        }
        if req.a.kind != req.b.kind && !cut {
            // A TAP's frames carry a virtio-net header and may be
            // super-frames; an AF_XDP socket's are plain wire frames.
            return Err(format!(
                "b.kind: {:?}, but a.kind is {:?}: both ends of a link are the same kind",
                req.b.kind.name(),
                req.a.kind.name()
            ));
        }
        // Everything that can be checked is checked before anything is
        // created.
        let ab = self.prepare(req.ab, "ab")?;
        let ba = self.prepare(req.ba, "ba")?;
        let ab = Direction::new(ab).map_err(|e| format!("ab.{e}"))?;
        let ba = Direction::new(ba).map_err(|e| format!("ba.{e}"))?;
        let a = self.opener.open(&req.a, "a")?;
        // On failure `a` is dropped here, which destroys it.
        let b = self.opener.open(&req.b, "b")?;
        if a.header_len() != b.header_len() {
            return Err(format!(
                "b: frames with a {}-byte header, but a's have {} (internal)",
                b.header_len(),
                a.header_len()
            ));
        }
        // Direction ab enters at a, ba at b: each carries its endpoint's
        // header in front of every frame, uncounted.
        let ab = ab.with_prefix(a.header_len());
        let ba = ba.with_prefix(b.header_len());
        let id = self.next_link;
        self.next_link += 1;
        for (side, end) in [&a, &b].into_iter().enumerate() {
            let ev = EpollEvent::new(EpollFlags::EPOLLIN, tap_token(id, side));
            if let Err(e) = self.epoll.add(end.as_fd(), ev) {
                if side == 1 {
                    let _ = self.epoll.delete(a.as_fd());
                }
                return Err(format!("cannot watch endpoint {}: {e}", SIDE_NAMES[side]));
            }
        }
        log!(
            "link {:?} added: a={} b={}",
            req.link,
            req.a.describe(),
            req.b.describe()
        );
        self.links.insert(
            id,
            Link {
                name: req.link.clone(),
                ends: [a, b],
                dirs: [DirState::new(ab), DirState::new(ba)],
                gone: [false; 2],
                diverted: false,
            },
        );
        self.names.insert(req.link, id);
        Ok(Map::new())
    }

    fn set_link(&mut self, req: SetLink) -> Result<Map<String, Value>, String> {
        let id = self.lookup(&req.link)?;
        if req.ab.is_none() && req.ba.is_none() {
            return Err("set_link: give ab, ba or both".to_owned());
        }
        let new = [
            req.ab.map(|p| self.prepare(p, "ab")).transpose()?,
            req.ba.map(|p| self.prepare(p, "ba")).transpose()?,
        ];
        let link = self.links.get_mut(&id).expect("names and links agree");
        let now = self.clock.now();
        let mut applied: Vec<(usize, DirectionParams)> = Vec::new();
        for (i, params) in new.into_iter().enumerate() {
            let Some(params) = params else { continue };
            let old = link.dirs[i].dir.params().clone();
            if let Err(e) = link.dirs[i].dir.set_params(now, params) {
                // Validated above, so not expected; undo what was applied.
                for (j, old) in applied {
                    let _ = link.dirs[j].dir.set_params(now, old);
                }
                return Err(format!("{}.{e}", DIR_NAMES[i]));
            }
            applied.push((i, old));
        }
        let which: Vec<&str> = applied.iter().map(|(i, _)| DIR_NAMES[*i]).collect();
        for i in 0..2 {
            self.schedule(id, i);
        }
        log!(
            "link {:?}: new parameters for {}",
            req.link,
            which.join(" and ")
        );
        Ok(Map::new())
    }

    /// A cut link's clocks measured again: from now on its udp half counts the
    /// delay of each frame from the peer's stamp with this offset.
    fn set_clock(
        &mut self,
        name: &str,
        offset_ns: i64,
        uncertainty_ns: Option<u64>,
    ) -> Result<Map<String, Value>, String> {
        let id = self.lookup(name)?;
        let link = self.links.get_mut(&id).expect("names and links agree");
        let mut set = 0;
        for end in &mut link.ends {
            if end.set_clock(offset_ns, uncertainty_ns).is_ok() {
                set += 1;
            }
        }
        if set == 0 {
            return Err(format!(
                "set_clock: link {name:?} has no udp endpoint (not a cut link's half)"
            ));
        }
        Ok(Map::new())
    }

    fn set_state(
        &mut self,
        name: &str,
        up: bool,
        at_ns: Option<u64>,
    ) -> Result<Map<String, Value>, String> {
        let id = self.lookup(name)?;
        let link = self.links.get_mut(&id).expect("names and links agree");
        let now = self.clock.now();
        // The caller plans in real CLOCK_MONOTONIC; the model runs in its own.
        let at_ns = at_ns.map(|at| self.clock.at(at));
        // A planned change is applied by link-core at its own instant, however
        // late the loop wakes for it: an arrival stamped before it finds the old
        // state, one stamped at or after it the new (docs/linkd.md).
        let at = at_ns.filter(|&at| at > now);
        for st in &mut link.dirs {
            match at {
                Some(at) => st.dir.set_up_at(at, up),
                None => st.dir.set_up(now, up),
            }
        }
        for i in 0..2 {
            self.schedule(id, i);
        }
        let what = if up { "up" } else { "down" };
        match at {
            Some(at) => log!("link {name:?} {what} in {} us", (at - now) / 1000),
            None => log!("link {name:?} {what}"),
        }
        // The instant it takes effect (CLOCK_MONOTONIC ns): the truth an outage
        // measured from the packets is held against (docs/events.md).
        let mut out = Map::new();
        let applied = at.map_or_else(now_ns, |at| self.clock.real_at(at));
        out.insert("applied_ns".to_owned(), Value::from(applied));
        out.insert("planned".to_owned(), Value::from(at.is_some()));
        Ok(out)
    }

    /// Lead two veth ends' traffic through the link's TAPs, which stand beside
    /// them (docs/linkd.md, "divert"): what the engine writes into a TAP is
    /// received on its veth end, what the veth end sends goes into the TAP.
    /// All four redirects or none; they last as long as the link.
    fn divert(&mut self, req: Divert) -> Result<Map<String, Value>, String> {
        let id = self.lookup(&req.link)?;
        let veths = [req.a, req.b];
        for (side, veth) in veths.iter().enumerate() {
            let name = SIDE_NAMES[side];
            EndpointSpec {
                netns: None,
                ifname: veth.clone(),
                kind: Default::default(),
                local: None,
                peer: None,
                clock_offset_ns: None,
            }
            .validate(name)?;
        }
        let link = &self.links[&id];
        if link.diverted {
            return Err(format!("link: {:?} is diverted already", req.link));
        }
        let mut taps = Vec::new();
        for (side, end) in link.ends.iter().enumerate() {
            let spec = end.spec().cloned();
            taps.push(spec.ok_or_else(|| {
                format!(
                    "{}: this endpoint is no device beside a veth",
                    SIDE_NAMES[side]
                )
            })?);
        }
        let mut guards = [Vec::new(), Vec::new()];
        // First the way back into each node, then the switch itself; on an
        // error the guards drop here and every redirect made goes with them.
        for side in 0..2 {
            let tap = &taps[side];
            let g = self.opener.redirect(
                tap,
                SIDE_NAMES[side],
                &tap.ifname,
                &veths[side],
                Way::IngressToIngress,
            )?;
            guards[side].push(g);
        }
        for side in 0..2 {
            let tap = &taps[side];
            let g = self.opener.redirect(
                tap,
                SIDE_NAMES[side],
                &veths[side],
                &tap.ifname,
                Way::EgressToEgress,
            )?;
            guards[side].push(g);
        }
        let link = self.links.get_mut(&id).expect("names and links agree");
        for (side, gs) in guards.into_iter().enumerate() {
            for g in gs {
                link.ends[side].hold(g);
            }
        }
        link.diverted = true;
        log!(
            "link {:?} diverted: {} and {} send through it",
            req.link,
            veths[0],
            veths[1]
        );
        Ok(Map::new())
    }

    fn remove_link(&mut self, name: &str) -> Result<Map<String, Value>, String> {
        let id = self.lookup(name)?;
        self.names.remove(name);
        let link = self.links.remove(&id).expect("names and links agree");
        for (side, end) in link.ends.iter().enumerate() {
            if !link.gone[side] {
                let _ = self.epoll.delete(end.as_fd());
            }
        }
        drop(link);
        log!("link {name:?} removed");
        Ok(Map::new())
    }

    fn stats(&self, name: Option<&str>) -> Result<Map<String, Value>, String> {
        let ids: Vec<u64> = match name {
            Some(name) => vec![self.lookup(name)?],
            None => self.names.values().copied().collect(),
        };
        let mut links = Map::new();
        for id in ids {
            let link = &self.links[&id];
            let mut entry = Map::new();
            entry.insert(
                "up".to_owned(),
                Value::Bool(link.dirs.iter().all(|d| d.dir.is_up())),
            );
            for (i, st) in link.dirs.iter().enumerate() {
                let mut s = match serde_json::to_value(st.dir.stats()) {
                    Ok(Value::Object(m)) => m,
                    Ok(other) => fields(json!({ "model": other })),
                    Err(e) => fields(json!({ "model_error": e.to_string() })),
                };
                s.insert("write_errors".to_owned(), st.write_errors.into());
                s.insert(
                    "ingress_drops".to_owned(),
                    link.ends[i].ingress_drops().into(),
                );
                s.insert("read_errors".to_owned(), st.read_errors.into());
                s.insert(
                    "offload".to_owned(),
                    serde_json::to_value(st.offload).unwrap_or(Value::Null),
                );
                entry.insert(DIR_NAMES[i].to_owned(), Value::Object(s));
            }
            let ends: Map<String, Value> = link
                .ends
                .iter()
                .zip(SIDE_NAMES)
                .filter_map(|(end, side)| Some((side.to_owned(), end.counters()?)))
                .collect();
            if !ends.is_empty() {
                entry.insert("endpoints".to_owned(), Value::Object(ends));
            }
            links.insert(link.name.clone(), Value::Object(entry));
        }
        let mut out = Map::new();
        let now = now_ns();
        out.insert("now_ns".to_owned(), now.into());
        if self.clock.dilated() {
            out.insert("clock".to_owned(), Value::Object(self.clock_report()));
        }
        let mut engine = self.timing.report(now);
        engine["realtime"] = self.rt.report(now);
        out.insert("engine".to_owned(), engine);
        out.insert("links".to_owned(), Value::Object(links));
        Ok(out)
    }
}

/// The map inside a `json!({...})` object.
pub(crate) fn fields(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}
