//! The few `bpf(2)` commands the daemon uses, and eBPF instructions built by
//! hand: the programs it loads are a handful of instructions each (see
//! [`crate::tcx`] and [`crate::xsk`]), so no compiler, object file or loader
//! library is involved, and nothing can be out of step with the daemon.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

pub const BPF_MAP_CREATE: libc::c_long = 0;
pub const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
pub const BPF_PROG_LOAD: libc::c_long = 5;
pub const BPF_LINK_CREATE: libc::c_long = 28;

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    pub code: u8,
    pub regs: u8, // dst_reg in the low nibble, src_reg in the high one
    pub off: i16,
    pub imm: i32,
}

impl Insn {
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Self {
        Self {
            code,
            regs: (src << 4) | (dst & 0x0f),
            off,
            imm,
        }
    }
    /// `dst = imm` (64-bit).
    pub const fn mov_imm(dst: u8, imm: i32) -> Self {
        Self::new(0xb7, dst, 0, 0, imm)
    }
    /// `dst = src` (64-bit).
    pub const fn mov_reg(dst: u8, src: u8) -> Self {
        Self::new(0xbf, dst, src, 0, 0)
    }
    /// `dst += imm` (64-bit).
    pub const fn add_imm(dst: u8, imm: i32) -> Self {
        Self::new(0x07, dst, 0, 0, imm)
    }
    /// `dst = *(u32 *)(src + off)`.
    pub const fn load_u32(dst: u8, src: u8, off: i16) -> Self {
        Self::new(0x61, dst, src, off, 0)
    }
    /// `*(u64 *)(dst + off) = src`.
    pub const fn store_u64(dst: u8, off: i16, src: u8) -> Self {
        Self::new(0x7b, dst, src, off, 0)
    }
    /// `if dst != imm goto +off`.
    pub const fn jne_imm(dst: u8, imm: i32, off: i16) -> Self {
        Self::new(0x55, dst, 0, off, imm)
    }
    /// `if dst > src goto +off` (unsigned).
    pub const fn jgt_reg(dst: u8, src: u8, off: i16) -> Self {
        Self::new(0x2d, dst, src, off, 0)
    }
    /// Call helper `func`.
    pub const fn call(func: i32) -> Self {
        Self::new(0x85, 0, 0, 0, func)
    }
    /// Return `r0`.
    pub const fn exit() -> Self {
        Self::new(0x95, 0, 0, 0, 0)
    }
    /// `dst = map` (two instructions: `BPF_LD | BPF_DW | BPF_IMM` with the
    /// map's descriptor as a pseudo map fd).
    pub const fn load_map_fd(dst: u8, fd: i32) -> [Self; 2] {
        [Self::new(0x18, dst, 1, 0, fd), Self::new(0, 0, 0, 0, 0)]
    }
}

/// The part of `union bpf_attr` that BPF_PROG_LOAD reads.
#[repr(C)]
#[derive(Default)]
pub struct ProgLoad {
    pub prog_type: u32,
    pub insn_cnt: u32,
    pub insns: u64,
    pub license: u64,
    pub log_level: u32,
    pub log_size: u32,
    pub log_buf: u64,
    pub kern_version: u32,
    pub prog_flags: u32,
    pub prog_name: [u8; 16],
    pub prog_ifindex: u32,
    pub expected_attach_type: u32,
}

/// The part of `union bpf_attr` that BPF_LINK_CREATE reads (tcx and XDP
/// links).
#[repr(C)]
#[derive(Default)]
pub struct LinkCreate {
    pub prog_fd: u32,
    pub target_ifindex: u32,
    pub attach_type: u32,
    pub flags: u32,
    pub relative_fd: u32,
    pub _pad: u32,
    pub expected_revision: u64,
}

/// The part of `union bpf_attr` that BPF_MAP_CREATE reads.
#[repr(C)]
#[derive(Default)]
pub struct MapCreate {
    pub map_type: u32,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
    pub map_flags: u32,
}

/// The part of `union bpf_attr` that BPF_MAP_UPDATE_ELEM reads.
#[repr(C)]
#[derive(Default)]
pub struct MapElem {
    pub map_fd: u32,
    pub _pad: u32,
    pub key: u64,
    pub value: u64,
    pub flags: u64,
}

/// Issue `bpf(cmd, attr)`; the return value (a new descriptor for the
/// commands that create something, 0 otherwise).
pub fn call<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, fully initialised repr(C) prefix of `union
    // bpf_attr` for `cmd`, and its size is passed with it; the kernel reads
    // it and writes nothing we rely on.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Issue a `bpf` command that returns a new descriptor.
pub fn create<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<OwnedFd> {
    let fd = call(cmd, attr)?;
    // SAFETY: a non-negative return of a creating command is a new file
    // descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// Load `insns` as a GPL program of `prog_type` named `name` (at most 15
/// bytes), expecting `attach_type`.
pub fn load(prog_type: u32, attach_type: u32, name: &str, insns: &[Insn]) -> io::Result<OwnedFd> {
    let license = b"GPL\0";
    let mut prog_name = [0u8; 16];
    let n = name.len().min(15);
    prog_name[..n].copy_from_slice(&name.as_bytes()[..n]);
    let mut attr = ProgLoad {
        prog_type,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name,
        expected_attach_type: attach_type,
        ..ProgLoad::default()
    };
    create(BPF_PROG_LOAD, &mut attr)
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
        assert_eq!(std::mem::size_of::<MapCreate>(), 20);
        assert_eq!(std::mem::size_of::<MapElem>(), 32);
        assert_eq!(std::mem::offset_of!(MapElem, key), 8);
    }

    #[test]
    fn instruction_encoding() {
        let i = Insn::mov_reg(6, 1);
        assert_eq!((i.code, i.regs), (0xbf, 0x16));
        let i = Insn::store_u64(2, 0, 7);
        assert_eq!((i.code, i.regs, i.off), (0x7b, 0x72, 0));
        let [a, b] = Insn::load_map_fd(1, 9);
        assert_eq!((a.code, a.regs, a.imm), (0x18, 0x11, 9));
        assert_eq!(b, Insn::new(0, 0, 0, 0, 0));
    }
}
