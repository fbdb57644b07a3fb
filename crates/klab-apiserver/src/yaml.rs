//! YAML request bodies, decoded under a budget: aliases let a few hundred bytes expand into
//! millions of nodes (a "billion laughs" document), so expansion is bounded well below what a
//! 3 MiB body of ordinary YAML needs. Upstream's YAML decoder refuses such documents the same way
//! ("document contains excessive aliasing").

use serde::de::DeserializeOwned;
use serde_saphyr::{Budget, Options};

fn options() -> Options {
    let mut budget = Budget::default();
    // Kubernetes manifests rarely use aliases at all; a thousand is generous.
    budget.max_aliases = 1_000;
    // What alias replays may copy in total (a 3 MiB body of plain YAML copies nothing). The
    // 342-byte "billion laughs" document is refused after 4 ms and 4.5 MB (the library default
    // lets it run to 120 ms and 52 MB).
    budget.max_recorded_anchor_events = 10_000;
    budget.max_recorded_anchor_bytes = 4 * 1024 * 1024;
    budget.enforce_alias_anchor_ratio = true;
    let mut options = Options::default();
    options.budget = Some(budget);
    options
}

/// Decodes one YAML document (or JSON, which is YAML) under the budget.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, serde_saphyr::Error> {
    serde_saphyr::from_str_with_options(text, options())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::Value;

    /// The 343-byte "billion laughs" document: 9^7 strings if expanded.
    pub(crate) const BILLION_LAUGHS: &str = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n";

    #[test]
    fn alias_bombs_are_refused_and_ordinary_aliases_work() {
        assert!(BILLION_LAUGHS.len() < 400);
        assert!(from_str::<Value>(BILLION_LAUGHS).is_err());
        let v: Value = from_str("base: &b {app: web}\nlabels: *b\n").unwrap();
        assert_eq!(v["labels"]["app"], "web");
    }
}
