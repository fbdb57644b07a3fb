//! Label selectors: the full string syntax (`k=v,k!=v,k in (a,b),k notin (a),k,!k`) and
//! `metav1.LabelSelector` (matchLabels + matchExpressions), with one matching rule for both.
//!
//! Mirrors upstream `k8s.io/apimachinery/pkg/labels` (lexer, parser, `Requirement.Matches`,
//! `Selector.String`) and the label-key / label-value / DNS-name checks of
//! `k8s.io/apimachinery/pkg/util/validation`, whose error texts the API server's validation reuses.
//! Pure and synchronous: the API server (list/watch filtering), controllers (selecting their pods)
//! and Scale status (`selector` string) all use this one implementation.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;

// ---------------------------------------------------------------------------------------------
// Name and label validation (upstream util/validation). Each returns the upstream error strings;
// an empty vector means valid. Hand-written matchers instead of a regex crate: the grammars are tiny.
// ---------------------------------------------------------------------------------------------

/// Regex shown in DNS-1123 label errors.
pub const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
/// Regex shown in DNS-1123 subdomain errors.
pub const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// Upstream `validation.RegexError`: the message, examples and the regex used. Upstream joins
/// examples as `'a', ` + ` or ` + `'b', `, so real messages carry a double space (`'MyName',  or`); kept.
pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    if examples.is_empty() {
        return format!("{msg} (regex used for validation is '{fmt}')");
    }
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(e);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(fmt);
    out.push_str("')");
    out
}

/// Upstream `validation.MaxLenError`.
pub fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

fn is_dns_label_chars(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    b.first().is_some_and(|&c| alnum(c))
        && b.last().is_some_and(|&c| alnum(c))
        && b.iter().all(|&c| alnum(c) || c == b'-')
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, the body of qualified names and label values.
fn is_qualified_chars(s: &str) -> bool {
    let b = s.as_bytes();
    let alnum = |c: u8| c.is_ascii_alphanumeric();
    b.first().is_some_and(|&c| alnum(c))
        && b.last().is_some_and(|&c| alnum(c))
        && b.iter()
            .all(|&c| alnum(c) || c == b'-' || c == b'_' || c == b'.')
}

/// Upstream `IsDNS1123Label` (max 63).
pub fn is_dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !is_dns_label_chars(value) {
        errs.push(regex_error(
            DNS1123_LABEL_ERR,
            DNS1123_LABEL_FMT,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

/// Upstream `IsDNS1123Subdomain` (max 253).
pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push(max_len_error(253));
    }
    if !value.split('.').all(is_dns_label_chars) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// Upstream `IsQualifiedName`: label keys, annotation keys, finalizer names.
pub fn is_qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    is_dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > 63 {
        errs.push(format!("name part {}", max_len_error(63)));
    }
    if !is_qualified_chars(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Upstream `IsValidLabelValue` (empty is valid, max 63).
pub fn is_valid_label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(max_len_error(63));
    }
    if !value.is_empty() && !is_qualified_chars(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

// ---------------------------------------------------------------------------------------------
// Requirements and selectors
// ---------------------------------------------------------------------------------------------

/// A selector operator (upstream `selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operator {
    Equals,
    DoubleEquals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// One `key op values` term. Set operators keep their values sorted and deduplicated, as the
/// upstream parser's string set does, so `Display` is canonical.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

impl Requirement {
    /// Upstream `NewRequirement`: validates the key, the values and their count for the operator.
    pub fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Requirement, String> {
        // Upstream collects every problem as a `field.ErrorList` and reports the aggregate.
        let mut errs: Vec<String> = Vec::new();
        let key_errs = is_qualified_name(key);
        if !key_errs.is_empty() {
            errs.push(format!(
                "key: Invalid value: {key:?}: {}",
                key_errs.join("; ")
            ));
        }
        let vals = go_string_slice(&values);
        match operator {
            Operator::In | Operator::NotIn => {
                if values.is_empty() {
                    errs.push(format!(
                        "values: Invalid value: {vals}: for 'in', 'notin' operators, values set can't be empty"
                    ));
                }
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => {
                if values.len() != 1 {
                    errs.push(format!(
                        "values: Invalid value: {vals}: exact-match compatibility requires one single value"
                    ));
                }
            }
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    errs.push(format!(
                        "values: Invalid value: {vals}: values set must be empty for exists and does not exist"
                    ));
                }
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(format!(
                        "values: Invalid value: {vals}: for 'Gt', 'Lt' operators, exactly one value is required"
                    ));
                }
                for (i, v) in values.iter().enumerate() {
                    if v.parse::<i64>().is_err() {
                        errs.push(format!(
                            "values[{i}]: Invalid value: {v:?}: for 'Gt', 'Lt' operators, the value must be an integer"
                        ));
                    }
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            let v_errs = is_valid_label_value(v);
            if !v_errs.is_empty() {
                errs.push(format!(
                    "values[{i}][{key}]: Invalid value: {v:?}: {}",
                    v_errs.join("; ")
                ));
            }
        }
        if !errs.is_empty() {
            return Err(aggregate(errs));
        }
        let mut values = values;
        values.sort();
        values.dedup();
        Ok(Requirement {
            key: key.to_string(),
            operator,
            values,
        })
    }

    /// Upstream `Requirement.Matches`: `!=` and `notin` match objects without the key.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_value(labels.get(&self.key).map(String::as_str))
    }

    fn matches_value(&self, value: Option<&str>) -> bool {
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                value.is_some_and(|v| self.values.iter().any(|x| x == v))
            }
            Operator::NotIn | Operator::NotEquals => {
                value.is_none_or(|v| !self.values.iter().any(|x| x == v))
            }
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(v), Some(want)) = (value, self.values.first()) else {
                    return false;
                };
                let (Ok(have), Ok(want)) = (v.parse::<i64>(), want.parse::<i64>()) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

/// Go's `%#v` of a `[]string` (how upstream prints a bad values list).
fn go_string_slice(values: &[String]) -> String {
    let items: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("[]string{{{}}}", items.join(", "))
}

/// Upstream `utilerrors.NewAggregate(..).Error()`: one message as is, several as `[a, b]`
/// (duplicates collapsed).
fn aggregate(errs: Vec<String>) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errs {
        if !seen.contains(&e) {
            seen.push(e);
        }
    }
    if seen.len() == 1 {
        seen.remove(0)
    } else {
        format!("[{}]", seen.join(", "))
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.operator {
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
        };
        f.write_str(op)?;
        if matches!(self.operator, Operator::In | Operator::NotIn) {
            write!(f, "({})", self.values.join(","))
        } else {
            f.write_str(&self.values.join(","))
        }
    }
}

/// A label selector: an AND of requirements, sorted by key. `nothing` is the selector of a nil
/// `metav1.LabelSelector` (matches no object), distinct from the empty selector (matches all).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
    nothing: bool,
}

impl LabelSelector {
    /// The selector that matches every object (empty string, or an empty `metav1.LabelSelector`).
    pub fn everything() -> Self {
        LabelSelector::default()
    }

    /// The selector that matches no object (upstream `labels.Nothing()`, for a nil selector).
    pub fn nothing() -> Self {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    pub fn is_everything(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    pub fn is_nothing(&self) -> bool {
        self.nothing
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    fn from_requirements(mut reqs: Vec<Requirement>) -> Self {
        // Upstream sorts by key only; a stable sort keeps the written order among equal keys.
        reqs.sort_by(|a, b| a.key.cmp(&b.key));
        LabelSelector {
            requirements: reqs,
            nothing: false,
        }
    }

    /// Parses the string syntax (upstream `labels.Parse`).
    pub fn parse(s: &str) -> Result<LabelSelector, String> {
        let tokens = lex(s)?;
        let mut p = Parser { tokens, pos: 0 };
        let reqs = p.parse()?;
        Ok(Self::from_requirements(reqs))
    }

    /// Converts a `metav1.LabelSelector` (upstream `metav1.LabelSelectorAsSelector`; an empty
    /// selector matches everything).
    pub fn from_label_selector(sel: &metav1::LabelSelector) -> Result<LabelSelector, String> {
        let mut reqs = Vec::new();
        if let Some(ml) = &sel.match_labels {
            for (k, v) in ml {
                reqs.push(Requirement::new(k, Operator::Equals, vec![v.clone()])?);
            }
        }
        if let Some(exprs) = &sel.match_expressions {
            for e in exprs {
                let op = match e.operator.as_str() {
                    "In" => Operator::In,
                    "NotIn" => Operator::NotIn,
                    "Exists" => Operator::Exists,
                    "DoesNotExist" => Operator::DoesNotExist,
                    other => {
                        return Err(format!("{other:?} is not a valid label selector operator"));
                    }
                };
                reqs.push(Requirement::new(
                    &e.key,
                    op,
                    e.values.clone().unwrap_or_default(),
                )?);
            }
        }
        Ok(Self::from_requirements(reqs))
    }

    /// Evaluates a `metav1.LabelSelector` directly, without building a selector: what controllers
    /// call once per pod per sync. Same result as `from_label_selector(sel)?.matches(labels)` for
    /// every selector the API server accepts (it validates keys and values on write); an unknown
    /// operator matches nothing, as the conversion error makes upstream skip the object.
    pub fn label_selector_matches(
        sel: &metav1::LabelSelector,
        labels: &BTreeMap<String, String>,
    ) -> bool {
        if let Some(ml) = &sel.match_labels
            && ml.iter().any(|(k, v)| labels.get(k) != Some(v))
        {
            return false;
        }
        sel.match_expressions.iter().flatten().all(|e| {
            let vals = e.values.as_deref().unwrap_or(&[]);
            let have = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => have.is_some_and(|v| vals.contains(v)),
                "NotIn" => have.is_none_or(|v| !vals.contains(v)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            }
        })
    }

    /// `None` (a nil selector) selects nothing, as upstream.
    pub fn from_optional(sel: Option<&metav1::LabelSelector>) -> Result<LabelSelector, String> {
        match sel {
            None => Ok(Self::nothing()),
            Some(s) => Self::from_label_selector(s),
        }
    }

    /// Converts the JSON form of a `metav1.LabelSelector` (as found in stored objects).
    pub fn from_json(v: &serde_json::Value) -> Result<LabelSelector, String> {
        let sel: metav1::LabelSelector = serde_json::from_value(v.clone())
            .map_err(|e| format!("invalid label selector: {e}"))?;
        Self::from_label_selector(&sel)
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Matches against an object's `metadata.labels` JSON map (absent = no labels; non-string
    /// values are treated as absent).
    pub fn matches_json(&self, labels: Option<&serde_json::Value>) -> bool {
        if self.nothing {
            return false;
        }
        let map = labels.and_then(|l| l.as_object());
        self.requirements
            .iter()
            .all(|r| r.matches_value(map.and_then(|m| m.get(&r.key)).and_then(|v| v.as_str())))
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// The canonical string of a `metav1.LabelSelector` (upstream `metav1.FormatLabelSelector`:
/// `<none>` for nil/empty-or-invalid, else the selector string). Used e.g. for Scale
/// `status.selector` (which upstream fills with `LabelSelectorAsSelector(..).String()`).
pub fn label_selector_to_string(sel: &metav1::LabelSelector) -> String {
    match LabelSelector::from_label_selector(sel) {
        Ok(s) if !s.is_everything() => s.to_string(),
        Ok(_) => String::new(),
        Err(_) => "<error>".to_string(),
    }
}

/// `kubectl describe`'s form: `<none>` when the selector is empty.
pub fn format_label_selector(sel: Option<&metav1::LabelSelector>) -> String {
    match sel.map(label_selector_to_string) {
        None => "<none>".to_string(),
        Some(s) if s.is_empty() => "<none>".to_string(),
        Some(s) => s,
    }
}

// ---------------------------------------------------------------------------------------------
// Lexer and parser (same token set and error texts as upstream labels/selector.go)
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Identifier,
    DoesNotExist, // "!"
    NotEquals,
    Equals,
    DoubleEquals,
    In,
    NotIn,
    OpenPar,
    ClosedPar,
    Comma,
    GreaterThan,
    LessThan,
    End,
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

#[allow(
    clippy::arithmetic_side_effects,
    reason = "indices stay below chars.len()"
)]
fn lex(s: &str) -> Result<Vec<(Tok, String)>, String> {
    let chars: Vec<char> = s.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if matches!(c, ' ' | '\t' | '\r' | '\n') {
            i += 1;
            continue;
        }
        if is_special(c) {
            // Greedy: the longest symbol that is a known token (`!=`, `==` before `!`, `=`).
            let next = chars.get(i + 1).copied();
            let (tok, lit, len) = match (c, next) {
                ('!', Some('=')) => (Tok::NotEquals, "!=", 2),
                ('=', Some('=')) => (Tok::DoubleEquals, "==", 2),
                ('!', _) => (Tok::DoesNotExist, "!", 1),
                ('=', _) => (Tok::Equals, "=", 1),
                ('(', _) => (Tok::OpenPar, "(", 1),
                (')', _) => (Tok::ClosedPar, ")", 1),
                (',', _) => (Tok::Comma, ",", 1),
                ('>', _) => (Tok::GreaterThan, ">", 1),
                _ => (Tok::LessThan, "<", 1),
            };
            out.push((tok, lit.to_string()));
            i += len;
            continue;
        }
        let start = i;
        while i < chars.len()
            && !matches!(chars[i], ' ' | '\t' | '\r' | '\n')
            && !is_special(chars[i])
        {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        let tok = match word.as_str() {
            "in" => Tok::In,
            "notin" => Tok::NotIn,
            _ => Tok::Identifier,
        };
        out.push((tok, word));
    }
    out.push((Tok::End, String::new()));
    Ok(out)
}

struct Parser {
    tokens: Vec<(Tok, String)>,
    pos: usize,
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Ctx {
    KeyAndOperator,
    Values,
}

impl Parser {
    fn peek(&self, ctx: Ctx) -> (Tok, String) {
        let (t, l) = self
            .tokens
            .get(self.pos)
            .cloned()
            .unwrap_or((Tok::End, String::new()));
        // In a values context the keywords are ordinary identifiers (`k in (in,notin)`).
        if ctx == Ctx::Values && matches!(t, Tok::In | Tok::NotIn) {
            return (Tok::Identifier, l);
        }
        (t, l)
    }

    fn next(&mut self, ctx: Ctx) -> (Tok, String) {
        let r = self.peek(ctx);
        if self.pos < self.tokens.len() {
            self.pos = self.pos.saturating_add(1);
        }
        r
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut reqs = Vec::new();
        loop {
            let (t, l) = self.peek(Ctx::Values);
            match t {
                Tok::Identifier | Tok::DoesNotExist => {
                    let r = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    reqs.push(r);
                    let (t, l) = self.next(Ctx::Values);
                    match t {
                        Tok::End => return Ok(reqs),
                        Tok::Comma => {
                            let (t2, l2) = self.peek(Ctx::Values);
                            if t2 != Tok::Identifier && t2 != Tok::DoesNotExist {
                                return Err(format!(
                                    "found '{l2}', expected: identifier after ','"
                                ));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Tok::End => return Ok(reqs),
                _ => {
                    return Err(format!(
                        "found '{l}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (mut t, mut key) = self.next(Ctx::Values);
        let mut op = None;
        if t == Tok::DoesNotExist {
            op = Some(Operator::DoesNotExist);
            (t, key) = self.next(Ctx::Values);
        }
        if t != Tok::Identifier {
            return Err(format!("found '{key}', expected: identifier"));
        }
        let errs = is_qualified_name(&key);
        if !errs.is_empty() {
            // Upstream validates the key here with the parser's nil field path, which prints
            // as `<nil>`.
            return Err(format!(
                "<nil>: Invalid value: {key:?}: {}",
                errs.join("; ")
            ));
        }
        let (la, _) = self.peek(Ctx::Values);
        if op.is_none() && matches!(la, Tok::End | Tok::Comma) {
            op = Some(Operator::Exists);
        }
        if let Some(op) = op {
            return Requirement::new(&key, op, Vec::new());
        }
        let (t, l) = self.next(Ctx::KeyAndOperator);
        let op = match t {
            Tok::In => Operator::In,
            Tok::NotIn => Operator::NotIn,
            Tok::Equals => Operator::Equals,
            Tok::DoubleEquals => Operator::DoubleEquals,
            Tok::NotEquals => Operator::NotEquals,
            Tok::GreaterThan => Operator::GreaterThan,
            Tok::LessThan => Operator::LessThan,
            _ => {
                return Err(format!(
                    "found '{l}', expected: in, notin, =, ==, !=, gt, lt"
                ));
            }
        };
        let values = match op {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        Requirement::new(&key, op, values)
    }

    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (t, l) = self.next(Ctx::Values);
        if t != Tok::OpenPar {
            return Err(format!("found '{l}' expected: '('"));
        }
        let (t, l) = self.peek(Ctx::Values);
        match t {
            Tok::Identifier | Tok::Comma => {
                let s = self.parse_identifiers_list()?;
                let (t, l) = self.next(Ctx::Values);
                if t != Tok::ClosedPar {
                    return Err(format!("found '{l}', expected: ')'"));
                }
                Ok(s)
            }
            Tok::ClosedPar => {
                // `k in ()` is an empty set, which the requirement refuses (a 400 from the API
                // server, as kube-apiserver answers `labelSelector=app notin ()`).
                self.next(Ctx::Values);
                Ok(Vec::new())
            }
            _ => Err(format!("found '{l}', expected: ',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<Vec<String>, String> {
        let mut s: Vec<String> = Vec::new();
        loop {
            let (t, l) = self.next(Ctx::Values);
            match t {
                Tok::Identifier => {
                    s.push(l);
                    let (t2, l2) = self.peek(Ctx::Values);
                    match t2 {
                        Tok::Comma => continue,
                        Tok::ClosedPar => return Ok(s),
                        _ => return Err(format!("found '{l2}', expected: ',' or ')'")),
                    }
                }
                Tok::Comma => {
                    // Empty elements (`(,a)`, `(a,)`, `(a,,b)`) stand for the empty value.
                    if s.is_empty() {
                        s.push(String::new());
                    }
                    let (t2, _) = self.peek(Ctx::Values);
                    if t2 == Tok::ClosedPar {
                        s.push(String::new());
                        return Ok(s);
                    }
                    if t2 == Tok::Comma {
                        self.next(Ctx::Values);
                        s.push(String::new());
                    }
                }
                _ => return Err(format!("found '{l}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (t, _) = self.peek(Ctx::Values);
        if matches!(t, Tok::End | Tok::Comma) {
            return Ok(vec![String::new()]);
        }
        let (t, l) = self.next(Ctx::Values);
        if t == Tok::Identifier {
            return Ok(vec![l]);
        }
        Err(format!("found '{l}', expected: identifier"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metav1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parse_and_canonical_string() {
        // (input, canonical Display)
        let cases = [
            ("", ""),
            ("a=b", "a=b"),
            ("a==b", "a==b"),
            ("a!=b", "a!=b"),
            (" a = b , c != d ", "a=b,c!=d"),
            ("z=1,a=2", "a=2,z=1"),
            ("env in (prod, dev)", "env in (dev,prod)"),
            ("env notin (b,a,b)", "env notin (a,b)"),
            ("env", "env"),
            ("!env", "!env"),
            ("  !env  ", "!env"),
            ("app=web,tier", "app=web,tier"),
            ("a=", "a="),
            ("a in (,x)", "a in (,x)"),
            ("k in (in,notin)", "k in (in,notin)"),
            ("example.com/app=web", "example.com/app=web"),
            ("n>3,n<10", "n>3,n<10"),
        ];
        for (input, want) in cases {
            let s = LabelSelector::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!(s.to_string(), want, "input {input:?}");
            // The canonical form parses back to the same selector.
            assert_eq!(
                LabelSelector::parse(&s.to_string()).unwrap(),
                s,
                "roundtrip {input:?}"
            );
        }
        assert!(LabelSelector::parse("").unwrap().is_everything());
        assert!(!LabelSelector::parse("a").unwrap().is_everything());
    }

    #[test]
    fn parse_errors() {
        let cases = [
            ("a=b,", "found '', expected: identifier after ','"),
            (
                ",a",
                "found ',', expected: !, identifier, or 'end of string'",
            ),
            (
                "a b",
                "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
            ),
            (
                "a in b",
                "unable to parse requirement: found 'b' expected: '('",
            ),
            (
                "a in (b",
                "unable to parse requirement: found '', expected: ',' or ')'",
            ),
            ("!a=b", "found '=', expected: ',' or 'end of string'"),
            (
                "a=(b)",
                "unable to parse requirement: found '(', expected: identifier",
            ),
            (
                "a>b",
                "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer",
            ),
            (
                "-a=b",
                "unable to parse requirement: <nil>: Invalid value: \"-a\": name part must consist of",
            ),
            ("a=b c", "found 'c', expected: ',' or 'end of string'"),
            (
                "a=-b",
                "unable to parse requirement: values[0][a]: Invalid value: \"-b\": a valid label must be",
            ),
        ];
        for (input, want) in cases {
            let err = LabelSelector::parse(input).expect_err(input);
            assert!(err.starts_with(want), "input {input:?}: got {err:?}");
        }
    }

    #[test]
    fn matching_table() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        let empty = labels(&[]);
        // (selector, matches l, matches empty)
        let cases = [
            ("", true, true),
            ("app=web", true, false),
            ("app==web", true, false),
            ("app=db", false, false),
            ("app!=db", true, true),
            ("app!=web", false, true),
            ("app in (web,db)", true, false),
            ("app notin (web)", false, true),
            ("app notin (db)", true, true),
            ("app", true, false),
            ("!app", false, true),
            ("app=web,tier=front", true, false),
            ("app=web,tier=back", false, false),
            ("missing=", false, false),
            ("missing!=", true, true),
            ("n>4", true, false),
            ("n>5", false, false),
            ("n<6", true, false),
        ];
        for (sel, want_l, want_empty) in cases {
            let s = LabelSelector::parse(sel).unwrap();
            assert_eq!(s.matches(&l), want_l, "{sel:?} on l");
            assert_eq!(s.matches(&empty), want_empty, "{sel:?} on empty");
            let json = serde_json::json!({"app": "web", "tier": "front", "n": "5"});
            assert_eq!(s.matches_json(Some(&json)), want_l, "{sel:?} on json");
            assert_eq!(s.matches_json(None), want_empty, "{sel:?} on no labels");
        }
    }

    #[test]
    fn from_metav1_selector() {
        let sel = metav1::LabelSelector {
            match_labels: Some([("app".to_string(), "web".to_string())].into()),
            match_expressions: Some(vec![
                LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: "In".into(),
                    values: Some(vec!["front".into(), "back".into()]),
                },
                LabelSelectorRequirement {
                    key: "canary".into(),
                    operator: "DoesNotExist".into(),
                    values: None,
                },
                LabelSelectorRequirement {
                    key: "zone".into(),
                    operator: "NotIn".into(),
                    values: Some(vec!["z1".into()]),
                },
                LabelSelectorRequirement {
                    key: "app".into(),
                    operator: "Exists".into(),
                    values: Some(vec![]),
                },
            ]),
        };
        let s = LabelSelector::from_label_selector(&sel).unwrap();
        assert_eq!(
            s.to_string(),
            "app=web,app,!canary,tier in (back,front),zone notin (z1)"
        );
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "back")])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("tier", "back"),
            ("canary", "1")
        ])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "back"), ("zone", "z1")])));
        assert!(!s.matches(&labels(&[("app", "web")])));

        assert!(
            LabelSelector::from_label_selector(&metav1::LabelSelector::default())
                .unwrap()
                .is_everything()
        );
        assert_eq!(
            label_selector_to_string(&metav1::LabelSelector::default()),
            ""
        );
        assert_eq!(format_label_selector(None), "<none>");
        let nothing = LabelSelector::from_optional(None).unwrap();
        assert!(!nothing.matches(&empty_map()) && !nothing.is_everything());

        let bad = |op: &str, values: Option<Vec<String>>| metav1::LabelSelector {
            match_labels: None,
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "k".into(),
                operator: op.into(),
                values,
            }]),
        };
        assert_eq!(
            LabelSelector::from_label_selector(&bad("Foo", None)).unwrap_err(),
            "\"Foo\" is not a valid label selector operator"
        );
        assert_eq!(
            LabelSelector::from_label_selector(&bad("In", None)).unwrap_err(),
            "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty"
        );
        assert_eq!(
            LabelSelector::from_label_selector(&bad("Exists", Some(vec!["x".into()]))).unwrap_err(),
            "values: Invalid value: []string{\"x\"}: values set must be empty for exists and does not exist"
        );
        // Several problems are reported together, as upstream's aggregate.
        assert_eq!(
            Requirement::new("k", Operator::Equals, vec!["a".into(), "-b".into()]).unwrap_err(),
            "[values: Invalid value: []string{\"a\", \"-b\"}: exact-match compatibility requires one single value, values[1][k]: Invalid value: \"-b\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')]"
        );
        assert!(
            LabelSelector::from_label_selector(&bad("Exists", Some(vec!["x".into()]))).is_err()
        );
        let json = serde_json::json!({"matchLabels": {"app": "web"}});
        assert_eq!(
            LabelSelector::from_json(&json).unwrap().to_string(),
            "app=web"
        );
    }

    fn empty_map() -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    #[test]
    fn name_validators() {
        assert!(is_dns1123_subdomain("example.com").is_empty());
        assert_eq!(
            is_dns1123_subdomain("Foo"),
            vec![
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
            ]
        );
        assert!(!is_dns1123_subdomain("a..b").is_empty());
        assert_eq!(
            is_dns1123_subdomain(&"a".repeat(254))[0],
            "must be no more than 253 characters"
        );
        assert!(is_dns1123_label("my-name").is_empty());
        assert!(!is_dns1123_label("my.name").is_empty());
        assert_eq!(
            is_dns1123_label(&"a".repeat(64)),
            vec!["must be no more than 63 characters".to_string()]
        );
        assert!(is_qualified_name("app").is_empty());
        assert!(is_qualified_name("kubernetes.io/metadata.name").is_empty());
        assert!(is_qualified_name("My_Name.1").is_empty());
        assert_eq!(
            is_qualified_name("/a"),
            vec!["prefix part must be non-empty".to_string()]
        );
        assert_eq!(is_qualified_name("a/"), vec![
            "name part must be non-empty".to_string(),
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_string(),
        ]);
        assert!(is_qualified_name("a/b/c")[0].starts_with("a qualified name must consist of"));
        assert!(
            is_qualified_name("Example.com/x")[0]
                .starts_with("prefix part a lowercase RFC 1123 subdomain")
        );
        assert!(is_valid_label_value("").is_empty());
        assert!(is_valid_label_value("v1.2_x-3").is_empty());
        assert!(!is_valid_label_value("-x").is_empty());
        assert!(!is_valid_label_value("a b").is_empty());
        assert_eq!(
            is_valid_label_value(&"a".repeat(64)),
            vec!["must be no more than 63 characters".to_string()]
        );
    }

    #[test]
    fn direct_evaluation_agrees_with_the_built_selector() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;
        let req = |k: &str, op: &str, v: &[&str]| LabelSelectorRequirement {
            key: k.into(),
            operator: op.into(),
            values: Some(v.iter().map(|s| s.to_string()).collect()),
        };
        let sels = [
            metav1::LabelSelector::default(),
            metav1::LabelSelector {
                match_labels: Some([("app".into(), "web".into())].into()),
                ..Default::default()
            },
            metav1::LabelSelector {
                match_expressions: Some(vec![req("tier", "In", &["fe", "be"])]),
                ..Default::default()
            },
            metav1::LabelSelector {
                match_expressions: Some(vec![req("tier", "NotIn", &["fe"])]),
                ..Default::default()
            },
            metav1::LabelSelector {
                match_expressions: Some(vec![
                    req("app", "Exists", &[]),
                    req("x", "DoesNotExist", &[]),
                ]),
                ..Default::default()
            },
        ];
        let label_sets: Vec<BTreeMap<String, String>> = vec![
            BTreeMap::new(),
            [("app".to_string(), "web".to_string())].into(),
            [
                ("app".to_string(), "web".to_string()),
                ("tier".to_string(), "fe".to_string()),
            ]
            .into(),
            [
                ("tier".to_string(), "be".to_string()),
                ("x".to_string(), "1".to_string()),
            ]
            .into(),
        ];
        for sel in &sels {
            let built = LabelSelector::from_label_selector(sel).unwrap();
            for l in &label_sets {
                assert_eq!(
                    LabelSelector::label_selector_matches(sel, l),
                    built.matches(l),
                    "{sel:?} {l:?}"
                );
            }
        }
        let bad = metav1::LabelSelector {
            match_expressions: Some(vec![req("a", "Near", &[])]),
            ..Default::default()
        };
        assert!(!LabelSelector::label_selector_matches(
            &bad,
            &BTreeMap::new()
        ));
    }
}
