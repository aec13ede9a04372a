//! Redirects between a veth end and the TAP beside it, for links diverted
//! through the engine at runtime (`divert` in docs/linkd.md).
//!
//! Each redirect is a four-instruction BPF program, `return
//! bpf_redirect(target, flags)`, attached to a tc hook through a tcx link
//! (Linux 6.6+). Built here from its instructions, so no compiler or object
//! file is involved, and attached without a qdisc: adding a `clsact` qdisc
//! to an interface that carries traffic briefly deactivates it, dropping the
//! frames in flight and everything queued in its root qdisc, which is the
//! moment a runtime change must not lose anything. The link is a file
//! descriptor: the redirect lasts exactly as long as the daemon holds it,
//! so when the daemon exits, for any reason, the veth carries its traffic
//! directly again instead of redirecting it into a TAP that is gone.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;
const BPF_TCX_INGRESS: u32 = 46;
const BPF_TCX_EGRESS: u32 = 47;
const BPF_FUNC_REDIRECT: i32 = 23;
const BPF_F_INGRESS: i32 = 1;

/// Which way a redirect goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// Every frame received on `from` (a TAP the engine writes into) is
    /// received on `to` (its veth end) instead.
    IngressToIngress,
    /// Every frame sent out of `from` (a veth end) is sent out of `to` (its
    /// TAP, which the engine reads) instead, ahead of `from`'s qdisc.
    EgressToEgress,
}

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    regs: u8, // dst_reg in the low nibble, src_reg in the high one
    off: i16,
    imm: i32,
}

/// The part of `union bpf_attr` that BPF_PROG_LOAD reads.
#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// The part of `union bpf_attr` that BPF_LINK_CREATE reads, for tcx.
#[repr(C)]
#[derive(Default)]
struct LinkCreate {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
    relative_fd: u32,
    _pad: u32,
    expected_revision: u64,
}

fn bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<OwnedFd> {
    // SAFETY: `attr` is a live, fully initialised repr(C) prefix of `union
    // bpf_attr` for `cmd`, and its size is passed with it; the kernel only
    // reads it (and fills in nothing we rely on).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a non-negative return of BPF_PROG_LOAD or BPF_LINK_CREATE is a
    // new file descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// The program: `r1 = to; r2 = flags; call bpf_redirect; exit`.
fn program(to: u32, flags: i32) -> [Insn; 4] {
    let mov_imm = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
    [
        Insn {
            code: mov_imm,
            regs: 1,
            off: 0,
            imm: to as i32,
        },
        Insn {
            code: mov_imm,
            regs: 2,
            off: 0,
            imm: flags,
        },
        Insn {
            code: 0x85,
            regs: 0,
            off: 0,
            imm: BPF_FUNC_REDIRECT,
        }, // BPF_JMP | BPF_CALL
        Insn {
            code: 0x95,
            regs: 0,
            off: 0,
            imm: 0,
        }, // BPF_JMP | BPF_EXIT
    ]
}

/// Attach a redirect from interface `from` to interface `to` (indexes in the
/// calling thread's network namespace); the returned descriptor holds it.
pub fn redirect(from: u32, to: u32, way: Way) -> io::Result<OwnedFd> {
    let (flags, attach_type) = match way {
        Way::IngressToIngress => (BPF_F_INGRESS, BPF_TCX_INGRESS),
        Way::EgressToEgress => (0, BPF_TCX_EGRESS),
    };
    let insns = program(to, flags);
    let license = b"GPL\0";
    let mut name = [0u8; 16];
    name[..14].copy_from_slice(b"fidelnet_divrt");
    let mut load = ProgLoad {
        prog_type: BPF_PROG_TYPE_SCHED_CLS,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name,
        ..ProgLoad::default()
    };
    let prog = bpf(BPF_PROG_LOAD, &mut load)
        .map_err(|e| io::Error::new(e.kind(), format!("loading the redirect program: {e}")))?;
    let mut create = LinkCreate {
        prog_fd: std::os::fd::AsRawFd::as_raw_fd(&prog) as u32,
        target_ifindex: from,
        attach_type,
        ..LinkCreate::default()
    };
    bpf(BPF_LINK_CREATE, &mut create).map_err(|e| {
        let hint = if e.raw_os_error() == Some(libc::EINVAL) {
            " (tcx links need Linux 6.6 or later)"
        } else {
            ""
        };
        io::Error::new(e.kind(), format!("attaching the redirect: {e}{hint}"))
    })
    // `prog` closes here; the link keeps the program.
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_layouts_match_the_kernel() {
        assert_eq!(std::mem::size_of::<Insn>(), 8);
        assert_eq!(std::mem::size_of::<ProgLoad>(), 72);
        assert_eq!(std::mem::offset_of!(ProgLoad, prog_name), 48);
        assert_eq!(std::mem::offset_of!(ProgLoad, expected_attach_type), 68);
        assert_eq!(std::mem::size_of::<LinkCreate>(), 32);
        assert_eq!(std::mem::offset_of!(LinkCreate, expected_revision), 24);
    }

    #[test]
    fn the_program_redirects_to_its_target() {
        let p = program(7, BPF_F_INGRESS);
        assert_eq!((p[0].code, p[0].regs, p[0].imm), (0xb7, 1, 7));
        assert_eq!((p[1].code, p[1].regs, p[1].imm), (0xb7, 2, 1));
        assert_eq!((p[2].code, p[2].imm), (0x85, 23));
        assert_eq!(p[3].code, 0x95);
    }
}
