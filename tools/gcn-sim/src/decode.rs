//! Decoder for gfx942 (GFX9 / CDNA3) machine code.
//!
//! Encodings follow the "AMD Instinct MI300 ISA" reference (GFX9 layouts). The opcode numbers in
//! [`OPS`] were read back from `llvm-mc-19 -mcpu=gfx942 -show-encoding`, and the decoder is
//! checked against `llvm-objdump-19` (same boundaries, mnemonic and operands) on every embedded
//! kernel, the hazard fixtures and the clang-compiled cross-check suite
//! (`tests/decode_vs_objdump.rs`, `tests/cross.rs`). Anything outside the table decodes to an
//! error that names the encoding, the opcode and the byte offset: the simulator never guesses.
//!
//! Each operation carries a signature ([`Sig`]): the type of its destination and sources, which
//! fixes the registers it reads and writes (for the hazard checks), how inline constants and
//! source modifiers apply, and how it is printed.

use std::fmt;
use std::sync::OnceLock;

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
    ($($enc:ident $code:literal $name:ident $text:literal $sig:literal;)*) => {
        /// Every supported operation.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Op { $($name,)* }
        /// (encoding, opcode, op, mnemonic, signature) of every supported instruction. VOP1 / VOP2
        /// / VOPC ops also decode from VOP3 (opcode + 0x140 / + 0x100 / + 0), and from DPP and
        /// SDWA. Signatures: `DST = SRC0 SRC1 SRC2 | FLAGS` (see [`Ty`] and [`flag`]); memory
        /// ops list `Rn` (dwords returned), `A` (address), `Dn` / `En` (data dwords), `ATOMIC`.
        pub const OPS: &[(Enc, u16, Op, &str, &str)] = &[$((Enc::$enc, $code, Op::$name, $text, $sig),)*];
    };
}

ops! {
    Sop2 0x00 SAddU32 "s_add_u32" "S = S S | SCC";
    Sop2 0x01 SSubU32 "s_sub_u32" "S = S S | SCC";
    Sop2 0x02 SAddI32 "s_add_i32" "S = S S | SCC";
    Sop2 0x03 SSubI32 "s_sub_i32" "S = S S | SCC";
    Sop2 0x04 SAddcU32 "s_addc_u32" "S = S S | SCC";
    Sop2 0x05 SSubbU32 "s_subb_u32" "S = S S | SCC";
    Sop2 0x06 SMinI32 "s_min_i32" "S = S S | SCC";
    Sop2 0x07 SMinU32 "s_min_u32" "S = S S | SCC";
    Sop2 0x08 SMaxI32 "s_max_i32" "S = S S | SCC";
    Sop2 0x09 SMaxU32 "s_max_u32" "S = S S | SCC";
    Sop2 0x0a SCselectB32 "s_cselect_b32" "S = S S";
    Sop2 0x0c SAndB32 "s_and_b32" "S = S S | SCC";
    Sop2 0x0e SOrB32 "s_or_b32" "S = S S | SCC";
    Sop2 0x10 SXorB32 "s_xor_b32" "S = S S | SCC";
    Sop2 0x12 SAndn2B32 "s_andn2_b32" "S = S S | SCC";
    Sop2 0x14 SOrn2B32 "s_orn2_b32" "S = S S | SCC";
    Sop2 0x16 SNandB32 "s_nand_b32" "S = S S | SCC";
    Sop2 0x18 SNorB32 "s_nor_b32" "S = S S | SCC";
    Sop2 0x1a SXnorB32 "s_xnor_b32" "S = S S | SCC";
    Sop2 0x1c SLshlB32 "s_lshl_b32" "S = S S | SCC";
    Sop2 0x1e SLshrB32 "s_lshr_b32" "S = S S | SCC";
    Sop2 0x20 SAshrI32 "s_ashr_i32" "S = S S | SCC";
    Sop2 0x22 SBfmB32 "s_bfm_b32" "S = S S";
    Sop2 0x24 SMulI32 "s_mul_i32" "S = S S";
    Sop2 0x25 SBfeU32 "s_bfe_u32" "S = S S | SCC";
    Sop2 0x26 SBfeI32 "s_bfe_i32" "S = S S | SCC";
    Sop2 0x2a SAbsdiffI32 "s_absdiff_i32" "S = S S | SCC";
    Sop2 0x2c SMulHiU32 "s_mul_hi_u32" "S = S S";
    Sop2 0x2d SMulHiI32 "s_mul_hi_i32" "S = S S";
    Sop2 0x2e SLshl1AddU32 "s_lshl1_add_u32" "S = S S | SCC";
    Sop2 0x2f SLshl2AddU32 "s_lshl2_add_u32" "S = S S | SCC";
    Sop2 0x30 SLshl3AddU32 "s_lshl3_add_u32" "S = S S | SCC";
    Sop2 0x31 SLshl4AddU32 "s_lshl4_add_u32" "S = S S | SCC";
    Sop2 0x32 SPackLlB32B16 "s_pack_ll_b32_b16" "S = S S";
    Sop2 0x33 SPackLhB32B16 "s_pack_lh_b32_b16" "S = S S";
    Sop2 0x34 SPackHhB32B16 "s_pack_hh_b32_b16" "S = S S";
    Sop2 0x0b SCselectB64 "s_cselect_b64" "S2 = S2 S2";
    Sop2 0x0d SAndB64 "s_and_b64" "S2 = S2 S2 | SCC";
    Sop2 0x0f SOrB64 "s_or_b64" "S2 = S2 S2 | SCC";
    Sop2 0x11 SXorB64 "s_xor_b64" "S2 = S2 S2 | SCC";
    Sop2 0x13 SAndn2B64 "s_andn2_b64" "S2 = S2 S2 | SCC";
    Sop2 0x15 SOrn2B64 "s_orn2_b64" "S2 = S2 S2 | SCC";
    Sop2 0x17 SNandB64 "s_nand_b64" "S2 = S2 S2 | SCC";
    Sop2 0x19 SNorB64 "s_nor_b64" "S2 = S2 S2 | SCC";
    Sop2 0x1b SXnorB64 "s_xnor_b64" "S2 = S2 S2 | SCC";
    Sop2 0x1d SLshlB64 "s_lshl_b64" "S2 = S2 S | SCC";
    Sop2 0x1f SLshrB64 "s_lshr_b64" "S2 = S2 S | SCC";
    Sop2 0x21 SAshrI64 "s_ashr_i64" "S2 = S2 S | SCC";
    Sop2 0x27 SBfeU64 "s_bfe_u64" "S2 = S2 S | SCC";
    Sop2 0x28 SBfeI64 "s_bfe_i64" "S2 = S2 S | SCC";
    Sop2 0x23 SBfmB64 "s_bfm_b64" "S2 = S S";
    Sopk 0x00 SMovkI32 "s_movk_i32" "S = K";
    Sopk 0x01 SCmovkI32 "s_cmovk_i32" "S = K";
    Sopk 0x02 SCmpkEqI32 "s_cmpk_eq_i32" "N = S K | SCC";
    Sopk 0x03 SCmpkLgI32 "s_cmpk_lg_i32" "N = S K | SCC";
    Sopk 0x04 SCmpkGtI32 "s_cmpk_gt_i32" "N = S K | SCC";
    Sopk 0x05 SCmpkGeI32 "s_cmpk_ge_i32" "N = S K | SCC";
    Sopk 0x06 SCmpkLtI32 "s_cmpk_lt_i32" "N = S K | SCC";
    Sopk 0x07 SCmpkLeI32 "s_cmpk_le_i32" "N = S K | SCC";
    Sopk 0x08 SCmpkEqU32 "s_cmpk_eq_u32" "N = S K | SCC";
    Sopk 0x09 SCmpkLgU32 "s_cmpk_lg_u32" "N = S K | SCC";
    Sopk 0x0a SCmpkGtU32 "s_cmpk_gt_u32" "N = S K | SCC";
    Sopk 0x0b SCmpkGeU32 "s_cmpk_ge_u32" "N = S K | SCC";
    Sopk 0x0c SCmpkLtU32 "s_cmpk_lt_u32" "N = S K | SCC";
    Sopk 0x0d SCmpkLeU32 "s_cmpk_le_u32" "N = S K | SCC";
    Sopk 0x0e SAddkI32 "s_addk_i32" "S = S K | SCC";
    Sopk 0x0f SMulkI32 "s_mulk_i32" "S = S K";
    Sopk 0x11 SGetregB32 "s_getreg_b32" "S = K";
    Sopk 0x12 SSetregB32 "s_setreg_b32" "N = S K";
    Sopk 0x14 SSetregImm32B32 "s_setreg_imm32_b32" "N = K";
    Sop1 0x00 SMovB32 "s_mov_b32" "S = S";
    Sop1 0x02 SCmovB32 "s_cmov_b32" "S = S";
    Sop1 0x04 SNotB32 "s_not_b32" "S = S | SCC";
    Sop1 0x08 SBrevB32 "s_brev_b32" "S = S";
    Sop1 0x0a SBcnt0I32B32 "s_bcnt0_i32_b32" "S = S | SCC";
    Sop1 0x0c SBcnt1I32B32 "s_bcnt1_i32_b32" "S = S | SCC";
    Sop1 0x0e SFf0I32B32 "s_ff0_i32_b32" "S = S";
    Sop1 0x10 SFf1I32B32 "s_ff1_i32_b32" "S = S";
    Sop1 0x12 SFlbitI32B32 "s_flbit_i32_b32" "S = S";
    Sop1 0x14 SFlbitI32 "s_flbit_i32" "S = S";
    Sop1 0x16 SSextI32I8 "s_sext_i32_i8" "S = S";
    Sop1 0x17 SSextI32I16 "s_sext_i32_i16" "S = S";
    Sop1 0x18 SBitset0B32 "s_bitset0_b32" "S = S";
    Sop1 0x1a SBitset1B32 "s_bitset1_b32" "S = S";
    Sop1 0x30 SAbsI32 "s_abs_i32" "S = S | SCC";
    Sop1 0x01 SMovB64 "s_mov_b64" "S2 = S2";
    Sop1 0x03 SCmovB64 "s_cmov_b64" "S2 = S2";
    Sop1 0x05 SNotB64 "s_not_b64" "S2 = S2 | SCC";
    Sop1 0x09 SBrevB64 "s_brev_b64" "S2 = S2";
    Sop1 0x0b SBcnt0I32B64 "s_bcnt0_i32_b64" "S = S2 | SCC";
    Sop1 0x0d SBcnt1I32B64 "s_bcnt1_i32_b64" "S = S2 | SCC";
    Sop1 0x0f SFf0I32B64 "s_ff0_i32_b64" "S = S2";
    Sop1 0x11 SFf1I32B64 "s_ff1_i32_b64" "S = S2";
    Sop1 0x13 SFlbitI32B64 "s_flbit_i32_b64" "S = S2";
    Sop1 0x15 SFlbitI32I64 "s_flbit_i32_i64" "S = S2";
    Sop1 0x20 SAndSaveexecB64 "s_and_saveexec_b64" "S2 = S2 | SCC EXEC";
    Sop1 0x21 SOrSaveexecB64 "s_or_saveexec_b64" "S2 = S2 | SCC EXEC";
    Sop1 0x22 SXorSaveexecB64 "s_xor_saveexec_b64" "S2 = S2 | SCC EXEC";
    Sop1 0x23 SAndn2SaveexecB64 "s_andn2_saveexec_b64" "S2 = S2 | SCC EXEC";
    Sop1 0x24 SOrn2SaveexecB64 "s_orn2_saveexec_b64" "S2 = S2 | SCC EXEC";
    Sop1 0x25 SNandSaveexecB64 "s_nand_saveexec_b64" "S2 = S2 | SCC EXEC";
    Sop1 0x26 SNorSaveexecB64 "s_nor_saveexec_b64" "S2 = S2 | SCC EXEC";
    Sop1 0x27 SXnorSaveexecB64 "s_xnor_saveexec_b64" "S2 = S2 | SCC EXEC";
    Sop1 0x33 SAndn1SaveexecB64 "s_andn1_saveexec_b64" "S2 = S2 | SCC EXEC";
    Sop1 0x34 SOrn1SaveexecB64 "s_orn1_saveexec_b64" "S2 = S2 | SCC EXEC";
    Sop1 0x35 SAndn1WrexecB64 "s_andn1_wrexec_b64" "S2 = S2 | SCC EXEC";
    Sop1 0x36 SAndn2WrexecB64 "s_andn2_wrexec_b64" "S2 = S2 | SCC EXEC";
    Sopc 0x00 SCmpEqI32 "s_cmp_eq_i32" "N = S S | SCC";
    Sopc 0x01 SCmpLgI32 "s_cmp_lg_i32" "N = S S | SCC";
    Sopc 0x02 SCmpGtI32 "s_cmp_gt_i32" "N = S S | SCC";
    Sopc 0x03 SCmpGeI32 "s_cmp_ge_i32" "N = S S | SCC";
    Sopc 0x04 SCmpLtI32 "s_cmp_lt_i32" "N = S S | SCC";
    Sopc 0x05 SCmpLeI32 "s_cmp_le_i32" "N = S S | SCC";
    Sopc 0x06 SCmpEqU32 "s_cmp_eq_u32" "N = S S | SCC";
    Sopc 0x07 SCmpLgU32 "s_cmp_lg_u32" "N = S S | SCC";
    Sopc 0x08 SCmpGtU32 "s_cmp_gt_u32" "N = S S | SCC";
    Sopc 0x09 SCmpGeU32 "s_cmp_ge_u32" "N = S S | SCC";
    Sopc 0x0a SCmpLtU32 "s_cmp_lt_u32" "N = S S | SCC";
    Sopc 0x0b SCmpLeU32 "s_cmp_le_u32" "N = S S | SCC";
    Sopc 0x0c SBitcmp0B32 "s_bitcmp0_b32" "N = S S | SCC";
    Sopc 0x0d SBitcmp1B32 "s_bitcmp1_b32" "N = S S | SCC";
    Sopc 0x0e SBitcmp0B64 "s_bitcmp0_b64" "N = S2 S | SCC";
    Sopc 0x0f SBitcmp1B64 "s_bitcmp1_b64" "N = S2 S | SCC";
    Sopc 0x12 SCmpEqU64 "s_cmp_eq_u64" "N = S2 S2 | SCC";
    Sopc 0x13 SCmpLgU64 "s_cmp_lg_u64" "N = S2 S2 | SCC";
    Sopp 0x00 SNop "s_nop" "N = K";
    Sopp 0x01 SEndpgm "s_endpgm" "N = K";
    Sopp 0x02 SBranch "s_branch" "N = K";
    Sopp 0x04 SCbranchScc0 "s_cbranch_scc0" "N = K";
    Sopp 0x05 SCbranchScc1 "s_cbranch_scc1" "N = K";
    Sopp 0x06 SCbranchVccz "s_cbranch_vccz" "N = K";
    Sopp 0x07 SCbranchVccnz "s_cbranch_vccnz" "N = K";
    Sopp 0x08 SCbranchExecz "s_cbranch_execz" "N = K";
    Sopp 0x09 SCbranchExecnz "s_cbranch_execnz" "N = K";
    Sopp 0x0a SBarrier "s_barrier" "N = K";
    Sopp 0x0c SWaitcnt "s_waitcnt" "N = K";
    Sopp 0x0e SSleep "s_sleep" "N = K";
    Sopp 0x0f SSetprio "s_setprio" "N = K";
    Smem 0x00 SLoadDword "s_load_dword" "S = S2";
    Smem 0x01 SLoadDwordx2 "s_load_dwordx2" "S2 = S2";
    Smem 0x02 SLoadDwordx4 "s_load_dwordx4" "S4 = S2";
    Smem 0x03 SLoadDwordx8 "s_load_dwordx8" "S8 = S2";
    Smem 0x04 SLoadDwordx16 "s_load_dwordx16" "S16 = S2";
    Vop2 0x00 VCndmaskB32 "v_cndmask_b32" "I32 = F32 F32 M | CI";
    Vop2 0x01 VAddF32 "v_add_f32" "F32 = F32 F32";
    Vop2 0x02 VSubF32 "v_sub_f32" "F32 = F32 F32";
    Vop2 0x03 VSubrevF32 "v_subrev_f32" "F32 = F32 F32";
    Vop3 0x2a1 VMulLegacyF32 "v_mul_legacy_f32" "F32 = F32 F32";
    Vop2 0x05 VMulF32 "v_mul_f32" "F32 = F32 F32";
    Vop2 0x06 VMulI32I24 "v_mul_i32_i24" "I32 = I32 I32";
    Vop2 0x07 VMulHiI32I24 "v_mul_hi_i32_i24" "I32 = I32 I32";
    Vop2 0x08 VMulU32U24 "v_mul_u32_u24" "I32 = I32 I32";
    Vop2 0x09 VMulHiU32U24 "v_mul_hi_u32_u24" "I32 = I32 I32";
    Vop2 0x0a VMinF32 "v_min_f32" "F32 = F32 F32";
    Vop2 0x0b VMaxF32 "v_max_f32" "F32 = F32 F32";
    Vop2 0x0c VMinI32 "v_min_i32" "I32 = I32 I32";
    Vop2 0x0d VMaxI32 "v_max_i32" "I32 = I32 I32";
    Vop2 0x0e VMinU32 "v_min_u32" "I32 = I32 I32";
    Vop2 0x0f VMaxU32 "v_max_u32" "I32 = I32 I32";
    Vop2 0x10 VLshrrevB32 "v_lshrrev_b32" "I32 = I32 I32";
    Vop2 0x11 VAshrrevI32 "v_ashrrev_i32" "I32 = I32 I32";
    Vop2 0x12 VLshlrevB32 "v_lshlrev_b32" "I32 = I32 I32";
    Vop2 0x13 VAndB32 "v_and_b32" "I32 = I32 I32";
    Vop2 0x14 VOrB32 "v_or_b32" "I32 = I32 I32";
    Vop2 0x15 VXorB32 "v_xor_b32" "I32 = I32 I32";
    Vop2 0x19 VAddCoU32 "v_add_co_u32" "I32 = I32 I32 | CO";
    Vop2 0x1a VSubCoU32 "v_sub_co_u32" "I32 = I32 I32 | CO";
    Vop2 0x1b VSubrevCoU32 "v_subrev_co_u32" "I32 = I32 I32 | CO";
    Vop2 0x1c VAddcCoU32 "v_addc_co_u32" "I32 = I32 I32 M | CO CI";
    Vop2 0x1d VSubbCoU32 "v_subb_co_u32" "I32 = I32 I32 M | CO CI";
    Vop2 0x1e VSubbrevCoU32 "v_subbrev_co_u32" "I32 = I32 I32 M | CO CI";
    Vop2 0x26 VAddU16 "v_add_u16" "I16 = I16 I16";
    Vop2 0x27 VSubU16 "v_sub_u16" "I16 = I16 I16";
    Vop2 0x28 VSubrevU16 "v_subrev_u16" "I16 = I16 I16";
    Vop2 0x29 VMulLoU16 "v_mul_lo_u16" "I16 = I16 I16";
    Vop2 0x2a VLshlrevB16 "v_lshlrev_b16" "I16 = I16 I16";
    Vop2 0x2b VLshrrevB16 "v_lshrrev_b16" "I16 = I16 I16";
    Vop2 0x2c VAshrrevI16 "v_ashrrev_i16" "I16 = I16 I16";
    Vop2 0x2f VMaxU16 "v_max_u16" "I16 = I16 I16";
    Vop2 0x30 VMaxI16 "v_max_i16" "I16 = I16 I16";
    Vop2 0x31 VMinU16 "v_min_u16" "I16 = I16 I16";
    Vop2 0x32 VMinI16 "v_min_i16" "I16 = I16 I16";
    Vop2 0x34 VAddU32 "v_add_u32" "I32 = I32 I32";
    Vop2 0x35 VSubU32 "v_sub_u32" "I32 = I32 I32";
    Vop2 0x36 VSubrevU32 "v_subrev_u32" "I32 = I32 I32";
    Vop2 0x3b VFmacF32 "v_fmac_f32" "F32 = F32 F32 | MAC";
    Vop2 0x3d VXnorB32 "v_xnor_b32" "I32 = I32 I32";
    Vop2 0x04 VFmacF64 "v_fmac_f64" "F64 = F64 F64 | MAC";
    Vop2 0x17 VFmamkF32 "v_fmamk_f32" "F32 = F32 F32 F32 | LIT";
    Vop2 0x18 VFmaakF32 "v_fmaak_f32" "F32 = F32 F32 F32 | LIT";
    Vop1 0x00 VNop "v_nop" "N = ";
    Vop1 0x01 VMovB32 "v_mov_b32" "I32 = I32";
    Vop1 0x02 VReadfirstlaneB32 "v_readfirstlane_b32" "S = I32";
    Vop1 0x03 VCvtI32F64 "v_cvt_i32_f64" "I32 = F64";
    Vop1 0x04 VCvtF64I32 "v_cvt_f64_i32" "F64 = I32";
    Vop1 0x05 VCvtF32I32 "v_cvt_f32_i32" "F32 = I32";
    Vop1 0x06 VCvtF32U32 "v_cvt_f32_u32" "F32 = I32";
    Vop1 0x07 VCvtU32F32 "v_cvt_u32_f32" "I32 = F32";
    Vop1 0x08 VCvtI32F32 "v_cvt_i32_f32" "I32 = F32";
    Vop1 0x0a VCvtF16F32 "v_cvt_f16_f32" "I16 = F32";
    Vop1 0x0b VCvtF32F16 "v_cvt_f32_f16" "F32 = F16";
    Vop1 0x0c VCvtRpiI32F32 "v_cvt_rpi_i32_f32" "I32 = F32";
    Vop1 0x0d VCvtFlrI32F32 "v_cvt_flr_i32_f32" "I32 = F32";
    Vop1 0x0f VCvtF32F64 "v_cvt_f32_f64" "F32 = F64";
    Vop1 0x10 VCvtF64F32 "v_cvt_f64_f32" "F64 = F32";
    Vop1 0x11 VCvtF32Ubyte0 "v_cvt_f32_ubyte0" "F32 = I32";
    Vop1 0x12 VCvtF32Ubyte1 "v_cvt_f32_ubyte1" "F32 = I32";
    Vop1 0x13 VCvtF32Ubyte2 "v_cvt_f32_ubyte2" "F32 = I32";
    Vop1 0x14 VCvtF32Ubyte3 "v_cvt_f32_ubyte3" "F32 = I32";
    Vop1 0x15 VCvtU32F64 "v_cvt_u32_f64" "I32 = F64";
    Vop1 0x16 VCvtF64U32 "v_cvt_f64_u32" "F64 = I32";
    Vop1 0x17 VTruncF64 "v_trunc_f64" "F64 = F64";
    Vop1 0x18 VCeilF64 "v_ceil_f64" "F64 = F64";
    Vop1 0x19 VRndneF64 "v_rndne_f64" "F64 = F64";
    Vop1 0x1a VFloorF64 "v_floor_f64" "F64 = F64";
    Vop1 0x1b VFractF32 "v_fract_f32" "F32 = F32";
    Vop1 0x1c VTruncF32 "v_trunc_f32" "F32 = F32";
    Vop1 0x1d VCeilF32 "v_ceil_f32" "F32 = F32";
    Vop1 0x1e VRndneF32 "v_rndne_f32" "F32 = F32";
    Vop1 0x1f VFloorF32 "v_floor_f32" "F32 = F32";
    Vop1 0x20 VExpF32 "v_exp_f32" "F32 = F32 | TRANS";
    Vop1 0x21 VLogF32 "v_log_f32" "F32 = F32 | TRANS";
    Vop1 0x22 VRcpF32 "v_rcp_f32" "F32 = F32 | TRANS";
    Vop1 0x23 VRcpIflagF32 "v_rcp_iflag_f32" "F32 = F32 | TRANS";
    Vop1 0x24 VRsqF32 "v_rsq_f32" "F32 = F32 | TRANS";
    Vop1 0x25 VRcpF64 "v_rcp_f64" "F64 = F64 | TRANS";
    Vop1 0x26 VRsqF64 "v_rsq_f64" "F64 = F64 | TRANS";
    Vop1 0x27 VSqrtF32 "v_sqrt_f32" "F32 = F32 | TRANS";
    Vop1 0x28 VSqrtF64 "v_sqrt_f64" "F64 = F64 | TRANS";
    Vop1 0x29 VSinF32 "v_sin_f32" "F32 = F32 | TRANS";
    Vop1 0x2a VCosF32 "v_cos_f32" "F32 = F32 | TRANS";
    Vop1 0x2b VNotB32 "v_not_b32" "I32 = I32";
    Vop1 0x2c VBfrevB32 "v_bfrev_b32" "I32 = I32";
    Vop1 0x2d VFfbhU32 "v_ffbh_u32" "I32 = I32";
    Vop1 0x2e VFfblB32 "v_ffbl_b32" "I32 = I32";
    Vop1 0x2f VFfbhI32 "v_ffbh_i32" "I32 = I32";
    Vop1 0x30 VFrexpExpI32F64 "v_frexp_exp_i32_f64" "I32 = F64";
    Vop1 0x31 VFrexpMantF64 "v_frexp_mant_f64" "F64 = F64";
    Vop1 0x32 VFractF64 "v_fract_f64" "F64 = F64";
    Vop1 0x33 VFrexpExpI32F32 "v_frexp_exp_i32_f32" "I32 = F32";
    Vop1 0x34 VFrexpMantF32 "v_frexp_mant_f32" "F32 = F32";
    Vop1 0x38 VMovB64 "v_mov_b64" "I64 = I64";
    Vopc 0x10 VCmpClassF32 "v_cmp_class_f32" "M = F32 I32 | CLS";
    Vopc 0x12 VCmpClassF64 "v_cmp_class_f64" "M = F64 I32 | CLS";
    Vopc 0x40 VCmpFF32 "v_cmp_f_f32" "M = F32 F32";
    Vopc 0x41 VCmpLtF32 "v_cmp_lt_f32" "M = F32 F32";
    Vopc 0x42 VCmpEqF32 "v_cmp_eq_f32" "M = F32 F32";
    Vopc 0x43 VCmpLeF32 "v_cmp_le_f32" "M = F32 F32";
    Vopc 0x44 VCmpGtF32 "v_cmp_gt_f32" "M = F32 F32";
    Vopc 0x45 VCmpLgF32 "v_cmp_lg_f32" "M = F32 F32";
    Vopc 0x46 VCmpGeF32 "v_cmp_ge_f32" "M = F32 F32";
    Vopc 0x47 VCmpOF32 "v_cmp_o_f32" "M = F32 F32";
    Vopc 0x48 VCmpUF32 "v_cmp_u_f32" "M = F32 F32";
    Vopc 0x49 VCmpNgeF32 "v_cmp_nge_f32" "M = F32 F32";
    Vopc 0x4a VCmpNlgF32 "v_cmp_nlg_f32" "M = F32 F32";
    Vopc 0x4b VCmpNgtF32 "v_cmp_ngt_f32" "M = F32 F32";
    Vopc 0x4c VCmpNleF32 "v_cmp_nle_f32" "M = F32 F32";
    Vopc 0x4d VCmpNeqF32 "v_cmp_neq_f32" "M = F32 F32";
    Vopc 0x4e VCmpNltF32 "v_cmp_nlt_f32" "M = F32 F32";
    Vopc 0x4f VCmpTruF32 "v_cmp_tru_f32" "M = F32 F32";
    Vopc 0x60 VCmpFF64 "v_cmp_f_f64" "M = F64 F64";
    Vopc 0x61 VCmpLtF64 "v_cmp_lt_f64" "M = F64 F64";
    Vopc 0x62 VCmpEqF64 "v_cmp_eq_f64" "M = F64 F64";
    Vopc 0x63 VCmpLeF64 "v_cmp_le_f64" "M = F64 F64";
    Vopc 0x64 VCmpGtF64 "v_cmp_gt_f64" "M = F64 F64";
    Vopc 0x65 VCmpLgF64 "v_cmp_lg_f64" "M = F64 F64";
    Vopc 0x66 VCmpGeF64 "v_cmp_ge_f64" "M = F64 F64";
    Vopc 0x67 VCmpOF64 "v_cmp_o_f64" "M = F64 F64";
    Vopc 0x68 VCmpUF64 "v_cmp_u_f64" "M = F64 F64";
    Vopc 0x69 VCmpNgeF64 "v_cmp_nge_f64" "M = F64 F64";
    Vopc 0x6a VCmpNlgF64 "v_cmp_nlg_f64" "M = F64 F64";
    Vopc 0x6b VCmpNgtF64 "v_cmp_ngt_f64" "M = F64 F64";
    Vopc 0x6c VCmpNleF64 "v_cmp_nle_f64" "M = F64 F64";
    Vopc 0x6d VCmpNeqF64 "v_cmp_neq_f64" "M = F64 F64";
    Vopc 0x6e VCmpNltF64 "v_cmp_nlt_f64" "M = F64 F64";
    Vopc 0x6f VCmpTruF64 "v_cmp_tru_f64" "M = F64 F64";
    Vopc 0xc0 VCmpFI32 "v_cmp_f_i32" "M = I32 I32";
    Vopc 0xc1 VCmpLtI32 "v_cmp_lt_i32" "M = I32 I32";
    Vopc 0xc2 VCmpEqI32 "v_cmp_eq_i32" "M = I32 I32";
    Vopc 0xc3 VCmpLeI32 "v_cmp_le_i32" "M = I32 I32";
    Vopc 0xc4 VCmpGtI32 "v_cmp_gt_i32" "M = I32 I32";
    Vopc 0xc5 VCmpNeI32 "v_cmp_ne_i32" "M = I32 I32";
    Vopc 0xc6 VCmpGeI32 "v_cmp_ge_i32" "M = I32 I32";
    Vopc 0xc7 VCmpTI32 "v_cmp_t_i32" "M = I32 I32";
    Vopc 0xc8 VCmpFU32 "v_cmp_f_u32" "M = I32 I32";
    Vopc 0xc9 VCmpLtU32 "v_cmp_lt_u32" "M = I32 I32";
    Vopc 0xca VCmpEqU32 "v_cmp_eq_u32" "M = I32 I32";
    Vopc 0xcb VCmpLeU32 "v_cmp_le_u32" "M = I32 I32";
    Vopc 0xcc VCmpGtU32 "v_cmp_gt_u32" "M = I32 I32";
    Vopc 0xcd VCmpNeU32 "v_cmp_ne_u32" "M = I32 I32";
    Vopc 0xce VCmpGeU32 "v_cmp_ge_u32" "M = I32 I32";
    Vopc 0xcf VCmpTU32 "v_cmp_t_u32" "M = I32 I32";
    Vopc 0xe0 VCmpFI64 "v_cmp_f_i64" "M = I64 I64";
    Vopc 0xe1 VCmpLtI64 "v_cmp_lt_i64" "M = I64 I64";
    Vopc 0xe2 VCmpEqI64 "v_cmp_eq_i64" "M = I64 I64";
    Vopc 0xe3 VCmpLeI64 "v_cmp_le_i64" "M = I64 I64";
    Vopc 0xe4 VCmpGtI64 "v_cmp_gt_i64" "M = I64 I64";
    Vopc 0xe5 VCmpNeI64 "v_cmp_ne_i64" "M = I64 I64";
    Vopc 0xe6 VCmpGeI64 "v_cmp_ge_i64" "M = I64 I64";
    Vopc 0xe7 VCmpTI64 "v_cmp_t_i64" "M = I64 I64";
    Vopc 0xe8 VCmpFU64 "v_cmp_f_u64" "M = I64 I64";
    Vopc 0xe9 VCmpLtU64 "v_cmp_lt_u64" "M = I64 I64";
    Vopc 0xea VCmpEqU64 "v_cmp_eq_u64" "M = I64 I64";
    Vopc 0xeb VCmpLeU64 "v_cmp_le_u64" "M = I64 I64";
    Vopc 0xec VCmpGtU64 "v_cmp_gt_u64" "M = I64 I64";
    Vopc 0xed VCmpNeU64 "v_cmp_ne_u64" "M = I64 I64";
    Vopc 0xee VCmpGeU64 "v_cmp_ge_u64" "M = I64 I64";
    Vopc 0xef VCmpTU64 "v_cmp_t_u64" "M = I64 I64";
    Vopc 0xa0 VCmpFI16 "v_cmp_f_i16" "M = I16 I16";
    Vopc 0xa1 VCmpLtI16 "v_cmp_lt_i16" "M = I16 I16";
    Vopc 0xa2 VCmpEqI16 "v_cmp_eq_i16" "M = I16 I16";
    Vopc 0xa3 VCmpLeI16 "v_cmp_le_i16" "M = I16 I16";
    Vopc 0xa4 VCmpGtI16 "v_cmp_gt_i16" "M = I16 I16";
    Vopc 0xa5 VCmpNeI16 "v_cmp_ne_i16" "M = I16 I16";
    Vopc 0xa6 VCmpGeI16 "v_cmp_ge_i16" "M = I16 I16";
    Vopc 0xa7 VCmpTI16 "v_cmp_t_i16" "M = I16 I16";
    Vopc 0xa8 VCmpFU16 "v_cmp_f_u16" "M = I16 I16";
    Vopc 0xa9 VCmpLtU16 "v_cmp_lt_u16" "M = I16 I16";
    Vopc 0xaa VCmpEqU16 "v_cmp_eq_u16" "M = I16 I16";
    Vopc 0xab VCmpLeU16 "v_cmp_le_u16" "M = I16 I16";
    Vopc 0xac VCmpGtU16 "v_cmp_gt_u16" "M = I16 I16";
    Vopc 0xad VCmpNeU16 "v_cmp_ne_u16" "M = I16 I16";
    Vopc 0xae VCmpGeU16 "v_cmp_ge_u16" "M = I16 I16";
    Vopc 0xaf VCmpTU16 "v_cmp_t_u16" "M = I16 I16";
    Vopc 0x11 VCmpxClassF32 "v_cmpx_class_f32" "M = F32 I32 | CLS CMPX";
    Vopc 0x13 VCmpxClassF64 "v_cmpx_class_f64" "M = F64 I32 | CLS CMPX";
    Vopc 0x50 VCmpxFF32 "v_cmpx_f_f32" "M = F32 F32 | CMPX";
    Vopc 0x51 VCmpxLtF32 "v_cmpx_lt_f32" "M = F32 F32 | CMPX";
    Vopc 0x52 VCmpxEqF32 "v_cmpx_eq_f32" "M = F32 F32 | CMPX";
    Vopc 0x53 VCmpxLeF32 "v_cmpx_le_f32" "M = F32 F32 | CMPX";
    Vopc 0x54 VCmpxGtF32 "v_cmpx_gt_f32" "M = F32 F32 | CMPX";
    Vopc 0x55 VCmpxLgF32 "v_cmpx_lg_f32" "M = F32 F32 | CMPX";
    Vopc 0x56 VCmpxGeF32 "v_cmpx_ge_f32" "M = F32 F32 | CMPX";
    Vopc 0x57 VCmpxOF32 "v_cmpx_o_f32" "M = F32 F32 | CMPX";
    Vopc 0x58 VCmpxUF32 "v_cmpx_u_f32" "M = F32 F32 | CMPX";
    Vopc 0x59 VCmpxNgeF32 "v_cmpx_nge_f32" "M = F32 F32 | CMPX";
    Vopc 0x5a VCmpxNlgF32 "v_cmpx_nlg_f32" "M = F32 F32 | CMPX";
    Vopc 0x5b VCmpxNgtF32 "v_cmpx_ngt_f32" "M = F32 F32 | CMPX";
    Vopc 0x5c VCmpxNleF32 "v_cmpx_nle_f32" "M = F32 F32 | CMPX";
    Vopc 0x5d VCmpxNeqF32 "v_cmpx_neq_f32" "M = F32 F32 | CMPX";
    Vopc 0x5e VCmpxNltF32 "v_cmpx_nlt_f32" "M = F32 F32 | CMPX";
    Vopc 0x5f VCmpxTruF32 "v_cmpx_tru_f32" "M = F32 F32 | CMPX";
    Vopc 0x70 VCmpxFF64 "v_cmpx_f_f64" "M = F64 F64 | CMPX";
    Vopc 0x71 VCmpxLtF64 "v_cmpx_lt_f64" "M = F64 F64 | CMPX";
    Vopc 0x72 VCmpxEqF64 "v_cmpx_eq_f64" "M = F64 F64 | CMPX";
    Vopc 0x73 VCmpxLeF64 "v_cmpx_le_f64" "M = F64 F64 | CMPX";
    Vopc 0x74 VCmpxGtF64 "v_cmpx_gt_f64" "M = F64 F64 | CMPX";
    Vopc 0x75 VCmpxLgF64 "v_cmpx_lg_f64" "M = F64 F64 | CMPX";
    Vopc 0x76 VCmpxGeF64 "v_cmpx_ge_f64" "M = F64 F64 | CMPX";
    Vopc 0x77 VCmpxOF64 "v_cmpx_o_f64" "M = F64 F64 | CMPX";
    Vopc 0x78 VCmpxUF64 "v_cmpx_u_f64" "M = F64 F64 | CMPX";
    Vopc 0x79 VCmpxNgeF64 "v_cmpx_nge_f64" "M = F64 F64 | CMPX";
    Vopc 0x7a VCmpxNlgF64 "v_cmpx_nlg_f64" "M = F64 F64 | CMPX";
    Vopc 0x7b VCmpxNgtF64 "v_cmpx_ngt_f64" "M = F64 F64 | CMPX";
    Vopc 0x7c VCmpxNleF64 "v_cmpx_nle_f64" "M = F64 F64 | CMPX";
    Vopc 0x7d VCmpxNeqF64 "v_cmpx_neq_f64" "M = F64 F64 | CMPX";
    Vopc 0x7e VCmpxNltF64 "v_cmpx_nlt_f64" "M = F64 F64 | CMPX";
    Vopc 0x7f VCmpxTruF64 "v_cmpx_tru_f64" "M = F64 F64 | CMPX";
    Vopc 0xd0 VCmpxFI32 "v_cmpx_f_i32" "M = I32 I32 | CMPX";
    Vopc 0xd1 VCmpxLtI32 "v_cmpx_lt_i32" "M = I32 I32 | CMPX";
    Vopc 0xd2 VCmpxEqI32 "v_cmpx_eq_i32" "M = I32 I32 | CMPX";
    Vopc 0xd3 VCmpxLeI32 "v_cmpx_le_i32" "M = I32 I32 | CMPX";
    Vopc 0xd4 VCmpxGtI32 "v_cmpx_gt_i32" "M = I32 I32 | CMPX";
    Vopc 0xd5 VCmpxNeI32 "v_cmpx_ne_i32" "M = I32 I32 | CMPX";
    Vopc 0xd6 VCmpxGeI32 "v_cmpx_ge_i32" "M = I32 I32 | CMPX";
    Vopc 0xd7 VCmpxTI32 "v_cmpx_t_i32" "M = I32 I32 | CMPX";
    Vopc 0xd8 VCmpxFU32 "v_cmpx_f_u32" "M = I32 I32 | CMPX";
    Vopc 0xd9 VCmpxLtU32 "v_cmpx_lt_u32" "M = I32 I32 | CMPX";
    Vopc 0xda VCmpxEqU32 "v_cmpx_eq_u32" "M = I32 I32 | CMPX";
    Vopc 0xdb VCmpxLeU32 "v_cmpx_le_u32" "M = I32 I32 | CMPX";
    Vopc 0xdc VCmpxGtU32 "v_cmpx_gt_u32" "M = I32 I32 | CMPX";
    Vopc 0xdd VCmpxNeU32 "v_cmpx_ne_u32" "M = I32 I32 | CMPX";
    Vopc 0xde VCmpxGeU32 "v_cmpx_ge_u32" "M = I32 I32 | CMPX";
    Vopc 0xdf VCmpxTU32 "v_cmpx_t_u32" "M = I32 I32 | CMPX";
    Vopc 0xf0 VCmpxFI64 "v_cmpx_f_i64" "M = I64 I64 | CMPX";
    Vopc 0xf1 VCmpxLtI64 "v_cmpx_lt_i64" "M = I64 I64 | CMPX";
    Vopc 0xf2 VCmpxEqI64 "v_cmpx_eq_i64" "M = I64 I64 | CMPX";
    Vopc 0xf3 VCmpxLeI64 "v_cmpx_le_i64" "M = I64 I64 | CMPX";
    Vopc 0xf4 VCmpxGtI64 "v_cmpx_gt_i64" "M = I64 I64 | CMPX";
    Vopc 0xf5 VCmpxNeI64 "v_cmpx_ne_i64" "M = I64 I64 | CMPX";
    Vopc 0xf6 VCmpxGeI64 "v_cmpx_ge_i64" "M = I64 I64 | CMPX";
    Vopc 0xf7 VCmpxTI64 "v_cmpx_t_i64" "M = I64 I64 | CMPX";
    Vopc 0xf8 VCmpxFU64 "v_cmpx_f_u64" "M = I64 I64 | CMPX";
    Vopc 0xf9 VCmpxLtU64 "v_cmpx_lt_u64" "M = I64 I64 | CMPX";
    Vopc 0xfa VCmpxEqU64 "v_cmpx_eq_u64" "M = I64 I64 | CMPX";
    Vopc 0xfb VCmpxLeU64 "v_cmpx_le_u64" "M = I64 I64 | CMPX";
    Vopc 0xfc VCmpxGtU64 "v_cmpx_gt_u64" "M = I64 I64 | CMPX";
    Vopc 0xfd VCmpxNeU64 "v_cmpx_ne_u64" "M = I64 I64 | CMPX";
    Vopc 0xfe VCmpxGeU64 "v_cmpx_ge_u64" "M = I64 I64 | CMPX";
    Vopc 0xff VCmpxTU64 "v_cmpx_t_u64" "M = I64 I64 | CMPX";
    Vopc 0xb0 VCmpxFI16 "v_cmpx_f_i16" "M = I16 I16 | CMPX";
    Vopc 0xb1 VCmpxLtI16 "v_cmpx_lt_i16" "M = I16 I16 | CMPX";
    Vopc 0xb2 VCmpxEqI16 "v_cmpx_eq_i16" "M = I16 I16 | CMPX";
    Vopc 0xb3 VCmpxLeI16 "v_cmpx_le_i16" "M = I16 I16 | CMPX";
    Vopc 0xb4 VCmpxGtI16 "v_cmpx_gt_i16" "M = I16 I16 | CMPX";
    Vopc 0xb5 VCmpxNeI16 "v_cmpx_ne_i16" "M = I16 I16 | CMPX";
    Vopc 0xb6 VCmpxGeI16 "v_cmpx_ge_i16" "M = I16 I16 | CMPX";
    Vopc 0xb7 VCmpxTI16 "v_cmpx_t_i16" "M = I16 I16 | CMPX";
    Vopc 0xb8 VCmpxFU16 "v_cmpx_f_u16" "M = I16 I16 | CMPX";
    Vopc 0xb9 VCmpxLtU16 "v_cmpx_lt_u16" "M = I16 I16 | CMPX";
    Vopc 0xba VCmpxEqU16 "v_cmpx_eq_u16" "M = I16 I16 | CMPX";
    Vopc 0xbb VCmpxLeU16 "v_cmpx_le_u16" "M = I16 I16 | CMPX";
    Vopc 0xbc VCmpxGtU16 "v_cmpx_gt_u16" "M = I16 I16 | CMPX";
    Vopc 0xbd VCmpxNeU16 "v_cmpx_ne_u16" "M = I16 I16 | CMPX";
    Vopc 0xbe VCmpxGeU16 "v_cmpx_ge_u16" "M = I16 I16 | CMPX";
    Vopc 0xbf VCmpxTU16 "v_cmpx_t_u16" "M = I16 I16 | CMPX";
    Vop3 0x1c2 VMadI32I24 "v_mad_i32_i24" "I32 = I32 I32 I32";
    Vop3 0x1c3 VMadU32U24 "v_mad_u32_u24" "I32 = I32 I32 I32";
    Vop3 0x1c8 VBfeU32 "v_bfe_u32" "I32 = I32 I32 I32";
    Vop3 0x1c9 VBfeI32 "v_bfe_i32" "I32 = I32 I32 I32";
    Vop3 0x1ca VBfiB32 "v_bfi_b32" "I32 = I32 I32 I32";
    Vop3 0x1cb VFmaF32 "v_fma_f32" "F32 = F32 F32 F32";
    Vop3 0x1cc VFmaF64 "v_fma_f64" "F64 = F64 F64 F64";
    Vop3 0x1ce VAlignbitB32 "v_alignbit_b32" "I32 = I32 I32 I32";
    Vop3 0x1cf VAlignbyteB32 "v_alignbyte_b32" "I32 = I32 I32 I32";
    Vop3 0x1d0 VMin3F32 "v_min3_f32" "F32 = F32 F32 F32";
    Vop3 0x1d1 VMin3I32 "v_min3_i32" "I32 = I32 I32 I32";
    Vop3 0x1d2 VMin3U32 "v_min3_u32" "I32 = I32 I32 I32";
    Vop3 0x1d3 VMax3F32 "v_max3_f32" "F32 = F32 F32 F32";
    Vop3 0x1d4 VMax3I32 "v_max3_i32" "I32 = I32 I32 I32";
    Vop3 0x1d5 VMax3U32 "v_max3_u32" "I32 = I32 I32 I32";
    Vop3 0x1d6 VMed3F32 "v_med3_f32" "F32 = F32 F32 F32";
    Vop3 0x1d7 VMed3I32 "v_med3_i32" "I32 = I32 I32 I32";
    Vop3 0x1d8 VMed3U32 "v_med3_u32" "I32 = I32 I32 I32";
    Vop3 0x1de VDivFixupF32 "v_div_fixup_f32" "F32 = F32 F32 F32";
    Vop3 0x1df VDivFixupF64 "v_div_fixup_f64" "F64 = F64 F64 F64";
    Vop3 0x1e0 VDivScaleF32 "v_div_scale_f32" "F32 = F32 F32 F32 | CO";
    Vop3 0x1e1 VDivScaleF64 "v_div_scale_f64" "F64 = F64 F64 F64 | CO";
    Vop3 0x1e2 VDivFmasF32 "v_div_fmas_f32" "F32 = F32 F32 F32 | VCCIN";
    Vop3 0x1e3 VDivFmasF64 "v_div_fmas_f64" "F64 = F64 F64 F64 | VCCIN";
    Vop3 0x1e8 VMadU64U32 "v_mad_u64_u32" "I64 = I32 I32 I64 | CO";
    Vop3 0x1e9 VMadI64I32 "v_mad_i64_i32" "I64 = I32 I32 I64 | CO";
    Vop3 0x1ed VPermB32 "v_perm_b32" "I32 = I32 I32 I32";
    Vop3 0x1f3 VXadU32 "v_xad_u32" "I32 = I32 I32 I32";
    Vop3 0x1fd VLshlAddU32 "v_lshl_add_u32" "I32 = I32 I32 I32";
    Vop3 0x1fe VAddLshlU32 "v_add_lshl_u32" "I32 = I32 I32 I32";
    Vop3 0x1ff VAdd3U32 "v_add3_u32" "I32 = I32 I32 I32";
    Vop3 0x200 VLshlOrB32 "v_lshl_or_b32" "I32 = I32 I32 I32";
    Vop3 0x201 VAndOrB32 "v_and_or_b32" "I32 = I32 I32 I32";
    Vop3 0x202 VOr3B32 "v_or3_b32" "I32 = I32 I32 I32";
    Vop3 0x280 VAddF64 "v_add_f64" "F64 = F64 F64";
    Vop3 0x281 VMulF64 "v_mul_f64" "F64 = F64 F64";
    Vop3 0x282 VMinF64 "v_min_f64" "F64 = F64 F64";
    Vop3 0x283 VMaxF64 "v_max_f64" "F64 = F64 F64";
    Vop3 0x284 VLdexpF64 "v_ldexp_f64" "F64 = F64 I32";
    Vop3 0x285 VMulLoU32 "v_mul_lo_u32" "I32 = I32 I32";
    Vop3 0x286 VMulHiU32 "v_mul_hi_u32" "I32 = I32 I32";
    Vop3 0x287 VMulHiI32 "v_mul_hi_i32" "I32 = I32 I32";
    Vop3 0x288 VLdexpF32 "v_ldexp_f32" "F32 = F32 I32";
    Vop3 0x289 VReadlaneB32 "v_readlane_b32" "S = I32 I32";
    Vop3 0x28a VWritelaneB32 "v_writelane_b32" "I32 = I32 I32 | WL";
    Vop3 0x28b VBcntU32B32 "v_bcnt_u32_b32" "I32 = I32 I32";
    Vop3 0x28c VMbcntLoU32B32 "v_mbcnt_lo_u32_b32" "I32 = I32 I32";
    Vop3 0x28d VMbcntHiU32B32 "v_mbcnt_hi_u32_b32" "I32 = I32 I32";
    Vop3 0x28f VLshlrevB64 "v_lshlrev_b64" "I64 = I32 I64";
    Vop3 0x290 VLshrrevB64 "v_lshrrev_b64" "I64 = I32 I64";
    Vop3 0x291 VAshrrevI64 "v_ashrrev_i64" "I64 = I32 I64";
    Vop3 0x293 VBfmB32 "v_bfm_b32" "I32 = I32 I32";
    Vop3 0x296 VCvtPkrtzF16F32 "v_cvt_pkrtz_f16_f32" "I32 = F32 F32";
    Vop3 0x297 VCvtPkU16U32 "v_cvt_pk_u16_u32" "I32 = I32 I32";
    Vop3 0x298 VCvtPkI16I32 "v_cvt_pk_i16_i32" "I32 = I32 I32";
    Vop3 0x208 VLshlAddU64 "v_lshl_add_u64" "I64 = I64 I32 I64";
    Vop3 0x29c VAddI32 "v_add_i32" "I32 = I32 I32";
    Vop3 0x29d VSubI32 "v_sub_i32" "I32 = I32 I32";
    Vop3 0x2a0 VPackB32F16 "v_pack_b32_f16" "I32 = I16 I16";
    Vop3p 0x01 VPkMulLoU16 "v_pk_mul_lo_u16" "P16 = P16 P16";
    Vop3p 0x02 VPkAddI16 "v_pk_add_i16" "P16 = P16 P16";
    Vop3p 0x03 VPkSubI16 "v_pk_sub_i16" "P16 = P16 P16";
    Vop3p 0x04 VPkLshlrevB16 "v_pk_lshlrev_b16" "P16 = P16 P16";
    Vop3p 0x05 VPkLshrrevB16 "v_pk_lshrrev_b16" "P16 = P16 P16";
    Vop3p 0x06 VPkAshrrevI16 "v_pk_ashrrev_i16" "P16 = P16 P16";
    Vop3p 0x07 VPkMaxI16 "v_pk_max_i16" "P16 = P16 P16";
    Vop3p 0x08 VPkMinI16 "v_pk_min_i16" "P16 = P16 P16";
    Vop3p 0x0a VPkAddU16 "v_pk_add_u16" "P16 = P16 P16";
    Vop3p 0x0b VPkSubU16 "v_pk_sub_u16" "P16 = P16 P16";
    Vop3p 0x0c VPkMaxU16 "v_pk_max_u16" "P16 = P16 P16";
    Vop3p 0x0d VPkMinU16 "v_pk_min_u16" "P16 = P16 P16";
    Vop3p 0x30 VPkFmaF32 "v_pk_fma_f32" "PF = PF PF PF";
    Vop3p 0x31 VPkMulF32 "v_pk_mul_f32" "PF = PF PF";
    Vop3p 0x32 VPkAddF32 "v_pk_add_f32" "PF = PF PF";
    Vop3p 0x33 VPkMovB32 "v_pk_mov_b32" "PF = PF PF";
    Ds 0x00 DsAddU32 "ds_add_u32" "A D1";
    Ds 0x01 DsSubU32 "ds_sub_u32" "A D1";
    Ds 0x02 DsRsubU32 "ds_rsub_u32" "A D1";
    Ds 0x03 DsIncU32 "ds_inc_u32" "A D1";
    Ds 0x04 DsDecU32 "ds_dec_u32" "A D1";
    Ds 0x05 DsMinI32 "ds_min_i32" "A D1";
    Ds 0x06 DsMaxI32 "ds_max_i32" "A D1";
    Ds 0x07 DsMinU32 "ds_min_u32" "A D1";
    Ds 0x08 DsMaxU32 "ds_max_u32" "A D1";
    Ds 0x09 DsAndB32 "ds_and_b32" "A D1";
    Ds 0x0a DsOrB32 "ds_or_b32" "A D1";
    Ds 0x0b DsXorB32 "ds_xor_b32" "A D1";
    Ds 0x0d DsWriteB32 "ds_write_b32" "A D1";
    Ds 0x0e DsWrite2B32 "ds_write2_b32" "A D1 E1";
    Ds 0x0f DsWrite2st64B32 "ds_write2st64_b32" "A D1 E1";
    Ds 0x10 DsCmpstB32 "ds_cmpst_b32" "A D1 E1";
    Ds 0x15 DsAddF32 "ds_add_f32" "A D1";
    Ds 0x1e DsWriteB8 "ds_write_b8" "A D1";
    Ds 0x1f DsWriteB16 "ds_write_b16" "A D1";
    Ds 0x20 DsAddRtnU32 "ds_add_rtn_u32" "R1 A D1";
    Ds 0x21 DsSubRtnU32 "ds_sub_rtn_u32" "R1 A D1";
    Ds 0x22 DsRsubRtnU32 "ds_rsub_rtn_u32" "R1 A D1";
    Ds 0x23 DsIncRtnU32 "ds_inc_rtn_u32" "R1 A D1";
    Ds 0x24 DsDecRtnU32 "ds_dec_rtn_u32" "R1 A D1";
    Ds 0x25 DsMinRtnI32 "ds_min_rtn_i32" "R1 A D1";
    Ds 0x26 DsMaxRtnI32 "ds_max_rtn_i32" "R1 A D1";
    Ds 0x27 DsMinRtnU32 "ds_min_rtn_u32" "R1 A D1";
    Ds 0x28 DsMaxRtnU32 "ds_max_rtn_u32" "R1 A D1";
    Ds 0x29 DsAndRtnB32 "ds_and_rtn_b32" "R1 A D1";
    Ds 0x2a DsOrRtnB32 "ds_or_rtn_b32" "R1 A D1";
    Ds 0x2b DsXorRtnB32 "ds_xor_rtn_b32" "R1 A D1";
    Ds 0x2d DsWrxchgRtnB32 "ds_wrxchg_rtn_b32" "R1 A D1";
    Ds 0x30 DsCmpstRtnB32 "ds_cmpst_rtn_b32" "R1 A D1 E1";
    Ds 0x35 DsAddRtnF32 "ds_add_rtn_f32" "R1 A D1";
    Ds 0x3d DsSwizzleB32 "ds_swizzle_b32" "R1 A";
    Ds 0x36 DsReadB32 "ds_read_b32" "R1 A";
    Ds 0x37 DsRead2B32 "ds_read2_b32" "R2 A";
    Ds 0x38 DsRead2st64B32 "ds_read2st64_b32" "R2 A";
    Ds 0x39 DsReadI8 "ds_read_i8" "R1 A";
    Ds 0x3a DsReadU8 "ds_read_u8" "R1 A";
    Ds 0x3b DsReadI16 "ds_read_i16" "R1 A";
    Ds 0x3c DsReadU16 "ds_read_u16" "R1 A";
    Ds 0x3e DsPermuteB32 "ds_permute_b32" "R1 A D1";
    Ds 0x3f DsBpermuteB32 "ds_bpermute_b32" "R1 A D1";
    Ds 0x40 DsAddU64 "ds_add_u64" "A D2";
    Ds 0x47 DsMinU64 "ds_min_u64" "A D2";
    Ds 0x48 DsMaxU64 "ds_max_u64" "A D2";
    Ds 0x4d DsWriteB64 "ds_write_b64" "A D2";
    Ds 0x4e DsWrite2B64 "ds_write2_b64" "A D2 E2";
    Ds 0x4f DsWrite2st64B64 "ds_write2st64_b64" "A D2 E2";
    Ds 0x60 DsAddRtnU64 "ds_add_rtn_u64" "R2 A D2";
    Ds 0x76 DsReadB64 "ds_read_b64" "R2 A";
    Ds 0x77 DsRead2B64 "ds_read2_b64" "R4 A";
    Ds 0x78 DsRead2st64B64 "ds_read2st64_b64" "R4 A";
    Ds 0x70 DsCmpstRtnB64 "ds_cmpst_rtn_b64" "R2 A D2 E2";
    Ds 0x54 DsWriteB8D16Hi "ds_write_b8_d16_hi" "A D1";
    Ds 0x55 DsWriteB16D16Hi "ds_write_b16_d16_hi" "A D1";
    Ds 0x56 DsReadU8D16 "ds_read_u8_d16" "R1 A";
    Ds 0x57 DsReadU8D16Hi "ds_read_u8_d16_hi" "R1 A";
    Ds 0x58 DsReadI8D16 "ds_read_i8_d16" "R1 A";
    Ds 0x59 DsReadI8D16Hi "ds_read_i8_d16_hi" "R1 A";
    Ds 0x5a DsReadU16D16 "ds_read_u16_d16" "R1 A";
    Ds 0x5b DsReadU16D16Hi "ds_read_u16_d16_hi" "R1 A";
    Ds 0xde DsWriteB96 "ds_write_b96" "A D3";
    Ds 0xdf DsWriteB128 "ds_write_b128" "A D4";
    Ds 0xfe DsReadB96 "ds_read_b96" "R3 A";
    Ds 0xff DsReadB128 "ds_read_b128" "R4 A";
    Global 0x10 GlobalLoadUbyte "global_load_ubyte" "R1";
    Global 0x11 GlobalLoadSbyte "global_load_sbyte" "R1";
    Global 0x12 GlobalLoadUshort "global_load_ushort" "R1";
    Global 0x13 GlobalLoadSshort "global_load_sshort" "R1";
    Global 0x14 GlobalLoadDword "global_load_dword" "R1";
    Global 0x15 GlobalLoadDwordx2 "global_load_dwordx2" "R2";
    Global 0x16 GlobalLoadDwordx3 "global_load_dwordx3" "R3";
    Global 0x17 GlobalLoadDwordx4 "global_load_dwordx4" "R4";
    Global 0x20 GlobalLoadUbyteD16 "global_load_ubyte_d16" "R1";
    Global 0x21 GlobalLoadUbyteD16Hi "global_load_ubyte_d16_hi" "R1";
    Global 0x22 GlobalLoadSbyteD16 "global_load_sbyte_d16" "R1";
    Global 0x23 GlobalLoadSbyteD16Hi "global_load_sbyte_d16_hi" "R1";
    Global 0x24 GlobalLoadShortD16 "global_load_short_d16" "R1";
    Global 0x25 GlobalLoadShortD16Hi "global_load_short_d16_hi" "R1";
    Global 0x18 GlobalStoreByte "global_store_byte" "D1";
    Global 0x19 GlobalStoreByteD16Hi "global_store_byte_d16_hi" "D1";
    Global 0x1a GlobalStoreShort "global_store_short" "D1";
    Global 0x1b GlobalStoreShortD16Hi "global_store_short_d16_hi" "D1";
    Global 0x1c GlobalStoreDword "global_store_dword" "D1";
    Global 0x1d GlobalStoreDwordx2 "global_store_dwordx2" "D2";
    Global 0x1e GlobalStoreDwordx3 "global_store_dwordx3" "D3";
    Global 0x1f GlobalStoreDwordx4 "global_store_dwordx4" "D4";
    Global 0x40 GlobalAtomicSwap "global_atomic_swap" "R1 D1 ATOMIC";
    Global 0x60 GlobalAtomicSwapX2 "global_atomic_swap_x2" "R2 D2 ATOMIC";
    Global 0x41 GlobalAtomicCmpswap "global_atomic_cmpswap" "R1 D2 ATOMIC";
    Global 0x61 GlobalAtomicCmpswapX2 "global_atomic_cmpswap_x2" "R2 D4 ATOMIC";
    Global 0x42 GlobalAtomicAdd "global_atomic_add" "R1 D1 ATOMIC";
    Global 0x62 GlobalAtomicAddX2 "global_atomic_add_x2" "R2 D2 ATOMIC";
    Global 0x43 GlobalAtomicSub "global_atomic_sub" "R1 D1 ATOMIC";
    Global 0x63 GlobalAtomicSubX2 "global_atomic_sub_x2" "R2 D2 ATOMIC";
    Global 0x44 GlobalAtomicSmin "global_atomic_smin" "R1 D1 ATOMIC";
    Global 0x64 GlobalAtomicSminX2 "global_atomic_smin_x2" "R2 D2 ATOMIC";
    Global 0x45 GlobalAtomicUmin "global_atomic_umin" "R1 D1 ATOMIC";
    Global 0x65 GlobalAtomicUminX2 "global_atomic_umin_x2" "R2 D2 ATOMIC";
    Global 0x46 GlobalAtomicSmax "global_atomic_smax" "R1 D1 ATOMIC";
    Global 0x66 GlobalAtomicSmaxX2 "global_atomic_smax_x2" "R2 D2 ATOMIC";
    Global 0x47 GlobalAtomicUmax "global_atomic_umax" "R1 D1 ATOMIC";
    Global 0x67 GlobalAtomicUmaxX2 "global_atomic_umax_x2" "R2 D2 ATOMIC";
    Global 0x48 GlobalAtomicAnd "global_atomic_and" "R1 D1 ATOMIC";
    Global 0x68 GlobalAtomicAndX2 "global_atomic_and_x2" "R2 D2 ATOMIC";
    Global 0x49 GlobalAtomicOr "global_atomic_or" "R1 D1 ATOMIC";
    Global 0x69 GlobalAtomicOrX2 "global_atomic_or_x2" "R2 D2 ATOMIC";
    Global 0x4a GlobalAtomicXor "global_atomic_xor" "R1 D1 ATOMIC";
    Global 0x6a GlobalAtomicXorX2 "global_atomic_xor_x2" "R2 D2 ATOMIC";
    Global 0x4b GlobalAtomicInc "global_atomic_inc" "R1 D1 ATOMIC";
    Global 0x6b GlobalAtomicIncX2 "global_atomic_inc_x2" "R2 D2 ATOMIC";
    Global 0x4c GlobalAtomicDec "global_atomic_dec" "R1 D1 ATOMIC";
    Global 0x6c GlobalAtomicDecX2 "global_atomic_dec_x2" "R2 D2 ATOMIC";
    Global 0x4d GlobalAtomicAddF32 "global_atomic_add_f32" "R1 D1 ATOMIC";
    Global 0x4f GlobalAtomicAddF64 "global_atomic_add_f64" "R2 D2 ATOMIC";
    Global 0x50 GlobalAtomicMinF64 "global_atomic_min_f64" "R2 D2 ATOMIC";
    Global 0x51 GlobalAtomicMaxF64 "global_atomic_max_f64" "R2 D2 ATOMIC";
    Mubuf 0x10 BufferLoadUbyte "buffer_load_ubyte" "R1";
    Mubuf 0x11 BufferLoadSbyte "buffer_load_sbyte" "R1";
    Mubuf 0x12 BufferLoadUshort "buffer_load_ushort" "R1";
    Mubuf 0x13 BufferLoadSshort "buffer_load_sshort" "R1";
    Mubuf 0x14 BufferLoadDword "buffer_load_dword" "R1";
    Mubuf 0x15 BufferLoadDwordx2 "buffer_load_dwordx2" "R2";
    Mubuf 0x16 BufferLoadDwordx3 "buffer_load_dwordx3" "R3";
    Mubuf 0x17 BufferLoadDwordx4 "buffer_load_dwordx4" "R4";
    Mubuf 0x18 BufferStoreByte "buffer_store_byte" "D1";
    Mubuf 0x1a BufferStoreShort "buffer_store_short" "D1";
    Mubuf 0x1c BufferStoreDword "buffer_store_dword" "D1";
    Mubuf 0x1d BufferStoreDwordx2 "buffer_store_dwordx2" "D2";
    Mubuf 0x1e BufferStoreDwordx3 "buffer_store_dwordx3" "D3";
    Mubuf 0x1f BufferStoreDwordx4 "buffer_store_dwordx4" "D4";
    Mubuf 0x40 BufferAtomicSwap "buffer_atomic_swap" "R1 D1 ATOMIC";
    Mubuf 0x60 BufferAtomicSwapX2 "buffer_atomic_swap_x2" "R2 D2 ATOMIC";
    Mubuf 0x41 BufferAtomicCmpswap "buffer_atomic_cmpswap" "R1 D2 ATOMIC";
    Mubuf 0x61 BufferAtomicCmpswapX2 "buffer_atomic_cmpswap_x2" "R2 D4 ATOMIC";
    Mubuf 0x42 BufferAtomicAdd "buffer_atomic_add" "R1 D1 ATOMIC";
    Mubuf 0x62 BufferAtomicAddX2 "buffer_atomic_add_x2" "R2 D2 ATOMIC";
    Mubuf 0x43 BufferAtomicSub "buffer_atomic_sub" "R1 D1 ATOMIC";
    Mubuf 0x63 BufferAtomicSubX2 "buffer_atomic_sub_x2" "R2 D2 ATOMIC";
    Mubuf 0x44 BufferAtomicSmin "buffer_atomic_smin" "R1 D1 ATOMIC";
    Mubuf 0x64 BufferAtomicSminX2 "buffer_atomic_smin_x2" "R2 D2 ATOMIC";
    Mubuf 0x45 BufferAtomicUmin "buffer_atomic_umin" "R1 D1 ATOMIC";
    Mubuf 0x65 BufferAtomicUminX2 "buffer_atomic_umin_x2" "R2 D2 ATOMIC";
    Mubuf 0x46 BufferAtomicSmax "buffer_atomic_smax" "R1 D1 ATOMIC";
    Mubuf 0x66 BufferAtomicSmaxX2 "buffer_atomic_smax_x2" "R2 D2 ATOMIC";
    Mubuf 0x47 BufferAtomicUmax "buffer_atomic_umax" "R1 D1 ATOMIC";
    Mubuf 0x67 BufferAtomicUmaxX2 "buffer_atomic_umax_x2" "R2 D2 ATOMIC";
    Mubuf 0x48 BufferAtomicAnd "buffer_atomic_and" "R1 D1 ATOMIC";
    Mubuf 0x68 BufferAtomicAndX2 "buffer_atomic_and_x2" "R2 D2 ATOMIC";
    Mubuf 0x49 BufferAtomicOr "buffer_atomic_or" "R1 D1 ATOMIC";
    Mubuf 0x69 BufferAtomicOrX2 "buffer_atomic_or_x2" "R2 D2 ATOMIC";
    Mubuf 0x4a BufferAtomicXor "buffer_atomic_xor" "R1 D1 ATOMIC";
    Mubuf 0x6a BufferAtomicXorX2 "buffer_atomic_xor_x2" "R2 D2 ATOMIC";
    Mubuf 0x4b BufferAtomicInc "buffer_atomic_inc" "R1 D1 ATOMIC";
    Mubuf 0x6b BufferAtomicIncX2 "buffer_atomic_inc_x2" "R2 D2 ATOMIC";
    Mubuf 0x4c BufferAtomicDec "buffer_atomic_dec" "R1 D1 ATOMIC";
    Mubuf 0x6c BufferAtomicDecX2 "buffer_atomic_dec_x2" "R2 D2 ATOMIC";
    Mubuf 0x28 BufferWbl2 "buffer_wbl2" "";
    Mubuf 0x29 BufferInv "buffer_inv" "";
}

/// Operand types of a signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// No operand.
    N,
    /// A 32-bit scalar (SGPR, constant or literal); `S2` .. `S16` are SGPR ranges.
    S,
    S2,
    S4,
    S8,
    S16,
    /// An immediate in the instruction (SOPK / SOPP).
    K,
    /// 16-bit integer (low half of a 32-bit register).
    I16,
    /// 16-bit float (low half).
    F16,
    /// 32-bit integer / bits.
    I32,
    /// 32-bit float: takes float inline constants, |x| and -x modifiers, denormal flushing.
    F32,
    /// 64-bit integer (register pair; inline constants sign-extend).
    I64,
    /// 64-bit float.
    F64,
    /// A 64-bit lane mask in an SGPR pair (VCC, carry, compare result).
    M,
    /// Two packed 16-bit integers (VOP3P).
    P16,
    /// Two packed f32 in a register pair (VOP3P).
    PF,
}

impl Ty {
    /// Registers the operand spans.
    pub fn regs(self) -> u16 {
        match self {
            Ty::N | Ty::K => 0,
            Ty::S | Ty::I16 | Ty::F16 | Ty::I32 | Ty::F32 | Ty::P16 => 1,
            Ty::S2 | Ty::I64 | Ty::F64 | Ty::M | Ty::PF => 2,
            Ty::S4 => 4,
            Ty::S8 => 8,
            Ty::S16 => 16,
        }
    }
    /// Does the operand take float inline constants and source modifiers?
    pub fn is_float(self) -> bool {
        matches!(self, Ty::F16 | Ty::F32 | Ty::F64 | Ty::PF)
    }
    fn parse(t: &str) -> Ty {
        match t {
            "N" => Ty::N,
            "S" => Ty::S,
            "S2" => Ty::S2,
            "S4" => Ty::S4,
            "S8" => Ty::S8,
            "S16" => Ty::S16,
            "K" => Ty::K,
            "I16" => Ty::I16,
            "F16" => Ty::F16,
            "I32" => Ty::I32,
            "F32" => Ty::F32,
            "I64" => Ty::I64,
            "F64" => Ty::F64,
            "M" => Ty::M,
            "P16" => Ty::P16,
            "PF" => Ty::PF,
            _ => panic!("bad operand type {t} in the op table"),
        }
    }
}

/// Signature flags.
pub mod flag {
    /// Writes SCC.
    pub const SCC: u32 = 1;
    /// Reads and writes EXEC (the saveexec family).
    pub const EXEC: u32 = 2;
    /// Writes a lane mask besides its result: VOP3b `sdst` (carry out, v_div_scale's VCC), VCC
    /// in the 32-bit encoding.
    pub const CO: u32 = 4;
    /// Source 2 is a lane mask read per lane (carry in, v_cndmask's select): VCC in the 32-bit
    /// encoding.
    pub const CI: u32 = 8;
    /// The destination is also source 2 (v_fmac).
    pub const MAC: u32 = 16;
    /// One source is the literal constant that follows the instruction (v_fmamk / v_fmaak).
    pub const LIT: u32 = 32;
    /// A transcendental (quarter-rate trans unit; gfx94x forwarding wait state).
    pub const TRANS: u32 = 64;
    /// A v_cmpx: writes EXEC as well.
    pub const CMPX: u32 = 128;
    /// A v_cmp_class: source 1 is a class mask.
    pub const CLS: u32 = 256;
    /// Reads VCC implicitly (v_div_fmas).
    pub const VCCIN: u32 = 512;
    /// v_writelane: the destination VGPR keeps its other lanes (read-modify-write).
    pub const WL: u32 = 1024;
    /// A memory atomic.
    pub const ATOMIC: u32 = 2048;
}

/// An operation's signature (parsed once from [`OPS`]).
#[derive(Debug, Clone, Copy)]
pub struct Sig {
    pub dst: Ty,
    pub src: [Ty; 3],
    pub nsrc: usize,
    pub flags: u32,
    /// Memory ops: dwords returned (0 = none), data dwords (data0, data1), address operand.
    pub ret: u8,
    pub data: u8,
    pub data1: u8,
    pub addr: bool,
}

impl Sig {
    pub fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }
    fn parse(text: &str, enc: Enc) -> Sig {
        let mut sig = Sig { dst: Ty::N, src: [Ty::N; 3], nsrc: 0, flags: 0, ret: 0, data: 0, data1: 0, addr: false };
        let (body, flags) = text.split_once('|').unwrap_or((text, ""));
        for f in flags.split_whitespace() {
            sig.flags |= match f {
                "SCC" => flag::SCC,
                "EXEC" => flag::EXEC,
                "CO" => flag::CO,
                "CI" => flag::CI,
                "MAC" => flag::MAC,
                "LIT" => flag::LIT,
                "TRANS" => flag::TRANS,
                "CMPX" => flag::CMPX,
                "CLS" => flag::CLS,
                "VCCIN" => flag::VCCIN,
                "WL" => flag::WL,
                _ => panic!("bad flag {f} in the op table"),
            };
        }
        if matches!(enc, Enc::Ds | Enc::Global | Enc::Mubuf) {
            for t in body.split_whitespace() {
                let n = t[1..].parse::<u8>().unwrap_or(0);
                match t.as_bytes()[0] {
                    b'R' => sig.ret = n,
                    b'A' if t == "A" => sig.addr = true,
                    b'A' => sig.flags |= flag::ATOMIC,
                    b'D' => sig.data = n,
                    b'E' => sig.data1 = n,
                    _ => panic!("bad memory signature {text}"),
                }
            }
            return sig;
        }
        if let Some((d, s)) = body.split_once('=') {
            sig.dst = Ty::parse(d.trim());
            for (i, t) in s.split_whitespace().enumerate() {
                sig.src[i] = Ty::parse(t);
                sig.nsrc = i + 1;
            }
            if sig.has(flag::MAC) {
                // The destination is the addend: a third source of the destination's type.
                sig.src[2] = sig.dst;
                sig.nsrc = 3;
            }
        }
        sig
    }
}

fn sigs() -> &'static [Sig] {
    static SIGS: OnceLock<Vec<Sig>> = OnceLock::new();
    SIGS.get_or_init(|| {
        let mut v = vec![Sig::parse("", Enc::Sopp); OPS.len()];
        for (enc, _, op, _, text) in OPS {
            v[*op as usize] = Sig::parse(text, *enc);
        }
        v
    })
}

/// The signature of `op`.
pub fn sig(op: Op) -> &'static Sig {
    &sigs()[op as usize]
}

/// DPP controls (VOP1 / VOP2 / VOPC with src0 = 0xfa).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dpp {
    pub ctrl: u16,
    pub row_mask: u8,
    pub bank_mask: u8,
    pub bound_ctrl: bool,
}

/// SDWA selects (VOP1 / VOP2 / VOPC with src0 = 0xf9). Selects: 0..3 BYTE_n, 4 / 5 WORD_n,
/// 6 DWORD; dst_unused: 0 pad with zeros, 1 sign-extend, 2 preserve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sdwa {
    pub dst_sel: u8,
    pub dst_unused: u8,
    pub sel: [u8; 2],
    pub sext: [bool; 2],
}

/// Encoding extensions of a VALU instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ext {
    None,
    Dpp(Dpp),
    Sdwa(Sdwa),
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
    /// Destination: SGPR code, VGPR (256 + n), or unused. DS / GLOBAL / MUBUF: the return VGPR.
    pub dst: u16,
    /// The lane-mask destination of VOP3b / VOPC / carry-out ops (106 = VCC).
    pub sdst: u16,
    /// VALU / SALU sources; DS: [addr, data0, data1]; GLOBAL: [addr, data, saddr (0x7f = off)];
    /// MUBUF: [vaddr, vdata, srsrc].
    pub src: [u16; 3],
    /// The literal constant following the instruction (operand code 255).
    pub literal: u32,
    /// SOPP/SOPK simm16, SMEM offset, DS offset (offset1 << 8 | offset0), GLOBAL / MUBUF offset.
    pub imm: i32,
    /// SMEM: an SGPR offset (`soffset`) is added to the immediate one.
    pub soffset_reg: bool,
    /// Source modifiers, bit i = source i (VOP3, DPP, SDWA; VOP3P: neg = neg_lo).
    pub neg: u8,
    pub abs: u8,
    /// VOP3P: neg_hi, op_sel, op_sel_hi; VOP3: op_sel (bit 3 = destination).
    pub neg_hi: u8,
    pub op_sel: u8,
    pub op_sel_hi: u8,
    pub clamp: bool,
    pub omod: u8,
    pub ext: Ext,
    /// GLOBAL / MUBUF: glc / sc0 (an atomic returns the old value).
    pub glc: bool,
    /// Cache policy bits as printed: bit 0 sc0, bit 1 sc1, bit 2 nt (GLOBAL, MUBUF, SMEM glc).
    pub cpol: u8,
    /// MUBUF: VGPR offset / index enables and the soffset operand code (SMEM: the SGPR
    /// offset); DS: gds.
    pub offen: bool,
    pub idxen: bool,
    pub soffset: u16,
    pub gds: bool,
}

impl Inst {
    pub fn sig(&self) -> &'static Sig {
        sig(self.op)
    }
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

fn table() -> &'static std::collections::HashMap<(u8, u16), Op> {
    static T: OnceLock<std::collections::HashMap<(u8, u16), Op>> = OnceLock::new();
    T.get_or_init(|| OPS.iter().map(|(e, c, op, _, _)| ((*e as u8, *c), *op)).collect())
}

fn lookup(enc: Enc, code: u16) -> Option<Op> {
    table().get(&(enc as u8, code)).copied()
}

/// The encoding `op` belongs to in the table.
pub fn enc_of(op: Op) -> Enc {
    OPS[op as usize].0
}

/// The mnemonic of `op` as LLVM prints it (without an `_e32` / `_e64` / `_dpp` / `_sdwa` suffix).
pub fn mnemonic(op: Op) -> &'static str {
    OPS[op as usize].3
}

const VCC: u16 = 106;

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
        neg_hi: 0,
        op_sel: 0,
        op_sel_hi: 0,
        clamp: false,
        omod: 0,
        ext: Ext::None,
        glc: false,
        cpol: 0,
        offen: false,
        idxen: false,
        soffset: 0,
        gds: false,
    };
    let find = |enc: Enc, code: u16, w: u32| -> Result<Op, DecodeError> {
        lookup(enc, code).ok_or_else(|| err(w, format!("{enc:?} opcode 0x{code:x} is not in the supported subset")))
    };
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
            match inst.op {
                Op::SSetregB32 => inst.src[0] = inst.dst,
                Op::SSetregImm32B32 => {
                    inst.src[0] = 255;
                }
                Op::SMovkI32 | Op::SCmovkI32 | Op::SGetregB32 => {}
                _ => inst.src[0] = inst.dst,
            }
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
        // VOP2, VOP1, VOPC (32-bit VALU encodings), possibly with a literal, DPP or SDWA word.
        let src0 = (w0 & 0x1ff) as u16;
        let vsrc1 = 256 + ((w0 >> 9) & 0xff) as u16;
        let vdst = ((w0 >> 17) & 0xff) as u16;
        if w0 >> 25 == 0b011_1111 {
            inst.enc = Enc::Vop1;
            inst.op = find(Enc::Vop1, ((w0 >> 9) & 0xff) as u16, w0)?;
            inst.dst = if inst.op == Op::VReadfirstlaneB32 { vdst } else { 256 + vdst };
            inst.src[0] = src0;
        } else if w0 >> 25 == 0b011_1110 {
            inst.enc = Enc::Vopc;
            inst.op = find(Enc::Vopc, ((w0 >> 17) & 0xff) as u16, w0)?;
            inst.sdst = VCC;
            inst.src = [src0, vsrc1, 0];
        } else {
            inst.enc = Enc::Vop2;
            inst.op = find(Enc::Vop2, ((w0 >> 25) & 0x3f) as u16, w0)?;
            inst.dst = 256 + vdst;
            inst.src = [src0, vsrc1, 0];
            let s = inst.sig();
            if s.has(flag::CO) {
                inst.sdst = VCC;
            }
            if s.has(flag::CI) {
                inst.src[2] = VCC;
            }
            if s.has(flag::MAC) {
                inst.src[2] = inst.dst;
            }
            if inst.op == Op::VFmamkF32 {
                inst.src = [src0, 255, vsrc1];
            } else if inst.op == Op::VFmaakF32 {
                inst.src = [src0, vsrc1, 255];
            }
        }
        if src0 == 0xfa || src0 == 0xf9 {
            let d = w1()?;
            inst.len = 8;
            inst.src[0] = 256 + (d & 0xff) as u16;
            if src0 == 0xfa {
                inst.ext = Ext::Dpp(Dpp {
                    ctrl: ((d >> 8) & 0x1ff) as u16,
                    bound_ctrl: d & (1 << 19) != 0,
                    row_mask: (d >> 28) as u8,
                    bank_mask: ((d >> 24) & 0xf) as u8,
                });
                inst.neg = (((d >> 20) & 1) | ((d >> 21) & 2)) as u8;
                inst.abs = (((d >> 21) & 1) | ((d >> 22) & 2)) as u8;
            } else {
                if d & (1 << 23) != 0 {
                    inst.src[0] = (d & 0xff) as u16;
                }
                if d & (1 << 31) != 0 {
                    inst.src[1] = (w0 >> 9 & 0xff) as u16;
                }
                let mut s = Sdwa {
                    dst_sel: 6,
                    dst_unused: 0,
                    sel: [((d >> 16) & 7) as u8, ((d >> 24) & 7) as u8],
                    sext: [d & (1 << 19) != 0, d & (1 << 27) != 0],
                };
                inst.neg = (((d >> 20) & 1) | ((d >> 27) & 2)) as u8;
                inst.abs = (((d >> 21) & 1) | ((d >> 28) & 2)) as u8;
                if inst.enc == Enc::Vopc {
                    if d & (1 << 15) != 0 {
                        inst.sdst = ((d >> 8) & 0x7f) as u16;
                    }
                } else {
                    s.dst_sel = ((d >> 8) & 7) as u8;
                    s.dst_unused = ((d >> 11) & 3) as u8;
                    inst.clamp = d & (1 << 13) != 0;
                    inst.omod = ((d >> 14) & 3) as u8;
                }
                if s.sel.iter().any(|&x| x > 6) || s.dst_sel > 6 || s.dst_unused > 2 {
                    return Err(err(w0, "SDWA select out of range".into()));
                }
                inst.ext = Ext::Sdwa(s);
            }
        } else if inst.src.contains(&255) {
            inst.literal = w1()?;
            inst.len = 8;
        }
        if inst.sig().has(flag::LIT) && inst.len == 4 {
            inst.literal = w1()?;
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
            // IMM: a 21-bit signed immediate in the second word; SOE: an SGPR offset in its
            // bits 31:25 as well; neither: the SGPR offset is in bits 6:0.
            let (imm, soe) = (w0 & (1 << 17) != 0, w0 & (1 << 14) != 0);
            if imm {
                inst.imm = ((w1 & 0x1f_ffff) << 11) as i32 >> 11;
            }
            if soe {
                inst.soffset_reg = true;
                inst.soffset = ((w1 >> 25) & 0x7f) as u16;
            } else if !imm {
                inst.soffset_reg = true;
                inst.soffset = (w1 & 0x7f) as u16;
            }
            inst.glc = w0 & (1 << 16) != 0;
            inst.cpol = inst.glc as u8;
        }
        0b110100 => {
            let w1 = w1()?;
            inst.len = 8;
            inst.src = [(w1 & 0x1ff) as u16, ((w1 >> 9) & 0x1ff) as u16, ((w1 >> 18) & 0x1ff) as u16];
            inst.clamp = w0 & (1 << 15) != 0;
            let vdst = (w0 & 0xff) as u16;
            if w0 >> 23 == 0b1_1010_0111 {
                inst.enc = Enc::Vop3p;
                inst.op = find(Enc::Vop3p, ((w0 >> 16) & 0x7f) as u16, w0)?;
                inst.dst = 256 + vdst;
                inst.neg_hi = ((w0 >> 8) & 7) as u8;
                inst.op_sel = ((w0 >> 11) & 7) as u8;
                inst.op_sel_hi = (((w1 >> 27) & 3) | ((w0 >> 12) & 4)) as u8;
                inst.neg = ((w1 >> 29) & 7) as u8;
                if inst.src.contains(&255) {
                    return Err(err(w0, "a literal in VOP3P does not exist on GFX9".into()));
                }
                return Ok(inst);
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
            if matches!(op, Op::VFmamkF32 | Op::VFmaakF32) {
                return Err(err(w0, "v_fmamk / v_fmaak have no VOP3 form".into()));
            }
            inst.neg = ((w1 >> 29) & 7) as u8;
            inst.omod = ((w1 >> 27) & 3) as u8;
            let s = sig(op);
            if enc == Enc::Vopc {
                // VOPC in VOP3: the SGPR-pair result in the vdst field; abs in 8..10.
                inst.sdst = vdst;
                inst.abs = ((w0 >> 8) & 7) as u8;
            } else if s.has(flag::CO) {
                // VOP3b: sdst in 8..14, no abs / op_sel.
                inst.dst = 256 + vdst;
                inst.sdst = ((w0 >> 8) & 0x7f) as u16;
            } else {
                inst.dst = if s.dst == Ty::S { vdst } else { 256 + vdst };
                inst.abs = ((w0 >> 8) & 7) as u8;
                inst.op_sel = ((w0 >> 11) & 0xf) as u8;
            }
            if s.has(flag::MAC) {
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
            if w0 & (1 << 25) != 0 {
                return Err(err(w0, "DS with AGPR data is not supported".into()));
            }
            inst.gds = w0 & (1 << 16) != 0;
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
            let w1 = w1()?;
            inst.enc = Enc::Mubuf;
            inst.len = 8;
            inst.op = find(Enc::Mubuf, ((w0 >> 18) & 0x7f) as u16, w0)?;
            if w0 & (1 << 16) != 0 || w1 & (1 << 23) != 0 {
                return Err(err(w0, "MUBUF with LDS or AGPR data is not supported".into()));
            }
            inst.imm = (w0 & 0xfff) as i32;
            inst.offen = w0 & (1 << 12) != 0;
            inst.idxen = w0 & (1 << 13) != 0;
            inst.glc = w0 & (1 << 14) != 0;
            inst.cpol = (((w0 >> 14) & 1) as u8) | (((w0 >> 15) & 1) as u8) << 1 | (((w0 >> 17) & 1) as u8) << 2;
            inst.src = [256 + (w1 & 0xff) as u16, 256 + ((w1 >> 8) & 0xff) as u16, (((w1 >> 16) & 0x1f) << 2) as u16];
            inst.soffset = ((w1 >> 24) & 0xff) as u16;
            inst.dst = inst.src[1];
            if inst.soffset == 255 {
                return Err(err(w0, "a literal soffset does not exist on GFX9".into()));
            }
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

/// LLVM-style mnemonic with the encoding suffix llvm-objdump prints (`_e32`, `_e64`, `_dpp`,
/// `_sdwa`) for ops that exist in more than one VALU encoding.
pub fn full_mnemonic(inst: &Inst) -> String {
    let base = mnemonic(inst.op);
    match inst.ext {
        Ext::Dpp(_) => return format!("{base}_dpp"),
        Ext::Sdwa(_) => return format!("{base}_sdwa"),
        Ext::None => {}
    }
    match inst.enc {
        Enc::Vop1 | Enc::Vop2 | Enc::Vopc
            if !matches!(inst.op, Op::VReadfirstlaneB32 | Op::VNop | Op::VFmamkF32 | Op::VFmaakF32) =>
        {
            format!("{base}{}", if inst.vop3 { "_e64" } else { "_e32" })
        }
        _ => base.to_string(),
    }
}

/// An inline constant or register of the 9-bit source space, as LLVM prints it (`f64`: the
/// operand is 64 bits wide, so registers print as pairs and literals are the high half).
fn operand(code: u16, n: u16, literal: u32) -> String {
    match (code, n) {
        (106, 2) => return "vcc".into(),
        (126, 2) => return "exec".into(),
        (102, 2) => return "flat_scratch".into(),
        (0..=101, 2..) => return format!("s[{}:{}]", code, code + n - 1),
        (256..=511, 2..) => return format!("v[{}:{}]", code - 256, code - 256 + n - 1),
        _ => {}
    }
    match code {
        0..=101 => format!("s{code}"),
        102 => "flat_scratch_lo".into(),
        103 => "flat_scratch_hi".into(),
        104 => "xnack_mask_lo".into(),
        105 => "xnack_mask_hi".into(),
        106 => "vcc_lo".into(),
        107 => "vcc_hi".into(),
        124 => "m0".into(),
        126 => "exec_lo".into(),
        127 => "exec_hi".into(),
        128..=192 => format!("{}", code - 128),
        193..=208 => format!("-{}", code - 192),
        235 => "src_shared_base".into(),
        236 => "src_shared_limit".into(),
        237 => "src_private_base".into(),
        238 => "src_private_limit".into(),
        239 => "src_pops_exiting_wave_id".into(),
        240 => "0.5".into(),
        241 => "-0.5".into(),
        242 => "1.0".into(),
        243 => "-1.0".into(),
        244 => "2.0".into(),
        245 => "-2.0".into(),
        246 => "4.0".into(),
        247 => "-4.0".into(),
        248 => "0.15915494".into(),
        251 => "src_vccz".into(),
        252 => "src_execz".into(),
        253 => "src_scc".into(),
        254 => "src_lds_direct".into(),
        255 => format!("0x{literal:x}"),
        256..=511 => format!("v{}", code - 256),
        _ => format!("?{code}"),
    }
}

fn sel_name(s: u8) -> &'static str {
    ["BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD"][s as usize]
}

fn dpp_text(d: &Dpp) -> String {
    let c = d.ctrl;
    let ctl = match c {
        0x000..=0x0ff => format!("quad_perm:[{},{},{},{}]", c & 3, (c >> 2) & 3, (c >> 4) & 3, (c >> 6) & 3),
        0x101..=0x10f => format!("row_shl:{}", c & 0xf),
        0x111..=0x11f => format!("row_shr:{}", c & 0xf),
        0x121..=0x12f => format!("row_ror:{}", c & 0xf),
        0x130 => "wave_shl:1".into(),
        0x134 => "wave_rol:1".into(),
        0x138 => "wave_shr:1".into(),
        0x13c => "wave_ror:1".into(),
        0x140 => "row_mirror".into(),
        0x141 => "row_half_mirror".into(),
        0x142 => "row_bcast:15".into(),
        0x143 => "row_bcast:31".into(),
        _ => format!("dpp_ctrl:0x{c:x}"),
    };
    let mut t = format!("{ctl} row_mask:0x{:x} bank_mask:0x{:x}", d.row_mask, d.bank_mask);
    if d.bound_ctrl {
        t.push_str(" bound_ctrl:1");
    }
    t
}

/// The `ds_swizzle_b32` offset as LLVM prints it.
fn swizzle_text(off: u16) -> String {
    if off & 0x8000 != 0 {
        let s = |i: u16| (off >> (2 * i)) & 3;
        return format!("swizzle(QUAD_PERM,{},{},{},{})", s(0), s(1), s(2), s(3));
    }
    let (and, or, xor) = (off & 0x1f, (off >> 5) & 0x1f, (off >> 10) & 0x1f);
    if and == 0x1f && or == 0 && xor.is_power_of_two() {
        return format!("swizzle(SWAP,{xor})");
    }
    if or == 0 && (and + 1).is_power_of_two() && and + xor == 0x1f && xor != 0 && and != 0x1f {
        let size = 0x20 - and;
        if xor == size - 1 {
            return format!("swizzle(REVERSE,{})", size);
        }
    }
    if xor == 0 && (0x20 - and).is_power_of_two() && and != 0x1f && or < 0x20 - and {
        return format!("swizzle(BROADCAST,{},{})", 0x20 - and, or);
    }
    if xor == 0x1f - and && (and + 1).is_power_of_two() && or == 0 && and != 0x1f {
        return format!("swizzle(REVERSE,{})", and + 1);
    }
    let bits: String = (0..5)
        .rev()
        .map(|b| {
            let (a, o, x) = ((and >> b) & 1, (or >> b) & 1, (xor >> b) & 1);
            match (a, o, x) {
                (0, 0, _) => '0',
                (0, 1, _) => '1',
                (1, _, 0) => 'p',
                _ => 'i',
            }
        })
        .collect();
    format!("swizzle(BITMASK_PERM,\"{bits}\")")
}

fn hwreg_text(imm: i32) -> String {
    let imm = imm as u32 & 0xffff;
    let (id, off, size) = (imm & 0x3f, (imm >> 6) & 0x1f, ((imm >> 11) & 0x1f) + 1);
    let name = match id {
        1 => "HW_REG_MODE".to_string(),
        2 => "HW_REG_STATUS".to_string(),
        3 => "HW_REG_TRAPSTS".to_string(),
        4 => "HW_REG_HW_ID".to_string(),
        5 => "HW_REG_GPR_ALLOC".to_string(),
        6 => "HW_REG_LDS_ALLOC".to_string(),
        7 => "HW_REG_IB_STS".to_string(),
        _ => format!("{id}"),
    };
    if off == 0 && size == 32 {
        format!("hwreg({name})")
    } else {
        format!("hwreg({name}, {off}, {size})")
    }
}

/// The instruction in LLVM's assembly syntax, as `llvm-objdump-19 -d --mcpu=gfx942` prints it:
/// used to check the decoder operand by operand.
pub fn disassemble(inst: &Inst) -> String {
    use Op::*;
    let mn = full_mnemonic(inst);
    let lit = inst.literal;
    let s = inst.sig();
    let reg = |code: u16, n: u16| operand(code, n, lit);
    let mut suffix: Vec<String> = Vec::new();
    let operands: Vec<String> = match inst.enc {
        Enc::Sop2 | Enc::Sop1 | Enc::Sopc => {
            let mut v = Vec::new();
            if s.dst != Ty::N {
                v.push(reg(inst.dst, s.dst.regs()));
            }
            for i in 0..s.nsrc {
                v.push(reg(inst.src[i], s.src[i].regs()));
            }
            v
        }
        Enc::Sopk => match inst.op {
            SGetregB32 => vec![reg(inst.dst, 1), hwreg_text(inst.imm)],
            SSetregB32 => vec![hwreg_text(inst.imm), reg(inst.dst, 1)],
            SSetregImm32B32 => vec![hwreg_text(inst.imm), format!("{lit}")],
            _ => vec![reg(inst.dst, 1), format!("0x{:x}", inst.imm as u16)],
        },
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
                if parts.is_empty() {
                    parts.push(format!("{imm}"));
                }
                vec![parts.join(" ")]
            }
            _ => vec![format!("{}", inst.imm as u16)],
        },
        Enc::Smem => {
            let off = if inst.soffset_reg { reg(inst.soffset, 1) } else { format!("0x{:x}", inst.imm) };
            if inst.soffset_reg && inst.imm != 0 {
                suffix.push(format!("offset:0x{:x}", inst.imm));
            }
            if inst.glc {
                suffix.push("glc".into());
            }
            vec![reg(inst.dst, s.dst.regs()), reg(inst.src[0], 2), off]
        }
        Enc::Vop1 | Enc::Vop2 | Enc::Vopc | Enc::Vop3 => {
            let sdwa = match inst.ext {
                Ext::Sdwa(x) => Some(x),
                _ => None,
            };
            let f = |i: usize| {
                let n = s.src[i].regs().max(1);
                let mut t = reg(inst.src[i], n);
                if let Some(x) = sdwa {
                    if x.sext[i] {
                        t = format!("sext({t})");
                    }
                }
                if inst.abs >> i & 1 != 0 {
                    t = format!("|{t}|");
                }
                if inst.neg >> i & 1 != 0 {
                    t = format!("-{t}");
                }
                t
            };
            let mut v = Vec::new();
            if inst.enc == Enc::Vopc {
                v.push(reg(inst.sdst, 2));
            } else if s.dst != Ty::N {
                v.push(reg(inst.dst, s.dst.regs()));
                if s.has(flag::CO) {
                    v.push(reg(inst.sdst, 2));
                }
            }
            let nsrc = if s.has(flag::MAC) || s.has(flag::CI) || s.has(flag::LIT) { s.nsrc.min(2) } else { s.nsrc };
            for i in 0..nsrc {
                v.push(f(i));
            }
            if s.has(flag::CI) {
                v.push(reg(inst.src[2], 2));
            }
            if inst.op == VFmamkF32 {
                v = vec![v[0].clone(), f(0), format!("0x{lit:x}"), f(2)];
            } else if inst.op == VFmaakF32 {
                v = vec![v[0].clone(), f(0), f(1), format!("0x{lit:x}")];
            }
            if inst.clamp {
                suffix.push("clamp".into());
            }
            match inst.omod {
                1 => suffix.push("mul:2".into()),
                2 => suffix.push("mul:4".into()),
                3 => suffix.push("div:2".into()),
                _ => {}
            }
            if inst.op_sel != 0 {
                let n = if s.dst == Ty::N { s.nsrc } else { s.nsrc + 1 };
                let bits: Vec<String> = (0..n)
                    .map(|i| if i == s.nsrc { (inst.op_sel >> 3) & 1 } else { (inst.op_sel >> i) & 1 }.to_string())
                    .collect();
                suffix.push(format!("op_sel:[{}]", bits.join(",")));
            }
            match inst.ext {
                Ext::Dpp(d) => suffix.push(dpp_text(&d)),
                Ext::Sdwa(x) => {
                    if inst.enc != Enc::Vopc {
                        suffix.push(format!("dst_sel:{}", sel_name(x.dst_sel)));
                        suffix.push(format!(
                            "dst_unused:{}",
                            ["UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE"][x.dst_unused as usize]
                        ));
                    }
                    suffix.push(format!("src0_sel:{}", sel_name(x.sel[0])));
                    if inst.enc != Enc::Vop1 {
                        suffix.push(format!("src1_sel:{}", sel_name(x.sel[1])));
                    }
                }
                Ext::None => {}
            }
            v
        }
        Enc::Vop3p => {
            let mut v = vec![reg(inst.dst, s.dst.regs())];
            for i in 0..s.nsrc {
                v.push(reg(inst.src[i], s.src[i].regs()));
            }
            let arr = |bits: u8| {
                let b: Vec<String> = (0..s.nsrc).map(|i| ((bits >> i) & 1).to_string()).collect();
                format!("[{}]", b.join(","))
            };
            let all = (1u8 << s.nsrc) - 1;
            if inst.op_sel & all != 0 {
                suffix.push(format!("op_sel:{}", arr(inst.op_sel)));
            }
            if inst.op_sel_hi & all != all {
                suffix.push(format!("op_sel_hi:{}", arr(inst.op_sel_hi)));
            }
            if inst.neg & all != 0 {
                suffix.push(format!("neg_lo:{}", arr(inst.neg)));
            }
            if inst.neg_hi & all != 0 {
                suffix.push(format!("neg_hi:{}", arr(inst.neg_hi)));
            }
            if inst.clamp {
                suffix.push("clamp".into());
            }
            v
        }
        Enc::Ds => {
            let (a, d0, d1, dst) = (inst.src[0], inst.src[1], inst.src[2], inst.dst);
            let mut v = Vec::new();
            if s.ret > 0 {
                v.push(reg(dst, s.ret as u16));
            }
            if s.addr {
                v.push(reg(a, 1));
            }
            if s.data > 0 {
                v.push(reg(d0, s.data as u16));
            }
            if s.data1 > 0 {
                v.push(reg(d1, s.data1 as u16));
            }
            let two = matches!(
                inst.op,
                DsWrite2B32
                    | DsWrite2st64B32
                    | DsRead2B32
                    | DsRead2st64B32
                    | DsWrite2B64
                    | DsWrite2st64B64
                    | DsRead2B64
                    | DsRead2st64B64
            );
            if inst.op == DsSwizzleB32 {
                suffix.push(format!("offset:{}", swizzle_text(inst.imm as u16)));
            } else if two {
                if inst.imm & 0xff != 0 {
                    suffix.push(format!("offset0:{}", inst.imm & 0xff));
                }
                if inst.imm >> 8 != 0 {
                    suffix.push(format!("offset1:{}", inst.imm >> 8));
                }
            } else if inst.imm != 0 {
                suffix.push(format!("offset:{}", inst.imm));
            }
            if inst.gds {
                suffix.push("gds".into());
            }
            v
        }
        Enc::Global => {
            let saddr = inst.src[2];
            let addr = reg(inst.src[0], if saddr == 0x7f { 2 } else { 1 });
            let base = if saddr == 0x7f { "off".to_string() } else { reg(saddr, 2) };
            let mut v = Vec::new();
            let atomic = s.has(flag::ATOMIC);
            if s.ret > 0 && (!atomic || inst.glc) {
                v.push(reg(inst.dst, s.ret as u16));
            }
            v.push(addr);
            if s.data > 0 {
                v.push(reg(inst.src[1], s.data as u16));
            }
            v.push(base);
            if inst.imm != 0 {
                suffix.push(format!("offset:{}", inst.imm));
            }
            for (bit, name) in [(0, "sc0"), (1, "sc1"), (2, "nt")] {
                if inst.cpol >> bit & 1 != 0 {
                    suffix.push(name.into());
                }
            }
            v
        }
        Enc::Mubuf => {
            let mut v = Vec::new();
            if s.ret > 0 || s.data > 0 {
                let n = if s.data > 0 { s.data } else { s.ret };
                v.push(reg(inst.src[1], n as u16));
                v.push(match (inst.idxen, inst.offen) {
                    (true, true) => reg(inst.src[0], 2),
                    (false, false) => "off".into(),
                    _ => reg(inst.src[0], 1),
                });
                v.push(reg(inst.src[2], 4));
                v.push(reg(inst.soffset, 1));
                if inst.idxen {
                    suffix.push("idxen".into());
                }
                if inst.offen {
                    suffix.push("offen".into());
                }
                if inst.imm != 0 {
                    suffix.push(format!("offset:{}", inst.imm));
                }
            }
            for (bit, name) in [(0, "sc0"), (1, "sc1"), (2, "nt")] {
                if inst.cpol >> bit & 1 != 0 {
                    suffix.push(name.into());
                }
            }
            v
        }
    };
    let mut text = mn;
    if !operands.is_empty() {
        text = format!("{text} {}", operands.join(", "));
    }
    for s in suffix {
        text = format!("{text} {s}");
    }
    text
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
        assert_eq!((i.op, i.imm, i.src[0], i.src[1], i.src[2]), (Op::GlobalStoreDword, -16, 257, 256, 2));
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
    fn a_vop3_compare_keeps_its_abs_modifier() {
        // v_cmp_lt_f32_e64 vcc, |v2|, 4.0 (llvm-mc-19: [0x6a,0x01,0x41,0xd0,0x02,0xed,0x01,0x00])
        let i = d(&[0x6a, 0x01, 0x41, 0xd0, 0x02, 0xed, 0x01, 0x00]);
        assert_eq!((i.op, i.sdst, i.abs, i.src[1]), (Op::VCmpLtF32, 106, 1, 246));
        assert_eq!(disassemble(&i), "v_cmp_lt_f32_e64 vcc, |v2|, 4.0");
    }

    #[test]
    fn unsupported_is_named_with_offset() {
        // s_getpc_b64 is not in the subset.
        let e = decode_one(&[0, 0, 0, 0, 0x00, 0x1c, 0x80, 0xbe], 4).unwrap_err();
        assert_eq!(e.offset, 4);
        assert!(e.to_string().contains("Sop1 opcode 0x1c"), "{e}");
    }

    #[test]
    fn every_table_entry_has_a_unique_opcode_and_parses() {
        let mut seen = std::collections::HashSet::new();
        for (enc, code, op, _, _) in OPS {
            assert!(seen.insert((*enc as u8, *code)), "{op:?}");
            let _ = sig(*op);
            assert_eq!(enc_of(*op), *enc);
        }
    }
}
