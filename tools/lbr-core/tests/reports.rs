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
    assert_eq!(
        got.last().unwrap(),
        &("kmem_cache_free".into(), false)
    );
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
