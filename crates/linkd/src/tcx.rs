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
use std::os::fd::{AsRawFd, OwnedFd};

use crate::bpf::{self, Insn, LinkCreate, BPF_LINK_CREATE};

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

/// The program: `r1 = to; r2 = flags; call bpf_redirect; exit`.
fn program(to: u32, flags: i32) -> [Insn; 4] {
    [
        Insn::mov_imm(1, to as i32),
        Insn::mov_imm(2, flags),
        Insn::call(BPF_FUNC_REDIRECT),
        Insn::exit(),
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
    let prog = bpf::load(BPF_PROG_TYPE_SCHED_CLS, 0, "fidelnet_divrt", &insns)
        .map_err(|e| io::Error::new(e.kind(), format!("loading the redirect program: {e}")))?;
    let mut create = LinkCreate {
        prog_fd: prog.as_raw_fd() as u32,
        target_ifindex: from,
        attach_type,
        ..LinkCreate::default()
    };
    bpf::create(BPF_LINK_CREATE, &mut create).map_err(|e| {
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
    fn the_program_redirects_to_its_target() {
        let p = program(7, BPF_F_INGRESS);
        assert_eq!((p[0].code, p[0].regs, p[0].imm), (0xb7, 1, 7));
        assert_eq!((p[1].code, p[1].regs, p[1].imm), (0xb7, 2, 1));
        assert_eq!((p[2].code, p[2].imm), (0x85, 23));
        assert_eq!(p[3].code, 0x95);
    }
}
