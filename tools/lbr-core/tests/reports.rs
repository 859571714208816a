// SPDX-License-Identifier: GPL-2.0

//! The `reports` parameter's syntax (Documentation/lbr-dump/admin-guide.rst "Reports").

use lbr_core::reports::{parse, Refusal, DEFAULT, MAX_NAMES};

fn names(text: &str) -> Vec<(String, bool)> {
    parse(text)
        .unwrap()
        .names()
        .iter()
        .map(|(n, d)| (n.to_string(), *d))
        .collect()
}

#[test]
fn default_expands_in_place_and_marks_its_names() {
    let got = names("kfree_sensitive,default,kmem_cache_free\n");
    assert_eq!(got.len(), 2 + DEFAULT.len());
    assert_eq!(got[0], ("kfree_sensitive".into(), false));
    assert_eq!(got[1], ("kasan_report".into(), true));
    assert_eq!(got[12], ("__ubsan_handle_out_of_bounds".into(), true));
    assert_eq!(got.last().unwrap(), &("kmem_cache_free".into(), false));
}

#[test]
fn none_alone_is_empty_and_refused_with_others() {
    assert!(names("none\n").is_empty());
    assert_eq!(parse("none,kasan_report"), Err(Refusal::NoneWithOthers));
    assert_eq!(parse("kasan_report,none"), Err(Refusal::NoneWithOthers));
}

#[test]
fn bad_names_are_refused_naming_the_name() {
    assert_eq!(parse(""), Err(Refusal::Empty));
    assert_eq!(parse("a,,b"), Err(Refusal::Empty));
    assert_eq!(parse("default,"), Err(Refusal::Empty));
    assert_eq!(parse("foo bar"), Err(Refusal::BadChar("foo bar")));
    assert_eq!(
        parse("kasan_report;rm"),
        Err(Refusal::BadChar("kasan_report;rm"))
    );
    assert_eq!(parse("*"), Err(Refusal::ShortGlob("*")));
    assert_eq!(parse("__u*"), Err(Refusal::ShortGlob("__u*")));
    assert!(parse("__ub*").is_ok());
    assert_eq!(
        parse("default,kasan_report"),
        Err(Refusal::Twice("kasan_report"))
    );
    let many: Vec<String> = (0..=MAX_NAMES).map(|i| format!("func{i}")).collect();
    assert_eq!(parse(&many.join(",")), Err(Refusal::TooMany));
    assert_eq!(parse(&"a".repeat(256)), Err(Refusal::TooLong));
}

#[test]
fn refusals_say_what_is_wrong() {
    assert_eq!(
        Refusal::ShortGlob("*").to_string(),
        "*: a wildcard needs at least 4 characters before it"
    );
    assert_eq!(Refusal::Twice("x").to_string(), "x named twice");
}

#[test]
fn ubsan_handlers_of_sanitizers_the_kernel_lacks_are_uncalled() {
    use lbr_core::reports::{ubsan::*, uncalled};
    // The test kernels' UBSAN: bounds, bool and enum (scripts/kconfig/test-kernel.config).
    let test_kernel = BOUNDS | BOOL | ENUM;
    let called: Vec<&str> = DEFAULT
        .iter()
        .copied()
        .filter(|n| uncalled(n, test_kernel).is_none())
        .collect();
    assert_eq!(
        called,
        [
            "kasan_report",
            "kasan_report_invalid_free",
            "kfence_report_error",
            "__ubsan_handle_out_of_bounds",
            "__ubsan_handle_load_invalid_value",
            "__list_add_valid_or_report",
            "__list_del_entry_valid_or_report",
            "refcount_warn_saturate",
        ]
    );
    assert_eq!(
        uncalled("__ubsan_handle_shift_out_of_bounds", test_kernel),
        Some("no CONFIG_UBSAN_SHIFT")
    );
    // Division by zero and overflow both call divrem_overflow.
    assert_eq!(uncalled("__ubsan_handle_divrem_overflow", DIV_ZERO), None);
    assert_eq!(
        uncalled("__ubsan_handle_divrem_overflow", INTEGER_WRAP),
        None
    );
    assert_eq!(uncalled("__ubsan_handle_load_invalid_value", ENUM), None);
    // Trapping UBSAN calls no handler, whatever it checks.
    assert!(DEFAULT
        .iter()
        .filter(|n| n.starts_with("__ubsan_handle_"))
        .all(|n| uncalled(n, !0) == Some("CONFIG_UBSAN_TRAP: UBSAN's checks trap instead")));
    // Every UBSAN handler of `default` has its sanitizer: all are called with all on.
    assert!(DEFAULT.iter().all(|n| uncalled(n, !TRAP).is_none()));
    // Names outside UBSAN are never judged.
    assert_eq!(uncalled("kasan_report", 0), None);
}
