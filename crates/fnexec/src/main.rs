//! `fidelnet-exec`: starts a program inside a fidelnet node (session, cgroups,
//! namespaces, hostname, cwd), then `execvp`s it with its argv untouched.
//! See [`args::USAGE`] for the interface.
//!
//! The binary defines the C `main` itself (`no_main`): the Rust runtime's
//! start-up would otherwise set `SIGPIPE` to ignored — a disposition that
//! survives `exec` and would silently change how every program in the node
//! reacts to a closed pipe — and would reopen closed stdio descriptors on
//! `/dev/null`. A launcher must hand its caller's process state through.

#![cfg_attr(not(test), no_main)]
// In test builds the C entry point is compiled out, so most code is unused.
#![cfg_attr(test, allow(dead_code))]

mod args;
mod launch;
mod ns;
mod serve;

use std::ffi::OsString;
use std::io::Write;

/// Parse, set up, exec; returns the exit status if anything fails.
/// `--serve FD` alone: serve start requests on that socket (see [`serve`]).
fn run(args: &[OsString]) -> i32 {
    if args.len() == 2 && args[0] == "--serve" {
        return match args[1].to_str().and_then(|s| s.parse::<libc::c_int>().ok()) {
            Some(fd) if fd > 2 => serve::serve(fd, run),
            _ => {
                report("fidelnet-exec: --serve FD: FD must be a socket descriptor above 2\n");
                launch::EXIT_SETUP
            }
        };
    }
    let opts = match args::parse(args) {
        Ok(args::Command::Run(opts)) => opts,
        Ok(args::Command::Help) => return print_stdout(args::USAGE),
        Ok(args::Command::Version) => {
            return print_stdout(concat!("fidelnet-exec ", env!("CARGO_PKG_VERSION"), "\n"))
        }
        Err(e) => {
            report(&format!("fidelnet-exec: {e}\n\n{}", args::USAGE));
            return launch::EXIT_SETUP;
        }
    };
    let failure = match launch::setup(&opts) {
        Ok(()) => launch::exec(&opts.argv),
        Err(failure) => failure,
    };
    report(&format!("fidelnet-exec: {failure}\n"));
    failure.exit_code
}

/// Write to stderr; a broken stderr must not turn into a panic.
fn report(text: &str) {
    let _ = std::io::stderr().write_all(text.as_bytes());
}

/// No Rust runtime flushes stdout at exit here, so flush explicitly.
fn print_stdout(text: &str) -> i32 {
    let mut out = std::io::stdout();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

/// C entry point.
///
/// # Safety
///
/// Called by the C runtime with a valid `argc`/`argv` pair.
#[cfg(not(test))]
#[no_mangle]
unsafe extern "C" fn main(argc: libc::c_int, argv: *const *const libc::c_char) -> libc::c_int {
    use std::ffi::{CStr, OsStr};
    use std::os::unix::ffi::OsStrExt;

    let args: Vec<OsString> = (1..argc.max(0) as usize)
        .map(|i| {
            // SAFETY: the C runtime passes `argc` valid NUL-terminated strings.
            let arg = unsafe { CStr::from_ptr(*argv.add(i)) };
            OsStr::from_bytes(arg.to_bytes()).to_os_string()
        })
        .collect();
    run(&args)
}
