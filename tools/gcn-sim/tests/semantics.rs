//! Operand semantics that are easy to model wrongly (a VOP3 compare's |abs| modifier, 64-bit
//! shifts of scalar sources), each with a kernel whose result shows it
//! (tests/fixtures/semantics.s), and the denormal mode read from the kernel descriptor.

#[path = "support/fixture.rs"]
mod fixture;

use gcn_sim::Order;

const IMAGE: &[u8] = include_bytes!("fixtures/semantics.hsaco");

/// `v_cmp_lt_f32_e64 vcc, |v1|, 4.0` over v1 = -32 .. 31: the |abs| modifier of a compare in the
/// VOP3 encoding marks the 7 lanes with |x| < 4 (lanes 29 .. 35), not the 36 with x < 4.
#[test]
fn a_vop3_compare_applies_its_abs_modifier() {
    let (r, buf) = fixture::run(IMAGE, "cmp_abs", 1, 64, &fixture::opts(Order::InOrder, false));
    r.unwrap();
    let w = fixture::u32s(&buf);
    let mask = w[0] as u64 | (w[1] as u64) << 32;
    assert_eq!(mask.count_ones(), 7, "mask {mask:#018x}");
    assert_eq!(mask, 0x7f << 29);
}

/// `v_lshlrev_b64` shifts all 64 bits of an SGPR-pair source and of an inline constant
/// (-1 is 64 ones), not only the low 32.
#[test]
fn lshlrev_b64_shifts_both_halves_of_scalar_sources() {
    let (r, buf) = fixture::run(IMAGE, "lshlrev_b64_scalar_sources", 1, 64, &fixture::opts(Order::InOrder, false));
    r.unwrap();
    let w = fixture::u32s(&buf);
    for lane in 0..64 {
        let s = lane as u32 & 31;
        let got_pair = w[4 * lane] as u64 | (w[4 * lane + 1] as u64) << 32;
        let got_const = w[4 * lane + 2] as u64 | (w[4 * lane + 3] as u64) << 32;
        assert_eq!(got_pair, 0x1234_5678_9abc_def0u64 << s, "lane {lane}: SGPR pair");
        assert_eq!(got_const, u64::MAX << s, "lane {lane}: inline constant -1");
    }
}

/// The descriptor's FLOAT_DENORM_MODE_32: 1e-20 squared is a denormal, kept in mode 3 and
/// flushed to zero in mode 0.
#[test]
fn the_denormal_mode_comes_from_the_descriptor() {
    let kept = gcn_sim::load_kernel(IMAGE, "denormal_product_kept").unwrap();
    let flushed = gcn_sim::load_kernel(IMAGE, "denormal_product_flushed").unwrap();
    assert_eq!((kept.rsrc1 >> 16) & 3, 3);
    assert_eq!((flushed.rsrc1 >> 16) & 3, 0);
    let x = f32::from_bits(0x1e3c_e508);
    let product = x * x;
    assert!(product.is_subnormal());
    let opts = fixture::opts(Order::InOrder, false);
    let (r, buf) = fixture::run(IMAGE, "denormal_product_kept", 1, 64, &opts);
    r.unwrap();
    assert_eq!(fixture::u32s(&buf)[0], product.to_bits());
    let (r, buf) = fixture::run(IMAGE, "denormal_product_flushed", 1, 64, &opts);
    r.unwrap();
    assert_eq!(fixture::u32s(&buf)[0], 0);
}
