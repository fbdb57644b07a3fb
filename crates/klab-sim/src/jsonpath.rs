//! The subset of kubectl's JSONPath that scenario expectations use to reach into any object:
//! `{.status.conditions[?(@.type=="Ready")].reason}`, `.spec.taints[0].key`, `.items[*]`,
//! `['kubernetes.io/hostname']`, escaped dots (`.metadata.labels.kubernetes\.io/os`), and
//! templates mixing text and expressions (`{.status.currentHealthy}/{.status.desiredHealthy}`).
//!
//! Pure: a path is parsed once when the scenario loads (so a bad one is refused with its line)
//! and evaluated against recorded objects after the run. Results render as `kubectl get -o
//! jsonpath` prints them: strings bare, other values as JSON, several results joined by a space.

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
enum Segment {
    /// `.name` or `['name']`.
    Field(String),
    /// `[n]`; a negative index counts from the end, as kubectl's does.
    Index(i64),
    /// `[*]` or `.*`: every element of a list or every value of a map.
    Wildcard,
    /// `[?(@.a.b == 'x')]`, `[?(@.a != 1)]` or `[?(@.a)]` (the field exists).
    Filter {
        path: Vec<Segment>,
        op: Option<(bool, Value)>,
    },
}

/// A piece of a template: literal text or a `{…}` expression.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    Text(String),
    Expr(Vec<Segment>),
}

/// A parsed JSONPath template.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    text: String,
    parts: Vec<Part>,
}

impl std::fmt::Display for JsonPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl JsonPath {
    /// Parses a template (`{.a.b}`, `{.a} of {.b}`) or a bare expression (`.a.b`, `$.a.b`).
    pub fn parse(text: &str) -> Result<JsonPath, String> {
        let bad = |e: String| format!("invalid jsonpath {text:?}: {e}");
        let t = text.trim();
        let mut parts = Vec::new();
        if !t.contains('{') {
            parts.push(Part::Expr(parse_expr(t).map_err(bad)?));
        } else {
            let mut rest = text;
            while !rest.is_empty() {
                match rest.find('{') {
                    Some(0) => {
                        let close = rest.find('}').ok_or_else(|| bad("unclosed {".into()))?;
                        parts.push(Part::Expr(parse_expr(&rest[1..close]).map_err(bad)?));
                        rest = &rest[close.saturating_add(1)..];
                    }
                    Some(i) => {
                        parts.push(Part::Text(rest[..i].to_string()));
                        rest = &rest[i..];
                    }
                    None => {
                        parts.push(Part::Text(rest.to_string()));
                        rest = "";
                    }
                }
            }
        }
        Ok(JsonPath {
            text: text.to_string(),
            parts,
        })
    }

    /// Every value the template's expressions reach in `root`, in order.
    pub fn eval<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        self.parts
            .iter()
            .flat_map(|p| match p {
                Part::Expr(segs) => eval(segs, root),
                Part::Text(_) => Vec::new(),
            })
            .collect()
    }

    /// What `kubectl get -o jsonpath=…` prints for `root`: the template's text with each
    /// expression's results in place.
    pub fn render(&self, root: &Value) -> String {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Text(t) => t.clone(),
                Part::Expr(segs) => render(&eval(segs, root)),
            })
            .collect()
    }
}

/// One expression: `.a.b`, `$.a.b` (braces already removed).
fn parse_expr(s: &str) -> Result<Vec<Segment>, String> {
    let inner = s.trim();
    let inner = inner.strip_prefix('$').unwrap_or(inner);
    let chars: Vec<char> = inner.chars().collect();
    let mut pos = 0usize;
    let segments = parse_segments(&chars, &mut pos, false)?;
    if pos != chars.len() {
        return Err(format!(
            "unexpected {:?}",
            chars[pos..].iter().collect::<String>()
        ));
    }
    Ok(segments)
}

fn eval<'a>(segments: &[Segment], root: &'a Value) -> Vec<&'a Value> {
    let mut cur = vec![root];
    for s in segments {
        let mut next = Vec::new();
        for v in cur {
            match s {
                Segment::Field(name) => {
                    if let Some(x) = v.get(name.as_str()) {
                        next.push(x);
                    }
                }
                Segment::Index(i) => {
                    if let Some(a) = v.as_array() {
                        let len = i64::try_from(a.len()).unwrap_or(i64::MAX);
                        let idx = if *i < 0 { len.saturating_add(*i) } else { *i };
                        if let Some(x) = usize::try_from(idx).ok().and_then(|u| a.get(u)) {
                            next.push(x);
                        }
                    }
                }
                Segment::Wildcard => match v {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
                Segment::Filter { path, op } => {
                    if let Some(a) = v.as_array() {
                        for item in a {
                            let found = eval(path, item);
                            let keep = match op {
                                None => !found.is_empty(),
                                Some((eq, lit)) => {
                                    let hit = found.iter().any(|f| loosely_equal(f, lit));
                                    hit == *eq
                                }
                            };
                            if keep {
                                next.push(item);
                            }
                        }
                    }
                }
            }
        }
        cur = next;
    }
    cur
}

/// kubectl compares a filter's literal with the field's printed form (`@.count==3` matches 3).
fn loosely_equal(v: &Value, lit: &Value) -> bool {
    v == lit || render_one(v) == render_one(lit)
}

fn render_one(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => sorted(other).to_string(),
    }
}

/// Maps with their keys in order, as Go's encoding/json writes a map (kubectl prints nested
/// values that way).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let ordered: std::collections::BTreeMap<&String, Value> =
                m.iter().map(|(k, x)| (k, sorted(x))).collect();
            Value::Object(ordered.into_iter().map(|(k, x)| (k.clone(), x)).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// What `kubectl get -o jsonpath=…` prints for these results.
pub fn render(values: &[&Value]) -> String {
    values
        .iter()
        .map(|v| render_one(v))
        .collect::<Vec<_>>()
        .join(" ")
}

fn parse_segments(c: &[char], pos: &mut usize, in_filter: bool) -> Result<Vec<Segment>, String> {
    let mut out = Vec::new();
    while *pos < c.len() {
        match c[*pos] {
            '.' => {
                *pos = pos.saturating_add(1);
                if c.get(*pos) == Some(&'.') {
                    return Err("recursive descent (..) is not supported".into());
                }
                if c.get(*pos) == Some(&'*') {
                    *pos = pos.saturating_add(1);
                    out.push(Segment::Wildcard);
                    continue;
                }
                let mut name = String::new();
                while let Some(&ch) = c.get(*pos) {
                    if ch == '\\' && c.get(pos.saturating_add(1)) == Some(&'.') {
                        name.push('.');
                        *pos = pos.saturating_add(2);
                        continue;
                    }
                    if ch == '.' || ch == '[' || (in_filter && !is_name_char(ch)) {
                        break;
                    }
                    name.push(ch);
                    *pos = pos.saturating_add(1);
                }
                if name.is_empty() {
                    return Err("empty field name".into());
                }
                out.push(Segment::Field(name));
            }
            '[' => {
                *pos = pos.saturating_add(1);
                out.push(parse_bracket(c, pos)?);
            }
            _ if in_filter => break,
            ch => return Err(format!("unexpected {ch:?}")),
        }
    }
    Ok(out)
}

fn is_name_char(ch: char) -> bool {
    ch.is_alphanumeric() || matches!(ch, '_' | '-' | '/')
}

fn skip_ws(c: &[char], pos: &mut usize) {
    while c.get(*pos).is_some_and(|ch| ch.is_whitespace()) {
        *pos = pos.saturating_add(1);
    }
}

fn expect_char(c: &[char], pos: &mut usize, want: char) -> Result<(), String> {
    skip_ws(c, pos);
    if c.get(*pos) == Some(&want) {
        *pos = pos.saturating_add(1);
        Ok(())
    } else {
        Err(format!("expected {want:?}"))
    }
}

fn parse_quoted(c: &[char], pos: &mut usize) -> Result<String, String> {
    let q = c[*pos];
    *pos = pos.saturating_add(1);
    let mut s = String::new();
    loop {
        match c.get(*pos) {
            None => return Err("unterminated string".into()),
            Some(&ch) if ch == q => {
                *pos = pos.saturating_add(1);
                return Ok(s);
            }
            Some('\\') if c.get(pos.saturating_add(1)).is_some() => {
                s.push(c[pos.saturating_add(1)]);
                *pos = pos.saturating_add(2);
            }
            Some(&ch) => {
                s.push(ch);
                *pos = pos.saturating_add(1);
            }
        }
    }
}

fn parse_bracket(c: &[char], pos: &mut usize) -> Result<Segment, String> {
    skip_ws(c, pos);
    let seg = match c.get(*pos) {
        Some('*') => {
            *pos = pos.saturating_add(1);
            Segment::Wildcard
        }
        Some('\'' | '"') => Segment::Field(parse_quoted(c, pos)?),
        Some('?') => {
            *pos = pos.saturating_add(1);
            expect_char(c, pos, '(')?;
            expect_char(c, pos, '@')?;
            let path = parse_segments(c, pos, true)?;
            if path.is_empty() {
                return Err("a filter needs a path after @".into());
            }
            skip_ws(c, pos);
            let op = match (c.get(*pos), c.get(pos.saturating_add(1))) {
                (Some('='), Some('=')) | (Some('!'), Some('=')) => {
                    let eq = c[*pos] == '=';
                    *pos = pos.saturating_add(2);
                    skip_ws(c, pos);
                    Some((eq, parse_literal(c, pos)?))
                }
                _ => None,
            };
            expect_char(c, pos, ')')?;
            Segment::Filter { path, op }
        }
        Some(_) => {
            let start = *pos;
            while c
                .get(*pos)
                .is_some_and(|ch| ch.is_ascii_digit() || *ch == '-')
            {
                *pos = pos.saturating_add(1);
            }
            let s: String = c[start..*pos].iter().collect();
            if s.is_empty() {
                return Err("expected an index, '*', a quoted name or a filter in [...]".into());
            }
            let i = s
                .parse::<i64>()
                .map_err(|_| format!("invalid index {s:?}"))?;
            skip_ws(c, pos);
            if c.get(*pos) == Some(&':') {
                return Err("slices ([a:b]) are not supported".into());
            }
            Segment::Index(i)
        }
        None => return Err("unclosed [".into()),
    };
    expect_char(c, pos, ']')?;
    Ok(seg)
}

fn parse_literal(c: &[char], pos: &mut usize) -> Result<Value, String> {
    match c.get(*pos) {
        Some('\'' | '"') => Ok(Value::String(parse_quoted(c, pos)?)),
        Some(_) => {
            let start = *pos;
            while c
                .get(*pos)
                .is_some_and(|ch| *ch != ')' && !ch.is_whitespace())
            {
                *pos = pos.saturating_add(1);
            }
            let s: String = c[start..*pos].iter().collect();
            serde_json::from_str::<Value>(&s).map_err(|_| format!("invalid literal {s:?}"))
        }
        None => Err("a comparison needs a value".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node() -> Value {
        json!({
            "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1", "zone": "z1"}},
            "spec": {"taints": [
                {"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
            ]},
            "status": {
                "conditions": [
                    {"type": "MemoryPressure", "status": "Unknown", "reason": "NodeStatusUnknown"},
                    {"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                     "message": "container runtime is down"}
                ],
                "capacity": {"pods": "110"},
                "replicas": 3
            }
        })
    }

    #[test]
    fn paths_reach_what_kubectl_prints() {
        let n = node();
        let table: &[(&str, &str)] = &[
            ("{.metadata.name}", "n1"),
            (".metadata.name", "n1"),
            ("$.metadata.name", "n1"),
            (
                "{.status.conditions[?(@.type==\"Ready\")].reason}",
                "KubeletNotReady",
            ),
            (
                "{.status.conditions[?(@.type=='Ready')].message}",
                "container runtime is down",
            ),
            (
                "{.status.conditions[?(@.type!='Ready')].type}",
                "MemoryPressure",
            ),
            ("{.spec.taints[*].effect}", "NoSchedule NoExecute"),
            ("{.spec.taints[-1].effect}", "NoExecute"),
            (
                "{.spec.taints[0]}",
                r#"{"effect":"NoSchedule","key":"node.kubernetes.io/unreachable"}"#,
            ),
            ("{.metadata.labels['kubernetes.io/hostname']}", "n1"),
            ("{.metadata.labels.kubernetes\\.io/hostname}", "n1"),
            ("{.status.replicas}", "3"),
            (
                "{.status.conditions[?(@.reason)].type}",
                "MemoryPressure Ready",
            ),
            ("{.status.missing}", ""),
            ("{.spec.taints[5].key}", ""),
            ("{.metadata.labels.*}", "n1 z1"),
            ("{.metadata.name}/{.status.replicas}", "n1/3"),
            ("name: {.metadata.name}!", "name: n1!"),
        ];
        for (p, want) in table {
            let jp = JsonPath::parse(p).unwrap_or_else(|e| panic!("{p}: {e}"));
            assert_eq!(jp.render(&n), *want, "{p}");
        }
        assert!(
            JsonPath::parse("{.status.missing}")
                .unwrap()
                .eval(&n)
                .is_empty()
        );
        let counted = json!({"items": [{"n": 3}, {"n": 4}]});
        let jp = JsonPath::parse("{.items[?(@.n==3)].n}").unwrap();
        assert_eq!(jp.render(&counted), "3");
        // Text alone finds nothing (for `exists`), but renders.
        let jp = JsonPath::parse("{.missing} and {.items[0].n}").unwrap();
        assert_eq!(jp.eval(&counted).len(), 1);
        assert_eq!(jp.render(&counted), " and 3");
    }

    #[test]
    fn bad_paths_are_refused_with_a_reason() {
        for (p, want) in [
            ("{.a", "unclosed {"),
            ("{..a}", "recursive descent"),
            ("{.a[}", "unclosed ["),
            ("{.a[x]}", "expected an index"),
            ("{.a[1:2]}", "slices"),
            ("{.a[?(@.b=='x']}", "expected ')'"),
            ("{.a['x}", "unterminated string"),
            ("{.a.}", "empty field name"),
            ("{a}", "unexpected 'a'"),
        ] {
            let e = JsonPath::parse(p).expect_err(p);
            assert!(e.contains(want), "{p}: {e}");
        }
    }
}
