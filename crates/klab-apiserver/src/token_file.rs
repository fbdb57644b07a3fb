//! Static bearer tokens, as kube-apiserver's `--token-auth-file`: a CSV file of
//! `token,user,uid,"group1,group2"` (at least three columns; groups optional). A request bearing
//! one of the tokens is that user, in its groups and `system:authenticated`. A line the file
//! cannot be read as refuses the start, with upstream's message.

use std::collections::BTreeMap;

use crate::identity::Identity;

/// The tokens of a token file.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct StaticTokens {
    tokens: BTreeMap<String, Identity>,
}

impl std::fmt::Debug for StaticTokens {
    // Tokens are secrets: only their number is ever printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StaticTokens({} tokens)", self.tokens.len())
    }
}

impl StaticTokens {
    /// Reads the file's text; `path` only names it in errors.
    pub fn parse(path: &str, text: &str) -> Result<StaticTokens, String> {
        let mut tokens = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let line_no = i.saturating_add(1);
            let line = line.strip_suffix('\r').unwrap_or(line);
            // Go's csv reader skips empty lines.
            if line.is_empty() {
                continue;
            }
            let record =
                csv_record(line).map_err(|e| format!("parse error on line {line_no}, {e}"))?;
            if record.len() < 3 {
                return Err(format!(
                    "token file '{path}' must have at least 3 columns (token, user name, user uid), found {}",
                    record.len()
                ));
            }
            if record[0].is_empty() {
                tracing::warn!(
                    "empty token has been found in token file '{path}', record number '{line_no}'"
                );
                continue;
            }
            let mut groups: Vec<String> = match record.get(3) {
                Some(g) => g.split(',').map(str::to_string).collect(),
                None => Vec::new(),
            };
            if !groups.iter().any(|g| g == "system:authenticated") {
                groups.push("system:authenticated".into());
            }
            let id = Identity {
                user: record[1].clone(),
                groups,
            };
            if tokens.insert(record[0].clone(), id).is_some() {
                tracing::warn!(
                    "duplicate token has been found in token file '{path}', record number '{line_no}'"
                );
            }
        }
        Ok(StaticTokens { tokens })
    }

    /// The user a bearer token names, if it is one of the file's.
    pub fn authenticate(&self, token: &str) -> Option<Identity> {
        self.tokens.get(token).cloned()
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

/// One CSV record as Go's `encoding/csv` reads it with `TrimLeadingSpace`: fields separated by
/// commas, a quoted field may hold commas and `""` for a quote.
fn csv_record(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.peek() == Some(&' ') || chars.peek() == Some(&'\t') {
            chars.next();
        }
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                    None => return Err("extraneous or missing \" in quoted-field".into()),
                }
            }
            match chars.next() {
                None => {
                    fields.push(field);
                    return Ok(fields);
                }
                Some(',') => fields.push(field),
                Some(_) => return Err("extraneous or missing \" in quoted-field".into()),
            }
        } else {
            loop {
                match chars.next() {
                    None => {
                        fields.push(field);
                        return Ok(fields);
                    }
                    Some(',') => {
                        fields.push(field);
                        break;
                    }
                    Some('"') => return Err("bare \" in non-quoted-field".into()),
                    Some(c) => field.push(c),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_upstream_token_files() {
        let t = StaticTokens::parse(
            "t.csv",
            "abc,alice,1001,\"dev,ops\"\n\n  def, bob, 1002\nghi,carol,1003,solo\r\n,nobody,1\n",
        )
        .unwrap();
        assert_eq!(t.len(), 3);
        assert_eq!(
            t.authenticate("abc"),
            Some(Identity::new(
                "alice",
                &["dev", "ops", "system:authenticated"]
            ))
        );
        // Leading spaces are trimmed, as Go's reader with TrimLeadingSpace.
        assert_eq!(
            t.authenticate("def"),
            Some(Identity::new("bob", &["system:authenticated"]))
        );
        assert_eq!(
            t.authenticate("ghi"),
            Some(Identity::new("carol", &["solo", "system:authenticated"]))
        );
        assert_eq!(t.authenticate(""), None);
        assert_eq!(t.authenticate("abd"), None);
        assert_eq!(format!("{t:?}"), "StaticTokens(3 tokens)");
    }

    #[test]
    fn bad_lines_are_refused_with_a_reason() {
        for (text, want) in [
            (
                "abc,alice\n",
                "token file 't.csv' must have at least 3 columns (token, user name, user uid), found 2",
            ),
            (
                "ok,a,1\nabc\n",
                "token file 't.csv' must have at least 3 columns (token, user name, user uid), found 1",
            ),
            (
                "abc,alice,1,\"dev\n",
                "parse error on line 1, extraneous or missing \" in quoted-field",
            ),
            (
                "ok,a,1\nab\"c,alice,1\n",
                "parse error on line 2, bare \" in non-quoted-field",
            ),
            (
                "abc,alice,1,\"dev\"x\n",
                "parse error on line 1, extraneous or missing \" in quoted-field",
            ),
        ] {
            assert_eq!(
                StaticTokens::parse("t.csv", text).unwrap_err(),
                want,
                "{text:?}"
            );
        }
    }
}
