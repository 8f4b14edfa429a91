//! The suite runs with the engine's invariants checked.
//!
//! `scripts/test.sh` runs `cargo test --workspace --profile test-opt`: optimised like release,
//! but with debug assertions and overflow checks on, so every `debug_assert!` of the engine
//! (handle state transitions, pin counts, stream bookkeeping) and every integer overflow is
//! checked in every test. This test fails when the tests are built without them — for
//! example by `cargo test --release`, which is not how the suite runs.

/// Fails unless the test binary was built with debug assertions (the `test-opt` profile).
#[test]
// The constant is the point: it is what the profile compiled in.
#[allow(clippy::assertions_on_constants)]
fn suite_profile_has_debug_assertions_and_overflow_checks() {
    assert!(
        cfg!(debug_assertions),
        "built without debug assertions: run the suite with `cargo test --profile test-opt` \
         (scripts/test.sh), not `--release`"
    );
    // Overflow checks are a separate switch: an addition that overflows must panic.
    let max = std::hint::black_box(u32::MAX);
    let overflowed = std::panic::catch_unwind(|| max + std::hint::black_box(1));
    assert!(
        overflowed.is_err(),
        "built without overflow checks: run the suite with `cargo test --profile test-opt`"
    );
}

/// `debug_assert!` itself panics in the suite's profile; a build that compiles it out does not
/// panic here, which `should_panic` reports as a failure.
#[test]
#[should_panic(expected = "debug assertions are on")]
fn debug_assert_fires_in_the_suite_profile() {
    debug_assert!(std::hint::black_box(false), "debug assertions are on");
}
