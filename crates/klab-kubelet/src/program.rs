//! The simulated program of a container, derived from its `command` and `args`.
//!
//! klab runs no processes: a container's behaviour is read from its command line. The rules
//! (`argv` = `command` followed by `args`):
//!
//! * no `command`/`args` (the image's own entrypoint, e.g. `nginx`): a server that runs until
//!   stopped and exits 0 promptly on SIGTERM;
//! * `sleep N` (also `/bin/sleep`, `N` in seconds, fractions allowed, `infinity`): exits 0 after
//!   `N` s; as PID 1 it **ignores SIGTERM**, so a graceful stop ends with SIGKILL (exit 137) at the
//!   end of the grace period — exactly like busybox `sleep` in a real container;
//! * `exit N`, `true` (0), `false` (1): exit with that code right after starting;
//! * a shell script (`sh|bash|ash -c "<script>"`): statements separated by `;`, `&&`, `||` or
//!   newlines are run in order: `sleep N` waits, `exit N` ends with `N`, `true`/`:`/`echo …` do
//!   nothing, `false` sets the status to 1, `trap '<exit N>' TERM` makes SIGTERM end the script with
//!   `N`; the script's status at the end is its exit code. A shell (PID 1) ignores SIGTERM unless
//!   it set a trap. Any other statement (`nginx`, `while true; do …`, `tail -f …`) runs until the
//!   container is stopped;
//! * any other command (`python app.py`, `/server`): runs until stopped, exits 0 on SIGTERM.
//!
//! SIGKILL always ends a container with exit code 137.

use std::time::Duration;

/// How a program ends on its own.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum Lifetime {
    /// Exits with `code` after running for `after`.
    Exits { after: Duration, code: i32 },
    /// Runs until it is stopped.
    Forever,
}

/// What a program does when it receives SIGTERM.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum OnSigterm {
    /// Nothing (PID 1 without a handler): only SIGKILL ends it.
    Ignore,
    /// Exits with `code` after the runtime model's shutdown time (a signal-handling server).
    ExitGracefully { code: i32 },
    /// Exits with `code` at once (a shell `trap`).
    Exit { code: i32 },
}

/// A container's simulated behaviour.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Program {
    pub lifetime: Lifetime,
    pub on_sigterm: OnSigterm,
}

impl Program {
    const SERVER: Program = Program {
        lifetime: Lifetime::Forever,
        on_sigterm: OnSigterm::ExitGracefully { code: 0 },
    };

    /// Derives the program from a container's `command` and `args` (see the module doc).
    pub fn from_command(command: &[String], args: &[String]) -> Program {
        let argv: Vec<&str> = command
            .iter()
            .chain(args.iter())
            .map(String::as_str)
            .collect();
        let Some(&bin) = argv.first() else {
            return Program::SERVER;
        };
        let base = bin.rsplit('/').next().unwrap_or(bin);
        match base {
            "sh" | "bash" | "ash" | "dash" if argv.get(1) == Some(&"-c") => {
                let script = argv.get(2).copied().unwrap_or("");
                parse_script(script)
            }
            _ => {
                let words: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
                match simple(&words) {
                    Statement::Unknown => Program::SERVER,
                    st => run_statements(&[st], OnSigterm::Ignore),
                }
            }
        }
    }

    /// Parses a preStop `exec.command` the same way: how long it takes and with which code it ends.
    /// A hook that never ends (`sleep infinity`, an endless loop) has `None` duration.
    pub fn hook_outcome(command: &[String]) -> (Option<Duration>, i32) {
        let p = Program::from_command(command, &[]);
        match p.lifetime {
            Lifetime::Exits { after, code } => (Some(after), code),
            // An unknown command in a hook (`nginx -s quit`) is taken to finish at once.
            Lifetime::Forever if p == Program::SERVER => (Some(Duration::ZERO), 0),
            Lifetime::Forever => (None, 0),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Statement {
    Sleep(Option<Duration>),
    Exit(i32),
    Status(i32),
    Trap(i32),
    Unknown,
}

fn simple(words: &[String]) -> Statement {
    let Some(first) = words.first() else {
        return Statement::Status(0);
    };
    let base = first.rsplit('/').next().unwrap_or(first);
    match base {
        "sleep" => match words.get(1).map(String::as_str) {
            Some("infinity") => Statement::Sleep(None),
            Some(n) => match n.trim_end_matches('s').parse::<f64>() {
                // Beyond the representable range a sleep is as good as infinite.
                Ok(v) if v >= 0.0 && v.is_finite() => {
                    Statement::Sleep(Duration::try_from_secs_f64(v).ok())
                }
                _ => Statement::Unknown,
            },
            None => Statement::Unknown,
        },
        "exit" => Statement::Exit(
            words
                .get(1)
                .and_then(|n| n.parse::<i32>().ok())
                .unwrap_or(0)
                .rem_euclid(256),
        ),
        "true" | ":" | "echo" | "printf" | "date" | "hostname" | "env" => Statement::Status(0),
        "false" => Statement::Status(1),
        "trap" => {
            // trap '<action>' TERM|SIGTERM|15
            let signal_ok = words
                .iter()
                .skip(2)
                .any(|w| matches!(w.as_str(), "TERM" | "SIGTERM" | "15"));
            match (signal_ok, words.get(1)) {
                (true, Some(action)) => {
                    let inner = tokenize(action);
                    let code = match inner.first().map(|t| t.as_str()) {
                        Some("exit") => inner
                            .get(1)
                            .and_then(|n| n.parse::<i32>().ok())
                            .unwrap_or(0),
                        _ => 0,
                    };
                    Statement::Trap(code.rem_euclid(256))
                }
                _ => Statement::Status(0),
            }
        }
        _ => Statement::Unknown,
    }
}

fn parse_script(script: &str) -> Program {
    let statements: Vec<Statement> = split_statements(script).iter().map(|w| simple(w)).collect();
    run_statements(&statements, OnSigterm::Ignore)
}

fn run_statements(statements: &[Statement], mut on_sigterm: OnSigterm) -> Program {
    let mut elapsed = Duration::ZERO;
    let mut status = 0;
    for st in statements {
        match st {
            Statement::Sleep(Some(d)) => {
                elapsed += *d;
                status = 0;
            }
            Statement::Sleep(None) | Statement::Unknown => {
                return Program {
                    lifetime: Lifetime::Forever,
                    on_sigterm,
                };
            }
            Statement::Exit(code) => {
                return Program {
                    lifetime: Lifetime::Exits {
                        after: elapsed,
                        code: *code,
                    },
                    on_sigterm,
                };
            }
            Statement::Status(s) => status = *s,
            Statement::Trap(code) => on_sigterm = OnSigterm::Exit { code: *code },
        }
    }
    Program {
        lifetime: Lifetime::Exits {
            after: elapsed,
            code: status,
        },
        on_sigterm,
    }
}

/// Splits a shell script into statements (lists of words), honouring quotes.
pub(crate) fn split_statements(script: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for tok in tokenize(script) {
        match tok.as_str() {
            ";" | "&&" | "||" | "\n" => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(tok),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Shell-like tokenizer: whitespace splits words, quotes group, `;`, `&&`, `||`, newline are tokens.
pub(crate) fn tokenize(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == c {
                        break;
                    }
                    cur.push(q);
                }
            }
            ';' | '\n' => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
                out.push(c.to_string());
            }
            '&' | '|' if chars.peek() == Some(&c) => {
                chars.next();
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
                out.push(format!("{c}{c}"));
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    fn exits(secs: f64, code: i32) -> Lifetime {
        Lifetime::Exits {
            after: Duration::from_secs_f64(secs),
            code,
        }
    }

    #[test]
    fn program_table() {
        use OnSigterm::*;
        let cases: Vec<(Vec<String>, Vec<String>, Lifetime, OnSigterm)> = vec![
            (
                v(&[]),
                v(&[]),
                Lifetime::Forever,
                ExitGracefully { code: 0 },
            ),
            (v(&["sleep", "30"]), v(&[]), exits(30.0, 0), Ignore),
            (v(&["/bin/sleep"]), v(&["2.5"]), exits(2.5, 0), Ignore),
            (v(&["sleep", "infinity"]), v(&[]), Lifetime::Forever, Ignore),
            (v(&["exit", "3"]), v(&[]), exits(0.0, 3), Ignore),
            (v(&["false"]), v(&[]), exits(0.0, 1), Ignore),
            (v(&["sh", "-c", "exit 1"]), v(&[]), exits(0.0, 1), Ignore),
            (v(&["sh"]), v(&["-c", "exit 1"]), exits(0.0, 1), Ignore),
            (
                v(&["/bin/sh", "-c", "sleep 5; exit 2"]),
                v(&[]),
                exits(5.0, 2),
                Ignore,
            ),
            (
                v(&["sh", "-c", "sleep 5 && sleep 5"]),
                v(&[]),
                exits(10.0, 0),
                Ignore,
            ),
            (
                v(&["sh", "-c", "echo hi; sleep 3"]),
                v(&[]),
                exits(3.0, 0),
                Ignore,
            ),
            (
                v(&["sh", "-c", "trap 'exit 0' TERM; sleep 3600"]),
                v(&[]),
                exits(3600.0, 0),
                Exit { code: 0 },
            ),
            (
                v(&[
                    "sh",
                    "-c",
                    "trap \"exit 143\" SIGTERM; while true; do sleep 1; done",
                ]),
                v(&[]),
                Lifetime::Forever,
                Exit { code: 143 },
            ),
            (
                v(&["sh", "-c", "while true; do sleep 1; done"]),
                v(&[]),
                Lifetime::Forever,
                Ignore,
            ),
            (
                v(&["nginx", "-g", "daemon off;"]),
                v(&[]),
                Lifetime::Forever,
                ExitGracefully { code: 0 },
            ),
            (
                v(&["sleep", "abc"]),
                v(&[]),
                Lifetime::Forever,
                ExitGracefully { code: 0 },
            ),
            (v(&["sh", "-c", "exit 300"]), v(&[]), exits(0.0, 44), Ignore),
        ];
        for (cmd, args, lifetime, on_sigterm) in cases {
            let p = Program::from_command(&cmd, &args);
            assert_eq!(
                p,
                Program {
                    lifetime,
                    on_sigterm
                },
                "{cmd:?} {args:?}"
            );
        }
    }

    #[test]
    fn absurd_durations_do_not_panic() {
        let p = Program::from_command(&v(&["sleep", "1e30"]), &[]);
        assert_eq!(p.lifetime, Lifetime::Forever);
        let mut m =
            crate::runtime::Machine::new("b".into(), "m".into(), "s".into(), "10.244.0".into());
        let now = jiff::Timestamp::from_second(1_767_225_600).unwrap();
        m.run_sandbox("u", "ns", "p", now, Duration::from_secs(u64::MAX));
        let huge = Program::from_command(&v(&["sleep", "1e15"]), &[]);
        m.start_container("u", "c", "i", huge, 0, "id".into(), now);
        m.stop_container(
            "u",
            "c",
            Duration::from_secs(i64::MAX as u64),
            Duration::ZERO,
            now,
        );
        m.advance(now);
        m.freeze(now);
        m.thaw(now + jiff::SignedDuration::from_secs(10));
        assert!(m.pods["u"].containers["c"].is_running());
    }

    #[test]
    fn hook_outcomes() {
        assert_eq!(
            Program::hook_outcome(&v(&["sleep", "5"])),
            (Some(Duration::from_secs(5)), 0)
        );
        assert_eq!(
            Program::hook_outcome(&v(&["sh", "-c", "exit 1"])),
            (Some(Duration::ZERO), 1)
        );
        assert_eq!(Program::hook_outcome(&v(&["sleep", "infinity"])), (None, 0));
        assert_eq!(
            Program::hook_outcome(&v(&["/usr/sbin/nginx", "-s", "quit"])),
            (Some(Duration::ZERO), 0)
        );
        assert_eq!(
            Program::hook_outcome(&v(&["sh", "-c", "while true; do sleep 1; done"])),
            (None, 0)
        );
    }
}
