// SPDX-License-Identifier: GPL-2.0

//! The `reports` parameter: which of the kernel's report functions get the report trampoline.
//!
//! Pure code: the parameter's text goes in, the list of function names (ftrace filter patterns,
//! as `set_ftrace_filter` takes them) comes out, or why the text is refused. The module hooks
//! each name when it arms (src/capture/report.rs).
//!
//! Syntax: a comma-separated list of names. `default` stands for [`DEFAULT`]; `none` alone
//! hooks nothing. A name is a function name, or an ftrace glob (`__ubsan_handle_*`) whose part
//! before the first wildcard is at least [`MIN_PREFIX`] characters long (so that no pattern can
//! put a trampoline on most of the kernel). A name gets an int3 (a kprobe) at its entry; a glob
//! gets the report trampoline as an ftrace direct call on every traceable function it matches
//! (kprobes take exact names). A trailing newline, as `echo` writes, is accepted.

/// What `default` stands for: every report function of the kernel's checks that report by a
/// call (KASAN, KFENCE's calls from kfree(), UBSAN, the hardened list checks, refcount's
/// saturation; not UBSAN's
/// `__ubsan_handle_builtin_unreachable`, which panics: the panic trampoline captures it). A
/// function this kernel does not have is left out with one line at arming.
pub const DEFAULT: [&str; 18] = [
    "kasan_report",
    "kasan_report_invalid_free",
    "kfence_report_error",
    "__ubsan_handle_add_overflow",
    "__ubsan_handle_sub_overflow",
    "__ubsan_handle_mul_overflow",
    "__ubsan_handle_negate_overflow",
    "__ubsan_handle_implicit_conversion",
    "__ubsan_handle_divrem_overflow",
    "__ubsan_handle_type_mismatch",
    "__ubsan_handle_type_mismatch_v1",
    "__ubsan_handle_out_of_bounds",
    "__ubsan_handle_shift_out_of_bounds",
    "__ubsan_handle_load_invalid_value",
    "__ubsan_handle_alignment_assumption",
    "__list_add_valid_or_report",
    "__list_del_entry_valid_or_report",
    "refcount_warn_saturate",
];

/// The most names a list holds (after `default` is expanded).
pub const MAX_NAMES: usize = 32;

/// The longest parameter text.
pub const MAX_TEXT: usize = 255;

/// The shortest literal prefix of a glob.
pub const MIN_PREFIX: usize = 4;

/// Why a parameter text is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal<'a> {
    /// Longer than [`MAX_TEXT`].
    TooLong,
    /// An empty name (two commas, or a comma at an end).
    Empty,
    /// A character other than letters, digits, `_`, `.` and the wildcard `*`.
    BadChar(&'a str),
    /// A glob whose literal prefix is shorter than [`MIN_PREFIX`].
    ShortGlob(&'a str),
    /// `none` beside other names.
    NoneWithOthers,
    /// A name given twice (`default` counts as its names).
    Twice(&'a str),
    /// More than [`MAX_NAMES`] names.
    TooMany,
}

impl core::fmt::Display for Refusal<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::TooLong => write!(f, "longer than {MAX_TEXT} characters"),
            Self::Empty => write!(f, "an empty name"),
            Self::BadChar(n) => write!(
                f,
                "{n}: not a function name (letters, digits, '_', '.', and '*' as a wildcard)"
            ),
            Self::ShortGlob(n) => write!(
                f,
                "{n}: a wildcard needs at least {MIN_PREFIX} characters before it"
            ),
            Self::NoneWithOthers => write!(f, "'none' with other names"),
            Self::Twice(n) => write!(f, "{n} named twice"),
            Self::TooMany => write!(f, "more than {MAX_NAMES} names"),
        }
    }
}

/// A parsed list: the names, each with whether it came from `default` (absent from this kernel
/// is then not an error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reports<'a> {
    names: [(&'a str, bool); MAX_NAMES],
    len: usize,
}

impl<'a> Reports<'a> {
    /// The names, in the order given (`default`'s in [`DEFAULT`]'s order where it stands), each
    /// with whether it came from `default`.
    pub fn names(&self) -> &[(&'a str, bool)] {
        &self.names[..self.len]
    }

    fn push(&mut self, name: &'a str, default: bool) -> Result<(), Refusal<'a>> {
        if self.names().iter().any(|(n, _)| *n == name) {
            return Err(Refusal::Twice(name));
        }
        if self.len == MAX_NAMES {
            return Err(Refusal::TooMany);
        }
        self.names[self.len] = (name, default);
        self.len += 1;
        Ok(())
    }
}

/// Parses the parameter's text.
pub fn parse(text: &str) -> Result<Reports<'_>, Refusal<'_>> {
    if text.len() > MAX_TEXT {
        return Err(Refusal::TooLong);
    }
    let text = text.strip_suffix('\n').unwrap_or(text);
    let mut r = Reports {
        names: [("", false); MAX_NAMES],
        len: 0,
    };
    if text == "none" {
        return Ok(r);
    }
    for name in text.split(',') {
        match name {
            "" => return Err(Refusal::Empty),
            "none" => return Err(Refusal::NoneWithOthers),
            "default" => {
                for d in DEFAULT {
                    r.push(d, true)?;
                }
            }
            _ => {
                let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '*';
                if !name.chars().all(ok) {
                    return Err(Refusal::BadChar(name));
                }
                if name.find('*').is_some_and(|i| i < MIN_PREFIX) {
                    return Err(Refusal::ShortGlob(name));
                }
                r.push(name, false)?;
            }
        }
    }
    Ok(r)
}

/// The kernel options that decide whether the kernel's code calls a UBSAN handler at all
/// (scripts/Makefile.ubsan's sanitizers), as bits of the mask [`uncalled`] takes.
pub mod ubsan {
    /// CONFIG_UBSAN_TRAP: every check traps (a ud1), no handler is called.
    pub const TRAP: u32 = 1 << 0;
    /// CONFIG_UBSAN_ALIGNMENT (-fsanitize=alignment).
    pub const ALIGNMENT: u32 = 1 << 1;
    /// CONFIG_UBSAN_BOUNDS (-fsanitize=array-bounds or bounds-strict).
    pub const BOUNDS: u32 = 1 << 2;
    /// CONFIG_UBSAN_SHIFT (-fsanitize=shift).
    pub const SHIFT: u32 = 1 << 3;
    /// CONFIG_UBSAN_DIV_ZERO (-fsanitize=integer-divide-by-zero).
    pub const DIV_ZERO: u32 = 1 << 4;
    /// CONFIG_UBSAN_BOOL (-fsanitize=bool).
    pub const BOOL: u32 = 1 << 5;
    /// CONFIG_UBSAN_ENUM (-fsanitize=enum).
    pub const ENUM: u32 = 1 << 6;
    /// CONFIG_UBSAN_INTEGER_WRAP (signed and unsigned overflow, implicit truncation).
    pub const INTEGER_WRAP: u32 = 1 << 7;
}

/// Why nothing in this kernel calls the `default` name `name`, given the kernel's UBSAN options
/// (`config`, bits of [`ubsan`]), or `None` if something may: a UBSAN handler whose sanitizer
/// the kernel is built without would cost an int3 at every arming for nothing. (A handler of a
/// sanitizer this kernel lacks is only called by code built otherwise, such as a module built
/// with its own flags: name it to hook it.)
pub fn uncalled(name: &str, config: u32) -> Option<&'static str> {
    use ubsan::*;
    let handler = name.strip_prefix("__ubsan_handle_")?;
    if config & TRAP != 0 {
        return Some("CONFIG_UBSAN_TRAP: UBSAN's checks trap instead");
    }
    let (needs, why) = match handler {
        "add_overflow"
        | "sub_overflow"
        | "mul_overflow"
        | "negate_overflow"
        | "implicit_conversion" => (INTEGER_WRAP, "no CONFIG_UBSAN_INTEGER_WRAP"),
        "divrem_overflow" => (
            DIV_ZERO | INTEGER_WRAP,
            "no CONFIG_UBSAN_DIV_ZERO or CONFIG_UBSAN_INTEGER_WRAP",
        ),
        "type_mismatch" | "type_mismatch_v1" | "alignment_assumption" => {
            (ALIGNMENT, "no CONFIG_UBSAN_ALIGNMENT")
        }
        "out_of_bounds" => (BOUNDS, "no CONFIG_UBSAN_BOUNDS"),
        "shift_out_of_bounds" => (SHIFT, "no CONFIG_UBSAN_SHIFT"),
        "load_invalid_value" => (BOOL | ENUM, "no CONFIG_UBSAN_BOOL or CONFIG_UBSAN_ENUM"),
        _ => return None,
    };
    (config & needs == 0).then_some(why)
}
