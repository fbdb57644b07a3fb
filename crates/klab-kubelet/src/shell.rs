//! The simulated shell of a container: what `kubectl exec` runs.
//!
//! klab runs no processes, so an exec'd command is interpreted here, against the container's
//! simulated state: its environment, a tiny filesystem (`/etc/hostname`, `/etc/hosts`,
//! `/etc/resolv.conf`, and files written by `echo … > f` in this container instance), its
//! process table (PID 1 is the container's command) and the cluster's clock. It knows:
//! `echo`, `printf`, `cat`, `ls`, `hostname`, `env`/`printenv`, `pwd`, `date`, `ps`, `sleep N`
//! (virtual time), `true`, `false`, `exit N`, `kill [-SIG] 1` (signals the container's PID 1,
//! which reacts as its program does: a server exits, `sleep` as PID 1 ignores SIGTERM), `sh -c
//! '…'` (statements joined by `;`, `&&`, `||`, `$VAR` and `$?` expanded, `>`/`>>` redirections)
//! and an interactive `sh` reading its commands from stdin (with a terminal: a `/ # ` prompt,
//! echo and CR-LF line endings, as a pty gives). Anything else: `sh: X: not found`, exit 127.

use std::collections::BTreeMap;

use jiff::Timestamp;

use crate::program::tokenize;

/// What the shell needs from its container.
pub trait Container {
    /// The container's environment, in order.
    fn env(&self) -> Vec<(String, String)>;
    fn hostname(&self) -> String;
    /// `/etc/hosts`, `/etc/resolv.conf` and the files written so far, by absolute path.
    fn read(&self, path: &str) -> Option<String>;
    fn write(&mut self, path: &str, text: &str, append: bool);
    /// Absolute paths of every file (for `ls`).
    fn files(&self) -> Vec<String>;
    /// The container's PID 1 command line.
    fn pid1(&self) -> String;
    /// Delivers a signal to PID 1 (`kill 1`); false if the container is gone.
    fn signal_pid1(&mut self, signal: &str) -> bool;
    fn now(&self) -> Timestamp;
}

/// Output of a command: what went to stdout and stderr, and its status.
#[derive(Debug, Default, PartialEq)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
    pub status: i32,
    /// `exit` ran: the shell ends with `status`.
    pub exit: bool,
    /// Virtual time the command takes (`sleep`).
    pub sleep: std::time::Duration,
}

/// Splits a command line into statements with the operator that joins each to the previous one.
pub fn statements(line: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut cur = Vec::new();
    let mut op = ";".to_string();
    for tok in tokenize(line) {
        match tok.as_str() {
            ";" | "&&" | "||" | "\n" => {
                if !cur.is_empty() {
                    out.push((op.clone(), std::mem::take(&mut cur)));
                }
                op = if tok == "\n" { ";".into() } else { tok };
            }
            _ => cur.push(tok),
        }
    }
    if !cur.is_empty() {
        out.push((op, cur));
    }
    out
}

/// The shell's state across the commands of one session.
pub struct Shell<'a, C: Container> {
    pub c: &'a mut C,
    pub status: i32,
    vars: BTreeMap<String, String>,
}

impl<'a, C: Container> Shell<'a, C> {
    pub fn new(c: &'a mut C) -> Self {
        let vars = c.env().into_iter().collect();
        Shell { c, status: 0, vars }
    }

    fn expand(&self, w: &str) -> String {
        if !w.contains('$') {
            return w.to_string();
        }
        let mut out = String::new();
        let mut chars = w.chars().peekable();
        while let Some(ch) = chars.next() {
            if ch != '$' {
                out.push(ch);
                continue;
            }
            if chars.peek() == Some(&'?') {
                chars.next();
                out.push_str(&self.status.to_string());
                continue;
            }
            let braced = chars.peek() == Some(&'{');
            if braced {
                chars.next();
            }
            let mut name = String::new();
            while let Some(&n) = chars.peek() {
                if n.is_ascii_alphanumeric() || n == '_' {
                    name.push(n);
                    chars.next();
                } else {
                    break;
                }
            }
            if braced && chars.peek() == Some(&'}') {
                chars.next();
            }
            if name.is_empty() {
                out.push('$');
            } else {
                out.push_str(self.vars.get(&name).map(String::as_str).unwrap_or(""));
            }
        }
        out
    }

    /// Runs one command line (statements with `;`, `&&`, `||`).
    pub fn run_line(&mut self, line: &str) -> Output {
        let mut total = Output::default();
        for (op, words) in statements(line) {
            let Some(o) = self.run_statement(&op, &words) else {
                continue;
            };
            total.stdout.push_str(&o.stdout);
            total.stderr.push_str(&o.stderr);
            total.sleep = total.sleep.saturating_add(o.sleep);
            total.status = o.status;
            if o.exit {
                total.exit = true;
                break;
            }
        }
        total
    }

    /// Runs one statement of a list (`op` joins it to the previous one: `;`, `&&`, `||`);
    /// `None` when the operator skips it.
    pub fn run_statement(&mut self, op: &str, words: &[String]) -> Option<Output> {
        let skip = match op {
            "&&" => self.status != 0,
            "||" => self.status == 0,
            _ => false,
        };
        if skip {
            return None;
        }
        let words: Vec<String> = words.iter().map(|w| self.expand(w)).collect();
        let o = self.run(&words);
        self.status = o.status;
        Some(o)
    }

    /// Runs one simple command (argv already expanded), with its redirections.
    pub fn run(&mut self, words: &[String]) -> Output {
        // Redirections: `> f`, `>> f`, `>f`, `2>/dev/null`, `>&2`.
        let mut argv: Vec<String> = Vec::new();
        let mut target: Option<(String, bool)> = None;
        let mut to_stderr = false;
        let mut drop_stderr = false;
        let mut it = words.iter().peekable();
        while let Some(w) = it.next() {
            let (append, rest) = if let Some(r) = w.strip_prefix(">>") {
                (true, Some(r))
            } else if let Some(r) = w.strip_prefix("1>") {
                (false, Some(r))
            } else if w == ">&2" || w == "1>&2" {
                to_stderr = true;
                continue;
            } else if let Some(r) = w.strip_prefix("2>") {
                let file = if r.is_empty() {
                    it.next().cloned().unwrap_or_default()
                } else {
                    r.to_string()
                };
                drop_stderr = file == "/dev/null";
                continue;
            } else if let Some(r) = w.strip_prefix('>') {
                (false, Some(r))
            } else {
                (false, None)
            };
            match rest {
                Some(r) => {
                    let file = if r.is_empty() {
                        it.next().cloned().unwrap_or_default()
                    } else {
                        r.to_string()
                    };
                    target = Some((file, append));
                }
                None => argv.push(w.clone()),
            }
        }
        let mut o = self.builtin(&argv);
        if to_stderr {
            let out = std::mem::take(&mut o.stdout);
            o.stderr.push_str(&out);
        }
        if let Some((file, append)) = target {
            let out = std::mem::take(&mut o.stdout);
            if file != "/dev/null" {
                let path = absolute(&file);
                self.c.write(&path, &out, append);
            }
        }
        if drop_stderr {
            o.stderr.clear();
        }
        o
    }

    fn builtin(&mut self, argv: &[String]) -> Output {
        let ok = |stdout: String| Output {
            stdout,
            ..Default::default()
        };
        let fail = |stderr: String, status: i32| Output {
            stderr,
            status,
            ..Default::default()
        };
        let Some(cmd) = argv.first() else {
            return Output {
                status: self.status,
                ..Default::default()
            };
        };
        let args = &argv[1..];
        // Variable assignment: `X=1`.
        if let Some((k, v)) = cmd.split_once('=')
            && !k.is_empty()
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && args.is_empty()
        {
            self.vars.insert(k.to_string(), v.to_string());
            return ok(String::new());
        }
        let base = cmd.rsplit('/').next().unwrap_or(cmd);
        match base {
            "echo" => {
                let (newline, words) = match args.first().map(String::as_str) {
                    Some("-n") => (false, &args[1..]),
                    _ => (true, args),
                };
                let mut s = words.join(" ");
                if newline {
                    s.push('\n');
                }
                ok(s)
            }
            "printf" => match args.first() {
                Some(f) => {
                    let rest: Vec<&str> = args[1..].iter().map(String::as_str).collect();
                    ok(printf(f, &rest))
                }
                None => fail("printf: usage: printf FORMAT [ARGUMENT]...\n".into(), 1),
            },
            "true" | ":" => ok(String::new()),
            "false" => fail(String::new(), 1),
            "hostname" => ok(format!("{}\n", self.c.hostname())),
            "pwd" => ok("/\n".into()),
            "whoami" => ok("root\n".into()),
            "id" => ok("uid=0(root) gid=0(root) groups=0(root),10(wheel)\n".into()),
            "uname" => ok(if args.iter().any(|a| a == "-a") {
                format!(
                    "Linux {} 6.1.0-klab #1 SMP x86_64 GNU/Linux\n",
                    self.c.hostname()
                )
            } else {
                "Linux\n".into()
            }),
            "env" | "printenv" => {
                if let Some(name) = args.first().filter(|_| base == "printenv") {
                    return match self.vars.get(name) {
                        Some(v) => ok(format!("{v}\n")),
                        None => fail(String::new(), 1),
                    };
                }
                ok(self.vars.iter().map(|(k, v)| format!("{k}={v}\n")).collect())
            }
            "date" => ok(format!("{}\n", crate::logs::date_line(self.c.now()))),
            "cat" => {
                let mut out = Output::default();
                for f in args {
                    match self.c.read(&absolute(f)) {
                        Some(t) => out.stdout.push_str(&t),
                        None => {
                            out.stderr
                                .push_str(&format!("cat: can't open '{f}': No such file or directory\n"));
                            out.status = 1;
                        }
                    }
                }
                out
            }
            "ls" => {
                let dir = args
                    .iter()
                    .find(|a| !a.starts_with('-'))
                    .map(|d| absolute(d))
                    .unwrap_or_else(|| "/".into());
                let mut names = std::collections::BTreeSet::new();
                if dir == "/" {
                    for d in [
                        "bin", "dev", "etc", "home", "proc", "root", "sys", "tmp", "usr", "var",
                    ] {
                        names.insert(d.to_string());
                    }
                }
                let prefix = if dir.ends_with('/') {
                    dir.clone()
                } else {
                    format!("{dir}/")
                };
                let files = self.c.files();
                if files.contains(&dir) {
                    return ok(format!("{dir}\n"));
                }
                let mut found = dir == "/" || dir == "/tmp";
                for f in files {
                    if let Some(rest) = f.strip_prefix(&prefix) {
                        found = true;
                        names.insert(rest.split('/').next().unwrap_or(rest).to_string());
                    }
                }
                if !found {
                    return fail(
                        format!("ls: {}: No such file or directory\n", args.join(" ")),
                        1,
                    );
                }
                ok(names.into_iter().map(|n| format!("{n}\n")).collect())
            }
            "ps" => ok(format!(
                "PID   USER     TIME  COMMAND\n    1 root      0:00 {}\n   {} root      0:00 ps{}\n",
                self.c.pid1(),
                7,
                args.iter().map(|a| format!(" {a}")).collect::<String>()
            )),
            "sleep" => match args.first().map(|n| n.trim_end_matches('s').parse::<f64>()) {
                Some(Ok(v)) if v >= 0.0 && v.is_finite() => Output {
                    sleep: std::time::Duration::try_from_secs_f64(v)
                        .unwrap_or(std::time::Duration::MAX),
                    ..Default::default()
                },
                Some(_) => fail(
                    format!("sleep: invalid number '{}'\n", args.join(" ")),
                    1,
                ),
                None => fail("BusyBox v1.36.1 (2023-05-18 22:34:17 UTC) multi-call binary.\n\nUsage: sleep [N]...\n".into(), 1),
            },
            "exit" => Output {
                status: args
                    .first()
                    .and_then(|n| n.parse::<i64>().ok())
                    .map_or(self.status, |n| n.rem_euclid(256) as i32),
                exit: true,
                ..Default::default()
            },
            "kill" => {
                let mut signal = "TERM".to_string();
                let mut pids = Vec::new();
                for a in args {
                    match a.strip_prefix('-') {
                        Some(s) => signal = s.trim_start_matches("SIG").to_string(),
                        None => pids.push(a.clone()),
                    }
                }
                if pids.is_empty() {
                    return fail("kill: usage: kill [-SIG] PID\n".into(), 1);
                }
                let mut out = Output::default();
                for p in pids {
                    if p == "1" {
                        self.c.signal_pid1(&signal);
                    } else {
                        out.stderr
                            .push_str(&format!("sh: can't kill pid {p}: No such process\n"));
                        out.status = 1;
                    }
                }
                out
            }
            "sh" | "bash" | "ash" if args.first().map(String::as_str) == Some("-c") => {
                let script = args.get(1).cloned().unwrap_or_default();
                let saved = self.status;
                let mut o = self.run_line(&script);
                // `exit` in a child shell ends that shell only.
                o.exit = false;
                self.status = saved;
                o
            }
            _ => fail(format!("sh: {cmd}: not found\n"), 127),
        }
    }
}

/// A small `printf`: `%s`/`%d` take the next argument, `\n` and `\t` are escapes (the shell's
/// builtin, and what a container's `printf` writes to its log).
pub(crate) fn printf(fmt: &str, args: &[&str]) -> String {
    let mut out = String::new();
    let mut args = args.iter();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek().copied()) {
            ('\\', Some('n')) => {
                chars.next();
                out.push('\n');
            }
            ('\\', Some('t')) => {
                chars.next();
                out.push('\t');
            }
            ('%', Some('s' | 'd')) => {
                chars.next();
                out.push_str(args.next().copied().unwrap_or(""));
            }
            ('%', Some('%')) => {
                chars.next();
                out.push('%');
            }
            _ => out.push(c),
        }
    }
    out
}

fn absolute(p: &str) -> String {
    if p.starts_with('/') {
        p.to_string()
    } else {
        format!("/{p}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Fake {
        files: BTreeMap<String, String>,
        signals: Vec<String>,
    }

    impl Container for Fake {
        fn env(&self) -> Vec<(String, String)> {
            vec![
                ("HOME".into(), "/root".into()),
                ("GREETING".into(), "hi".into()),
            ]
        }
        fn hostname(&self) -> String {
            "web-0".into()
        }
        fn read(&self, path: &str) -> Option<String> {
            match path {
                "/etc/hostname" => Some("web-0\n".into()),
                p => self.files.get(p).cloned(),
            }
        }
        fn write(&mut self, path: &str, text: &str, append: bool) {
            let f = self.files.entry(path.into()).or_default();
            if !append {
                f.clear();
            }
            f.push_str(text);
        }
        fn files(&self) -> Vec<String> {
            self.files.keys().cloned().collect()
        }
        fn pid1(&self) -> String {
            "sleep 3600".into()
        }
        fn signal_pid1(&mut self, signal: &str) -> bool {
            self.signals.push(signal.into());
            true
        }
        fn now(&self) -> Timestamp {
            Timestamp::from_second(1_767_225_600).unwrap()
        }
    }

    fn run(line: &str) -> (Output, Fake) {
        let mut c = Fake::default();
        let o = Shell::new(&mut c).run_line(line);
        (o, c)
    }

    #[test]
    fn the_shell_knows_its_commands() {
        let (o, _) = run("echo $GREETING world; hostname; cat /etc/hostname");
        assert_eq!(o.stdout, "hi world\nweb-0\nweb-0\n");
        let (o, _) = run("echo a > /tmp/f && echo b >> /tmp/f; cat /tmp/f; ls /tmp");
        assert_eq!(o.stdout, "a\nb\nf\n");
        let (o, _) = run("frobnicate --now");
        assert_eq!(
            (o.stderr.as_str(), o.status),
            ("sh: frobnicate: not found\n", 127)
        );
        let (o, _) = run("false || echo fallback; false && echo never; echo $?");
        assert_eq!(o.stdout, "fallback\n1\n");
        let (o, _) = run("exit 3; echo unreachable");
        assert_eq!((o.status, o.exit, o.stdout.as_str()), (3, true, ""));
        let (o, _) = run("sh -c 'exit 4'; echo after $?");
        assert_eq!(o.stdout, "after 4\n");
        let (o, _) = run("sleep 2.5");
        assert_eq!(o.sleep, std::time::Duration::from_millis(2500));
        let (o, c) = run("kill 1; kill -9 1; kill 42");
        assert_eq!(c.signals, vec!["TERM", "9"]);
        assert_eq!(o.stderr, "sh: can't kill pid 42: No such process\n");
        let (o, _) = run("cat /nope");
        assert_eq!(
            (o.stderr.as_str(), o.status),
            ("cat: can't open '/nope': No such file or directory\n", 1)
        );
        let (o, _) = run("ps");
        assert!(
            o.stdout.contains("    1 root      0:00 sleep 3600\n"),
            "{}",
            o.stdout
        );
        let (o, _) = run("echo oops >&2; date");
        assert_eq!(o.stderr, "oops\n");
        assert_eq!(o.stdout, "Thu Jan  1 00:00:00 UTC 2026\n");
    }
}
