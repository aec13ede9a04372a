//! Hand-written argument parser for `fidelnet-exec`.
//!
//! Options may appear in any order before the mandatory `--`; they are
//! *applied* in the fixed order documented in [`USAGE`], never in argv order.
//! Everything after `--` is the program's argv and is never inspected.
//!
//! Values are taken from the next argument (`--net PATH`) or after an equals
//! sign (`--net=PATH`). In the separate form a value that itself starts with
//! `--` is refused as a missing value, so that `--net --new-mount` is caught
//! here instead of failing later as a strange path; the `=` form accepts
//! anything.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::os::unix::ffi::OsStrExt;

/// Usage text, printed by `--help` (stdout) and after usage errors (stderr).
pub const USAGE: &str = "\
Usage: fidelnet-exec [--setsid] [--ctty] [--cgroup PROCSFILE]... [--net NETNS_PATH]
                     [--join-pid PID] [--new-mount] [--mount-base NS_PATH]
                     [--hostname NAME] [--unmount PATH]... [--cwd DIR]
                     -- PROGRAM [ARGS...]

Start PROGRAM inside a fidelnet node. Setup runs in this order, whatever the
order of the options, and any setup failure is fatal:

  --setsid             start a new session (setsid)
  --ctty               make stdin (a pty slave) the controlling terminal;
                       requires --setsid
  --cgroup PROCSFILE   write this pid to PROCSFILE (cgroup.procs, v1 or v2);
                       may be repeated
  --join-pid PID       join the net, uts and mount namespaces of PID;
                       excludes --net, --new-mount and --hostname
  --net NETNS_PATH     join the network namespace file NETNS_PATH
                       (e.g. /run/netns/h1)
  --new-mount          new mount and UTS namespaces, / made rprivate, fresh
                       sysfs on /sys (the sysfs mount is best effort)
  --mount-base NS_PATH with --new-mount: enter the mount namespace NS_PATH
                       first and copy that one instead of the caller's (a
                       copy costs time in proportion to its mounts); the
                       working directory is re-entered by path if it exists
                       there, else it is /
  --hostname NAME      set the hostname; requires --new-mount
  --unmount PATH       detach the mount at PATH in a mount namespace of this
                       program's own (a new one, / made rprivate, unless
                       --new-mount made it); may be repeated. For a program
                       that must not see a mount: crun refuses a hybrid
                       cgroup tree whose v2 part holds controllers
  --cwd DIR            change the working directory to DIR

  --help               print this help and exit
  --version            print the version and exit

  --serve FD           (alone) serve start requests on the Unix socket FD:
                       each one forks a child that does the above with the
                       request's options and environment (src/serve.rs)

Values may also be given as --option=VALUE. PROGRAM is started with execvp
(PATH search, no shell) and ARGS are passed through untouched.

Exit status: that of PROGRAM; 125 for a usage or setup error, 126 if PROGRAM
could not be executed, 127 if PROGRAM was not found.
";

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Set up the node context and exec the program.
    Run(Options),
    /// `--help`: print usage to stdout and exit 0.
    Help,
    /// `--version`: print the version to stdout and exit 0.
    Version,
}

/// Namespace to enter, if any. `--join-pid` and `--net` are exclusive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Join {
    /// Stay in the current namespaces.
    None,
    /// `--join-pid PID`: net, uts and mnt namespaces of a running process.
    Pid(libc::pid_t),
    /// `--net PATH`: a (bind-mounted) network namespace file.
    Net(OsString),
}

/// Validated options of a `Run` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// `--setsid`.
    pub setsid: bool,
    /// `--ctty` (implies `setsid`, checked by the parser).
    pub ctty: bool,
    /// `--cgroup` files, in command-line order.
    pub cgroups: Vec<OsString>,
    /// `--join-pid` or `--net`.
    pub join: Join,
    /// `--new-mount`.
    pub new_mount: bool,
    /// `--mount-base` (requires `new_mount`, checked by the parser).
    pub mount_base: Option<OsString>,
    /// `--hostname` (implies `new_mount`, checked by the parser).
    pub hostname: Option<OsString>,
    /// `--unmount` paths, in command-line order.
    pub unmounts: Vec<OsString>,
    /// `--cwd`.
    pub cwd: Option<OsString>,
    /// PROGRAM followed by its ARGS; never empty.
    pub argv: Vec<OsString>,
}

/// A command-line error; the message is meant to be shown to the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(msg: String) -> Result<T, UsageError> {
    Err(UsageError(msg))
}

/// Store a single-use value, refusing duplicates and empty values.
fn set_once(slot: &mut Option<OsString>, flag: &str, value: OsString) -> Result<(), UsageError> {
    if slot.is_some() {
        return err(format!("option '{flag}' given more than once"));
    }
    if value.is_empty() {
        return err(format!("option '{flag}' needs a non-empty value"));
    }
    *slot = Some(value);
    Ok(())
}

fn set_flag(slot: &mut bool, flag: &str) -> Result<(), UsageError> {
    if *slot {
        return err(format!("option '{flag}' given more than once"));
    }
    *slot = true;
    Ok(())
}

/// A strictly positive decimal pid, as the kernel would print it.
fn parse_pid(value: &OsStr) -> Result<libc::pid_t, UsageError> {
    let bytes = value.as_bytes();
    let parsed = if !bytes.is_empty() && bytes.iter().all(u8::is_ascii_digit) {
        std::str::from_utf8(bytes)
            .ok()
            .and_then(|s| s.parse::<libc::pid_t>().ok())
    } else {
        None
    };
    match parsed {
        Some(pid) if pid > 0 => Ok(pid),
        _ => err(format!(
            "invalid PID '{}' for '--join-pid'",
            value.to_string_lossy()
        )),
    }
}

/// Parse the arguments that follow argv\[0\].
pub fn parse(args: &[OsString]) -> Result<Command, UsageError> {
    let mut setsid = false;
    let mut ctty = false;
    let mut cgroups = Vec::new();
    let mut net: Option<OsString> = None;
    let mut join_pid: Option<OsString> = None;
    let mut new_mount = false;
    let mut hostname: Option<OsString> = None;
    let mut mount_base: Option<OsString> = None;
    let mut cwd: Option<OsString> = None;
    let mut unmounts = Vec::new();

    let mut i = 0;
    let argv = loop {
        let arg = match args.get(i) {
            Some(arg) => arg.as_bytes(),
            None => return err("missing '--' before PROGRAM".to_string()),
        };
        i += 1;
        if arg == b"--" {
            break &args[i..];
        }
        if !arg.starts_with(b"--") {
            return err(format!(
                "unexpected argument '{}' (missing '--' before PROGRAM?)",
                String::from_utf8_lossy(arg)
            ));
        }
        // Split `--flag=value`.
        let (flag, inline) = match arg.iter().position(|&b| b == b'=') {
            Some(eq) => (&arg[..eq], Some(OsStr::from_bytes(&arg[eq + 1..]))),
            None => (arg, None),
        };
        let flag = String::from_utf8_lossy(flag).into_owned();
        let takes_value = matches!(
            flag.as_str(),
            "--cgroup"
                | "--net"
                | "--join-pid"
                | "--hostname"
                | "--cwd"
                | "--mount-base"
                | "--unmount"
        );
        let value = if takes_value {
            match inline {
                Some(v) => v.to_os_string(),
                None => match args.get(i) {
                    Some(v) if !v.as_bytes().starts_with(b"--") => {
                        i += 1;
                        v.clone()
                    }
                    _ => return err(format!("option '{flag}' requires a value")),
                },
            }
        } else {
            if inline.is_some() && is_known_flag(&flag) {
                return err(format!("option '{flag}' does not take a value"));
            }
            OsString::new()
        };
        match flag.as_str() {
            "--help" => return Ok(Command::Help),
            "--version" => return Ok(Command::Version),
            "--setsid" => set_flag(&mut setsid, &flag)?,
            "--ctty" => set_flag(&mut ctty, &flag)?,
            "--new-mount" => set_flag(&mut new_mount, &flag)?,
            "--cgroup" => {
                if value.is_empty() {
                    return err(format!("option '{flag}' needs a non-empty value"));
                }
                cgroups.push(value);
            }
            "--unmount" => {
                if value.is_empty() {
                    return err(format!("option '{flag}' needs a non-empty value"));
                }
                unmounts.push(value);
            }
            "--net" => set_once(&mut net, &flag, value)?,
            "--join-pid" => set_once(&mut join_pid, &flag, value)?,
            "--hostname" => set_once(&mut hostname, &flag, value)?,
            "--cwd" => set_once(&mut cwd, &flag, value)?,
            "--mount-base" => set_once(&mut mount_base, &flag, value)?,
            _ => return err(format!("unknown option '{}'", String::from_utf8_lossy(arg))),
        }
    };

    if argv.is_empty() {
        return err("missing PROGRAM after '--'".to_string());
    }
    if ctty && !setsid {
        return err("'--ctty' requires '--setsid'".to_string());
    }
    let join = match (join_pid, net) {
        (Some(pid), None) => {
            if new_mount {
                return err("'--join-pid' cannot be combined with '--new-mount'".to_string());
            }
            if hostname.is_some() {
                return err("'--join-pid' cannot be combined with '--hostname'".to_string());
            }
            if !unmounts.is_empty() {
                return err("'--join-pid' cannot be combined with '--unmount'".to_string());
            }
            Join::Pid(parse_pid(&pid)?)
        }
        (Some(_), Some(_)) => {
            return err("'--join-pid' cannot be combined with '--net'".to_string())
        }
        (None, Some(path)) => Join::Net(path),
        (None, None) => Join::None,
    };
    if hostname.is_some() && !new_mount {
        return err("'--hostname' requires '--new-mount'".to_string());
    }
    if mount_base.is_some() && !new_mount {
        return err("'--mount-base' requires '--new-mount'".to_string());
    }

    Ok(Command::Run(Options {
        setsid,
        ctty,
        cgroups,
        join,
        new_mount,
        mount_base,
        hostname,
        unmounts,
        cwd,
        argv: argv.to_vec(),
    }))
}

fn is_known_flag(flag: &str) -> bool {
    matches!(
        flag,
        "--help" | "--version" | "--setsid" | "--ctty" | "--new-mount"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn run(v: &[&str]) -> Options {
        match parse(&os(v)) {
            Ok(Command::Run(o)) => o,
            other => panic!("expected Run for {v:?}, got {other:?}"),
        }
    }

    fn usage_err(v: &[&str]) -> String {
        match parse(&os(v)) {
            Err(UsageError(msg)) => msg,
            other => panic!("expected a usage error for {v:?}, got {other:?}"),
        }
    }

    #[test]
    fn unmount_repeats_and_excludes_join_pid() {
        let o = run(&[
            "--unmount",
            "/sys/fs/cgroup/unified",
            "--unmount=/x",
            "--",
            "crun",
        ]);
        assert_eq!(o.unmounts, os(&["/sys/fs/cgroup/unified", "/x"]));
        assert!(!o.new_mount);
        assert!(
            usage_err(&["--join-pid", "1", "--unmount", "/x", "--", "p"]).contains("--unmount")
        );
        assert!(usage_err(&["--unmount=", "--", "p"]).contains("non-empty"));
    }

    #[test]
    fn minimal_command() {
        let o = run(&["--", "true"]);
        assert_eq!(o.argv, os(&["true"]));
        assert!(!o.setsid && !o.ctty && !o.new_mount);
        assert!(o.cgroups.is_empty());
        assert_eq!(o.join, Join::None);
        assert_eq!(o.hostname, None);
        assert_eq!(o.cwd, None);
    }

    #[test]
    fn all_options() {
        let o = run(&[
            "--setsid",
            "--ctty",
            "--cgroup",
            "/sys/fs/cgroup/a/cgroup.procs",
            "--cgroup=/sys/fs/cgroup/cpu/b/cgroup.procs",
            "--net",
            "/run/netns/h1",
            "--new-mount",
            "--mount-base=/proc/1/fd/7",
            "--hostname",
            "h1",
            "--cwd",
            "/tmp",
            "--",
            "sh",
            "-c",
            "echo hi",
        ]);
        assert!(o.setsid && o.ctty && o.new_mount);
        assert_eq!(
            o.cgroups,
            os(&[
                "/sys/fs/cgroup/a/cgroup.procs",
                "/sys/fs/cgroup/cpu/b/cgroup.procs"
            ])
        );
        assert_eq!(o.join, Join::Net("/run/netns/h1".into()));
        assert_eq!(o.hostname, Some("h1".into()));
        assert_eq!(o.mount_base, Some("/proc/1/fd/7".into()));
        assert_eq!(o.cwd, Some("/tmp".into()));
        assert_eq!(o.argv, os(&["sh", "-c", "echo hi"]));
    }

    #[test]
    fn option_order_does_not_matter() {
        let a = run(&[
            "--hostname",
            "x",
            "--new-mount",
            "--ctty",
            "--setsid",
            "--",
            "p",
        ]);
        let b = run(&[
            "--setsid",
            "--ctty",
            "--new-mount",
            "--hostname",
            "x",
            "--",
            "p",
        ]);
        assert_eq!(a, b);
    }

    #[test]
    fn cgroups_keep_command_line_order() {
        let o = run(&["--cgroup", "b", "--cgroup", "a", "--cgroup", "b", "--", "p"]);
        assert_eq!(o.cgroups, os(&["b", "a", "b"]));
    }

    #[test]
    fn everything_after_double_dash_is_untouched() {
        let o = run(&["--", "prog", "--net", "x", "--", "--help", "", "a b"]);
        assert_eq!(
            o.argv,
            os(&["prog", "--net", "x", "--", "--help", "", "a b"])
        );
        assert_eq!(o.join, Join::None);
        // The program itself may look like an option.
        assert_eq!(run(&["--", "--version"]).argv, os(&["--version"]));
    }

    #[test]
    fn non_utf8_arguments_pass_through() {
        use std::os::unix::ffi::OsStringExt;
        let weird = OsString::from_vec(vec![0xff, b'x', 0xfe]);
        let args = vec!["--cwd".into(), weird.clone(), "--".into(), weird.clone()];
        match parse(&args) {
            Ok(Command::Run(o)) => {
                assert_eq!(o.cwd, Some(weird.clone()));
                assert_eq!(o.argv, vec![weird]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn help_and_version() {
        assert_eq!(parse(&os(&["--help"])), Ok(Command::Help));
        assert_eq!(parse(&os(&["--version"])), Ok(Command::Version));
        assert_eq!(
            parse(&os(&["--setsid", "--help", "--bogus"])),
            Ok(Command::Help)
        );
        assert!(usage_err(&["--help=x"]).contains("does not take a value"));
    }

    #[test]
    fn missing_double_dash_or_program() {
        assert!(usage_err(&[]).contains("missing '--'"));
        assert!(usage_err(&["--setsid"]).contains("missing '--'"));
        assert!(usage_err(&["true"]).contains("missing '--' before PROGRAM?"));
        assert!(usage_err(&["--setsid", "true"]).contains("unexpected argument 'true'"));
        assert!(usage_err(&["--"]).contains("missing PROGRAM"));
        assert!(usage_err(&["--setsid", "--"]).contains("missing PROGRAM"));
    }

    #[test]
    fn unknown_options() {
        assert!(usage_err(&["--bogus", "--", "p"]).contains("unknown option '--bogus'"));
        assert!(usage_err(&["--bogus=1", "--", "p"]).contains("unknown option '--bogus=1'"));
        assert!(usage_err(&["-h", "--", "p"]).contains("unexpected argument '-h'"));
        assert!(usage_err(&["--setsid=yes", "--", "p"]).contains("does not take a value"));
    }

    #[test]
    fn missing_values() {
        for flag in ["--cgroup", "--net", "--join-pid", "--hostname", "--cwd"] {
            // Value swallowed by the separator or by another flag.
            assert!(
                usage_err(&[flag, "--", "p"]).contains("requires a value"),
                "{flag}"
            );
            assert!(
                usage_err(&[flag, "--setsid", "--", "p"]).contains("requires a value"),
                "{flag}"
            );
            // At the very end.
            assert!(usage_err(&[flag]).contains("requires a value"), "{flag}");
            // Empty values.
            let eq = format!("{flag}=");
            let msg = usage_err(&[&eq, "--new-mount", "--", "p"]);
            assert!(
                msg.contains("non-empty") || msg.contains("invalid PID"),
                "{flag}: {msg}"
            );
        }
    }

    #[test]
    fn inline_values_may_look_like_options() {
        let o = run(&["--cwd=--odd", "--", "p"]);
        assert_eq!(o.cwd, Some("--odd".into()));
        let o = run(&["--new-mount", "--hostname=a=b", "--", "p"]);
        assert_eq!(o.hostname, Some("a=b".into()));
    }

    #[test]
    fn duplicates_are_refused() {
        for v in [
            &["--setsid", "--setsid", "--", "p"][..],
            &["--net", "a", "--net=b", "--", "p"][..],
            &["--join-pid", "1", "--join-pid", "2", "--", "p"][..],
            &["--new-mount", "--new-mount", "--", "p"][..],
            &[
                "--new-mount",
                "--hostname",
                "a",
                "--hostname",
                "b",
                "--",
                "p",
            ][..],
            &["--cwd", "/", "--cwd", "/", "--", "p"][..],
        ] {
            assert!(usage_err(v).contains("more than once"), "{v:?}");
        }
    }

    #[test]
    fn requirements() {
        assert!(usage_err(&["--ctty", "--", "p"]).contains("'--ctty' requires '--setsid'"));
        assert!(usage_err(&["--hostname", "h", "--", "p"])
            .contains("'--hostname' requires '--new-mount'"));
        assert!(usage_err(&["--mount-base", "/x", "--", "p"])
            .contains("'--mount-base' requires '--new-mount'"));
        assert!(usage_err(&["--new-mount", "--mount-base", "--", "p"])
            .contains("'--mount-base' requires a value"));
    }

    #[test]
    fn join_pid_is_exclusive() {
        let o = run(&["--join-pid", "4242", "--setsid", "--cwd", "/", "--", "p"]);
        assert_eq!(o.join, Join::Pid(4242));
        assert!(
            usage_err(&["--join-pid", "1", "--net", "/run/netns/x", "--", "p"])
                .contains("cannot be combined with '--net'")
        );
        assert!(
            usage_err(&["--net", "/run/netns/x", "--join-pid", "1", "--", "p"])
                .contains("cannot be combined with '--net'")
        );
        assert!(usage_err(&["--join-pid", "1", "--new-mount", "--", "p"])
            .contains("cannot be combined with '--new-mount'"));
        assert!(
            usage_err(&["--join-pid", "1", "--hostname", "h", "--", "p"])
                .contains("cannot be combined with '--hostname'")
        );
    }

    #[test]
    fn join_pid_must_be_a_positive_decimal() {
        for bad in ["0", "-1", "+5", "abc", "12a", " 1", "0x10", "99999999999"] {
            let arg = format!("--join-pid={bad}");
            assert!(
                usage_err(&[&arg, "--", "p"]).contains("invalid PID"),
                "{bad}"
            );
        }
        assert_eq!(run(&["--join-pid=007", "--", "p"]).join, Join::Pid(7));
        assert_eq!(
            run(&["--join-pid", "2147483647", "--", "p"]).join,
            Join::Pid(2_147_483_647)
        );
    }
}
