//! Every gfx94x wait-state rule of `gcn_sim::hazard` at its threshold (tests/fixtures/
//! wait_states.s): one wait state short is reported, the exact count passes.

#[path = "support/fixture.rs"]
mod fixture;

use gcn_sim::{Order, SimError};

const IMAGE: &[u8] = include_bytes!("fixtures/wait_states.hsaco");

/// (fixture, what the report says, XNACK on).
const RULES: &[(&str, &str, bool)] = &[
    ("wide_store_data", "store of more than 64 bits read it (gfx94x needs 2)", false),
    (
        "cmpx_then_readfirstlane",
        "v_readfirstlane_b32 3 wait states after a VALU (v_cmpx) wrote EXEC (gfx94x needs 4)",
        false,
    ),
    (
        "valu_sgpr_then_lane_select",
        "reads s4 as a lane select 3 wait states after a VALU wrote it (gfx94x needs 4)",
        false,
    ),
    ("valu_sgpr_then_constant", "reads s4 1 wait states after a VALU wrote it (gfx94x needs 2)", false),
    ("carry_out_then_carry_in", "reads vcc_lo 1 wait states after a VALU wrote it (gfx94x needs 2)", false),
    ("compare_then_cndmask", "reads vcc_lo 1 wait states after a VALU wrote it (gfx94x needs 2)", false),
    ("vcc_then_div_fmas", "v_div_fmas reads VCC 3 wait states after a VALU wrote it (needs 4)", false),
    ("vgpr_then_readlane", "v_readlane_b32 reads v1 right after a VALU wrote it (gfx94x needs 1)", false),
    ("trans_then_valu", "reads v1 right after a transcendental wrote it", false),
    ("valu_sgpr_then_vmem", "VMEM reads s2 4 wait states after a VALU wrote it (gfx94x needs 5)", false),
    ("vgpr_then_dpp", "DPP reads v1 1 wait states after a VALU wrote it (needs 2)", false),
    ("exec_then_dpp", "DPP 4 wait states after a VALU wrote EXEC (needs 5)", false),
    ("sdwa_dst_sel_then_valu", "reads v1 right after an SDWA / op_sel partial write of it", false),
    ("setreg_then_getreg", "accessed 1 wait states after s_setreg wrote it (needs 2)", false),
    ("xnack_soft_clause", "memory clause with one writes a register another uses", true),
];

#[test]
fn one_wait_state_short_is_reported_and_the_exact_count_passes() {
    for (rule, what, xnack) in RULES {
        let opts = fixture::opts(Order::InOrder, *xnack);
        match fixture::run(IMAGE, &format!("{rule}_short"), 1, 128, &opts).0 {
            Err(SimError::Hazard { what: w, .. }) => assert!(w.contains(what), "{rule}_short: {w}"),
            other => panic!("{rule}_short: expected a hazard, got {other:?}"),
        }
        if let Err(e) = fixture::run(IMAGE, &format!("{rule}_exact"), 1, 128, &opts).0 {
            panic!("{rule}_exact: {e}");
        }
    }
}

#[test]
fn the_soft_clause_rule_applies_only_with_xnack() {
    let opts = fixture::opts(Order::InOrder, false);
    fixture::run(IMAGE, "xnack_soft_clause_short", 1, 128, &opts).0.unwrap();
}
