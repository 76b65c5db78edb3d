//! Every hazard the simulator must report, each on a small kernel that breaks exactly that rule
//! (tests/fixtures/hazards.s), plus one kernel that breaks none and computes the right values.
//! The wait-state rules at their thresholds are in tests/wait_states.rs, the cross-workgroup
//! release / acquire rules in tests/coherence.rs.

use gcn_sim::{launch, load_kernel, Launch, Memory, SimError};

const IMAGE: &[u8] = include_bytes!("fixtures/hazards.hsaco");

/// Runs fixture `name` on one workgroup of 128 work-items with a 1 KiB buffer.
fn run(name: &str) -> (Result<gcn_sim::Stats, SimError>, Vec<f32>) {
    let k = load_kernel(IMAGE, name).map_err(|e| e.to_string());
    let k = match k {
        Ok(k) => k,
        Err(e) => return (Err(SimError::BadCodeObject(e)), vec![]),
    };
    let mut mem = Memory::new();
    let data: Vec<u8> = (0..256).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let buf = mem.alloc("buf", data);
    let ka = mem.alloc("kernarg", buf.to_le_bytes().to_vec());
    let r = launch(&k, Launch { grid: [1, 1, 1], block: [128, 1, 1] }, ka, &mut mem);
    let out = mem.bytes(buf).chunks(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    (r, out)
}

fn hazard(name: &str) -> String {
    match run(name).0 {
        Err(e) => e.to_string(),
        Ok(_) => panic!("{name}: no hazard reported"),
    }
}

#[test]
fn a_correct_kernel_runs_and_computes() {
    let (r, out) = run("ok_waited");
    let stats = r.unwrap();
    assert_eq!(stats.waves, 2);
    for i in 0..128 {
        assert_eq!(out[i], i as f32 + 1.0);
        assert_eq!(out[128 + i], 2.0 * (i as f32 + 1.0));
    }
}

#[test]
fn register_read_before_its_vmcnt_wait_is_reported() {
    let e = hazard("vmem_use_before_wait");
    assert!(e.contains("v3 read before the s_waitcnt"), "{e}");
    assert!(e.contains("v_add_f32_e32"), "{e}");
}

#[test]
fn scalar_load_needs_lgkmcnt_zero() {
    // SMEM returns out of order: lgkmcnt(1) does not cover either load.
    let e = hazard("smem_use_before_wait");
    assert!(e.contains("s2 read before the s_waitcnt"), "{e}");
}

#[test]
fn lds_access_past_the_declared_size_is_reported() {
    let e = hazard("lds_out_of_bounds");
    assert!(e.contains("outside the declared 1024 bytes"), "{e}");
}

#[test]
fn global_access_outside_the_buffers_is_reported() {
    let e = hazard("global_out_of_bounds");
    assert!(e.contains("out of bounds") && e.contains("buffer `buf`"), "{e}");
}

#[test]
fn barrier_with_unwaited_lds_stores_is_reported() {
    let e = hazard("barrier_before_lds_wait");
    assert!(e.contains("s_barrier with LDS stores"), "{e}");
}

#[test]
fn registers_beyond_the_descriptor_are_reported_at_load() {
    let e = hazard("vgpr_over_descriptor");
    assert!(e.contains("uses v12") && e.contains("8 arch VGPRs"), "{e}");
}

#[test]
fn unsupported_instruction_is_named_with_its_offset() {
    let e = hazard("unsupported_instruction");
    assert!(e.contains("unsupported_instruction: unsupported instruction at +0x0"), "{e}");
}

#[test]
fn lds_exchange_between_waves_without_a_barrier_is_a_race() {
    // Wave 0 reads what wave 1 writes (and the reverse) with no s_barrier in between.
    let e = hazard("lds_race");
    assert!(e.contains("LDS race"), "{e}");
}

#[test]
fn gfx94x_manual_wait_states_are_checked() {
    // A transcendental's result read by the next VALU needs one wait state.
    let e = hazard("trans_then_valu");
    assert!(e.contains("transcendental"), "{e}");
    // An SGPR written by a VALU (v_readfirstlane) and used by VMEM 3 wait states later (needs 5).
    let e = hazard("valu_sgpr_then_vmem");
    assert!(e.contains("VMEM reads s2 3 wait states after a VALU wrote it"), "{e}");
}
