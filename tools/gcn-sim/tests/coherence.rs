//! The MI300 release / acquire pairs across workgroups (tests/fixtures/coherence.s): four
//! workgroups publish partials and the last to arrive sums them. The correct kernel passes in
//! every dispatch order; each kernel missing one piece is reported in every order.

#[path = "support/fixture.rs"]
mod fixture;

use gcn_sim::{Order, SimError};

const IMAGE: &[u8] = include_bytes!("fixtures/coherence.hsaco");

use fixture::permutations;

#[test]
fn release_and_acquire_pass_in_every_dispatch_order() {
    for order in permutations(4) {
        let (r, buf) =
            fixture::run(IMAGE, "release_acquire", 4, 64, &fixture::opts(Order::Given(order.clone()), false));
        r.unwrap_or_else(|e| panic!("order {order:?}: {e}"));
        let w = fixture::u32s(&buf);
        assert_eq!(w[0], 4, "order {order:?}: counter");
        assert_eq!(&w[4..8], &[1, 2, 3, 4], "order {order:?}: partials");
        assert_eq!(w[128], 10, "order {order:?}: the last workgroup's sum");
    }
}

#[test]
fn each_missing_piece_is_reported_in_every_order() {
    let cases = [
        ("release_missing", "without releasing it (buffer_wbl2 sc1"),
        ("acquire_missing", "without a buffer_inv sc1 after an acquire"),
        ("flag_before_release", "release of it completed after its last atomic"),
        ("inv_before_acquire_completes", "buffer_inv before the acquiring atomic / load completed"),
    ];
    for (name, what) in cases {
        for order in permutations(4) {
            match fixture::run(IMAGE, name, 4, 64, &fixture::opts(Order::Given(order.clone()), false)).0 {
                Err(SimError::Hazard { what: w, .. }) => assert!(w.contains(what), "{name} {order:?}: {w}"),
                other => panic!("{name} in order {order:?}: expected a hazard, got {other:?}"),
            }
        }
    }
}
