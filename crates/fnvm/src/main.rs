//! `fidelnet-vm`: how fidelnet reaches into its VM nodes, over one virtio-serial
//! port per VM (no network, no SSH).
//!
//! ```text
//! fidelnet-vm agent PORT                  in the guest: serve the host on PORT
//! fidelnet-vm agent --fd N                the same on an open descriptor (tests)
//! fidelnet-vm mux AGENT_SOCK LISTEN_SOCK [TIMEOUT_MS]
//!                                         on the host: hold QEMU's chardev
//!                                         socket, serve clients on LISTEN_SOCK
//! fidelnet-vm wait SOCK TIMEOUT_MS        exit 0 once the agent answers
//! fidelnet-vm sync SOCK [ROUNDS]          set the guest's clock to the host's;
//!                                         prints offset, round trip, residual (ns)
//! fidelnet-vm run SOCK [--pty] [--cwd DIR] -- PROGRAM [ARG...]
//!                                         run PROGRAM in the guest, with this
//!                                         process's stdio, environment and
//!                                         (as exit status) its result
//! ```

mod agent;
mod client;
mod frame;
mod mux;
mod sys;

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::time::Duration;

const USAGE: &str = "usage: fidelnet-vm agent PORT | --fd N
       fidelnet-vm mux AGENT_SOCK LISTEN_SOCK [TIMEOUT_MS]
       fidelnet-vm wait SOCK TIMEOUT_MS
       fidelnet-vm sync SOCK [ROUNDS]
       fidelnet-vm run SOCK [--pty] [--cwd DIR] -- PROGRAM [ARG...]
";
const EXIT_USAGE: i32 = 2;

fn main() {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    std::process::exit(dispatch(args));
}

fn fail(msg: &str) -> i32 {
    let _ = sys::write_all(2, format!("fidelnet-vm: {msg}\n{USAGE}").as_bytes());
    EXIT_USAGE
}

fn millis(arg: Option<&OsString>, default: u64) -> Option<Duration> {
    match arg {
        None => Some(Duration::from_millis(default)),
        Some(a) => a.to_str()?.parse().ok().map(Duration::from_millis),
    }
}

fn dispatch(args: Vec<OsString>) -> i32 {
    let Some(cmd) = args.first().and_then(|a| a.to_str()) else {
        return fail("a subcommand is needed");
    };
    match cmd {
        "agent" if args.len() == 3 && args[1] == "--fd" => {
            let Some(fd) = args[2]
                .to_str()
                .and_then(|s| s.parse::<i32>().ok())
                .filter(|&f| f > 2)
            else {
                return fail("agent --fd N: N must be an open descriptor above 2");
            };
            // SAFETY: the caller hands this descriptor over.
            let port = unsafe { <std::fs::File as std::os::unix::io::FromRawFd>::from_raw_fd(fd) };
            match agent::serve(port) {
                Ok(()) => 0,
                Err(e) => {
                    let _ = sys::write_all(2, format!("fidelnet-vm agent: {e}\n").as_bytes());
                    1
                }
            }
        }
        "agent" if args.len() == 2 => {
            let port = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&args[1]);
            match port.and_then(agent::serve) {
                Ok(()) => 0,
                Err(e) => {
                    let _ = sys::write_all(2, format!("fidelnet-vm agent: {e}\n").as_bytes());
                    1
                }
            }
        }
        "mux" if (3..=4).contains(&args.len()) => {
            let Some(timeout) = millis(args.get(3), 30_000) else {
                return fail("TIMEOUT_MS must be a number of milliseconds");
            };
            match mux::serve(&PathBuf::from(&args[1]), &PathBuf::from(&args[2]), timeout) {
                Ok(()) => 0,
                Err(e) => {
                    let _ = sys::write_all(2, format!("fidelnet-vm mux: {e}\n").as_bytes());
                    1
                }
            }
        }
        "wait" if args.len() == 3 => {
            let Some(timeout) = millis(args.get(2), 0) else {
                return fail("TIMEOUT_MS must be a number of milliseconds");
            };
            match client::wait_ready(&PathBuf::from(&args[1]), timeout) {
                Ok(()) => 0,
                Err(e) => {
                    let _ = sys::write_all(2, format!("fidelnet-vm wait: {e}\n").as_bytes());
                    1
                }
            }
        }
        "sync" if (2..=3).contains(&args.len()) => {
            let rounds = match args
                .get(2)
                .map(|a| a.to_str().and_then(|s| s.parse::<u32>().ok()))
            {
                None => 16,
                Some(Some(n)) if n > 0 => n,
                Some(_) => return fail("ROUNDS must be a positive number"),
            };
            match client::sync_clock(&PathBuf::from(&args[1]), rounds) {
                Ok((offset, rtt, left)) => {
                    let line = format!(
                        "{{\"offset_ns\": {offset}, \"rtt_ns\": {rtt}, \"residual_ns\": {left}}}\n"
                    );
                    let _ = sys::write_all(1, line.as_bytes());
                    0
                }
                Err(e) => {
                    let _ = sys::write_all(2, format!("fidelnet-vm sync: {e}\n").as_bytes());
                    1
                }
            }
        }
        "run" if args.len() >= 4 => run(&args[1..]),
        "--help" | "-h" => {
            let _ = sys::write_all(1, USAGE.as_bytes());
            0
        }
        _ => fail("unknown subcommand or wrong arguments"),
    }
}

fn run(args: &[OsString]) -> i32 {
    let sock = PathBuf::from(&args[0]);
    let (mut pty, mut cwd) = (false, Vec::new());
    let mut i = 1;
    while i < args.len() {
        match args[i].as_bytes() {
            b"--pty" => pty = true,
            b"--cwd" if i + 1 < args.len() => {
                cwd = args[i + 1].as_bytes().to_vec();
                i += 1;
            }
            b"--" => break,
            _ => return fail("run: options are --pty and --cwd DIR, then --"),
        }
        i += 1;
    }
    let argv: Vec<Vec<u8>> = args[(i + 1).min(args.len())..]
        .iter()
        .map(|a| a.clone().into_vec())
        .collect();
    if i >= args.len() || argv.is_empty() {
        return fail("run: a program is needed after --");
    }
    client::run(&sock, pty, &cwd, argv)
}
