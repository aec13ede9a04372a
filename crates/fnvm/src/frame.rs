//! The wire format between the host and the guest agent, and between the
//! multiplexer and its clients: frames of `[channel u32][kind u8][length u32]`
//! (little endian) followed by `length` bytes of payload.
//!
//! A channel is one process in the guest. The client speaks on channel 0; the
//! multiplexer gives each client a channel of its own toward the agent.

use std::io;

/// Largest payload accepted; a longer frame means the stream is corrupt.
pub const MAX_PAYLOAD: usize = 1 << 20;
/// Bytes read at once from a process or a client.
pub const CHUNK: usize = 32 * 1024;
const HEADER: usize = 9;

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Host to guest: start a process ([`Spec`]).
    Open = 1,
    /// Host to guest: bytes for the process's stdin.
    Data = 2,
    /// Host to guest: the process's stdin is closed.
    Eof = 3,
    /// Host to guest: send the process group this signal (i32).
    Signal = 4,
    /// Host to guest: nobody listens any more; kill the process group.
    Close = 5,
    /// Guest to host: started, with this pid (u32).
    Started = 10,
    /// Guest to host: could not start (a message).
    Failed = 11,
    /// Guest to host: stdout bytes (a pty's output too).
    Out = 12,
    /// Guest to host: stderr bytes.
    Err = 13,
    /// Guest to host: ended, with this wait status (i32); output is complete.
    Exit = 14,
    /// Guest to host: the agent is ready.
    Hello = 20,
    /// Client to multiplexer: answer with Hello once the agent is ready.
    Ping = 21,
    /// Host to guest: what is your CLOCK_REALTIME? (answered with TimeIs)
    TimeQuery = 30,
    /// Guest to host: CLOCK_REALTIME, ns (i64).
    TimeIs = 31,
    /// Host to guest: step CLOCK_REALTIME by this many ns (i64); answered with TimeIs.
    TimeStep = 32,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Open,
            2 => Kind::Data,
            3 => Kind::Eof,
            4 => Kind::Signal,
            5 => Kind::Close,
            10 => Kind::Started,
            11 => Kind::Failed,
            12 => Kind::Out,
            13 => Kind::Err,
            14 => Kind::Exit,
            20 => Kind::Hello,
            21 => Kind::Ping,
            30 => Kind::TimeQuery,
            31 => Kind::TimeIs,
            32 => Kind::TimeStep,
            _ => return None,
        })
    }
}

/// One frame.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame {
    /// The channel (process) it belongs to.
    pub ch: u32,
    /// What it carries.
    pub kind: Kind,
    /// Its bytes.
    pub payload: Vec<u8>,
}

/// Encode a frame onto `out`.
pub fn encode(out: &mut Vec<u8>, ch: u32, kind: Kind, payload: &[u8]) {
    out.extend_from_slice(&ch.to_le_bytes());
    out.push(kind as u8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Frames accumulated from a byte stream.
#[derive(Default)]
pub struct Decoder {
    buf: Vec<u8>,
}

impl Decoder {
    /// Add bytes read from the stream.
    pub fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete frame, if any; an error when the stream is corrupt.
    pub fn next_frame(&mut self) -> io::Result<Option<Frame>> {
        if self.buf.len() < HEADER {
            return Ok(None);
        }
        let ch = u32::from_le_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        let kind = Kind::from_u8(self.buf[4]).ok_or_else(|| corrupt("unknown frame kind"))?;
        let len = u32::from_le_bytes([self.buf[5], self.buf[6], self.buf[7], self.buf[8]]) as usize;
        if len > MAX_PAYLOAD {
            return Err(corrupt("frame too long"));
        }
        if self.buf.len() < HEADER + len {
            return Ok(None);
        }
        let payload = self.buf[HEADER..HEADER + len].to_vec();
        self.buf.drain(..HEADER + len);
        Ok(Some(Frame { ch, kind, payload }))
    }
}

fn corrupt(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// What to start in the guest.
#[derive(Debug, PartialEq, Eq, Default)]
pub struct Spec {
    /// On a new pty (stdin, stdout and stderr all on it) rather than on pipes.
    pub pty: bool,
    /// Working directory ("" for the agent's).
    pub cwd: Vec<u8>,
    /// The environment, `KEY=VALUE` each, exactly.
    pub env: Vec<Vec<u8>>,
    /// The program and its arguments.
    pub argv: Vec<Vec<u8>>,
}

impl Spec {
    /// `[pty u8][cwd][n env u32][env...][n argv u32][argv...]`, strings as
    /// `[len u32][bytes]`.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![u8::from(self.pty)];
        put(&mut out, &self.cwd);
        out.extend_from_slice(&(self.env.len() as u32).to_le_bytes());
        for e in &self.env {
            put(&mut out, e);
        }
        out.extend_from_slice(&(self.argv.len() as u32).to_le_bytes());
        for a in &self.argv {
            put(&mut out, a);
        }
        out
    }

    /// The inverse of [`Spec::encode`].
    pub fn decode(bytes: &[u8]) -> io::Result<Spec> {
        let mut r = Reader { bytes, at: 0 };
        let pty = r.take(1)?[0] != 0;
        let cwd = r.string()?;
        let mut env = Vec::new();
        for _ in 0..r.u32()? {
            env.push(r.string()?);
        }
        let mut argv = Vec::new();
        for _ in 0..r.u32()? {
            argv.push(r.string()?);
        }
        if argv.is_empty() {
            return Err(corrupt("no program to start"));
        }
        Ok(Spec {
            pty,
            cwd,
            env,
            argv,
        })
    }
}

fn put(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s);
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        if self.bytes.len() - self.at < n {
            return Err(corrupt("truncated start request"));
        }
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn u32(&mut self) -> io::Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn string(&mut self) -> io::Result<Vec<u8>> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_survive_any_split_of_the_stream() {
        let mut wire = Vec::new();
        encode(&mut wire, 7, Kind::Out, b"hello");
        encode(&mut wire, 0, Kind::Ping, b"");
        encode(&mut wire, 3, Kind::Exit, &9i32.to_le_bytes());
        for cut in 0..wire.len() {
            let mut d = Decoder::default();
            d.feed(&wire[..cut]);
            let mut got = Vec::new();
            while let Some(f) = d.next_frame().unwrap() {
                got.push(f);
            }
            d.feed(&wire[cut..]);
            while let Some(f) = d.next_frame().unwrap() {
                got.push(f);
            }
            assert_eq!(got.len(), 3);
            assert_eq!(
                got[0],
                Frame {
                    ch: 7,
                    kind: Kind::Out,
                    payload: b"hello".to_vec()
                }
            );
            assert_eq!(got[1].kind, Kind::Ping);
            assert_eq!(got[2].payload, 9i32.to_le_bytes());
        }
    }

    #[test]
    fn a_corrupt_stream_is_an_error_not_a_hang() {
        let mut d = Decoder::default();
        d.feed(&[0, 0, 0, 0, 99, 0, 0, 0, 0]);
        assert!(d.next_frame().is_err());
        let mut d = Decoder::default();
        d.feed(&[0, 0, 0, 0, 2, 0xff, 0xff, 0xff, 0x7f]);
        assert!(d.next_frame().is_err());
    }

    #[test]
    fn a_spec_round_trips_and_a_truncated_one_is_refused() {
        let s = Spec {
            pty: true,
            cwd: b"/tmp".to_vec(),
            env: vec![b"A=1".to_vec(), b"PATH=/bin".to_vec()],
            argv: vec![b"sh".to_vec(), b"-c".to_vec(), b"echo 'x y'".to_vec()],
        };
        let bytes = s.encode();
        assert_eq!(Spec::decode(&bytes).unwrap(), s);
        for n in 0..bytes.len() {
            assert!(Spec::decode(&bytes[..n]).is_err());
        }
        let empty = Spec {
            argv: vec![],
            ..Spec::default()
        }
        .encode();
        assert!(Spec::decode(&empty).is_err());
    }
}
