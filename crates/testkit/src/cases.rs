//! Property-test case counts that `PROPTEST_CASES` overrides.
//!
//! `ProptestConfig::with_cases(n)` ignores the `PROPTEST_CASES` environment
//! variable that proptest's own default honours, so a suite that sets its
//! count in code could be neither shortened nor lengthened from outside.
//! `with_cases(warpfs_testkit::cases(n))` keeps `n` as the default and lets
//! `PROPTEST_CASES=N` (a longer run made outside CI, or a quick local one)
//! set every suite's count.

/// The environment variable proptest reads for its default case count.
pub const ENV_CASES: &str = "PROPTEST_CASES";

/// `PROPTEST_CASES` when set to a positive number, else `default`.
pub fn cases(default: u32) -> u32 {
    from(std::env::var(ENV_CASES).ok().as_deref(), default)
}

fn from(var: Option<&str>, default: u32) -> u32 {
    match var.map(str::trim).map(str::parse::<u32>) {
        Some(Ok(n)) if n > 0 => n,
        Some(_) => panic!("{ENV_CASES} must be a positive number, not {var:?}"),
        None => default,
    }
}

#[cfg(test)]
mod tests {
    use super::from;

    #[test]
    fn the_variable_wins_over_the_default() {
        assert_eq!(from(None, 48), 48);
        assert_eq!(from(Some("5"), 48), 5);
        assert_eq!(from(Some(" 2000 "), 48), 2000);
    }

    #[test]
    #[should_panic(expected = "PROPTEST_CASES must be a positive number")]
    fn a_bad_value_is_refused_not_ignored() {
        from(Some("many"), 48);
    }

    #[test]
    #[should_panic(expected = "PROPTEST_CASES must be a positive number")]
    fn zero_cases_is_refused() {
        from(Some("0"), 48);
    }
}
