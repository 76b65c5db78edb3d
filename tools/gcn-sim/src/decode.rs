//! Decoder for the gfx942 (GFX9 / CDNA3) machine-code subset our kernels use.
//!
//! Encodings follow the "AMD Instinct MI300 ISA" reference (GFX9 layouts). Opcode numbers were
//! read back from `llvm-mc-19 -mcpu=gfx942 -show-encoding` for every mnemonic listed in [`OPS`],
//! and the decoder is checked against `llvm-objdump-19` on every embedded kernel
//! (`tests/decode_vs_objdump.rs`). Anything outside the table decodes to an error that names
//! the encoding, the opcode and the byte offset: the simulator never guesses.

use std::fmt;

/// Instruction encodings (the top bits of the first dword select one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enc {
    Sop2,
    Sopk,
    Sop1,
    Sopc,
    Sopp,
    Smem,
    Vop2,
    Vop1,
    Vopc,
    Vop3,
    Vop3p,
    Ds,
    Global,
    Mubuf,
}

macro_rules! ops {
    ($($enc:ident $code:literal $name:ident $text:literal;)*) => {
        /// Every supported operation.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Op { $($name,)* }
        /// (encoding, opcode, op, mnemonic) for every supported instruction. VOP1/VOP2/VOPC ops
        /// also decode from VOP3 (opcode + 0x140 / + 0x100 / + 0).
        pub const OPS: &[(Enc, u16, Op, &str)] = &[$((Enc::$enc, $code, Op::$name, $text),)*];
    };
}

ops! {
    Sop2 0x00 SAddU32 "s_add_u32";
    Sop2 0x01 SSubU32 "s_sub_u32";
    Sop2 0x02 SAddI32 "s_add_i32";
    Sop2 0x03 SSubI32 "s_sub_i32";
    Sop2 0x04 SAddcU32 "s_addc_u32";
    Sop2 0x07 SMinU32 "s_min_u32";
    Sop2 0x09 SMaxU32 "s_max_u32";
    Sop2 0x0a SCselectB32 "s_cselect_b32";
    Sop2 0x0b SCselectB64 "s_cselect_b64";
    Sop2 0x0c SAndB32 "s_and_b32";
    Sop2 0x0d SAndB64 "s_and_b64";
    Sop2 0x0e SOrB32 "s_or_b32";
    Sop2 0x0f SOrB64 "s_or_b64";
    Sop2 0x11 SXorB64 "s_xor_b64";
    Sop2 0x13 SAndn2B64 "s_andn2_b64";
    Sop2 0x1c SLshlB32 "s_lshl_b32";
    Sop2 0x1d SLshlB64 "s_lshl_b64";
    Sop2 0x1e SLshrB32 "s_lshr_b32";
    Sop2 0x1f SLshrB64 "s_lshr_b64";
    Sop2 0x24 SMulI32 "s_mul_i32";
    Sop2 0x25 SBfeU32 "s_bfe_u32";
    Sop2 0x2c SMulHiU32 "s_mul_hi_u32";
    Sopk 0x00 SMovkI32 "s_movk_i32";
    Sopk 0x0e SAddkI32 "s_addk_i32";
    Sopk 0x0f SMulkI32 "s_mulk_i32";
    Sop1 0x00 SMovB32 "s_mov_b32";
    Sop1 0x01 SMovB64 "s_mov_b64";
    Sop1 0x04 SNotB32 "s_not_b32";
    Sop1 0x0d SBcnt1I32B64 "s_bcnt1_i32_b64";
    Sop1 0x10 SFf1I32B32 "s_ff1_i32_b32";
    Sop1 0x20 SAndSaveexecB64 "s_and_saveexec_b64";
    Sopc 0x04 SCmpLtI32 "s_cmp_lt_i32";
    Sopc 0x06 SCmpEqU32 "s_cmp_eq_u32";
    Sopc 0x07 SCmpLgU32 "s_cmp_lg_u32";
    Sopc 0x08 SCmpGtU32 "s_cmp_gt_u32";
    Sopc 0x09 SCmpGeU32 "s_cmp_ge_u32";
    Sopc 0x0a SCmpLtU32 "s_cmp_lt_u32";
    Sopc 0x0b SCmpLeU32 "s_cmp_le_u32";
    Sopp 0x00 SNop "s_nop";
    Sopp 0x01 SEndpgm "s_endpgm";
    Sopp 0x02 SBranch "s_branch";
    Sopp 0x04 SCbranchScc0 "s_cbranch_scc0";
    Sopp 0x05 SCbranchScc1 "s_cbranch_scc1";
    Sopp 0x06 SCbranchVccz "s_cbranch_vccz";
    Sopp 0x07 SCbranchVccnz "s_cbranch_vccnz";
    Sopp 0x08 SCbranchExecz "s_cbranch_execz";
    Sopp 0x09 SCbranchExecnz "s_cbranch_execnz";
    Sopp 0x0a SBarrier "s_barrier";
    Sopp 0x0c SWaitcnt "s_waitcnt";
    Sopp 0x0e SSleep "s_sleep";
    Sopp 0x0f SSetprio "s_setprio";
    Smem 0x00 SLoadDword "s_load_dword";
    Smem 0x01 SLoadDwordx2 "s_load_dwordx2";
    Smem 0x02 SLoadDwordx4 "s_load_dwordx4";
    Smem 0x03 SLoadDwordx8 "s_load_dwordx8";
    Smem 0x04 SLoadDwordx16 "s_load_dwordx16";
    Vop2 0x00 VCndmaskB32 "v_cndmask_b32";
    Vop2 0x01 VAddF32 "v_add_f32";
    Vop2 0x02 VSubF32 "v_sub_f32";
    Vop2 0x03 VSubrevF32 "v_subrev_f32";
    Vop2 0x05 VMulF32 "v_mul_f32";
    Vop2 0x08 VMulU32U24 "v_mul_u32_u24";
    Vop2 0x0a VMinF32 "v_min_f32";
    Vop2 0x0b VMaxF32 "v_max_f32";
    Vop2 0x0e VMinU32 "v_min_u32";
    Vop2 0x0f VMaxU32 "v_max_u32";
    Vop2 0x10 VLshrrevB32 "v_lshrrev_b32";
    Vop2 0x12 VLshlrevB32 "v_lshlrev_b32";
    Vop2 0x13 VAndB32 "v_and_b32";
    Vop2 0x14 VOrB32 "v_or_b32";
    Vop2 0x15 VXorB32 "v_xor_b32";
    Vop2 0x19 VAddCoU32 "v_add_co_u32";
    Vop2 0x1c VAddcCoU32 "v_addc_co_u32";
    Vop2 0x34 VAddU32 "v_add_u32";
    Vop2 0x35 VSubU32 "v_sub_u32";
    Vop2 0x36 VSubrevU32 "v_subrev_u32";
    Vop2 0x3b VFmacF32 "v_fmac_f32";
    Vop1 0x01 VMovB32 "v_mov_b32";
    Vop1 0x02 VReadfirstlaneB32 "v_readfirstlane_b32";
    Vop1 0x05 VCvtF32I32 "v_cvt_f32_i32";
    Vop1 0x06 VCvtF32U32 "v_cvt_f32_u32";
    Vop1 0x07 VCvtU32F32 "v_cvt_u32_f32";
    Vop1 0x20 VExpF32 "v_exp_f32";
    Vop1 0x21 VLogF32 "v_log_f32";
    Vop1 0x22 VRcpF32 "v_rcp_f32";
    Vop1 0x24 VRsqF32 "v_rsq_f32";
    Vop1 0x27 VSqrtF32 "v_sqrt_f32";
    Vopc 0x41 VCmpLtF32 "v_cmp_lt_f32";
    Vopc 0x44 VCmpGtF32 "v_cmp_gt_f32";
    Vopc 0xc9 VCmpLtU32 "v_cmp_lt_u32";
    Vopc 0xca VCmpEqU32 "v_cmp_eq_u32";
    Vopc 0xcb VCmpLeU32 "v_cmp_le_u32";
    Vopc 0xcc VCmpGtU32 "v_cmp_gt_u32";
    Vopc 0xcd VCmpNeU32 "v_cmp_ne_u32";
    Vopc 0xce VCmpGeU32 "v_cmp_ge_u32";
    Vopc 0xd9 VCmpxLtU32 "v_cmpx_lt_u32";
    Vopc 0xdc VCmpxGtU32 "v_cmpx_gt_u32";
    Vop3 0x1c3 VMadU32U24 "v_mad_u32_u24";
    Vop3 0x1c8 VBfeU32 "v_bfe_u32";
    Vop3 0x1cb VFmaF32 "v_fma_f32";
    Vop3 0x1d3 VMax3F32 "v_max3_f32";
    Vop3 0x1fd VLshlAddU32 "v_lshl_add_u32";
    Vop3 0x1fe VAddLshlU32 "v_add_lshl_u32";
    Vop3 0x1ff VAdd3U32 "v_add3_u32";
    Vop3 0x285 VMulLoU32 "v_mul_lo_u32";
    Vop3 0x286 VMulHiU32 "v_mul_hi_u32";
    Vop3 0x28f VLshlrevB64 "v_lshlrev_b64";
    Ds 0x00 DsAddU32 "ds_add_u32";
    Ds 0x0d DsWriteB32 "ds_write_b32";
    Ds 0x0e DsWrite2B32 "ds_write2_b32";
    Ds 0x36 DsReadB32 "ds_read_b32";
    Ds 0x37 DsRead2B32 "ds_read2_b32";
    Ds 0x4d DsWriteB64 "ds_write_b64";
    Ds 0x76 DsReadB64 "ds_read_b64";
    Ds 0xdf DsWriteB128 "ds_write_b128";
    Ds 0xff DsReadB128 "ds_read_b128";
    Global 0x12 GLoadUshort "global_load_ushort";
    Global 0x14 GLoadDword "global_load_dword";
    Global 0x15 GLoadDwordx2 "global_load_dwordx2";
    Global 0x17 GLoadDwordx4 "global_load_dwordx4";
    Global 0x1a GStoreShort "global_store_short";
    Global 0x1c GStoreDword "global_store_dword";
    Global 0x1d GStoreDwordx2 "global_store_dwordx2";
    Global 0x1f GStoreDwordx4 "global_store_dwordx4";
    Global 0x42 GAtomicAdd "global_atomic_add";
    Mubuf 0x28 BufferWbl2 "buffer_wbl2";
    Mubuf 0x29 BufferInv "buffer_inv";
}

/// One decoded instruction. Operand fields use the 9-bit source encoding of the ISA
/// (0..=255 scalar registers and constants, 256..=511 VGPRs) so one reader serves all.
#[derive(Debug, Clone, Copy)]
pub struct Inst {
    /// Byte offset from the start of the kernel code.
    pub offset: u32,
    /// Length in bytes (4, 8 or 12).
    pub len: u8,
    pub enc: Enc,
    /// VOP1/VOP2/VOPC ops carried in a VOP3 encoding keep their own enc here and set `vop3`.
    pub vop3: bool,
    pub op: Op,
    /// Destination: SGPR code, VGPR number (DS/GLOBAL/VALU use 256 + n), or unused.
    pub dst: u16,
    /// Scalar destination of VOP3b/VOPC-e64 (carry or compare mask), 106 = VCC.
    pub sdst: u16,
    pub src: [u16; 3],
    /// The literal constant following the instruction (operand code 255).
    pub literal: u32,
    /// SOPP/SOPK simm16, SMEM offset, DS offset (offset1<<8|offset0), GLOBAL offset.
    pub imm: i32,
    /// SMEM: offset is an SGPR (imm == register code) rather than an immediate.
    pub soffset_reg: bool,
    /// VOP3 input modifiers (bit i = source i) and output modifiers.
    pub neg: u8,
    pub abs: u8,
    pub clamp: bool,
    pub omod: u8,
    /// GLOBAL: glc / sc0 (an atomic returns the old value).
    pub glc: bool,
    /// Cache policy bits as printed: bit 0 sc0, bit 1 sc1, bit 2 nt (GLOBAL, MUBUF).
    pub cpol: u8,
}

/// A decode failure: the byte offset and the raw first dword.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub offset: u32,
    pub word: u32,
    pub what: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unsupported instruction at +0x{:x} (0x{:08x}): {}", self.offset, self.word, self.what)
    }
}

fn lookup(enc: Enc, code: u16) -> Option<Op> {
    OPS.iter().find(|(e, c, _, _)| *e == enc && *c == code).map(|(_, _, op, _)| *op)
}

/// The mnemonic of `op` as LLVM prints it (without the `_e32`/`_e64` suffix).
pub fn mnemonic(op: Op) -> &'static str {
    OPS.iter().find(|(_, _, o, _)| *o == op).map(|(_, _, _, t)| *t).unwrap_or("?")
}

/// Decodes one instruction at `offset` of `code` (little-endian dwords).
pub fn decode_one(code: &[u8], offset: usize) -> Result<Inst, DecodeError> {
    let word = |i: usize| -> Option<u32> {
        code.get(offset + 4 * i..offset + 4 * i + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let err = |w: u32, what: String| DecodeError { offset: offset as u32, word: w, what };
    let w0 = word(0).ok_or_else(|| err(0, "truncated code".into()))?;
    let mut inst = Inst {
        offset: offset as u32,
        len: 4,
        enc: Enc::Sopp,
        vop3: false,
        op: Op::SNop,
        dst: 0,
        sdst: 0,
        src: [0; 3],
        literal: 0,
        imm: 0,
        soffset_reg: false,
        neg: 0,
        abs: 0,
        clamp: false,
        omod: 0,
        glc: false,
        cpol: 0,
    };
    let find = |enc: Enc, code: u16, w: u32| -> Result<Op, DecodeError> {
        lookup(enc, code).ok_or_else(|| err(w, format!("{enc:?} opcode 0x{code:x} is not in the supported subset")))
    };
    // Two-dword formats read the second word here.
    let w1 = || word(1).ok_or_else(|| err(w0, "truncated 64-bit instruction".into()));
    if w0 >> 30 == 0b10 {
        // Scalar ALU family: SOP1/SOPC/SOPP/SOPK are carved out of the SOP2 space.
        if w0 >> 23 == 0b1_0111_1101 {
            inst.enc = Enc::Sop1;
            inst.op = find(Enc::Sop1, ((w0 >> 8) & 0xff) as u16, w0)?;
            inst.dst = ((w0 >> 16) & 0x7f) as u16;
            inst.src[0] = (w0 & 0xff) as u16;
        } else if w0 >> 23 == 0b1_0111_1110 {
            inst.enc = Enc::Sopc;
            inst.op = find(Enc::Sopc, ((w0 >> 16) & 0x7f) as u16, w0)?;
            inst.src[0] = (w0 & 0xff) as u16;
            inst.src[1] = ((w0 >> 8) & 0xff) as u16;
        } else if w0 >> 23 == 0b1_0111_1111 {
            inst.enc = Enc::Sopp;
            inst.op = find(Enc::Sopp, ((w0 >> 16) & 0x7f) as u16, w0)?;
            inst.imm = (w0 & 0xffff) as i16 as i32;
        } else if w0 >> 28 == 0b1011 {
            inst.enc = Enc::Sopk;
            inst.op = find(Enc::Sopk, ((w0 >> 23) & 0x1f) as u16, w0)?;
            inst.dst = ((w0 >> 16) & 0x7f) as u16;
            inst.imm = (w0 & 0xffff) as i16 as i32;
        } else {
            inst.enc = Enc::Sop2;
            inst.op = find(Enc::Sop2, ((w0 >> 23) & 0x7f) as u16, w0)?;
            inst.dst = ((w0 >> 16) & 0x7f) as u16;
            inst.src[0] = (w0 & 0xff) as u16;
            inst.src[1] = ((w0 >> 8) & 0xff) as u16;
        }
        if inst.src[..2].contains(&255) {
            inst.literal = word(1).ok_or_else(|| err(w0, "truncated literal".into()))?;
            inst.len = 8;
        }
        return Ok(inst);
    }
    if w0 >> 31 == 0 {
        // VOP2, VOP1, VOPC (32-bit VALU encodings).
        if w0 >> 25 == 0b011_1111 {
            inst.enc = Enc::Vop1;
            inst.op = find(Enc::Vop1, ((w0 >> 9) & 0xff) as u16, w0)?;
            inst.dst = 256 + ((w0 >> 17) & 0xff) as u16;
            if inst.op == Op::VReadfirstlaneB32 {
                inst.dst = ((w0 >> 17) & 0xff) as u16;
            }
            inst.src[0] = (w0 & 0x1ff) as u16;
        } else if w0 >> 25 == 0b011_1110 {
            inst.enc = Enc::Vopc;
            inst.op = find(Enc::Vopc, ((w0 >> 17) & 0xff) as u16, w0)?;
            inst.sdst = 106;
            inst.src[0] = (w0 & 0x1ff) as u16;
            inst.src[1] = 256 + ((w0 >> 9) & 0xff) as u16;
        } else {
            inst.enc = Enc::Vop2;
            inst.op = find(Enc::Vop2, ((w0 >> 25) & 0x3f) as u16, w0)?;
            inst.dst = 256 + ((w0 >> 17) & 0xff) as u16;
            inst.src[0] = (w0 & 0x1ff) as u16;
            inst.src[1] = 256 + ((w0 >> 9) & 0xff) as u16;
            // Implicit operands: carry-in / select mask is VCC, fmac accumulates into dst.
            inst.sdst = 106;
            inst.src[2] = match inst.op {
                Op::VAddcCoU32 | Op::VCndmaskB32 => 106,
                Op::VFmacF32 => inst.dst,
                _ => 0,
            };
        }
        if inst.src[0] == 0xfa || inst.src[0] == 0xf9 {
            return Err(err(w0, "DPP/SDWA operand forms are not in the supported subset".into()));
        }
        if inst.src[0] == 255 {
            inst.literal = word(1).ok_or_else(|| err(w0, "truncated literal".into()))?;
            inst.len = 8;
        }
        return Ok(inst);
    }
    match w0 >> 26 {
        0b110000 => {
            let w1 = w1()?;
            inst.enc = Enc::Smem;
            inst.len = 8;
            inst.op = find(Enc::Smem, ((w0 >> 18) & 0xff) as u16, w0)?;
            inst.dst = ((w0 >> 6) & 0x7f) as u16;
            inst.src[0] = ((w0 & 0x3f) << 1) as u16;
            if w0 & (1 << 14) != 0 {
                return Err(err(w0, "SMEM with SOE (offset register plus immediate) is not supported".into()));
            }
            if w0 & (1 << 17) != 0 {
                // 21-bit signed byte offset.
                inst.imm = ((w1 & 0x1f_ffff) << 11) as i32 >> 11;
            } else {
                inst.soffset_reg = true;
                inst.imm = (w1 & 0x7f) as i32;
            }
            inst.glc = w0 & (1 << 16) != 0;
        }
        0b110100 => {
            let w1 = w1()?;
            inst.len = 8;
            if w0 >> 23 == 0b1_1010_0111 {
                return Err(err(w0, format!("VOP3P opcode 0x{:x} is not in the supported subset", (w0 >> 16) & 0x7f)));
            }
            let code = ((w0 >> 16) & 0x3ff) as u16;
            inst.vop3 = true;
            let (enc, op) = if code < 0x100 {
                (Enc::Vopc, find(Enc::Vopc, code, w0)?)
            } else if code < 0x140 {
                (Enc::Vop2, find(Enc::Vop2, code - 0x100, w0)?)
            } else if code < 0x1c0 {
                (Enc::Vop1, find(Enc::Vop1, code - 0x140, w0)?)
            } else {
                (Enc::Vop3, find(Enc::Vop3, code, w0)?)
            };
            inst.enc = enc;
            inst.op = op;
            inst.src = [(w1 & 0x1ff) as u16, ((w1 >> 9) & 0x1ff) as u16, ((w1 >> 18) & 0x1ff) as u16];
            inst.neg = ((w1 >> 29) & 7) as u8;
            inst.omod = ((w1 >> 27) & 3) as u8;
            inst.clamp = w0 & (1 << 15) != 0;
            let vdst = (w0 & 0xff) as u16;
            match op {
                Op::VAddCoU32 | Op::VAddcCoU32 => {
                    inst.dst = 256 + vdst;
                    inst.sdst = ((w0 >> 8) & 0x7f) as u16;
                }
                _ if enc == Enc::Vopc => inst.sdst = vdst,
                Op::VReadfirstlaneB32 => inst.dst = vdst,
                _ => {
                    inst.dst = 256 + vdst;
                    inst.abs = ((w0 >> 8) & 7) as u8;
                    if (w0 >> 11) & 0xf != 0 {
                        return Err(err(w0, "VOP3 op_sel is not supported".into()));
                    }
                }
            }
            if op == Op::VFmacF32 {
                inst.src[2] = inst.dst;
            }
            if inst.src.contains(&255) {
                return Err(err(w0, "a literal in VOP3 does not exist on GFX9".into()));
            }
        }
        0b110110 => {
            let w1 = w1()?;
            inst.enc = Enc::Ds;
            inst.len = 8;
            inst.op = find(Enc::Ds, ((w0 >> 17) & 0xff) as u16, w0)?;
            if w0 & (1 << 16) != 0 || w0 & (1 << 25) != 0 {
                return Err(err(w0, "DS with GDS or AGPR data is not supported".into()));
            }
            inst.imm = (w0 & 0xffff) as i32;
            inst.src = [256 + (w1 & 0xff) as u16, 256 + ((w1 >> 8) & 0xff) as u16, 256 + ((w1 >> 16) & 0xff) as u16];
            inst.dst = 256 + ((w1 >> 24) & 0xff) as u16;
        }
        0b110111 => {
            let w1 = w1()?;
            inst.enc = Enc::Global;
            inst.len = 8;
            if (w0 >> 14) & 3 != 2 {
                return Err(err(w0, "FLAT/SCRATCH segments are not supported (only GLOBAL)".into()));
            }
            if w0 & (1 << 13) != 0 || w1 & (1 << 23) != 0 {
                return Err(err(w0, "GLOBAL with LDS or AGPR data is not supported".into()));
            }
            inst.op = find(Enc::Global, ((w0 >> 18) & 0x7f) as u16, w0)?;
            inst.imm = ((w0 & 0x1fff) << 19) as i32 >> 19;
            inst.glc = w0 & (1 << 16) != 0;
            inst.cpol = (inst.glc as u8) | (((w0 >> 25) & 1) as u8) << 1 | (((w0 >> 17) & 1) as u8) << 2;
            // src0 = address VGPR, src1 = data VGPR, src2 = SADDR (0x7f = off).
            inst.src = [256 + (w1 & 0xff) as u16, 256 + ((w1 >> 8) & 0xff) as u16, ((w1 >> 16) & 0x7f) as u16];
            inst.dst = 256 + ((w1 >> 24) & 0xff) as u16;
        }
        0b111000 => {
            w1()?;
            inst.enc = Enc::Mubuf;
            inst.len = 8;
            inst.op = find(Enc::Mubuf, ((w0 >> 18) & 0x7f) as u16, w0)?;
            inst.cpol = (((w0 >> 14) & 1) as u8) | (((w0 >> 15) & 1) as u8) << 1 | (((w0 >> 17) & 1) as u8) << 2;
        }
        _ => return Err(err(w0, format!("encoding 0b{:06b} is not in the supported subset", w0 >> 26))),
    }
    Ok(inst)
}

/// Decodes a whole kernel body (stops after the last byte; `s_endpgm` padding is decoded too).
pub fn decode_all(code: &[u8]) -> Result<Vec<Inst>, DecodeError> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + 4 <= code.len() {
        let inst = decode_one(code, off)?;
        off += inst.len as usize;
        out.push(inst);
    }
    Ok(out)
}

/// LLVM-style mnemonic, with `_e32`/`_e64` where llvm-objdump prints one.
pub fn full_mnemonic(inst: &Inst) -> String {
    let base = mnemonic(inst.op);
    match inst.enc {
        Enc::Vop1 | Enc::Vop2 | Enc::Vopc if inst.op != Op::VReadfirstlaneB32 => {
            format!("{base}{}", if inst.vop3 { "_e64" } else { "_e32" })
        }
        _ => base.to_string(),
    }
}

/// A scalar-side operand (9-bit source code below 256, or a 7-bit SGPR field) as LLVM prints it.
fn scalar_operand(code: u16, literal: u32) -> String {
    match code {
        0..=101 => format!("s{code}"),
        102 => "flat_scratch_lo".into(),
        103 => "flat_scratch_hi".into(),
        106 => "vcc_lo".into(),
        107 => "vcc_hi".into(),
        124 => "m0".into(),
        126 => "exec_lo".into(),
        127 => "exec_hi".into(),
        128..=192 => format!("{}", code - 128),
        193..=208 => format!("-{}", code - 192),
        240 => "0.5".into(),
        241 => "-0.5".into(),
        242 => "1.0".into(),
        243 => "-1.0".into(),
        244 => "2.0".into(),
        245 => "-2.0".into(),
        246 => "4.0".into(),
        247 => "-4.0".into(),
        248 => "0.15915494".into(),
        251 => "vccz".into(),
        252 => "execz".into(),
        253 => "scc".into(),
        255 => format!("0x{literal:x}"),
        256..=511 => format!("v{}", code - 256),
        _ => format!("?{code}"),
    }
}

/// A register range of `n` registers starting at operand `code` (`s[a:b]`, `v[a:b]`, `vcc`, `exec`).
fn range(code: u16, n: u16, literal: u32) -> String {
    match (code, n) {
        (_, 1) => scalar_operand(code, literal),
        (106, 2) => "vcc".into(),
        (126, 2) => "exec".into(),
        (0..=101, _) => format!("s[{}:{}]", code, code + n - 1),
        (256..=511, _) => format!("v[{}:{}]", code - 256, code - 256 + n - 1),
        _ => scalar_operand(code, literal),
    }
}

/// The instruction in LLVM's assembly syntax, as `llvm-objdump-19 -d --mcpu=gfx942` prints it
/// (for the supported subset): used to check the decoder operand by operand.
pub fn disassemble(inst: &Inst) -> String {
    use Op::*;
    let mn = full_mnemonic(inst);
    let lit = inst.literal;
    let op = |i: usize| scalar_operand(inst.src[i], lit);
    let wide_s = matches!(
        inst.op,
        SMovB64 | SAndB64 | SOrB64 | SXorB64 | SAndn2B64 | SCselectB64 | SAndSaveexecB64 | SLshlB64 | SLshrB64
    );
    let operands: Vec<String> = match inst.enc {
        Enc::Sop2 => {
            let w = if wide_s { 2 } else { 1 };
            let w1 = if matches!(inst.op, SLshlB64 | SLshrB64) { 1 } else { w };
            vec![range(inst.dst, w, lit), range(inst.src[0], w, lit), range(inst.src[1], w1, lit)]
        }
        Enc::Sop1 => {
            let (wd, ws) = match inst.op {
                SBcnt1I32B64 => (1, 2),
                _ if wide_s => (2, 2),
                _ => (1, 1),
            };
            vec![range(inst.dst, wd, lit), range(inst.src[0], ws, lit)]
        }
        Enc::Sopc => vec![op(0), op(1)],
        Enc::Sopk => vec![range(inst.dst, 1, lit), format!("0x{:x}", inst.imm as u16)],
        Enc::Sopp => match inst.op {
            SEndpgm | SBarrier => vec![],
            SWaitcnt => {
                let imm = inst.imm as u32 & 0xffff;
                let (vm, exp, lgkm) = ((imm & 0xf) | ((imm >> 14) & 3) << 4, (imm >> 4) & 7, (imm >> 8) & 0xf);
                let mut parts = Vec::new();
                if vm != 63 {
                    parts.push(format!("vmcnt({vm})"));
                }
                if exp != 7 {
                    parts.push(format!("expcnt({exp})"));
                }
                if lgkm != 15 {
                    parts.push(format!("lgkmcnt({lgkm})"));
                }
                vec![parts.join(" ")]
            }
            _ => vec![format!("{}", inst.imm as u16)],
        },
        Enc::Smem => {
            let n = match inst.op {
                SLoadDword => 1,
                SLoadDwordx2 => 2,
                SLoadDwordx4 => 4,
                SLoadDwordx8 => 8,
                _ => 16,
            };
            let off = if inst.soffset_reg { format!("s{}", inst.imm) } else { format!("0x{:x}", inst.imm) };
            vec![range(inst.dst, n, lit), range(inst.src[0], 2, lit), off]
        }
        Enc::Vop1 | Enc::Vop2 | Enc::Vopc | Enc::Vop3 | Enc::Vop3p => {
            let f = |i: usize| {
                let mut t = op(i);
                if inst.abs >> i & 1 != 0 {
                    t = format!("|{t}|");
                }
                if inst.neg >> i & 1 != 0 {
                    t = format!("-{t}");
                }
                t
            };
            let vd = range(inst.dst, if inst.op == VLshlrevB64 { 2 } else { 1 }, lit);
            match inst.op {
                VReadfirstlaneB32 => vec![range(inst.dst, 1, lit), f(0)],
                _ if inst.enc == Enc::Vopc => vec![range(inst.sdst, 2, lit), f(0), f(1)],
                VAddCoU32 => vec![vd, range(inst.sdst, 2, lit), f(0), f(1)],
                VAddcCoU32 => vec![vd, range(inst.sdst, 2, lit), f(0), f(1), range(inst.src[2], 2, lit)],
                VCndmaskB32 => vec![vd, f(0), f(1), range(inst.src[2], 2, lit)],
                VLshlrevB64 => vec![vd, f(0), range(inst.src[1], 2, lit)],
                VMovB32 | VCvtF32I32 | VCvtF32U32 | VCvtU32F32 | VExpF32 | VLogF32 | VRcpF32 | VRsqF32 | VSqrtF32 => {
                    vec![vd, f(0)]
                }
                VFmaF32 | VMadU32U24 | VBfeU32 | VMax3F32 | VLshlAddU32 | VAddLshlU32 | VAdd3U32 => {
                    vec![vd, f(0), f(1), f(2)]
                }
                _ => vec![vd, f(0), f(1)],
            }
        }
        Enc::Ds => {
            let (a, d0, d1, dst) = (inst.src[0], inst.src[1], inst.src[2], inst.dst);
            let mut v = match inst.op {
                DsWriteB32 | DsAddU32 => vec![range(a, 1, lit), range(d0, 1, lit)],
                DsWriteB64 => vec![range(a, 1, lit), range(d0, 2, lit)],
                DsWriteB128 => vec![range(a, 1, lit), range(d0, 4, lit)],
                DsWrite2B32 => vec![range(a, 1, lit), range(d0, 1, lit), range(d1, 1, lit)],
                DsReadB32 => vec![range(dst, 1, lit), range(a, 1, lit)],
                DsReadB64 | DsRead2B32 => vec![range(dst, 2, lit), range(a, 1, lit)],
                _ => vec![range(dst, 4, lit), range(a, 1, lit)],
            };
            let last = v.pop().unwrap_or_default();
            let suffix = match inst.op {
                DsWrite2B32 | DsRead2B32 => format!(" offset0:{} offset1:{}", inst.imm & 0xff, inst.imm >> 8),
                _ if inst.imm != 0 => format!(" offset:{}", inst.imm),
                _ => String::new(),
            };
            v.push(format!("{last}{suffix}"));
            v
        }
        Enc::Global => {
            let n = match inst.op {
                GLoadDwordx2 | GStoreDwordx2 => 2,
                GLoadDwordx4 | GStoreDwordx4 => 4,
                _ => 1,
            };
            let saddr = inst.src[2];
            let addr = range(inst.src[0], if saddr == 0x7f { 2 } else { 1 }, lit);
            let base = if saddr == 0x7f { "off".to_string() } else { range(saddr, 2, lit) };
            let mut v = match inst.op {
                GStoreShort | GStoreDword | GStoreDwordx2 | GStoreDwordx4 => {
                    vec![addr, range(inst.src[1], n, lit), base]
                }
                GAtomicAdd if inst.glc => vec![range(inst.dst, 1, lit), addr, range(inst.src[1], 1, lit), base],
                GAtomicAdd => vec![addr, range(inst.src[1], 1, lit), base],
                _ => vec![range(inst.dst, n, lit), addr, base],
            };
            let mut last = v.pop().unwrap_or_default();
            if inst.imm != 0 {
                last = format!("{last} offset:{}", inst.imm);
            }
            for (bit, name) in [(0, "sc0"), (1, "sc1"), (2, "nt")] {
                if inst.cpol >> bit & 1 != 0 {
                    last = format!("{last} {name}");
                }
            }
            v.push(last);
            v
        }
        Enc::Mubuf => {
            let names: Vec<&str> = [(0, "sc0"), (1, "sc1"), (2, "nt")]
                .iter()
                .filter(|(b, _)| inst.cpol >> b & 1 != 0)
                .map(|(_, n)| *n)
                .collect();
            if names.is_empty() {
                vec![]
            } else {
                vec![names.join(" ")]
            }
        }
    };
    if operands.is_empty() {
        mn
    } else {
        format!("{mn} {}", operands.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(bytes: &[u8]) -> Inst {
        decode_one(bytes, 0).unwrap()
    }

    // Encodings copied from `llvm-mc-19 -mcpu=gfx942 -show-encoding`.
    #[test]
    fn decodes_known_encodings() {
        let i = d(&[0x01, 0x02, 0x00, 0x80]);
        assert_eq!((i.op, i.dst, i.src[0], i.src[1]), (Op::SAddU32, 0, 1, 2));
        let i = d(&[0x01, 0x00, 0x0a, 0xc0, 0x10, 0x00, 0x00, 0x00]);
        assert_eq!((i.op, i.dst, i.src[0], i.imm), (Op::SLoadDwordx4, 0, 2, 16));
        let i = d(&[0x00, 0x00, 0xcb, 0xd1, 0x01, 0x05, 0x0e, 0x04]);
        assert_eq!((i.op, i.dst, i.src), (Op::VFmaF32, 256, [257, 258, 259]));
        let i = d(&[0xf0, 0x9f, 0x70, 0xdc, 0x01, 0x00, 0x02, 0x00]);
        assert_eq!((i.op, i.imm, i.src[0], i.src[1], i.src[2]), (Op::GStoreDword, -16, 257, 256, 2));
        let i = d(&[0x01, 0x02, 0x1c, 0xd8, 0x00, 0x01, 0x02, 0x00]);
        assert_eq!((i.op, i.imm, i.src), (Op::DsWrite2B32, 0x201, [256, 257, 258]));
        let i = d(&[0x00, 0x00, 0xcc, 0xd0, 0x01, 0x05, 0x02, 0x00]);
        assert_eq!((i.op, i.sdst, i.vop3), (Op::VCmpGtU32, 0, true));
        let i = d(&[0xff, 0x00, 0x80, 0xbe, 0x78, 0x56, 0x34, 0x12]);
        assert_eq!((i.op, i.literal, i.len), (Op::SMovB32, 0x1234_5678, 8));
        let i = d(&[0x00, 0x02, 0x01, 0xd1, 0x01, 0x05, 0x02, 0x20]);
        assert_eq!((i.op, i.neg, i.abs), (Op::VAddF32, 1, 2));
    }

    #[test]
    fn unsupported_is_named_with_offset() {
        // v_mov_b32_dpp
        let e = decode_one(&[0, 0, 0, 0, 0xfa, 0x02, 0x00, 0x7e, 0x01, 0x11, 0x01, 0xff], 4).unwrap_err();
        assert_eq!(e.offset, 4);
        assert!(e.to_string().contains("DPP"));
        // s_getpc_b64 is not in the subset.
        let e = decode_one(&[0x00, 0x1c, 0x80, 0xbe], 0).unwrap_err();
        assert!(e.to_string().contains("Sop1 opcode 0x1c"), "{e}");
    }
}
